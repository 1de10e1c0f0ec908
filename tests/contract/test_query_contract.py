"""Query, retrieve, browse and visibility on every read path (docs/concepts.md, "The rules in one
page")."""

from __future__ import annotations

from datetime import timedelta

import attrs
import pytest

from apollo_adapters.clock import ManualClock
from apollo_app import Apollo, NotFound, Principal, Status, StoreUnavailable, ValidationError
from tests.contract.stores import EPOCH
from tests.support import KeyedEmbedder, at_cosine


async def _seed(apollo, embedder: KeyedEmbedder):
    base = embedder.basis(0)
    embedder.set("query about kafka", base)
    texts = {
        "kafka partitions order messages": 0.9,
        "kafka consumer groups share partitions": 0.8,
        "kafka brokers replicate logs": 0.7,
    }
    ids = {}
    for i, (text, cos) in enumerate(texts.items()):
        embedder.set(text, at_cosine(base, cos, i + 1))
        r = await apollo.client(f"agent-{i}").store_knowledge(content=text, tags=["kafka"])
        ids[text] = r.entry_id
    return ids


async def test_semantic_query_ranks_boosts_and_logs(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    ids = await _seed(apollo, embedder)
    result = await apollo.client("reader").query_knowledge(
        query="query about kafka", limit=2, mode="vector"
    )
    assert result.mode == "vector"
    assert [
        ids["kafka partitions order messages"],
        ids["kafka consumer groups share partitions"],
    ] == [e.id for e in result.entries]
    assert pytest.approx(0.9, abs=1e-5) == result.entries[0].similarity
    assert [pytest.approx(e.confidence) for e in result.entries] == [0.52, 0.52]
    top = await apollo.get_entry(result.entries[0].id)
    assert top.access_count == 1
    assert pytest.approx(0.52) == top.confidence
    async with apollo.store.unit_of_work() as uow:
        assert await uow.access_log.count("query") == 2


@pytest.mark.parametrize("mode", ["hybrid", "vector", "lexical"])
async def test_the_result_names_the_mode_that_ran(make_apollo, mode):
    """A search reports the mode it ran, found or not; a short query is a browse."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    await _seed(apollo, embedder)
    reader = apollo.client("reader")
    found = await reader.query_knowledge(query="query about kafka", mode=mode)
    assert (mode, True) == (found.mode, len(found) > 0)
    missed = await reader.query_knowledge(query="zzz qqq", mode=mode, min_similarity=0.99)
    assert (mode, 0) == (missed.mode, len(missed))
    browsed = await reader.query_knowledge(query="k", mode=mode)
    assert ("browse", 3) == (browsed.mode, len(browsed))


async def test_retrieve_boosts_without_access_count_or_log(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    await _seed(apollo, embedder)
    result = await apollo.client("reader").retrieve(query="query about kafka")
    assert len(result.entries) == 3
    entry = await apollo.get_entry(result.entries[0].id)
    assert entry.access_count == 0
    assert pytest.approx(0.52) == entry.confidence
    async with apollo.store.unit_of_work() as uow:
        assert await uow.access_log.count("query") == 0


async def test_short_query_browses_newest_first_without_boost(make_apollo):
    embedder = KeyedEmbedder(16)
    clock_apollo = await make_apollo(embedder=embedder)
    ids = await _seed(clock_apollo, embedder)
    result = await clock_apollo.client("reader").query_knowledge(query="k")
    assert result.mode == "browse"
    assert set(ids.values()) == {e.id for e in result.entries}
    assert all(e.confidence == 0.5 for e in result.entries)


async def test_filters_apply(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    ids = await _seed(apollo, embedder)
    reader = apollo.client("reader")
    assert (
        await reader.query_knowledge(query="query about kafka", min_confidence=0.6)
    ).entries == ()
    assert (await reader.query_knowledge(query="query about kafka", tags=["redis"])).entries == ()
    assert (
        len((await reader.query_knowledge(query="query about kafka", tags=["Kafka"])).entries) == 3
    )
    assert (
        len(
            (
                await reader.query_knowledge(query="query about kafka", knowledge_domain="kafka")
            ).entries
        )
        == 3
    )
    assert (
        await reader.query_knowledge(query="query about kafka", status="confirmed")
    ).entries == ()
    await apollo.client("curator", Principal("curator", role="admin")).deprecate_entry(
        entry_id=ids["kafka partitions order messages"], reason="outdated"
    )
    found = await reader.query_knowledge(
        query="query about kafka", status=["candidate", "archived"]
    )
    assert ids["kafka partitions order messages"] in {e.id for e in found.entries}
    default = await reader.query_knowledge(query="query about kafka")
    assert ids["kafka partitions order messages"] not in {e.id for e in default.entries}


async def test_bad_query_arguments_name_the_field(make_apollo):
    apollo = await make_apollo()
    reader = apollo.client("reader")
    for kwargs, field in [
        ({"query": "text", "limit": 0}, "limit"),
        ({"query": "text", "limit": "ten"}, "limit"),
        ({"query": "text", "min_confidence": 1.5}, "min_confidence"),
        ({"query": "text", "status": "bogus"}, "status"),
        ({"query": None}, "query"),
    ]:
        with pytest.raises(ValidationError) as err:
            await reader.query_knowledge(**kwargs)
        assert field == err.value.field


async def test_query_needs_the_access_log_before_embedding(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder, faulty=True)
    apollo.store.faults.unavailable.add("access_log")
    with pytest.raises(StoreUnavailable):
        await apollo.client("reader").query_knowledge(query="anything at all")
    assert embedder.calls == 0


async def test_visibility_on_every_read_path(make_apollo):
    """private: only the owner; team: principals sharing a group; anonymous: global only."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    await apollo.directory.add_membership("alice", "netops")
    await apollo.directory.add_membership("bob", "netops")
    base = embedder.basis(0)
    embedder.set("probe", base)
    for i, text in enumerate(["global note", "team note", "private note"]):
        embedder.set(text, at_cosine(base, 0.8 - i * 0.05, i + 1))
    alice = apollo.client("agent-a", Principal("alice"))
    g = await alice.store_knowledge(content="global note")
    t = await alice.store_knowledge(content="team note", access_scope="team")
    p = await alice.store_knowledge(content="private note", access_scope="private")
    await alice.link_entries(
        from_entry_id=g.entry_id, to_entry_id=t.entry_id, relation_type="extends"
    )
    await alice.link_entries(
        from_entry_id=g.entry_id, to_entry_id=p.entry_id, relation_type="extends"
    )

    async def seen(principal):
        client = apollo.client("reader", principal)
        queried = {e.id for e in (await client.query_knowledge(query="probe")).entries}
        browsed = {e.id for e in (await client.query_knowledge(query="")).entries}
        related = {r.id for r in await client.related_entries(entry_id=g.entry_id)}
        assert queried == browsed == related | {g.entry_id}
        return queried

    assert {g.entry_id, t.entry_id, p.entry_id} == await seen(Principal("alice"))
    assert {g.entry_id, t.entry_id} == await seen(Principal("bob"))
    assert {g.entry_id} == await seen(Principal("carol"))
    assert {g.entry_id} == await seen(Principal(None))
    with pytest.raises(NotFound):
        await apollo.client("x", Principal("carol")).deprecate_entry(
            entry_id=p.entry_id, reason="r"
        )
    assert (await apollo.get_entry(p.entry_id)).status == Status.CANDIDATE


async def test_unrelated_entries_are_not_matches(make_apollo):
    """Only entries above min_similarity (default 0) are returned, and only they are boosted."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    base = embedder.basis(0)
    embedder.set("the probe", base)
    embedder.set("a related note", at_cosine(base, 0.6, 1))
    embedder.set("an opposite note", [-x for x in at_cosine(base, 0.5, 2)])
    embedder.set("an orthogonal note", embedder.basis(3))
    ids = {}
    for text in ("a related note", "an opposite note", "an orthogonal note"):
        ids[text] = (await apollo.client("writer").store_knowledge(content=text)).entry_id
    reader = apollo.client("reader")
    found = await reader.query_knowledge(query="the probe")
    assert [ids["a related note"]] == [e.id for e in found.entries]
    assert 0.5 == (await apollo.get_entry(ids["an opposite note"])).confidence
    stricter = await reader.query_knowledge(query="the probe", min_similarity=0.7)
    assert () == stricter.entries
    everything = await reader.query_knowledge(query="the probe", min_similarity=-1.0)
    assert 3 == len(everything.entries)
    with pytest.raises(ValidationError) as err:
        await reader.query_knowledge(query="the probe", min_similarity=2)
    assert "min_similarity" == err.value.field


# --------------------------------------------------------------------------- boost window


async def _confidences(apollo, ids) -> list[float]:
    return [round((await apollo.get_entry(entry_id)).confidence, 6) for entry_id in ids]


async def test_a_principal_earns_a_retrieval_boost_once_per_window(make_apollo):
    """The same reader querying 30 times raises each returned entry once (every query is
    still counted); a second reader raises it once more; once the window has passed the
    first reader raises it again."""
    clock = ManualClock(EPOCH)
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder, clock=clock)
    ids = list((await _seed(apollo, embedder)).values())
    alice = apollo.client("agent-a", principal=Principal("alice"))
    for _ in range(30):
        clock.advance(seconds=60)
        result = await alice.query_knowledge(query="query about kafka")
        assert [0.52] * 3 == [round(e.confidence, 6) for e in result.entries]
    assert [0.52] * 3 == await _confidences(apollo, ids)
    assert [30] * 3 == [(await apollo.get_entry(i)).access_count for i in ids]
    bob = apollo.client("agent-b", principal=Principal("bob"))
    await bob.query_knowledge(query="query about kafka")
    await bob.query_knowledge(query="query about kafka")
    assert [0.54] * 3 == await _confidences(apollo, ids)
    clock.advance(seconds=3600 - 29 * 60)  # an hour after alice's first boost
    await alice.query_knowledge(query="query about kafka")
    assert [0.56] * 3 == await _confidences(apollo, ids)


async def test_the_boost_window_is_the_one_the_use_cases_are_given(make_apollo):
    """A five-minute window on every store: a second boost four minutes after the first
    is not earned, one five minutes after it is."""
    clock = ManualClock(EPOCH)
    embedder = KeyedEmbedder(16)
    wide = await make_apollo(embedder=embedder, clock=clock)
    apollo = Apollo(attrs.evolve(wide.deps, boost_window=timedelta(minutes=5)))
    ids = list((await _seed(apollo, embedder)).values())
    reader = apollo.client("reader")  # no principal: the agent earns the boost
    await reader.retrieve(query="query about kafka")
    clock.advance(minutes=4)
    await reader.retrieve(query="query about kafka")
    assert [0.52] * 3 == await _confidences(apollo, ids)
    clock.advance(minutes=1)
    await reader.retrieve(query="query about kafka")
    assert [0.54] * 3 == await _confidences(apollo, ids)


async def test_deleting_or_erasing_forgets_the_boosts_earned(make_apollo):
    """The record of a boost goes with its entry, and with the earner's erasure: an erased
    agent that comes back earns boosts again."""
    clock = ManualClock(EPOCH)
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder, clock=clock)
    ids = list((await _seed(apollo, embedder)).values())
    reader = apollo.client("reader")
    await reader.query_knowledge(query="query about kafka")
    assert [0.52] * 3 == await _confidences(apollo, ids)
    await apollo.erase_agent("reader")
    await reader.query_knowledge(query="query about kafka")
    assert [0.54] * 3 == await _confidences(apollo, ids)
    await apollo.erase_agent("agent-0")  # deletes its candidate entry and what it earned
    async with apollo.store.unit_of_work() as uow:
        assert await uow.entries.get(ids[0]) is None
        assert 2 == await uow.entries.forget_earner("reader")  # two entries are left


async def test_the_decay_cycle_forgets_boosts_whose_window_has_passed(make_apollo):
    """A record that no longer holds a boost back is dropped by the periodic decay; one
    still inside its window is kept, and keeps holding the boost back."""
    clock = ManualClock(EPOCH)
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder, clock=clock)
    ids = list((await _seed(apollo, embedder)).values())
    await apollo.client("early").query_knowledge(query="query about kafka")
    clock.advance(minutes=30)
    await apollo.client("late").query_knowledge(query="query about kafka")
    clock.advance(minutes=30)  # early's window has just passed; late's has not
    await apollo.run_decay_cycle()
    async with apollo.store.unit_of_work() as uow:
        assert 0 == await uow.entries.forget_boosts_before(EPOCH)  # early's are gone
    before = await _confidences(apollo, ids)
    await apollo.client("late").query_knowledge(query="query about kafka")
    assert before == await _confidences(apollo, ids)
    async with apollo.store.unit_of_work() as uow:
        assert 3 == await uow.entries.forget_earner("late")
