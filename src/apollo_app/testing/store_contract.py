"""The Store port's contract suite, for every store adapter: Apollo's own (in-memory and
PostgreSQL) and yours.

A store adapter proves itself by running this suite in its own test session: subclass
:class:`StoreContract` under a name pytest collects and say how to open an empty store
and how many of its units of work wait for a lock::

    from apollo_app.testing import StoreContract

    class TestMyStore(StoreContract):
        async def create_store(self, dimension: int) -> Store:
            return await MyStore.open(DATABASE_URL, dimension=dimension, empty=True)

        async def lock_waiters(self, store: Store) -> int:
            return await store.count_lock_waiters()

Each test gets a new empty store and closes it afterwards. The suite covers units of work
(rollback unless committed, savepoints, refusal once finished, concurrent reads),
nearest-neighbour and lexical search with their filters and tie rules, the dedup rule,
row locks, the confidence policy's formulas applied to boosts and decay, set-based
maintenance, and the round trip of every repository's values. It needs pytest and
pytest-asyncio (``pip install "apollo-knowledge[testing]"``) and runs in either asyncio
mode.
"""

from __future__ import annotations

import asyncio
import functools
import math
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

import attrs
import pytest
import pytest_asyncio

from apollo_domain import testing
from apollo_domain.errors import Conflict, NotFound, PersistenceFailed
from apollo_domain.model import (
    ACTIVE_STATUSES,
    AccessScope,
    ContentType,
    Entry,
    Evidence,
    EvidenceKind,
    Relation,
    RelationType,
    SourceRef,
    Status,
    Viewer,
)
from apollo_domain.policy import DEFAULT_POLICY, ConfidencePolicy
from apollo_domain.ports import (
    AccessLogRecord,
    CredibilityRecord,
    ExpertiseRecord,
    Reads,
    SearchFilter,
    Store,
    UnitOfWork,
)
from apollo_domain.testing import ENTRY_TIME

#: The dimension of every embedding the suite stores.
DIMENSION = 16
#: The time the suite's entries are created at, and its other times are counted from.
T0 = ENTRY_TIME
#: How long the suite waits for a unit of work it released: longer means a deadlock.
TIMEOUT = 20.0
EVERY_STATUS = frozenset(Status)
#: Policies whose numbers the stores must apply as the policy's formulas say, each with
#: hours of decay that archive some of the suite's entries and not all.
POLICIES = [
    (DEFAULT_POLICY, 400.0),
    (
        ConfidencePolicy(
            retrieval_boost=0.07,
            corroboration_boost=0.17,
            decay_factor_per_hour=0.95,
            archive_below=0.3,
        ),
        7.5,
    ),
]
T = TypeVar("T")


def vector(*components: float) -> tuple[float, ...]:
    """``components`` padded with zeros to the store's dimension."""
    return (*components, *[0.0] * (DIMENSION - len(components)))


def unit(*components: float) -> tuple[float, ...]:
    """``vector(*components)`` scaled to length one."""
    norm = math.sqrt(sum(x * x for x in components))
    return vector(*(x / norm for x in components))


#: The suite's entries: :func:`apollo_domain.testing.make_entry` with a unit embedding.
make_entry = functools.partial(testing.make_entry, embedding=unit(1.0), created_at=T0)


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


@pytest.mark.asyncio
class StoreContract:
    """The suite; a subclass names the store (:meth:`create_store`) and how to see its
    lock waits (:meth:`lock_waiters`). ``request`` is the running test's pytest request,
    set before :meth:`create_store` is called, for a store that needs other fixtures
    (``self.request.getfixturevalue("database")``)."""

    request: pytest.FixtureRequest

    async def create_store(self, dimension: int) -> Store:
        """A new, empty store for embeddings of ``dimension``; closed after the test."""
        raise NotImplementedError(f"{type(self).__name__} must define create_store")

    async def lock_waiters(self, store: Store) -> int:
        """How many of ``store``'s units of work are waiting, right now, for a lock that
        another one holds (a row lock, or a store that runs one unit of work at a time).
        The tests of row locks poll it to see the second unit of work blocked."""
        raise NotImplementedError(f"{type(self).__name__} must define lock_waiters")

    @pytest_asyncio.fixture
    async def store(self, request: pytest.FixtureRequest) -> AsyncIterator[Store]:
        self.request = request
        opened = await self.create_store(DIMENSION)
        try:
            yield opened
        finally:
            await opened.close()

    async def blocked_or_done(self, store: Store, task: asyncio.Task[Any]) -> bool:
        """Wait until ``task`` finishes (False) or a unit of work of ``store`` waits for a
        lock (True); an error after :data:`TIMEOUT` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT
        while not task.done():
            if await self.lock_waiters(store) > 0:
                return True
            if loop.time() > deadline:
                raise AssertionError(f"{task.get_name()} neither finished nor blocked")
            await asyncio.sleep(0.005)
        return False

    # ------------------------------------------------------------------ units of work

    async def test_leaving_without_commit_rolls_back_every_repository(self, store: Store) -> None:
        """Every mutation of every repository is undone when the block ends uncommitted."""
        ids = await populate(store)
        before = await snapshot(store, ids)
        async with store.unit_of_work() as uow:
            await mutate_everything(uow, ids)
        assert before == await snapshot(store, ids)

    async def test_an_exception_rolls_back_every_repository_and_propagates(
        self, store: Store
    ) -> None:
        ids = await populate(store)
        before = await snapshot(store, ids)
        with pytest.raises(RuntimeError, match="crash"):
            async with store.unit_of_work() as uow:
                await mutate_everything(uow, ids)
                raise RuntimeError("crash")
        assert before == await snapshot(store, ids)

    async def test_commit_keeps_every_change(self, store: Store) -> None:
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

    async def test_a_finished_unit_of_work_cannot_be_used_again(self, store: Store) -> None:
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

    async def test_concurrent_reads_see_the_store_as_the_unit_of_work_reads_it(
        self, store: Store
    ) -> None:
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

    async def test_a_savepoint_rolls_back_only_its_own_work(self, store: Store) -> None:
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

    async def test_nested_savepoints_unwind_to_their_own_mark(self, store: Store) -> None:
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

    async def test_nearest_ranks_by_cosine_then_id_within_the_filter(self, store: Store) -> None:
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

    async def test_near_pairs_are_the_pairs_at_the_cosine_asked_for(self, store: Store) -> None:
        """Every pair of the given embedded entries at or above the cosine, once, smaller id
        first (vector length does not matter); ids not asked for, unknown ids and entries
        without a vector make no pair."""
        a = make_entry("a", embedding=vector(2.0))
        twin = make_entry("a twin", embedding=unit(1.0, 0.05))  # cosine 0.9988 with a
        apart = make_entry("apart", embedding=unit(1.0, 1.0))  # cosine 0.707 with a
        other = make_entry("not asked", embedding=unit(1.0))
        bare = make_entry("no vector", embedding=None)
        await seed(store, a, twin, apart, other, bare)
        asked = [a.id, twin.id, apart.id, bare.id, uuid.uuid4()]
        async with store.unit_of_work() as uow:
            close = await uow.entries.near_pairs(asked, 0.99)
            loose = await uow.entries.near_pairs(asked, 0.7)
            none = await uow.entries.near_pairs([a.id], 0.0)

        def pair(x: Entry, y: Entry) -> tuple[UUID, UUID]:
            return (x.id, y.id) if x.id < y.id else (y.id, x.id)

        assert {pair(a, twin)} == close
        assert {pair(a, twin), pair(a, apart), pair(twin, apart)} == loose
        assert set() == none

    async def test_the_id_only_searches_agree_with_the_full_ones(self, store: Store) -> None:
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

    async def test_a_tie_longer_than_the_page_is_cut_in_id_order(self, store: Store) -> None:
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

    async def test_decay_is_one_exact_pass_and_idempotent_at_one_instant(
        self, store: Store
    ) -> None:
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
            assert (
                await uow.entries.find_by_hash(weak.content_hash, AccessScope.GLOBAL, None) is None
            )
            await uow.entries.add(make_entry("weak"))  # its partition is free again
            await uow.commit()

    async def test_scale_confidence_and_archive_stale_touch_only_active_entries(
        self,
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

    async def test_add_rejects_an_active_duplicate_of_the_same_partition(
        self, store: Store
    ) -> None:
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
            await uow.entries.add(
                make_entry("text", access_scope=AccessScope.PRIVATE, owner_id="a")
            )
            await uow.entries.add(
                make_entry("text", access_scope=AccessScope.PRIVATE, owner_id="b")
            )
            await uow.entries.update(attrs.evolve(original, status=Status.ARCHIVED))
            assert (
                await uow.entries.find_by_hash(original.content_hash, AccessScope.GLOBAL, None)
                is None
            )
            replacement = make_entry("text")
            await uow.entries.add(replacement)
            with pytest.raises(Conflict):
                async with uow.savepoint():
                    await uow.entries.update(
                        original
                    )  # reviving it would duplicate the replacement
            assert replacement == await uow.entries.find_by_hash(
                original.content_hash, AccessScope.GLOBAL, None
            )

    @pytest.mark.parametrize("read", ["lock", "find_by_hash"])
    async def test_a_locked_read_waits_for_the_row_lock_and_sees_its_commit(
        self, store: Store, read: str
    ) -> None:
        """A unit of work has archived an entry under its row lock and not yet committed. A
        locked read of that entry waits for it, then reads the committed row: ``lock`` returns
        the archived entry, ``find_by_hash(lock=True)`` no longer finds it."""
        entry = make_entry("text")
        await seed(store, entry)
        archived, release = asyncio.Event(), asyncio.Event()

        async def archive() -> None:
            async with store.unit_of_work() as uow:
                locked = await uow.entries.lock(entry.id)
                assert locked is not None
                await uow.entries.update(attrs.evolve(locked, status=Status.ARCHIVED))
                archived.set()
                await release.wait()
                await uow.commit()

        async def locked_read() -> Entry | None:
            async with store.unit_of_work() as uow:
                if read == "lock":
                    return await uow.entries.lock(entry.id)
                return await uow.entries.find_by_hash(
                    entry.content_hash, AccessScope.GLOBAL, None, lock=True
                )

        archiving = asyncio.create_task(archive())
        try:
            await asyncio.wait_for(archived.wait(), TIMEOUT)
            reading = asyncio.create_task(locked_read())
            blocked = await self.blocked_or_done(store, reading)
        finally:
            release.set()
        await asyncio.wait_for(archiving, TIMEOUT)
        found = await asyncio.wait_for(reading, TIMEOUT)

        assert blocked, "the locked read did not wait for the row lock"
        if read == "lock":
            assert isinstance(found, Entry) and Status.ARCHIVED == found.status
        else:
            assert found is None

    async def test_dedup_partitions_are_per_owner_except_that_global_is_one(
        self, store: Store
    ) -> None:
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
            assert {archived.id, shared.id} == {
                e.id for e in await uow.entries.browse(in_global, 10)
            }
            assert [mine.id] == [e.id for e in await uow.entries.browse(private, 10)]

    # ------------------------------------------------------------------------- repositories

    async def test_repositories_round_trip_their_values(self, store: Store) -> None:
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
            await uow.expertise.replace_all(
                [attrs.evolve(expertise, entry_count=3, last_active_at=T0)]
            )
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
            assert {a.id: evidence} == await uow.evidence.for_entries([a.id, b.id, uuid.uuid4()])
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

    async def test_update_writes_only_the_mutable_fields(self, store: Store) -> None:
        """Everything but the content, its type, the embedding, the access count and the
        creation time is replaced; an unknown entry is NotFound."""
        original = make_entry("text")
        await seed(store, original)
        later = T0 + timedelta(hours=5)
        changed = attrs.evolve(
            original,
            content="other text",
            content_type=ContentType.CONCEPT,
            access_count=99,
            status=Status.CONFIRMED,
            confidence=0.8,
            tags=("a", "b"),
            knowledge_domain="a",
            source=SourceRef("human-1", "human", "chat", "u", "host"),
            owner_id="alice",
            access_scope=AccessScope.TEAM,
            source_context={"k": "v"},
            confirmed_at=later,
            updated_at=later,
            decayed_at=later,
        )
        async with store.unit_of_work() as uow:
            await uow.entries.update(changed)
            with pytest.raises(NotFound):
                await uow.entries.update(make_entry("missing"))
            await uow.commit()
        stored = await read(store, lambda u: u.entries.get(original.id))
        expected = attrs.evolve(
            changed, content="text", content_type=ContentType.FACT, access_count=0, embedding=None
        )
        assert stored is not None
        assert attrs.asdict(expected, recurse=False) == attrs.asdict(stored, recurse=False)

    async def test_a_confidence_outside_the_unit_interval_is_refused(self, store: Store) -> None:
        """Adding or updating an entry with a confidence outside [0, 1] (NaN included) is
        PersistenceFailed, and its unit of work writes nothing."""
        kept = make_entry("kept")
        await seed(store, kept)
        for bad in (1.5, -0.1, math.nan):
            with pytest.raises(PersistenceFailed):
                async with store.unit_of_work() as uow:
                    await uow.entries.add(make_entry(f"refused {bad}", confidence=bad))
                    await uow.commit()
            with pytest.raises(PersistenceFailed):
                async with store.unit_of_work() as uow:
                    await uow.entries.update(attrs.evolve(kept, confidence=bad))
                    await uow.commit()
        assert [kept] == await read(store, lambda u: u.entries.browse(everything(), 10))

    async def test_a_boost_is_capped_at_one_and_counts_an_access_once(self, store: Store) -> None:
        """An id named twice is boosted once; an unknown id is absent from the result; the
        access count and the update time follow."""
        high, low = make_entry("high", confidence=0.95), make_entry("low", confidence=0.2)
        await seed(store, high, low)
        later = T0 + timedelta(minutes=1)
        async with store.unit_of_work() as uow:
            result = await uow.entries.boost(
                [high.id, low.id, low.id, uuid.uuid4()], 0.1, later, count_access=True
            )
            await uow.entries.boost([low.id], 0.1, later, count_access=False)
            await uow.commit()
        assert {high.id: 1.0, low.id: pytest.approx(0.3)} == result
        stored = await read(store, lambda u: u.entries.get_many([high.id, low.id]))
        assert (1, 1) == (stored[high.id].access_count, stored[low.id].access_count)
        assert pytest.approx(0.4) == stored[low.id].confidence
        assert later == stored[low.id].updated_at

    @pytest.mark.parametrize(("policy", "hours"), POLICIES, ids=["default", "tuned"])
    async def test_boosts_and_decay_apply_the_confidence_policys_formulas(
        self, store: Store, policy: ConfidencePolicy, hours: float
    ) -> None:
        """Given a policy's numbers, the store computes what the policy's own formulas say:
        a retrieval boost is ``after_retrieval``, a corroboration boost (the amount for a
        source's credibility) ``after_corroboration``, decay ``decayed`` over the hours since
        the last decay, and an entry is archived exactly when ``should_archive`` says so."""
        confidences = (0.0, 0.05, 0.3, 0.5, 0.93, 1.0)
        entries = [make_entry(f"note {c}", confidence=c) for c in confidences]
        await seed(store, *entries)
        ids = [e.id for e in entries]
        credibility = 0.3
        expected = {e.id: policy.after_retrieval(e.confidence) for e in entries}
        async with store.unit_of_work() as uow:
            retrieved = await uow.entries.boost(ids, policy.retrieval_boost, T0, count_access=True)
            expected = {i: policy.after_corroboration(c, credibility) for i, c in expected.items()}
            amount = policy.corroboration_amount(credibility)
            corroborated = await uow.entries.boost(ids, amount, T0, count_access=False)
            await uow.commit()
        async with store.unit_of_work() as uow:
            await uow.entries.decay(
                T0 + timedelta(hours=hours), policy.decay_factor_per_hour, policy.archive_below
            )
            await uow.commit()
        stored = await read(store, lambda u: u.entries.get_many(ids))

        assert [pytest.approx(policy.after_retrieval(c)) for c in confidences] == [
            retrieved[i] for i in ids
        ]
        assert [pytest.approx(expected[i]) for i in ids] == [corroborated[i] for i in ids]
        decayed = {i: policy.decayed(c, hours) for i, c in expected.items()}
        assert [pytest.approx(decayed[i]) for i in ids] == [stored[i].confidence for i in ids]
        archived = [policy.should_archive(decayed[i]) for i in ids]
        assert archived == [stored[i].status is Status.ARCHIVED for i in ids]
        assert any(archived) and not all(archived)

    async def test_delete_takes_the_entrys_evidence_and_relations_with_it(
        self, store: Store
    ) -> None:
        a, b, c = make_entry("a"), make_entry("b"), make_entry("c")
        await seed(store, a, b, c)
        async with store.unit_of_work() as uow:
            await uow.evidence.add(Evidence(a.id, a.source, 1.0, T0, EvidenceKind.ORIGIN))
            assert not await uow.evidence.add(Evidence(a.id, a.source, 0.5, T0))
            await uow.relations.add(Relation(a.id, b.id, RelationType.CAUSES))
            await uow.relations.add(Relation(c.id, a.id, RelationType.CAUSES))
            await uow.relations.add(Relation(b.id, c.id, RelationType.CAUSES))
            assert not await uow.relations.add(Relation(b.id, c.id, RelationType.CAUSES, 0.2))
            with pytest.raises(NotFound):
                await uow.relations.add(Relation(b.id, uuid.uuid4(), RelationType.CAUSES))
            assert 1 == await uow.entries.delete([a.id, a.id, uuid.uuid4()])
            assert [] == await uow.evidence.for_entry(a.id)
            assert 1 == await uow.relations.count()
            assert [(b.id, c.id)] == [
                (r.from_id, r.to_id) for r in await uow.relations.outgoing([a.id, b.id, c.id])
            ]
            with pytest.raises(NotFound):
                await uow.evidence.add(Evidence(a.id, a.source, 1.0, T0))

    async def test_stats_count_what_the_viewer_sees(self, store: Store) -> None:
        """Totals, the last 24 hours, the average confidence of active entries, counts by
        status and content type, and the relations between visible entries; the per-agent,
        per-domain aggregate over active entries."""
        mine = make_entry(
            "mine", access_scope=AccessScope.PRIVATE, owner_id="alice", confidence=0.9
        )
        theirs = make_entry("theirs", access_scope=AccessScope.PRIVATE, owner_id="bob")
        team = make_entry("team", access_scope=AccessScope.TEAM, owner_id="bob", confidence=0.3)
        old = make_entry(
            "old", status=Status.ARCHIVED, created_at=T0 - timedelta(days=3), knowledge_domain="x"
        )
        await seed(store, mine, theirs, team, old)
        async with store.unit_of_work() as uow:
            await uow.relations.add(Relation(mine.id, theirs.id, RelationType.CAUSES))
            await uow.relations.add(Relation(mine.id, old.id, RelationType.CAUSES))
            stats = await uow.entries.stats(Viewer("alice", frozenset({"bob"})), T0)
            by_agent = await uow.entries.agent_domain_stats()
        assert (3, 2) == (stats.total, stats.last_24h)
        assert pytest.approx(0.6) == stats.average_confidence
        assert {
            "candidate": 2,
            "confirmed": 0,
            "disputed": 0,
            "archived": 1,
            "active": 2,
        } == dict(stats.by_status)
        assert (3, 0) == (stats.by_content_type["fact"], stats.by_content_type["concept"])
        assert 1 == stats.total_relations
        ((agent, domain, count, average, last, confirmed, earned),) = [
            attrs.astuple(s) for s in by_agent
        ]
        assert ("claude-1", "networking", 3, T0, 0, 0) == (
            agent,
            domain,
            count,
            last,
            confirmed,
            earned,
        )
        assert pytest.approx((0.9 + 0.5 + 0.3) / 3) == average

    # ---------------------------------------------------------------------- bookkeeping

    async def test_expertise_ranks_by_proficiency_then_agent(self, store: Store) -> None:
        """``for_domain``: at or above the floor, most proficient first, ties by agent id;
        ``record_activity`` counts one more entry and moves the last activity."""
        async with store.unit_of_work() as uow:
            await uow.expertise.replace_all(
                [
                    ExpertiseRecord("b", "net", 3, 0.5, T0),
                    ExpertiseRecord("a", "net", 3, 0.5, T0),
                    ExpertiseRecord("c", "net", 9, 0.9, T0),
                    ExpertiseRecord("d", "net", 1, 0.1, T0),
                    ExpertiseRecord("a", "math", 1, 0.9, T0),
                ]
            )
            await uow.expertise.record_activity("a", "net", T0 + timedelta(hours=1))
            found = await uow.expertise.for_domain("net", 0.5)
        assert ["c", "a", "b"] == [r.agent_id for r in found]
        assert (4, 0.5, T0 + timedelta(hours=1)) == (
            found[1].entry_count,
            found[1].proficiency,
            found[1].last_active_at,
        )

    async def test_the_outbox_claims_the_oldest_first_and_buries_the_dead(
        self, store: Store
    ) -> None:
        """Oldest first: in the order the items were enqueued, whatever the times they
        were enqueued at; a failed item counts its attempt and waits for its retry time; a
        dead one is never claimed again."""
        async with store.unit_of_work() as uow:
            await uow.outbox.enqueue("scan", {"n": 1}, T0 + timedelta(seconds=2))
            await uow.outbox.enqueue("scan", {"n": 2}, T0 + timedelta(seconds=1))
            await uow.outbox.enqueue("scan", {"n": 3}, T0 + timedelta(seconds=3))
            claimed = await uow.outbox.claim(2, T0, lease_until=T0)
            assert [{"n": 1}, {"n": 2}] == [item.payload for item in claimed]
            await uow.outbox.complete(claimed[0].id)
            await uow.outbox.fail(claimed[1].id, "boom", retry_at=T0 + timedelta(seconds=1))
            assert [{"n": 3}] == [i.payload for i in await uow.outbox.claim(5, T0, lease_until=T0)]
            later = T0 + timedelta(seconds=1)
            due = await uow.outbox.claim(5, later, lease_until=later)
            assert [1, 0] == [i.attempts for i in due]
            await uow.outbox.fail(claimed[1].id, "boom", retry_at=None)
            assert 1 == await uow.outbox.pending()
            far = T0 + timedelta(days=1)
            assert [{"n": 3}] == [
                i.payload for i in await uow.outbox.claim(5, far, lease_until=far)
            ]
            await uow.commit()

    async def test_a_committed_claim_is_a_lease_and_a_failure_waits_for_its_retry(
        self, store: Store
    ) -> None:
        """A claimed item is invisible to every later claim until its lease ends, then due
        again with its attempts unchanged; a failed one is due at its retry time, not
        before; completing or failing a finished item changes nothing."""
        lease = timedelta(minutes=5)
        async with store.unit_of_work() as uow:
            for n in range(2):
                await uow.outbox.enqueue("contradiction_scan", {"n": n}, T0)
            await uow.commit()
        async with store.unit_of_work() as uow:
            first, second = await uow.outbox.claim(5, T0, lease_until=T0 + lease)
            await uow.commit()

        async def claim(at: datetime) -> list[tuple[Any, int]]:
            async with store.unit_of_work() as uow:
                found = await uow.outbox.claim(5, at, lease_until=at + lease)
                await uow.commit()
            return [(i.payload["n"], i.attempts) for i in found]

        assert [] == await claim(T0 + lease - timedelta(microseconds=1))
        assert [(0, 0), (1, 0)] == await claim(T0 + lease)  # abandoned: leased again
        retry_at = T0 + 3 * lease
        async with store.unit_of_work() as uow:
            await uow.outbox.fail(first.id, "judge down", retry_at=retry_at)
            await uow.outbox.complete(second.id)
            await uow.outbox.complete(second.id)
            await uow.outbox.fail(second.id, "late", retry_at=None)
            assert 1 == await uow.outbox.pending()
            await uow.commit()
        assert [] == await claim(retry_at - timedelta(microseconds=1))
        assert [(0, 1)] == await claim(retry_at)
        async with store.unit_of_work() as uow:
            await uow.outbox.fail(first.id, "judge down", retry_at=None)
            await uow.commit()
        assert [] == await claim(retry_at + timedelta(days=365))
        async with store.unit_of_work() as uow:
            assert 0 == await uow.outbox.pending()

    # ---------------------------------------------------------------- identity directory

    async def test_adding_and_removing_a_membership_is_idempotent(self, store: Store) -> None:
        """Each directory call stands alone (no unit of work)."""
        directory = store.directory
        for _ in range(2):
            await directory.add_membership("alice", "red")
        await directory.add_membership("bob", "red")
        await directory.add_membership("carol", "blue")
        for _ in range(2):
            await directory.remove_membership("bob", "red")
        await directory.remove_membership("nobody", "red")

        assert frozenset({"red"}) == await directory.groups_of("alice")
        assert frozenset() == await directory.groups_of("bob")
        assert frozenset({"alice"}) == await directory.members_of(["red"])
        assert frozenset({"alice", "carol"}) == await directory.members_of(["red", "blue"])

    async def test_a_principal_belongs_to_each_of_its_groups(self, store: Store) -> None:
        directory = store.directory
        for group in ("red", "blue", "green"):
            await directory.add_membership("alice", group)
        await directory.add_membership("bob", "blue")
        await directory.remove_membership("alice", "green")

        assert frozenset({"red", "blue"}) == await directory.groups_of("alice")
        assert frozenset({"alice", "bob"}) == await directory.members_of(["blue"])
        assert frozenset({"alice", "bob"}) == await directory.members_of(("red", "blue", "red"))
        assert frozenset() == await directory.members_of(["green"])

    async def test_unknown_principals_and_groups_are_empty_not_errors(self, store: Store) -> None:
        directory = store.directory
        await directory.add_membership("alice", "red")
        groups = await directory.groups_of("nobody")
        members = await directory.members_of(["nowhere"])
        assert (frozenset(), frozenset()) == (groups, members)
        assert isinstance(groups, frozenset) and isinstance(members, frozenset)
        assert frozenset() == await directory.members_of([])


__all__ = ["DIMENSION", "POLICIES", "T0", "StoreContract"]
