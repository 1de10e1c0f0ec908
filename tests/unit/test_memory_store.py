"""The in-memory store: serialized units of work, injected unavailability, matrix growth,
lazily rebuilt rows, vectorised filters and decay checked against a plain Python
reference; and the clocks.

The Store port's contract, which it shares with the PostgreSQL store, is checked by
:class:`apollo_app.testing.StoreContract` (``tests/contract/test_store_contract.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

import attrs
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from apollo_adapters.clock import ManualClock, SystemClock
from apollo_adapters.memory import InMemoryStore, InMemoryUnitOfWork, _vectors
from apollo_domain import testing
from apollo_domain.errors import (
    Conflict,
    StoreUnavailable,
    ValidationError,
)
from apollo_domain.model import (
    ACTIVE_STATUSES,
    AccessScope,
    ContentType,
    Entry,
    SourceRef,
    Status,
    Viewer,
)
from apollo_domain.ports import (
    AccessLogRecord,
    SearchFilter,
)
from apollo_domain.rules import is_visible

T0 = datetime(2025, 1, 1, tzinfo=UTC)
EVERY_STATUS = frozenset(Status)
T = TypeVar("T")


make_entry = functools.partial(testing.make_entry, embedding=(1.0, 0.0, 0.0), created_at=T0)


def everything(viewer: Viewer | None = None) -> SearchFilter:
    return SearchFilter(viewer=viewer or Viewer.anonymous(), statuses=EVERY_STATUS)


async def read(store: InMemoryStore, work: Callable[[InMemoryUnitOfWork], Awaitable[T]]) -> T:
    async with store.unit_of_work() as uow:
        return await work(uow)


async def seeded(*entries: Entry) -> InMemoryStore:
    store = InMemoryStore()
    async with store.unit_of_work() as uow:
        for entry in entries:
            await uow.entries.add(entry)
        await uow.commit()
    return store


async def test_units_of_work_are_serialized() -> None:
    """A second unit of work does not start before the first one ends."""
    store = InMemoryStore()
    events: list[str] = []
    first_in = asyncio.Event()

    async def first() -> None:
        async with store.unit_of_work():
            events.append("first in")
            first_in.set()
            for _ in range(5):
                await asyncio.sleep(0)
            events.append("first out")

    async def second() -> None:
        await first_in.wait()
        async with store.unit_of_work():
            events.append("second in")

    await asyncio.gather(first(), second())
    assert events == ["first in", "first out", "second in"]


async def test_unavailable_parts_fail_preflight_and_calls() -> None:
    store = InMemoryStore(unavailable=["access_log"])
    await store.preflight(["entries", "evidence"])
    with pytest.raises(StoreUnavailable, match="access_log"):
        await store.preflight(["entries", "access_log"])
    async with store.unit_of_work() as uow:
        with pytest.raises(StoreUnavailable):
            await uow.access_log.record([AccessLogRecord("ingest", "a", None, T0)])
    store.set_unavailable([])
    await store.preflight(["access_log"])
    with pytest.raises(ValidationError):
        store.set_unavailable(["no_such_part"])
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.preflight(["entries"])


# ---------------------------------------------------------------------- entries


async def test_matrix_grows_past_its_initial_capacity() -> None:
    """Rows beyond the first capacity keep their vectors; a rolled-back add frees its row."""
    store = InMemoryStore(capacity=2)
    entries = [
        make_entry(f"e{i}", embedding=(math.cos(i / 10), math.sin(i / 10), 0.0)) for i in range(40)
    ]
    async with store.unit_of_work() as uow:
        for entry in entries:
            await uow.entries.add(entry)
        await uow.commit()
    async with store.unit_of_work() as uow:
        await uow.entries.add(make_entry("gone", embedding=(0.0, 0.0, 1.0)))
    query = (math.cos(3.32), math.sin(3.32), 0.0)
    found = await read(store, lambda u: u.entries.nearest(query, everything(), 3))
    assert [s.entry.id for s in found] == [entries[33].id, entries[34].id, entries[32].id]
    assert found[0].similarity == pytest.approx(math.cos(0.02), abs=1e-6)
    stored = await read(store, lambda u: u.entries.get(entries[39].id, with_embedding=True))
    assert stored is not None and stored.embedding is not None
    assert stored.embedding == pytest.approx(entries[39].embedding, abs=1e-6)


async def test_decay_then_update_then_rollback_restores_the_decayed_values() -> None:
    """Lazily rebuilt rows stay exact across an update and a rollback after a decay."""
    entry = make_entry("x", confidence=0.5)
    store = await seeded(entry)
    now = T0 + timedelta(hours=2)
    async with store.unit_of_work() as uow:
        await uow.entries.decay(now, 0.5, 0.01)
        await uow.commit()
    decayed = await read(store, lambda u: u.entries.get(entry.id))
    assert decayed is not None and decayed.confidence == pytest.approx(0.125)
    async with store.unit_of_work() as uow:
        await uow.entries.update(attrs.evolve(decayed, confidence=0.9, status=Status.CONFIRMED))
        await uow.entries.scale_confidence(0.5, now)
        await uow.entries.archive_stale(now + timedelta(seconds=1), now)
    assert attrs.asdict(decayed) == attrs.asdict(
        await read(store, lambda u: u.entries.get(entry.id))
    )  # type: ignore[arg-type]


# ------------------------------------------------------------ filters vs a reference

DIM = 6
OWNERS = ["alice", "bob", "carol"]
TAGS = ["a", "b", "c", "d"]
DOMAINS = ["net", "math"]


@st.composite
def stored_entries(draw: st.DrawFn) -> list[Entry]:
    count = draw(st.integers(0, 25))
    entries = []
    for i in range(count):
        scope = draw(st.sampled_from(AccessScope))
        axis = draw(st.none() | st.integers(0, DIM - 1))
        embedding = None
        if axis is not None:
            scale = draw(st.floats(0.1, 10))
            embedding = tuple(scale if k == axis else 0.0 for k in range(DIM))
        created = T0 + timedelta(minutes=draw(st.integers(0, 5)))
        entries.append(
            make_entry(
                f"entry {i}",
                embedding=embedding,
                created_at=created,
                access_scope=scope,
                owner_id=draw(st.none() | st.sampled_from(OWNERS)),
                status=draw(st.sampled_from(Status)),
                tags=tuple(draw(st.lists(st.sampled_from(TAGS), max_size=3, unique=True))),
                knowledge_domain=draw(st.sampled_from(DOMAINS)),
                content_type=draw(st.sampled_from([ContentType.FACT, ContentType.CONCEPT])),
                confidence=draw(st.floats(0, 1)),
            )
        )
    return entries


@st.composite
def filters(draw: st.DrawFn, ids: list[UUID]) -> SearchFilter:
    principal = draw(st.none() | st.sampled_from(OWNERS))
    viewer = Viewer(principal, frozenset(draw(st.lists(st.sampled_from([*OWNERS, "zed"])))))
    return SearchFilter(
        viewer=viewer,
        statuses=frozenset(draw(st.sets(st.sampled_from(Status)))),
        min_confidence=draw(st.none() | st.floats(0, 1)),
        tags=draw(st.none() | st.lists(st.sampled_from([*TAGS, "zzz"]), max_size=2).map(tuple)),
        knowledge_domain=draw(st.none() | st.sampled_from([*DOMAINS, "nowhere"])),
        content_type=draw(st.none() | st.sampled_from([ContentType.FACT, ContentType.CONCEPT])),
        partition=draw(
            st.none() | st.tuples(st.sampled_from(AccessScope), st.none() | st.sampled_from(OWNERS))
        ),
        exclude_ids=frozenset(draw(st.lists(st.sampled_from(ids))) if ids else ()),
        access_scope=draw(st.none() | st.sampled_from(AccessScope)),
        only_ids=(draw(st.none() | st.frozensets(st.sampled_from(ids))) if ids else None),
    )


def in_partition(entry: Entry, scope: AccessScope, owner: str | None) -> bool:
    """Every global entry shares one partition; private and team ones are per owner."""
    if entry.access_scope is not scope:
        return False
    return scope is AccessScope.GLOBAL or entry.owner_id == owner


def reference_match(entry: Entry, flt: SearchFilter) -> bool:
    return (
        entry.status in flt.statuses
        and (flt.min_confidence is None or entry.confidence >= flt.min_confidence)
        and (flt.tags is None or bool(set(entry.tags) & set(flt.tags)))
        and (flt.knowledge_domain is None or entry.knowledge_domain == flt.knowledge_domain)
        and (flt.content_type is None or entry.content_type == flt.content_type)
        and (flt.partition is None or in_partition(entry, *flt.partition))
        and (flt.access_scope is None or entry.access_scope is flt.access_scope)
        and (flt.only_ids is None or entry.id in flt.only_ids)
        and entry.id not in flt.exclude_ids
        and is_visible(entry, flt.viewer)
    )


def without_deleted(entries: list[Entry], deleted: set[UUID]) -> list[Entry]:
    return [e for e in entries if e.id not in deleted]


async def load(entries: list[Entry], deleted: set[UUID]) -> InMemoryStore:
    store = InMemoryStore(capacity=4)
    async with store.unit_of_work() as uow:
        for entry in entries:
            try:
                async with uow.savepoint():
                    await uow.entries.add(entry)
            except Conflict:
                deleted.add(entry.id)  # a duplicate in its partition: never stored
        await uow.entries.delete(deleted)
        await uow.commit()
    return store


@settings(max_examples=150, deadline=None)
@given(data=st.data(), entries=stored_entries(), limit=st.integers(1, 30))
def test_nearest_and_browse_match_a_python_reference(
    data: st.DataObject, entries: list[Entry], limit: int
) -> None:
    """Vectorised filters, visibility, ranking and ordering equal a row-by-row reference."""
    ids = [e.id for e in entries]
    deleted = set(data.draw(st.lists(st.sampled_from(ids))) if ids else ())
    flt = data.draw(filters(ids))
    query = data.draw(st.permutations(range(1, DIM + 1)))
    query = [q * data.draw(st.sampled_from([1, -1])) for q in query]

    async def run() -> tuple[list[Any], list[Any]]:
        store = await load(entries, deleted)
        async with store.unit_of_work() as uow:
            return (
                await uow.entries.nearest(query, flt, limit),
                await uow.entries.browse(flt, limit),
            )

    nearest, browsed = asyncio.run(run())
    matching = [e for e in without_deleted(entries, deleted) if reference_match(e, flt)]
    norm = math.sqrt(sum(q * q for q in query))

    def axis(entry: Entry) -> int:
        assert entry.embedding is not None
        return max(range(DIM), key=lambda k: entry.embedding[k])  # type: ignore[index]

    ranked = sorted(
        (e for e in matching if e.embedding is not None),
        key=lambda e: (-query[axis(e)], str(e.id)),
    )[:limit]
    assert [e.id for e in ranked] == [s.entry.id for s in nearest]
    assert [query[axis(e)] / norm for e in ranked] == pytest.approx(
        [s.similarity for s in nearest], abs=1e-6
    )
    newest = sorted(matching, key=lambda e: (e.created_at, str(e.id)), reverse=True)[:limit]
    assert [e.id for e in newest] == [e.id for e in browsed]


@st.composite
def sourced_entries(draw: st.DrawFn) -> list[Entry]:
    """Entries of a few agents and principals (an owner, else who submitted them), on few
    axes so that many tie."""
    entries = []
    for i in range(draw(st.integers(0, 40))):
        axis = draw(st.integers(0, 2))
        entries.append(
            make_entry(
                f"entry {i}",
                embedding=tuple(
                    draw(st.sampled_from([1.0, 2.0])) if k == axis else 0.0 for k in range(DIM)
                ),
                source=SourceRef(
                    draw(st.sampled_from(["a1", "a2", "a3"])),
                    submitted_by=draw(st.none() | st.sampled_from(OWNERS)),
                ),
                owner_id=draw(st.none() | st.sampled_from(OWNERS)),
            )
        )
    return entries


@settings(max_examples=150, deadline=None)
@given(
    entries=sourced_entries(),
    limit=st.integers(1, 20),
    per_source=st.integers(1, 6),
    prefix=st.sampled_from([1, 4, 1024]),
    few=st.sampled_from([0, 8]),
)
def test_a_capped_search_matches_a_python_reference(
    entries: list[Entry], limit: int, per_source: int, prefix: int, few: int
) -> None:
    """``nearest_ids(per_source=...)`` keeps the first ``limit`` matches, best first (ties by
    id), within ``per_source`` of their agent's and of their principal's matches before
    them, whether it numbers every match at once or the best ones first, and whether it
    cuts each crowded source alone or numbers every row within its source."""
    query = [3.0, 2.0, 1.0, 0.0, 0.0, 0.0]

    async def run() -> list[tuple[UUID, float]]:
        store = await load(entries, set())
        async with store.unit_of_work() as uow:
            return await uow.entries.nearest_ids(query, everything(), limit, per_source=per_source)

    with _tuned(prefix, few):
        found = asyncio.run(run())
    norm = math.sqrt(sum(q * q for q in query))

    def cosine(entry: Entry) -> float:
        dot = sum(q * x for q, x in zip(query, entry.embedding or (), strict=True))
        return dot / _length(entry) / norm

    ranked = sorted(entries, key=lambda e: (-cosine(e), str(e.id)))
    held: dict[str, int] = {}
    expected = []
    for entry in ranked:
        keys = [f"agent:{entry.source.agent_id}"]
        principal = entry.owner_id or entry.source.submitted_by
        if principal is not None:
            keys.append(f"principal:{principal}")
        over = any(held.get(key, 0) >= per_source for key in keys)
        for key in keys:
            held[key] = held.get(key, 0) + 1
        if not over and len(expected) < limit:
            expected.append(entry.id)
    event(
        "some source capped"
        if len(expected) < min(limit, len(entries))
        or any(held.get(k, 0) > per_source for k in held)
        else "no source over its cap"
    )
    event("numbered in steps" if prefix < len(entries) and prefix * 4 < len(entries) else "at once")
    assert expected == [entry_id for entry_id, _ in found]
    by_id = {e.id: e for e in entries}
    assert [s for _, s in found] == pytest.approx([cosine(by_id[i]) for i in expected], abs=1e-6)


@contextlib.contextmanager
def _tuned(rows: int, few: int) -> Iterator[None]:
    """The capped search numbering its best ``rows`` matches first (not only in a large
    store), cutting at most ``few`` crowded sources one by one."""
    before = _vectors.PREFIX_ROWS, _vectors.FEW_SOURCES
    _vectors.PREFIX_ROWS, _vectors.FEW_SOURCES = rows, few
    try:
        yield
    finally:
        _vectors.PREFIX_ROWS, _vectors.FEW_SOURCES = before


def _length(entry: Entry) -> float:
    return math.sqrt(sum(x * x for x in entry.embedding or ()))


@settings(max_examples=100, deadline=None)
@given(
    entries=stored_entries(),
    hours=st.integers(-5, 100),
    factor=st.floats(0.5, 1.0),
    below=st.floats(0, 0.5),
)
def test_decay_matches_a_python_reference(
    entries: list[Entry], hours: int, factor: float, below: float
) -> None:
    now = T0 + timedelta(hours=hours)

    async def run() -> tuple[Any, dict[UUID, Entry]]:
        store = await load(entries, set())
        async with store.unit_of_work() as uow:
            outcome = await uow.entries.decay(now, factor, below)
            stored = await uow.entries.get_many([e.id for e in entries])
            await uow.commit()
        return outcome, stored

    outcome, stored = asyncio.run(run())
    active = [e for e in entries if e.id in stored and e.is_active]
    archived = 0
    for entry in active:
        elapsed = max(0.0, (now - entry.created_at) / timedelta(hours=1))
        expected = entry.confidence * factor**elapsed
        got = stored[entry.id]
        assert got.confidence == pytest.approx(expected, rel=1e-12, abs=1e-300)
        assert max(now, entry.decayed_at or entry.created_at) == got.decayed_at  # never back
        if got.confidence < below:
            archived += 1
            assert (Status.ARCHIVED, now) == (got.status, got.updated_at)
            assert got.source_context["archive_reason"] == "decayed"
        else:
            assert (entry.status, entry.updated_at) == (got.status, got.updated_at)
    assert (len(active), archived) == (outcome.decayed, outcome.archived)
    for entry_id, got in stored.items():
        original = next(e for e in entries if e.id == entry_id)
        if not original.is_active:
            assert attrs.asdict(attrs.evolve(original, embedding=None)) == attrs.asdict(got)


def test_active_statuses_are_the_non_archived_ones() -> None:
    assert EVERY_STATUS - {Status.ARCHIVED} == ACTIVE_STATUSES


# ---------------------------------------------------------------------- clocks


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(T0)
    assert T0 == clock.now() == clock.now()
    assert T0 + timedelta(hours=2) == clock.advance(hours=2) == clock.now()
    clock.set(T0 - timedelta(days=1))
    assert T0 - timedelta(days=1) == clock.now()
    with pytest.raises(ValidationError):
        clock.set(datetime(2025, 1, 1))
    with pytest.raises(ValidationError):
        ManualClock(datetime(2025, 1, 1))
    with pytest.raises(ValidationError):
        clock.advance(seconds=-1)
    assert ManualClock().now().tzinfo == UTC


def test_system_clock_is_aware_utc() -> None:
    now = SystemClock().now()
    assert timedelta(0) == now.utcoffset()
