"""Moving a store to another embedder in place (``Apollo.reembed``), on every store.

Each test forces its interleaving with a hook in the new embedder (it runs a query and an
ingest between two batches of the move) or a failure in it (the move stops midway), never
with sleeps."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from apollo_adapters.postgres import reembed as postgres_reembed
from apollo_app import Apollo, bootstrap
from apollo_domain.errors import Conflict, ValidationError
from tests.contract.stores import ApolloFactory
from tests.support import KeyedEmbedder

NOTES = ("The cat sat on the mat", "Postgres vacuum reclaims dead tuples", "Pods restart")
QUERY = "feline resting place"
LATE = "a note stored during the move"
LATE_QUERY = "what was stored while it moved"


def _old_embedder() -> KeyedEmbedder:
    """16 dimensions: the query is 0.6 from the cat note (a weak match)."""
    old = KeyedEmbedder(16)
    old.set(NOTES[0], old.basis(0))
    old.set(QUERY, [0.6, 0.8] + [0.0] * 14)
    return old


def _new_embedder() -> KeyedEmbedder:
    """24 dimensions (the old one has 16): the query means the cat note, the late query the
    late note; everything else is a pseudo-random direction."""
    new = KeyedEmbedder(24)
    new.set(NOTES[0], new.basis(0))
    new.set(QUERY, new.basis(0))
    new.set(LATE, new.basis(5))
    new.set(LATE_QUERY, new.basis(5))
    return new


class Hooked(KeyedEmbedder):
    """The new embedder, running ``hook`` (once) when asked for its ``at``-th batch."""

    def __init__(self, at: int, hook: object = None, fail: bool = False) -> None:
        super().__init__(24)
        self.table = _new_embedder().table
        self.at, self.hook, self.fail = at, hook, fail

    async def embed(self, texts: Sequence[str]) -> list[Sequence[float]]:
        if self.calls + 1 == self.at:
            if self.fail:
                self.calls += 1
                raise RuntimeError("the model went away")
            if self.hook is not None:
                await self.hook()  # type: ignore[operator]
        return await super().embed(texts)


async def _stored(apollo: Apollo) -> list[str]:
    client = apollo.client("writer-1")
    ids = []
    for note in NOTES:
        result = await client.store_knowledge(content=note, content_type="fact")
        assert result.outcome.value == "created", result
        ids.append(str(result.id))
    return ids


async def _top(apollo: Apollo, query: str) -> tuple[str, float]:
    result = await apollo.client("reader").query_knowledge(
        query, min_confidence=0, mode="vector", limit=3
    )
    assert result.entries, f"no answer to {query!r}"
    top = result.entries[0]
    assert top.similarity is not None
    return str(top.id), top.similarity


async def test_a_store_moves_to_another_embedder_while_queries_and_ingests_go_on(
    make_apollo: ApolloFactory,
) -> None:
    apollo = await make_apollo(embedder=_old_embedder())
    ids = await _stored(apollo)
    seen_during: list[tuple[str, float]] = []
    before = await _top(apollo, QUERY)

    async def between_batches() -> None:  # the old vectors still answer; writes go on
        seen_during.append(await _top(apollo, QUERY))
        stored = await apollo.client("writer-2").store_knowledge(content=LATE, content_type="fact")
        assert stored.outcome.value == "created", stored

    new = Hooked(at=2, hook=between_batches)
    progress: list[tuple[int, int]] = []
    report = await apollo.reembed(
        new, batch_size=1, progress=lambda done, total: progress.append((done, total))
    )

    assert [before] == seen_during, "a query during the move did not answer as before it"
    assert (ids[0], pytest.approx(0.6, abs=1e-4)) == before
    assert (ids[0], pytest.approx(1.0, abs=1e-4)) == await _top(apollo, QUERY)
    late_id, late_similarity = await _top(apollo, LATE_QUERY)
    assert late_similarity == pytest.approx(1.0, abs=1e-4), "the late entry kept its old vector"
    assert late_id not in ids
    assert ("keyed-test-16", "keyed-test-24") == (report.from_model, report.to_model)
    # the late entry is embedded by a later batch or, when its id sorts before the batches
    # already run, by the switch
    assert (4, 4, False) == (report.moved, report.total, report.resumed)
    assert (0, 3) == progress[0] and (4, 4) == progress[-1]
    assert [d for d, _ in progress] == sorted(d for d, _ in progress)
    # and the store now takes the new embedder's vectors for what is stored next
    stored = await apollo.client("writer-3").store_knowledge(content="after", content_type="fact")
    assert stored.outcome.value == "created", stored


async def test_a_move_that_stops_midway_changes_nothing_and_a_second_run_finishes_it(
    make_apollo: ApolloFactory, store_kind: str
) -> None:
    apollo = await make_apollo(embedder=_old_embedder())
    ids = await _stored(apollo)
    before = await _top(apollo, QUERY)
    with pytest.raises(RuntimeError, match="went away"):
        await apollo.reembed(Hooked(at=2, fail=True), batch_size=1)
    assert before == await _top(apollo, QUERY), "a failed move changed what queries answer"
    ingested = await apollo.client("w").store_knowledge(content="between", content_type="fact")
    assert ingested.outcome.value == "created", ingested

    report = await apollo.reembed(_new_embedder(), batch_size=1)
    assert (ids[0], pytest.approx(1.0, abs=1e-4)) == await _top(apollo, QUERY)
    assert 4 == report.total
    if store_kind == "memory":  # nothing outlives the process: the move starts over
        assert (False, 4) == (report.resumed, report.moved)
    else:  # the first batch was committed: the second run embeds only the rest
        assert (True, 3) == (report.resumed, report.moved)


async def test_a_move_to_the_same_embedder_moves_nothing(make_apollo: ApolloFactory) -> None:
    apollo = await make_apollo(embedder=_old_embedder())
    await _stored(apollo)
    report = await apollo.reembed(KeyedEmbedder(16))
    assert (0, False) == (report.moved, report.switched)


@pytest.mark.parametrize("batch_size", [0, -1, 1025, True])
async def test_a_batch_size_out_of_bounds_is_refused_before_anything_moves(
    make_apollo: ApolloFactory, batch_size: int
) -> None:
    apollo = await make_apollo(embedder=_old_embedder())
    await _stored(apollo)
    before = await _top(apollo, QUERY)
    with pytest.raises(ValidationError, match="batch_size"):
        await apollo.reembed(_new_embedder(), batch_size=batch_size)
    assert before == await _top(apollo, QUERY)


async def test_a_second_move_while_one_runs_is_refused(
    make_apollo: ApolloFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_reembed, "LOCK_WAIT_SECONDS", 0.2)
    apollo = await make_apollo(embedder=_old_embedder())
    await _stored(apollo)
    refused: list[str] = []

    async def second_move() -> None:
        with pytest.raises(Conflict, match="another reembed") as caught:
            await apollo.reembed(KeyedEmbedder(32), batch_size=1)
        refused.append(str(caught.value))

    report = await apollo.reembed(Hooked(at=2, hook=second_move), batch_size=1)
    assert 1 == len(refused)
    assert "keyed-test-24" == report.to_model
    assert (NOTES[0], pytest.approx(1.0, abs=1e-4)) == (
        (await apollo.client("r").query_knowledge(QUERY, min_confidence=0)).entries[0].content,
        (await _top(apollo, QUERY))[1],
    )


async def test_what_is_stored_after_the_last_batch_is_embedded_by_the_switch(
    make_apollo: ApolloFactory,
) -> None:
    """The move's steps one by one: every batch done, then an ingest, then the switch,
    which embeds that entry with the new model in the same transaction that records it."""
    apollo = await make_apollo(embedder=_old_embedder())
    ids = await _stored(apollo)
    new = _new_embedder()
    moving = apollo.deps.store.reembedding(new.model_id, new.dimension)  # type: ignore[attr-defined]
    async with moving:
        assert (0, 3) == await moving.start()
        batch = await moving.pending(None, 10)
        assert sorted(ids) == sorted(str(i) for i, _ in batch)
        vectors = await new.embed([content for _, content in batch])
        await moving.put([(i, v) for (i, _), v in zip(batch, vectors, strict=True)])
        assert [] == await moving.pending(None, 10)
        stored = await apollo.client("late").store_knowledge(content=LATE, content_type="fact")
        assert [(stored.id, LATE)] == await moving.pending(None, 10)
        await moving.index()
        assert 1 == await moving.switch(new.embed)
    apollo.deps = bootstrap.rewire_embedder(apollo.deps, new)
    assert (str(stored.id), pytest.approx(1.0, abs=1e-4)) == await _top(apollo, LATE_QUERY)
