"""Bulk ingest (``store_many``) on every store: exactly the outcomes of storing the same
items one by one, in order, whatever the items, the sources and the chunk size."""

from __future__ import annotations

import asyncio
import io
import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest
from attrs import evolve
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from apollo_adapters.clock import ManualClock
from apollo_app import Apollo, Outcome, Principal, Status
from apollo_app.cli.ingest import IngestReport, Progress, ingest_lines
from apollo_domain import services
from apollo_domain.commands import StoreKnowledge
from apollo_domain.ports import CredibilityRecord
from apollo_domain.services import bulk_ingest
from tests.contract.stores import open_store
from tests.support import KeyedEmbedder, at_cosine

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
AGENTS = ("claude-a", "claude-b", "openai-c", "gemini-d", "troll-e")
LABELS = {"gemini-d": "moderator", "troll-e": "troll"}  # credibility 1.0 and floor-rejected
SEEDED = "alpha zero"  # confirmed before the items arrive


def keyed_embedder() -> KeyedEmbedder:
    """Texts at chosen cosines: corroboration (0.9-0.95), restatement (≥ 0.95), low novelty."""
    embedder = KeyedEmbedder(16)
    alpha, beta, gamma = embedder.basis(0), embedder.basis(3), embedder.basis(7)
    embedder.set(SEEDED, alpha)
    embedder.set("alpha near", at_cosine(alpha, 0.93, 1))
    embedder.set("alpha restated", at_cosine(alpha, 0.97, 2))
    embedder.set("beta one", beta)
    embedder.set("beta two", at_cosine(beta, 0.96, 4))
    embedder.set("beta three", at_cosine(beta, 0.92, 5))
    embedder.set("beta four", at_cosine(beta, 0.995, 6))
    embedder.set("gamma", gamma)
    embedder.set("gamma twin", at_cosine(gamma, 0.999, 8))
    return embedder


TEXTS = (
    SEEDED,
    "ALPHA   zero",  # the seeded text again, by its content hash
    "alpha near",
    "alpha restated",
    "beta one",
    "Beta One",
    "beta two",
    "beta three",
    "beta four",
    "gamma",
    "gamma twin",
    "an unrelated note",
)
items = st.lists(
    st.fixed_dictionaries(
        {
            "content": st.sampled_from(TEXTS),
            "agent": st.sampled_from(AGENTS),
            "access_scope": st.sampled_from(["global", "global", "private"]),
            "content_type": st.sampled_from(["observation", "observation", "concept"]),
        }
    ),
    min_size=1,
    max_size=14,
)
MAX_EXAMPLES = {"memory": 120, "postgres": 6}


async def seeded_apollo(kind: str, request: pytest.FixtureRequest) -> Apollo:
    """A store holding the confirmed seeded entry, with the labelled sources."""
    embedder = keyed_embedder()
    store = await open_store(kind, request, dimension=16, model_id=embedder.model_id)
    apollo = Apollo.with_store(store, embedder=embedder, clock=ManualClock(EPOCH))
    seeded = await apollo.client("claude-a", Principal("alice")).store_knowledge(content=SEEDED)
    async with store.unit_of_work() as uow:
        entry = await uow.entries.get(seeded.entry_id)
        assert entry is not None
        await uow.entries.update(evolve(entry, status=Status.CONFIRMED, confirmed_at=EPOCH))
        for agent, label in LABELS.items():
            await uow.credibility.save(CredibilityRecord(agent, label=label))
        await uow.commit()
    return apollo


async def observe(apollo: Apollo, results: list[Any]) -> dict[str, Any]:
    """Everything ingest writes, with entries named by (content, scope) instead of ids."""
    async with apollo.store.unit_of_work() as uow:
        entries = {e.id: e for agent in AGENTS for e in await uow.entries.by_agent(agent)}
        evidence = await uow.evidence.for_entries(list(entries))
        name = {i: (e.content, e.access_scope.value) for i, e in entries.items()}
        return {
            "results": [
                (
                    r.outcome,
                    name.get(r.entry_id),
                    r.status,
                    None if r.confidence is None else round(r.confidence, 12),
                    r.reason,
                )
                for r in results
            ],
            "entries": sorted(
                (
                    name[i],
                    e.status,
                    round(e.confidence, 12),
                    e.source.agent_id,
                    [
                        (v.source.agent_id, v.kind, round(v.similarity, 6), v.credibility)
                        for v in evidence.get(i, [])
                    ],
                )
                for i, e in entries.items()
            ),
            "access_log": await uow.access_log.count("ingest"),
            "outbox": await uow.outbox.pending(),
            "expertise": [
                (x.agent_id, x.knowledge_domain, x.entry_count) for x in await uow.expertise.all()
            ],
        }


def _command(item: dict[str, Any]) -> StoreKnowledge:
    return StoreKnowledge(
        content=item["content"],
        access_scope=item["access_scope"],
        content_type=item["content_type"],
    )


async def ingest_both_ways(
    kind: str, request: pytest.FixtureRequest, batch: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ingesting ``batch`` one by one writes, and what one bulk ingest writes."""
    one_by_one, bulk = await seeded_apollo(kind, request), await seeded_apollo(kind, request)
    try:
        results = []
        for item in batch:
            caller = one_by_one.client(item["agent"], Principal("alice")).caller
            prepared = services.prepare(caller, _command(item))
            results.append(await services.ingest(one_by_one.deps, caller, prepared))
        requests = [
            services.prepare(bulk.client(item["agent"], Principal("alice")).caller, _command(item))
            for item in batch
        ]
        caller = bulk.client("claude-a", Principal("alice")).caller
        got = await services.ingest_many(bulk.deps, caller, requests)
        return await observe(one_by_one, results), await observe(bulk, got)
    finally:
        await one_by_one.store.close()
        await bulk.store.close()


@pytest.mark.parametrize("chunk", [1, 3, 256])
def test_bulk_ingest_has_the_outcomes_of_ingesting_in_order(
    store_kind: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """Exact and in-chunk duplicates, corroboration of a confirmed entry (boosted once per
    source), agreement with a candidate, a source repeating itself, low novelty, the
    credibility floor and private partitions: bulk ingest agrees with one-by-one ingest
    on every result and every row it writes, across chunk boundaries too."""
    monkeypatch.setattr(bulk_ingest, "BATCH_SIZE", chunk)

    @settings(
        max_examples=MAX_EXAMPLES[store_kind],
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(batch=items)
    def agree(batch: list[dict[str, Any]]) -> None:
        expected, got = asyncio.run(ingest_both_ways(store_kind, request, batch))
        for outcome, _, _, _, reason in expected["results"]:
            event(f"{outcome.value}: {(reason or '').split(':')[0]}")
        assert expected == got

    agree()


async def _confirmed(apollo: Apollo) -> Any:
    """The seeded text stored by claude-a and confirmed."""
    stored = await apollo.client("claude-a").store_knowledge(content=SEEDED)
    async with apollo.store.unit_of_work() as uow:
        entry = await uow.entries.get(stored.entry_id)
        await uow.entries.update(evolve(entry, status=Status.CONFIRMED, confirmed_at=EPOCH))
        await uow.commit()
    return stored.entry_id


async def test_bulk_corroboration_holds_its_target_until_commit(make_apollo):
    """A chunk that will corroborate a confirmed entry has locked it before reading its
    evidence; a single ingest that would corroborate it too waits, then sees the chunk's
    evidence: its source is not independent of the chunk's (same provider), so the entry
    is boosted once."""
    embedder = keyed_embedder()
    embedder.set("alpha near again", at_cosine(embedder.basis(0), 0.93, 9))
    apollo = await make_apollo(embedder=embedder, interleaved=True)
    points = apollo.deps.store
    target = await _confirmed(apollo)

    gate = points.hold("bulk", "evidence.for_entries")
    bulk = points.run("bulk", apollo.client("openai-c").store_many([{"content": "alpha near"}]))
    await points.reached("bulk", "evidence.for_entries")
    single = points.run(
        "single", apollo.client("openai-x").store_knowledge(content="alpha near again")
    )
    blocked = await points.blocked_or_done(single)
    gate.set()
    (bulk_results, single_result) = await points.finish(bulk, single)

    assert blocked, "the single ingest ran to completion while the chunk held its target"
    assert [(Outcome.CORROBORATED, target)] == [(r.outcome, r.entry_id) for r in bulk_results]
    assert Outcome.CREATED == single_result.outcome
    evidence = await apollo.get_evidence(target)
    assert ["claude-a", "openai-c"] == [e.source.agent_id for e in evidence]
    assert pytest.approx(0.5 + 0.3) == (await apollo.get_entry(target)).confidence


async def test_a_concurrent_writer_of_the_same_text_is_recorded_against(make_apollo):
    """A single ingest stores a chunk's text while the chunk has decided to create it: one
    entry holds the text whoever commits first, the other ingest is recorded against it
    (the chunk redoes its requests in order when its insert finds the hash taken)."""
    apollo = await make_apollo(embedder=keyed_embedder(), interleaved=True)
    points = apollo.deps.store

    gate = points.hold("bulk", "entries.add_many")
    bulk = points.run(
        "bulk",
        apollo.client("claude-a").store_many([{"content": "a fresh note"}, {"content": "gamma"}]),
    )
    await points.reached("bulk", "entries.add_many")
    single = points.run("single", apollo.client("openai-c").store_knowledge(content="a fresh note"))
    await points.blocked_or_done(single)
    gate.set()
    (bulk_results, single_result) = await points.finish(bulk, single)

    fresh = [bulk_results[0], single_result]
    assert {Outcome.CREATED, Outcome.DEDUPLICATED} == {r.outcome for r in fresh}
    assert fresh[0].entry_id == fresh[1].entry_id
    assert Outcome.CREATED == bulk_results[1].outcome
    evidence = await apollo.get_evidence(fresh[0].entry_id)
    assert {"claude-a", "openai-c"} == {e.source.agent_id for e in evidence}
    async with apollo.store.unit_of_work() as uow:
        assert 3 == await uow.access_log.count("ingest")
        assert [] == [e for e in await uow.entries.by_agent("claude-a") if e.content == "gamma"][1:]


BAD_LINES = ("{not json", '{"content": "x", "colour": "red"}', '{"tags": ["no content"]}', "[1]")
lines = st.lists(
    st.one_of(items.map(lambda batch: batch[0]), st.sampled_from(BAD_LINES)),
    min_size=1,
    max_size=14,
)


def jsonl(line: dict[str, Any] | str) -> str:
    """A JSONL line of ``apollo ingest`` for an item (a bad line as it is)."""
    if isinstance(line, str):
        return line
    return json.dumps(
        {
            "content": line["content"],
            "agent_id": line["agent"],
            "access_scope": line["access_scope"],
            "content_type": line["content_type"],
        }
    )


async def ingest_file_both_ways(
    kind: str, request: pytest.FixtureRequest, batch: list[dict[str, Any] | str], chunk: int
) -> tuple[dict[str, Any], Counter[str], dict[str, Any], IngestReport]:
    """What storing the good lines of ``batch`` one by one writes (and their outcomes), and
    what ``apollo ingest`` of the same lines writes (and its report)."""
    one_by_one, bulk = await seeded_apollo(kind, request), await seeded_apollo(kind, request)
    try:
        results, outcomes = [], Counter[str]()
        for item in batch:
            if isinstance(item, dict):
                result = await one_by_one.client(item["agent"], Principal("alice")).store_knowledge(
                    content=item["content"],
                    access_scope=item["access_scope"],
                    content_type=item["content_type"],
                )
                results.append(result)
                outcomes[result.outcome.value] += 1
        report = IngestReport()
        await ingest_lines(
            bulk,
            [jsonl(line) for line in batch],
            report,
            agent_id="claude-a",
            principal=Principal("alice"),
            progress=Progress(len(batch), io.StringIO()),
            chunk=chunk,
        )
        expected, got = await observe(one_by_one, results), await observe(bulk, [])
        del expected["results"], got["results"]
        return expected, outcomes, got, report
    finally:
        await one_by_one.store.close()
        await bulk.store.close()


@pytest.mark.parametrize("chunk", [1, 4, 256])
def test_the_ingest_command_has_the_outcomes_of_storing_its_lines_in_order(
    store_kind: str, request: pytest.FixtureRequest, chunk: int
) -> None:
    """``apollo ingest`` stores its good lines in bulk chunks: every row it writes and every
    outcome it counts are those of storing the lines one by one, in order, whatever the
    chunk size; each bad line is reported by its number and changes nothing."""

    @settings(
        max_examples=MAX_EXAMPLES[store_kind],
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(batch=lines)
    def agree(batch: list[dict[str, Any] | str]) -> None:
        expected, outcomes, got, report = asyncio.run(
            ingest_file_both_ways(store_kind, request, batch, chunk)
        )
        for outcome in outcomes:
            event(f"outcome {outcome}")
        event(f"bad lines: {min(len(report.bad), 2)}")
        assert expected == got
        assert outcomes == report.outcomes
        bad = [n for n, line in enumerate(batch, 1) if isinstance(line, str)]
        assert bad == [number for number, _ in report.bad]

    agree()


async def test_the_ingest_command_embeds_a_chunk_in_one_call(make_apollo):
    """The good lines of ``apollo ingest`` are embedded a chunk at a time (one call per
    chunk, not one per line), bad lines between them notwithstanding."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    texts = [json.dumps({"content": f"note number {i} on topic {i * 7}"}) for i in range(10)]
    texts.insert(5, "{not json")
    report = IngestReport()
    before = embedder.calls
    await ingest_lines(
        apollo,
        texts,
        report,
        agent_id="claude-a",
        principal=Principal("alice"),
        progress=Progress(len(texts), io.StringIO()),
        chunk=4,
    )
    assert {"created": 10} == dict(report.outcomes)
    assert [(6, report.bad[0][1])] == report.bad
    assert 3 == embedder.calls - before  # 4 + 4 + 2 lines
