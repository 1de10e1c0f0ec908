"""The Store port on every store adapter: units of work roll back unless committed,
savepoints, filtered nearest-neighbour search, set-based maintenance, the dedup rule and
the round trip of every repository's values (``apollo_domain.ports``)."""

from __future__ import annotations

import functools
import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

import attrs
import pytest

from apollo_domain.errors import Conflict, NotFound, PersistenceFailed
from apollo_domain.model import (
    ACTIVE_STATUSES,
    AccessScope,
    ContentType,
    Entry,
    Evidence,
    Relation,
    RelationType,
    SourceRef,
    Status,
    Viewer,
)
from apollo_domain.ports import (
    AccessLogRecord,
    CredibilityRecord,
    ExpertiseRecord,
    Reads,
    SearchFilter,
    Store,
    UnitOfWork,
)
from tests.contract.stores import POOLED_STORE_KINDS, STORE_DIMENSION, pooled_store_kind
from tests.support import Interleaving, candidate_entry

#: Also through PgBouncer in transaction mode, with fewer server connections than callers.
store_kind = pytest.fixture(params=POOLED_STORE_KINDS)(pooled_store_kind)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
EVERY_STATUS = frozenset(Status)
T = TypeVar("T")


def vector(*components: float) -> tuple[float, ...]:
    """``components`` padded with zeros to the store's dimension."""
    return (*components, *[0.0] * (STORE_DIMENSION - len(components)))


def unit(*components: float) -> tuple[float, ...]:
    """``vector(*components)`` scaled to length one."""
    norm = math.sqrt(sum(x * x for x in components))
    return vector(*(x / norm for x in components))


make_entry = functools.partial(candidate_entry, embedding=unit(1.0), created_at=T0)


def everything(viewer: Viewer | None = None) -> SearchFilter:
    return SearchFilter(viewer=viewer or Viewer.anonymous(), statuses=EVERY_STATUS)


async def read(store: Store, work: Callable[[UnitOfWork], Awaitable[T]]) -> T:
    async with store.unit_of_work() as uow:
        return await work(uow)


async def seed(store: Store, *entries: Entry) -> None:
    async with store.unit_of_work() as uow:
        for entry in entries:
            await uow.entries.add(entry)
        await uow.commit()


# ------------------------------------------------------------------------ units of work


async def snapshot(store: Store, ids: Sequence[UUID]) -> dict[str, Any]:
    """Everything observable through the ports about ``ids`` and the whole store."""

    async def take(uow: UnitOfWork) -> dict[str, Any]:
        entries = {i: await uow.entries.get(i, with_embedding=True) for i in ids}
        return {
            "entries": {
                i: None if e is None else (attrs.asdict(e, recurse=False), e.embedding)
                for i, e in entries.items()
            },
            "by_hash": [
                await uow.entries.find_by_hash(e.content_hash, e.access_scope, e.owner_id)
                for e in entries.values()
                if e is not None
            ],
            "browse": await uow.entries.browse(everything(), 1000),
            "nearest": await uow.entries.nearest(unit(1.0, 0.5, 0.25), everything(), 1000),
            "candidates": await uow.entries.candidates(1000, T0),
            "agents": await uow.entries.agent_domain_stats(),
            "stats": await uow.entries.stats(Viewer("alice", frozenset({"bob"})), T0),
            "evidence": await uow.evidence.for_entries(ids),
            "relations": await uow.relations.outgoing(ids),
            "relation_count": await uow.relations.count(),
            "expertise": await uow.expertise.all(),
            "log": (await uow.access_log.count(), await uow.access_log.count("ingest")),
            "credibility": await uow.credibility.get("claude-1"),
            "outbox": (await uow.outbox.pending(), await uow.outbox.claim(100, T0, lease_until=T0)),
            "processed": await uow.processed.seen("message-1"),
        }

    return await read(store, take)


async def populate(store: Store) -> list[UUID]:
    """A little of everything, committed; returns the ids of the three entries."""
    first = make_entry("first", embedding=unit(1.0))
    second = make_entry("second", embedding=unit(0.0, 1.0), created_at=T0 + timedelta(hours=1))
    third = make_entry("third", embedding=None, access_scope=AccessScope.PRIVATE, owner_id="bob")
    await seed(store, first, second, third)
    async with store.unit_of_work() as uow:
        await uow.evidence.add(Evidence(first.id, first.source, 1.0, T0, "origin"))
        await uow.relations.add(Relation(first.id, second.id, RelationType.SIMILAR_TO, 0.9, T0))
        await uow.expertise.record_activity("claude-1", "networking", T0)
        await uow.access_log.record([AccessLogRecord("ingest", "claude-1", first.id, T0)])
        await uow.credibility.save(CredibilityRecord("claude-1", 3.0, 1.0))
        await uow.outbox.enqueue("contradiction_scan", {"entry_id": str(first.id)}, T0)
        await uow.commit()
    return [first.id, second.id, third.id]


LATER = T0 + timedelta(days=3)


async def mutate_everything(uow: UnitOfWork, ids: Sequence[UUID]) -> None:
    """One call of every mutating repository method."""
    first, second, third = ids
    fresh = make_entry("fresh", embedding=unit(0.0, 0.0, 1.0), created_at=LATER)
    await uow.entries.add(fresh)
    current = await uow.entries.get(second)
    assert current is not None
    await uow.entries.update(
        attrs.evolve(
            current,
            status=Status.CONFIRMED,
            tags=("changed",),
            owner_id="alice",
            access_scope=AccessScope.TEAM,
            source_context={"x": 1},
            confirmed_at=LATER,
        )
    )
    await uow.entries.boost([first, third], 0.2, LATER, count_access=True)
    await uow.entries.decay(LATER, 0.9, 0.3)
    await uow.entries.scale_confidence(0.5, LATER)
    await uow.entries.archive_stale(LATER, LATER)
    await uow.evidence.add(Evidence(fresh.id, SourceRef("openai-2", "openai"), 0.95, LATER))
    await uow.relations.add(Relation(fresh.id, first, RelationType.SUPPORTS_BY))
    await uow.expertise.record_activity("openai-2", "physics", LATER)
    await uow.expertise.replace_all([ExpertiseRecord("gemini-3", "math", 4, 0.8, LATER)])
    await uow.expertise.forget_agent("gemini-3")
    await uow.access_log.record([AccessLogRecord("query", "openai-2", first, LATER)])
    await uow.credibility.save(CredibilityRecord("claude-1", 1.0, 9.0, "troll"))
    (item,) = await uow.outbox.claim(10, LATER, lease_until=LATER + timedelta(minutes=5))
    await uow.outbox.fail(item.id, "boom", retry_at=None)
    await uow.outbox.enqueue("contradiction_scan", {}, LATER)
    await uow.processed.mark("message-1", LATER)
    await uow.entries.delete([first, third])


async def test_leaving_without_commit_rolls_back_every_repository(store: Store) -> None:
    """Every mutation of every repository is undone when the block ends uncommitted."""
    ids = await populate(store)
    before = await snapshot(store, ids)
    async with store.unit_of_work() as uow:
        await mutate_everything(uow, ids)
    assert before == await snapshot(store, ids)


async def test_an_exception_rolls_back_every_repository_and_propagates(store: Store) -> None:
    ids = await populate(store)
    before = await snapshot(store, ids)
    with pytest.raises(RuntimeError, match="crash"):
        async with store.unit_of_work() as uow:
            await mutate_everything(uow, ids)
            raise RuntimeError("crash")
    assert before == await snapshot(store, ids)


async def test_commit_keeps_every_change(store: Store) -> None:
    ids = await populate(store)
    before = await snapshot(store, ids)
    async with store.unit_of_work() as uow:
        await mutate_everything(uow, ids)
        await uow.commit()
    after = await snapshot(store, ids)
    assert before != after
    assert (None, None) == (after["entries"][ids[0]], after["entries"][ids[2]])
    second, _ = after["entries"][ids[1]]
    assert (Status.ARCHIVED, ("changed",), AccessScope.TEAM, "alice") == (
        second["status"],
        second["tags"],
        second["access_scope"],
        second["owner_id"],
    )
    assert after["processed"] is True
    assert (1, 2, 1) == (after["outbox"][0], after["log"][0], after["log"][1])
    assert CredibilityRecord("claude-1", 1.0, 9.0, "troll") == after["credibility"]


async def test_a_finished_unit_of_work_cannot_be_used_again(store: Store) -> None:
    """Once committed or left, a unit of work refuses every call with PersistenceFailed,
    and it cannot be entered a second time."""
    committed = store.unit_of_work()
    async with committed:
        await committed.processed.mark("k", T0)
        await committed.commit()
        with pytest.raises(PersistenceFailed):
            await committed.processed.mark("again", T0)
        with pytest.raises(PersistenceFailed):
            await committed.commit()
        with pytest.raises(PersistenceFailed):
            async with committed.savepoint():
                pass
    with pytest.raises(PersistenceFailed):
        async with committed:
            pass

    async with store.unit_of_work() as left:
        await left.processed.mark("left", T0)
    with pytest.raises(PersistenceFailed):
        await left.processed.seen("k")
    with pytest.raises(PersistenceFailed):
        await left.commit()

    async def seen(uow: UnitOfWork) -> list[bool]:
        return [await uow.processed.seen(k) for k in ("k", "again", "left")]

    assert [True, False, False] == await read(store, seen)


async def test_concurrent_reads_see_the_store_as_the_unit_of_work_reads_it(store: Store) -> None:
    """``read_concurrently``: each read's result in order, through repositories that apply
    the same visibility; a failing read's error is raised and the unit of work goes on; a
    finished unit of work refuses."""
    public = make_entry("public note")
    private = make_entry("private note", access_scope=AccessScope.PRIVATE, owner_id="alice")
    await seed(store, public, private)

    def nearest(viewer: Viewer) -> Callable[[Reads], Awaitable[list[UUID]]]:
        async def run(reads: Reads) -> list[UUID]:
            hits = await reads.entries.nearest(unit(1.0), everything(viewer), 10)
            return sorted((h.entry.id for h in hits), key=str)

        return run

    async def fail(reads: Reads) -> list[UUID]:
        await reads.entries.get(public.id)
        raise RuntimeError("read failed")

    reads = [nearest(Viewer("alice")), nearest(Viewer("bob")), nearest(Viewer("alice"))]
    both = sorted((public.id, private.id), key=str)
    async with store.unit_of_work() as uow:
        assert [both, [public.id], both] == await uow.read_concurrently(reads)
        assert [] == await uow.read_concurrently([])
        with pytest.raises(RuntimeError, match="read failed"):
            await uow.read_concurrently([nearest(Viewer("bob")), fail])
        assert [[public.id]] == await uow.read_concurrently([nearest(Viewer("bob"))])
        await uow.processed.mark("after reads", T0)
        await uow.commit()
        with pytest.raises(PersistenceFailed):
            await uow.read_concurrently(reads)

    async def seen(uow: UnitOfWork) -> bool:
        return await uow.processed.seen("after reads")

    assert await read(store, seen)


async def test_a_savepoint_rolls_back_only_its_own_work(store: Store) -> None:
    """The work before the savepoint stays; the work inside is undone; the error propagates;
    the unit of work goes on and commits."""
    kept, dropped = make_entry("kept"), make_entry("dropped")
    async with store.unit_of_work() as uow:
        await uow.entries.add(kept)
        with pytest.raises(Conflict):
            async with uow.savepoint():
                await uow.entries.add(dropped)
                await uow.processed.mark("inside", T0)
                await uow.entries.add(make_entry("kept"))  # same partition and hash
        async with uow.savepoint():
            await uow.processed.mark("after", T0)
        await uow.commit()

    async def check(uow: UnitOfWork) -> tuple[Any, ...]:
        return (
            await uow.entries.get(kept.id) == kept,
            await uow.entries.get(dropped.id),
            await uow.processed.seen("inside"),
            await uow.processed.seen("after"),
        )

    assert (True, None, False, True) == await read(store, check)


async def test_nested_savepoints_unwind_to_their_own_mark(store: Store) -> None:
    async with store.unit_of_work() as uow:
        await uow.processed.mark("outer", T0)
        async with uow.savepoint():
            await uow.processed.mark("middle", T0)
            with pytest.raises(KeyError):
                async with uow.savepoint():
                    await uow.processed.mark("inner", T0)
                    raise KeyError("inner")
        await uow.commit()

    async def seen(uow: UnitOfWork) -> list[bool]:
        return [await uow.processed.seen(k) for k in ("outer", "middle", "inner")]

    assert [True, True, False] == await read(store, seen)


# ------------------------------------------------------------------------------- search


async def test_nearest_ranks_by_cosine_then_id_within_the_filter(store: Store) -> None:
    """Highest cosine first (vector length does not matter), ties by id; archived, invisible
    and vector-less entries never appear; the limit is filled whenever enough entries match;
    ``nearest_many`` answers each query as ``nearest`` would."""
    ties = sorted(
        (make_entry(f"tie {i}", embedding=unit(1.0, 1.0)) for i in range(3)),
        key=lambda e: str(e.id),
    )
    best = make_entry("best", embedding=vector(3.0))
    far = sorted(
        (make_entry(f"far {i}", embedding=unit(0.0, 1.0)) for i in range(3)),
        key=lambda e: str(e.id),
    )
    archived = make_entry("archived", embedding=unit(1.0), status=Status.ARCHIVED)
    team = make_entry("team", embedding=unit(1.0), access_scope=AccessScope.TEAM, owner_id="t")
    no_vector = make_entry("no vector", embedding=None)
    await seed(store, *ties, best, *far, archived, team, no_vector)
    flt = SearchFilter(Viewer("me"), ACTIVE_STATUSES)
    teammate = attrs.evolve(flt, viewer=Viewer("me", frozenset({"t"})))

    async with store.unit_of_work() as uow:
        top = await uow.entries.nearest(unit(1.0), flt, 3)
        visible = await uow.entries.nearest(unit(1.0), flt, 100)
        with_team = await uow.entries.nearest(unit(1.0), teammate, 2)
        many = await uow.entries.nearest_many([unit(1.0), unit(0.0, 1.0)], flt, 4)
        singles = [
            await uow.entries.nearest(unit(1.0), flt, 4),
            await uow.entries.nearest(unit(0.0, 1.0), flt, 4),
        ]

    assert [best.id, ties[0].id, ties[1].id] == [s.entry.id for s in top]
    assert [1.0, math.sqrt(0.5), math.sqrt(0.5)] == pytest.approx(
        [s.similarity for s in top], rel=1e-6
    )
    assert [e.id for e in (best, *ties, *far)] == [s.entry.id for s in visible]
    assert [0.0, 0.0, 0.0] == pytest.approx([s.similarity for s in visible[4:]], abs=1e-6)
    assert sorted([best.id, team.id], key=str) == [s.entry.id for s in with_team]
    assert [[s.entry.id for s in r] for r in singles] == [[s.entry.id for s in r] for r in many]
    assert [e.id for e in (*far, *ties[:1])] == [s.entry.id for s in many[1]]


async def test_the_id_only_searches_agree_with_the_full_ones(store: Store) -> None:
    """``nearest_ids`` and ``lexical_search_ids`` return the ids and scores of ``nearest``
    and ``lexical_search``: the same entries in the same order (ties by id, cut at the
    limit among tied entries), filtered the same way."""
    ties = [make_entry(f"quasar tie {i}", embedding=unit(1.0, 1.0)) for i in range(4)]
    best = make_entry("quasar quasar best", embedding=vector(3.0))
    far = [make_entry(f"nebula far {i}", embedding=unit(0.0, 1.0)) for i in range(3)]
    archived = make_entry("quasar archived", embedding=unit(1.0), status=Status.ARCHIVED)
    team = make_entry(
        "quasar team", embedding=unit(1.0), access_scope=AccessScope.TEAM, owner_id="t"
    )
    no_vector = make_entry("quasar no vector", embedding=None)
    await seed(store, *ties, best, *far, archived, team, no_vector)
    flt = SearchFilter(Viewer("me"), ACTIVE_STATUSES)
    filters = [flt, attrs.evolve(flt, viewer=Viewer("me", frozenset({"t"})))]

    async with store.unit_of_work() as uow:
        for f in filters:
            for limit in (1, 3, 100):
                for query in (unit(1.0), unit(0.0, 1.0)):
                    full = await uow.entries.nearest(query, f, limit)
                    ids = await uow.entries.nearest_ids(query, f, limit)
                    assert [(s.entry.id, s.similarity) for s in full] == ids
                for text in ("quasar", "nebula quasar", "nothing here"):
                    hits = await uow.entries.lexical_search(text, f, limit)
                    found = await uow.entries.lexical_search_ids(text, f, limit)
                    assert [(s.entry.id, s.similarity) for s in hits] == found
        assert len(await uow.entries.nearest_ids(unit(1.0), flt, 3)) == 3
        assert len(await uow.entries.lexical_search_ids("quasar", flt, 3)) == 3
        assert [] == await uow.entries.nearest_ids(unit(1.0), flt, 0)
        assert [] == await uow.entries.lexical_search_ids("quasar", flt, 0)


async def test_a_tie_longer_than_the_page_is_cut_in_id_order(store: Store) -> None:
    """Forty entries at one distance from the query, more than any scan margin: the first
    few by id are the answer, whichever the index happens to meet first."""
    tied = [make_entry(f"tied {i}", embedding=unit(1.0, 1.0)) for i in range(40)]
    await seed(store, *tied)
    flt = SearchFilter(Viewer("me"), ACTIVE_STATUSES)
    by_id = sorted((e.id for e in tied), key=str)
    async with store.unit_of_work() as uow:
        for limit in (1, 5, 30):
            assert [s.entry.id for s in await uow.entries.nearest(unit(1.0), flt, limit)] == (
                by_id[:limit]
            )
            assert [i for i, _ in await uow.entries.nearest_ids(unit(1.0), flt, limit)] == (
                by_id[:limit]
            )
            many = await uow.entries.nearest_many([unit(1.0), unit(0.0, 1.0)], flt, limit)
            assert [[s.entry.id for s in found] for found in many] == [by_id[:limit]] * 2


# -------------------------------------------------------------------------- maintenance


async def test_decay_is_one_exact_pass_and_idempotent_at_one_instant(store: Store) -> None:
    """Confidence × factor^hours since the last decay (or creation, never negative); below
    the threshold an entry is archived as 'decayed' and frees its dedup partition; decaying
    again at the same instant changes nothing. The last decay's time never moves back (an
    entry created after the decay's clock keeps its creation time)."""
    fresh = make_entry("fresh", confidence=0.5)
    weak = make_entry("weak", confidence=0.11)
    decayed_before = make_entry(
        "decayed before", confidence=0.5, decayed_at=T0 + timedelta(hours=6)
    )
    future = make_entry("future", confidence=0.5, created_at=T0 + timedelta(days=9))
    archived = make_entry("archived", confidence=0.5, status=Status.ARCHIVED)
    everyone = [fresh, weak, decayed_before, future, archived]
    await seed(store, *everyone)
    now = T0 + timedelta(hours=10)
    async with store.unit_of_work() as uow:
        outcome = await uow.entries.decay(now, 0.9, 0.1)
        await uow.commit()
    async with store.unit_of_work() as uow:
        before = await uow.entries.get_many([e.id for e in everyone])
        again = await uow.entries.decay(now, 0.9, 0.1)
        stored = await uow.entries.get_many([e.id for e in everyone])
        await uow.commit()

    assert (4, 1) == (outcome.decayed, outcome.archived)
    assert (3, 0) == (again.decayed, again.archived)
    assert before == stored
    assert 0.5 * 0.9**10 == pytest.approx(stored[fresh.id].confidence)
    assert 0.5 * 0.9**4 == pytest.approx(stored[decayed_before.id].confidence)
    assert 0.5 == pytest.approx(stored[future.id].confidence)
    assert archived == stored[archived.id]
    assert {fresh.id, weak.id, decayed_before.id} == {
        i for i, e in stored.items() if e.decayed_at == now
    }
    assert future.created_at == stored[future.id].decayed_at  # never before it existed
    assert (Status.CANDIDATE, T0) == (stored[fresh.id].status, stored[fresh.id].updated_at)
    gone = stored[weak.id]
    assert 0.11 * 0.9**10 == pytest.approx(gone.confidence)
    assert (Status.ARCHIVED, now, {"origin": "test", "archive_reason": "decayed"}) == (
        gone.status,
        gone.updated_at,
        gone.source_context,
    )
    async with store.unit_of_work() as uow:
        assert await uow.entries.find_by_hash(weak.content_hash, AccessScope.GLOBAL, None) is None
        await uow.entries.add(make_entry("weak"))  # its partition is free again
        await uow.commit()


async def test_scale_confidence_and_archive_stale_touch_only_active_entries(
    store: Store,
) -> None:
    old = make_entry("old", confidence=0.8)
    touched = make_entry("touched", confidence=0.8, updated_at=T0 + timedelta(days=10))
    archived = make_entry("archived", confidence=0.8, status=Status.ARCHIVED)
    await seed(store, old, touched, archived)
    now = T0 + timedelta(days=20)
    async with store.unit_of_work() as uow:
        assert 2 == await uow.entries.scale_confidence(0.5, now)
        assert 1 == await uow.entries.archive_stale(T0 + timedelta(days=5), now)
        await uow.commit()
    stored = await read(store, lambda u: u.entries.get_many([old.id, touched.id, archived.id]))
    assert [0.4, 0.4, 0.8] == pytest.approx(
        [stored[e.id].confidence for e in (old, touched, archived)]
    )
    assert (Status.ARCHIVED, now, {"origin": "test", "archive_reason": "stale"}) == (
        stored[old.id].status,
        stored[old.id].updated_at,
        stored[old.id].source_context,
    )
    assert (Status.CANDIDATE, T0 + timedelta(days=10)) == (
        stored[touched.id].status,
        stored[touched.id].updated_at,
    )
    assert archived == stored[archived.id]


# -------------------------------------------------------------------------------- dedup


async def test_add_rejects_an_active_duplicate_of_the_same_partition(store: Store) -> None:
    """Same hash in the same partition is a Conflict, the same id too; other owners' private
    partitions are free; archiving frees the partition, and reviving the archived entry
    over its replacement is a Conflict."""
    original = make_entry("text")
    await seed(store, original)
    async with store.unit_of_work() as uow:
        with pytest.raises(Conflict):
            async with uow.savepoint():
                await uow.entries.add(make_entry("text"))
        with pytest.raises(Conflict):
            async with uow.savepoint():
                await uow.entries.add(original)
        await uow.entries.add(make_entry("text", access_scope=AccessScope.PRIVATE, owner_id="a"))
        await uow.entries.add(make_entry("text", access_scope=AccessScope.PRIVATE, owner_id="b"))
        await uow.entries.update(attrs.evolve(original, status=Status.ARCHIVED))
        assert (
            await uow.entries.find_by_hash(original.content_hash, AccessScope.GLOBAL, None) is None
        )
        replacement = make_entry("text")
        await uow.entries.add(replacement)
        with pytest.raises(Conflict):
            async with uow.savepoint():
                await uow.entries.update(original)  # reviving it would duplicate the replacement
        assert replacement == await uow.entries.find_by_hash(
            original.content_hash, AccessScope.GLOBAL, None
        )


@pytest.mark.parametrize("read", ["lock", "find_by_hash"])
async def test_a_locked_read_waits_for_the_row_lock_and_sees_its_commit(
    store: Store, read: str
) -> None:
    """A unit of work has archived an entry under its row lock and not yet committed. A
    locked read of that entry waits for it, then reads the committed row: ``lock`` returns
    the archived entry, ``find_by_hash(lock=True)`` no longer finds it."""
    entry = make_entry("text")
    await seed(store, entry)
    points = Interleaving(store)

    async def archive() -> None:
        async with points.unit_of_work() as uow:
            locked = await uow.entries.lock(entry.id)
            assert locked is not None
            await uow.entries.update(attrs.evolve(locked, status=Status.ARCHIVED))
            await uow.commit()

    async def locked_read() -> Entry | None:
        async with points.unit_of_work() as uow:
            if read == "lock":
                return await uow.entries.lock(entry.id)
            return await uow.entries.find_by_hash(
                entry.content_hash, AccessScope.GLOBAL, None, lock=True
            )

    try:
        gate = points.hold("archive", "commit")
        archiving = points.run("archive", archive())
        await points.reached("archive", "commit")
        reading = points.run("read", locked_read())
        blocked = await points.blocked_or_done(reading)
        gate.set()
        _, found = await points.finish(archiving, reading)
    finally:
        await points.close()

    assert blocked, "the locked read did not wait for the row lock"
    if read == "lock":
        assert isinstance(found, Entry) and Status.ARCHIVED == found.status
    else:
        assert found is None


async def test_dedup_partitions_are_per_owner_except_that_global_is_one(store: Store) -> None:
    """Archived entries and other owners' private entries never conflict; every global entry
    shares one partition whoever owns it; search filters see the same partitions."""
    archived = make_entry("same", status=Status.ARCHIVED)
    mine = make_entry("same", access_scope=AccessScope.PRIVATE, owner_id="p1")
    theirs = make_entry("same", access_scope=AccessScope.PRIVATE, owner_id="p2")
    shared = make_entry("same", owner_id="p1")
    await seed(store, archived, mine, theirs, shared)
    same = mine.content_hash
    async with store.unit_of_work() as uow:
        with pytest.raises(Conflict):
            async with uow.savepoint():
                await uow.entries.add(
                    make_entry("same", access_scope=AccessScope.PRIVATE, owner_id="p1")
                )
        with pytest.raises(Conflict):
            async with uow.savepoint():
                await uow.entries.add(make_entry("same", owner_id="p2"))
        assert mine == await uow.entries.find_by_hash(same, AccessScope.PRIVATE, "p1")
        assert shared == await uow.entries.find_by_hash(same, AccessScope.GLOBAL, "p9")
        assert await uow.entries.find_by_hash(same, AccessScope.TEAM, "p1") is None
        both = Viewer("p1", frozenset({"p2"}))
        in_global = SearchFilter(both, EVERY_STATUS, partition=(AccessScope.GLOBAL, "x"))
        private = SearchFilter(both, EVERY_STATUS, access_scope=AccessScope.PRIVATE)
        assert {archived.id, shared.id} == {e.id for e in await uow.entries.browse(in_global, 10)}
        assert [mine.id] == [e.id for e in await uow.entries.browse(private, 10)]


# ------------------------------------------------------------------------- repositories


async def test_repositories_round_trip_their_values(store: Store) -> None:
    """What each repository stores comes back equal, through separate units of work."""
    a = make_entry(
        "a",
        tags=("x", "y"),
        source=SourceRef("agent-a", "openai", "chat", "alice", "10.0.0.1"),
        source_context={"nested": {"k": [1, 2]}},
        confirmed_at=T0 + timedelta(minutes=5),
        status=Status.CONFIRMED,
        confidence=0.75,
        content_type=ContentType.PROCEDURE,
    )
    b = make_entry("b", access_scope=AccessScope.TEAM, owner_id="t1", embedding=unit(1.0, 2.0))
    await seed(store, a, b)
    origin = Evidence(a.id, SourceRef("agent-a", "openai", None), 1.0, T0, "origin")
    relation = Relation(a.id, b.id, RelationType.SUPPORTS_BY, 0.7, T0, {"k": "v"})
    expertise = ExpertiseRecord("agent-a", "physics", 4, 0.9, T0 + timedelta(hours=1))
    credibility = CredibilityRecord("agent-a", 3.0, 1.5, "trusted")
    async with store.unit_of_work() as uow:
        assert await uow.evidence.add(origin)
        assert not await uow.evidence.add(attrs.evolve(origin, similarity=0.5))
        assert await uow.evidence.add(
            attrs.evolve(origin, source=SourceRef("agent-a", "openai", "c"))
        )
        with pytest.raises(NotFound):
            await uow.evidence.add(attrs.evolve(origin, entry_id=uuid.uuid4()))
        assert await uow.relations.add(relation)
        assert not await uow.relations.add(attrs.evolve(relation, weight=0.1))
        with pytest.raises(NotFound):
            await uow.relations.add(Relation(a.id, uuid.uuid4(), RelationType.IS_A))
        await uow.expertise.replace_all([attrs.evolve(expertise, entry_count=3, last_active_at=T0)])
        await uow.expertise.record_activity("agent-a", "physics", T0 + timedelta(hours=1))
        await uow.access_log.record(
            [
                AccessLogRecord("ingest", "agent-a", a.id, T0),
                AccessLogRecord("query", "agent-a", None, T0, {"q": "x"}),
            ]
        )
        await uow.credibility.save(credibility)
        assert await uow.processed.mark("k", T0)
        assert not await uow.processed.mark("k", T0)
        await uow.outbox.enqueue("contradiction_scan", {"id": 1}, T0)
        await uow.outbox.enqueue("contradiction_scan", {"id": 2}, T0 + timedelta(seconds=1))
        await uow.outbox.enqueue("contradiction_scan", {"id": 3}, T0 + timedelta(seconds=2))
        await uow.commit()

    async with store.unit_of_work() as uow:
        claimed = await uow.outbox.claim(2, T0, lease_until=T0)
        assert [{"id": 1}, {"id": 2}] == [i.payload for i in claimed]
        assert [("contradiction_scan", 0, T0)] == [
            (i.kind, i.attempts, i.created_at) for i in claimed[:1]
        ]
        await uow.outbox.complete(claimed[0].id)
        await uow.outbox.fail(claimed[1].id, "judge down", retry_at=None)
        await uow.commit()

    async with store.unit_of_work() as uow:
        stored_a = await uow.entries.get(a.id, with_embedding=True)
        assert a == stored_a
        assert stored_a is not None and stored_a.embedding is not None
        assert a.embedding == pytest.approx(stored_a.embedding, abs=1e-6)
        plain = await uow.entries.get_many([a.id, b.id, uuid.uuid4()])
        assert {a.id: a, b.id: b} == plain
        assert [None, None] == [entry.embedding for entry in plain.values()]
        vectors = await uow.entries.get_many([a.id, uuid.uuid4()], with_embedding=True)
        assert {a.id: a} == vectors
        assert a.embedding == pytest.approx(vectors[a.id].embedding, abs=1e-6)
        assert [a] == await uow.entries.by_agent("agent-a")
        evidence = await uow.evidence.for_entry(a.id)
        assert [origin, attrs.evolve(origin, source=SourceRef("agent-a", "openai", "c"))] == (
            evidence
        )
        assert {a.id: evidence} == await uow.evidence.for_entries([a.id])
        assert [relation] == await uow.relations.outgoing([a.id])
        assert [] == await uow.relations.outgoing([a.id], [RelationType.IS_A])
        assert await uow.relations.exists(a.id, b.id, RelationType.SUPPORTS_BY)
        assert not await uow.relations.exists(b.id, a.id, RelationType.SUPPORTS_BY)
        assert [expertise] == await uow.expertise.for_domain("physics", 0.5)
        assert [] == await uow.expertise.for_domain("physics", 0.95)
        assert [expertise] == await uow.expertise.for_agent("agent-a")
        assert (2, 1) == (await uow.access_log.count(), await uow.access_log.count("query"))
        assert credibility == await uow.credibility.get("agent-a")
        assert CredibilityRecord("newcomer") == await uow.credibility.get("newcomer")
        assert await uow.processed.seen("k")
        assert not await uow.processed.seen("other")
        assert 1 == await uow.outbox.pending()
        assert [{"id": 3}] == [i.payload for i in await uow.outbox.claim(5, T0, lease_until=T0)]
        stats = await uow.entries.stats(Viewer("t1"), T0)
        assert (2, 2, 1) == (stats.total, stats.by_status["active"], stats.total_relations)
        outsider = await uow.entries.stats(Viewer("z"), T0)
        assert (1, 0) == (outsider.total, outsider.total_relations)
        assert 1 == await uow.entries.delete([a.id, a.id, uuid.uuid4()])
        assert [] == await uow.evidence.for_entry(a.id)
        assert 0 == await uow.relations.count()
