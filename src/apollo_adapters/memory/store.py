"""The in-memory store: every store port over dicts and numpy columns, with real rollback.

Units of work are serialized (one writer at a time, an ``asyncio.Lock`` held from
``__aenter__`` to ``__aexit__``). Each mutation pushes its inverse onto the unit of work's
undo log; rolling back replays the log in reverse, a savepoint remembers a log position.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import Any
from uuid import UUID

from apollo_domain.errors import PersistenceFailed, StoreUnavailable, ValidationError
from apollo_domain.model import (
    AccessScope,
    Entry,
    Evidence,
    Relation,
    RelationType,
    SourceRef,
    Viewer,
)
from apollo_domain.ports import (
    STORE_PARTS,
    AccessLogRecord,
    AgentDomainStats,
    CredibilityRecord,
    DecayOutcome,
    ExpertiseRecord,
    OutboxItem,
    ScoredEntry,
    SearchFilter,
    StoreStats,
)

from ._entries import EntryTable, Undo
from ._records import (
    AccessLogTable,
    CredibilityTable,
    ExpertiseTable,
    OutboxTable,
    ProcessedTable,
)

PARTS = STORE_PARTS


def _parts(parts: Collection[str]) -> frozenset[str]:
    names = frozenset(parts) if not isinstance(parts, str) else frozenset({parts})
    unknown = names - PARTS
    if unknown:
        raise ValidationError("parts", f"unknown store parts: {sorted(unknown)}")
    return names


class InMemoryIdentityDirectory:
    """Group memberships in two dicts; each call stands alone (no unit of work)."""

    def __init__(self) -> None:
        self._groups: dict[str, set[str]] = {}
        self._members: dict[str, set[str]] = {}

    async def add_membership(self, principal_id: str, group: str) -> None:
        self._groups.setdefault(principal_id, set()).add(group)
        self._members.setdefault(group, set()).add(principal_id)

    async def remove_membership(self, principal_id: str, group: str) -> None:
        self._groups.get(principal_id, set()).discard(group)
        self._members.get(group, set()).discard(principal_id)

    async def groups_of(self, principal_id: str) -> frozenset[str]:
        return frozenset(self._groups.get(principal_id, ()))

    async def members_of(self, groups: Collection[str]) -> frozenset[str]:
        members: set[str] = set()
        for group in groups:
            members.update(self._members.get(group, ()))
        return frozenset(members)


class InMemoryStore:
    """A complete knowledge store in process memory.

    ``unavailable`` names parts (see :data:`PARTS`) that behave as if their table were
    gone: ``preflight`` and every repository call on them raise StoreUnavailable.
    ``dimension`` fixes the embedding dimension up front (else the first embedding sets
    it); ``capacity`` is the initial row capacity, doubled as needed.
    """

    def __init__(
        self,
        unavailable: Collection[str] = (),
        *,
        dimension: int | None = None,
        capacity: int = 1024,
    ) -> None:
        self.directory = InMemoryIdentityDirectory()
        self._unavailable = _parts(unavailable)
        self._lock = asyncio.Lock()
        self._closed = False
        self._entries = EntryTable(dimension, capacity)
        self._expertise = ExpertiseTable()
        self._access_log = AccessLogTable()
        self._credibility = CredibilityTable()
        self._outbox = OutboxTable()
        self._processed = ProcessedTable()

    def set_unavailable(self, parts: Collection[str]) -> None:
        """Make exactly ``parts`` unavailable (an empty collection restores every part)."""
        self._unavailable = _parts(parts)

    def unit_of_work(self) -> InMemoryUnitOfWork:
        return InMemoryUnitOfWork(self)

    async def preflight(self, parts: Collection[str]) -> None:
        if self._closed:
            raise StoreUnavailable("the store is closed")
        for part in sorted(_parts(parts) & self._unavailable):
            raise StoreUnavailable(f"{part} cannot be written right now")

    async def close(self) -> None:
        self._closed = True


_NEW, _ACTIVE, _COMMITTED, _ENDED = range(4)


class InMemoryUnitOfWork:
    """One serialized transaction over every in-memory repository."""

    def __init__(self, store: InMemoryStore) -> None:
        self._store = store
        self._undo: Undo = []
        self._state = _NEW
        self.entries = InMemoryEntryRepository(self)
        self.relations = InMemoryRelationRepository(self)
        self.evidence = InMemoryEvidenceRepository(self)
        self.expertise = InMemoryExpertiseRepository(self)
        self.access_log = InMemoryAccessLog(self)
        self.credibility = InMemoryCredibilityRegistry(self)
        self.outbox = InMemoryOutbox(self)
        self.processed = InMemoryProcessedKeys(self)

    def _open(self, part: str) -> Undo:
        """The undo log, once checked that ``part`` may be used now."""
        if self._state != _ACTIVE:
            raise PersistenceFailed("the unit of work is not active")
        if part in self._store._unavailable:
            raise StoreUnavailable(f"{part} is unavailable")
        return self._undo

    def _rollback_to(self, mark: int) -> None:
        undo = self._undo
        while len(undo) > mark:
            undo.pop()()

    async def __aenter__(self) -> InMemoryUnitOfWork:
        if self._state != _NEW:
            raise PersistenceFailed("a unit of work cannot be reused")
        if self._store._closed:
            raise StoreUnavailable("the store is closed")
        await self._store._lock.acquire()
        self._state = _ACTIVE
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._state == _NEW:
            return
        try:
            if self._state == _ACTIVE:
                self._rollback_to(0)
        finally:
            self._state = _ENDED
            self._store._lock.release()

    async def commit(self) -> None:
        if self._state != _ACTIVE:
            raise PersistenceFailed("the unit of work is not active")
        self._undo.clear()
        self._state = _COMMITTED

    @asynccontextmanager
    async def _savepoint(self) -> AsyncIterator[None]:
        if self._state != _ACTIVE:
            raise PersistenceFailed("the unit of work is not active")
        mark = len(self._undo)
        try:
            yield
        except BaseException:
            if self._state == _ACTIVE:
                self._rollback_to(mark)
            raise

    def savepoint(self) -> AbstractAsyncContextManager[None]:
        return self._savepoint()


class _Repository:
    __slots__ = ("_store", "_uow")

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self._uow = uow
        self._store = uow._store


class InMemoryEntryRepository(_Repository):
    __slots__ = ()

    async def add(self, entry: Entry) -> None:
        self._store._entries.add(entry, self._uow._open("entries"))

    async def get(self, entry_id: UUID, *, with_embedding: bool = False) -> Entry | None:
        self._uow._open("entries")
        return self._store._entries.get(entry_id, with_embedding)

    async def get_many(self, entry_ids: Collection[UUID]) -> dict[UUID, Entry]:
        self._uow._open("entries")
        return self._store._entries.get_many(entry_ids)

    async def find_by_hash(
        self, content_hash: str, access_scope: AccessScope, owner_id: str | None
    ) -> Entry | None:
        self._uow._open("entries")
        return self._store._entries.find_by_hash(content_hash, access_scope, owner_id)

    async def nearest(
        self, embedding: Sequence[float], flt: SearchFilter, limit: int
    ) -> list[ScoredEntry]:
        self._uow._open("entries")
        return self._store._entries.nearest(embedding, flt, limit)

    async def nearest_many(
        self, embeddings: Sequence[Sequence[float]], flt: SearchFilter, limit: int
    ) -> list[list[ScoredEntry]]:
        self._uow._open("entries")
        return self._store._entries.nearest_many(embeddings, flt, limit)

    async def browse(self, flt: SearchFilter, limit: int) -> list[Entry]:
        self._uow._open("entries")
        return self._store._entries.browse(flt, limit)

    async def update(self, entry: Entry) -> None:
        self._store._entries.update(entry, self._uow._open("entries"))

    async def boost(
        self, entry_ids: Sequence[UUID], amount: float, now: datetime, *, count_access: bool
    ) -> dict[UUID, float]:
        undo = self._uow._open("entries")
        return self._store._entries.boost(entry_ids, amount, now, count_access, undo)

    async def decay(
        self, now: datetime, factor_per_hour: float, archive_below: float
    ) -> DecayOutcome:
        undo = self._uow._open("entries")
        return self._store._entries.decay(now, factor_per_hour, archive_below, undo)

    async def scale_confidence(self, factor: float, now: datetime) -> int:
        return self._store._entries.scale_confidence(factor, self._uow._open("entries"))

    async def archive_stale(self, cutoff: datetime, now: datetime) -> int:
        return self._store._entries.archive_stale(cutoff, now, self._uow._open("entries"))

    async def candidates(self, limit: int) -> list[Entry]:
        self._uow._open("entries")
        return self._store._entries.candidates(limit)

    async def agent_domain_stats(self) -> list[AgentDomainStats]:
        self._uow._open("entries")
        return self._store._entries.agent_domain_stats()

    async def stats(self, viewer: Viewer, now: datetime) -> StoreStats:
        self._uow._open("entries")
        return self._store._entries.stats(viewer, now)

    async def by_agent(self, agent_id: str) -> list[Entry]:
        self._uow._open("entries")
        return self._store._entries.by_agent(agent_id)

    async def delete(self, entry_ids: Collection[UUID]) -> int:
        return self._store._entries.delete(entry_ids, self._uow._open("entries"))


class InMemoryRelationRepository(_Repository):
    __slots__ = ()

    async def add(self, relation: Relation) -> bool:
        return self._store._entries.relations.add(relation, self._uow._open("relations"))

    async def outgoing(
        self, entry_ids: Collection[UUID], types: Collection[RelationType] | None = None
    ) -> list[Relation]:
        self._uow._open("relations")
        return self._store._entries.relations.outgoing(entry_ids, types)

    async def exists(self, from_id: UUID, to_id: UUID, relation_type: RelationType) -> bool:
        self._uow._open("relations")
        return self._store._entries.relations.exists((from_id, to_id, RelationType(relation_type)))

    async def count(self) -> int:
        self._uow._open("relations")
        return self._store._entries.relations.count()


class InMemoryEvidenceRepository(_Repository):
    __slots__ = ()

    async def add(self, evidence: Evidence) -> bool:
        return self._store._entries.evidence.add(evidence, self._uow._open("evidence"))

    async def for_entry(self, entry_id: UUID) -> list[Evidence]:
        self._uow._open("evidence")
        return self._store._entries.evidence.for_entry(entry_id)

    async def for_entries(self, entry_ids: Collection[UUID]) -> dict[UUID, list[Evidence]]:
        self._uow._open("evidence")
        table = self._store._entries.evidence
        return {entry_id: table.for_entry(entry_id) for entry_id in entry_ids}

    async def forget_agent(self, agent_id: str, redacted: SourceRef) -> int:
        undo = self._uow._open("evidence")
        return self._store._entries.evidence.forget_agent(agent_id, redacted, undo)


class InMemoryExpertiseRepository(_Repository):
    __slots__ = ()

    async def record_activity(self, agent_id: str, domain: str, now: datetime) -> None:
        undo = self._uow._open("expertise")
        self._store._expertise.record_activity(agent_id, domain, now, undo)

    async def replace_all(self, records: Sequence[ExpertiseRecord]) -> None:
        self._store._expertise.replace_all(records, self._uow._open("expertise"))

    async def for_domain(self, domain: str, min_proficiency: float) -> list[ExpertiseRecord]:
        self._uow._open("expertise")
        records = self._store._expertise.ordered(
            lambda r: r.knowledge_domain == domain and r.proficiency >= min_proficiency
        )
        records.sort(key=lambda r: -r.proficiency)  # stable: agent_id breaks ties
        return records

    async def all(self) -> list[ExpertiseRecord]:
        self._uow._open("expertise")
        return self._store._expertise.ordered()

    async def for_agent(self, agent_id: str) -> list[ExpertiseRecord]:
        self._uow._open("expertise")
        return self._store._expertise.ordered(lambda r: r.agent_id == agent_id)

    async def forget_agent(self, agent_id: str) -> None:
        self._store._expertise.forget_agent(agent_id, self._uow._open("expertise"))


class InMemoryAccessLog(_Repository):
    __slots__ = ()

    async def record(self, records: Sequence[AccessLogRecord]) -> None:
        self._store._access_log.record(records, self._uow._open("access_log"))

    async def count(self, action: str | None = None) -> int:
        self._uow._open("access_log")
        return self._store._access_log.count(action)


class InMemoryCredibilityRegistry(_Repository):
    __slots__ = ()

    async def get(self, agent_id: str) -> CredibilityRecord:
        self._uow._open("credibility")
        return self._store._credibility.get(agent_id)

    async def save(self, record: CredibilityRecord) -> None:
        self._store._credibility.save(record, self._uow._open("credibility"))


class InMemoryOutbox(_Repository):
    __slots__ = ()

    async def enqueue(self, kind: str, payload: Mapping[str, Any], now: datetime) -> None:
        self._store._outbox.enqueue(kind, payload, now, self._uow._open("outbox"))

    async def claim(self, limit: int, now: datetime) -> list[OutboxItem]:
        self._uow._open("outbox")
        return self._store._outbox.claim(limit)

    async def complete(self, item_id: int) -> None:
        self._store._outbox.complete(item_id, self._uow._open("outbox"))

    async def fail(self, item_id: int, error: str, *, give_up: bool) -> None:
        self._store._outbox.fail(item_id, error, give_up, self._uow._open("outbox"))

    async def pending(self) -> int:
        self._uow._open("outbox")
        return self._store._outbox.pending()


class InMemoryProcessedKeys(_Repository):
    __slots__ = ()

    async def mark(self, key: str, now: datetime) -> bool:
        return self._store._processed.mark(key, now, self._uow._open("processed"))

    async def seen(self, key: str) -> bool:
        self._uow._open("processed")
        return key in self._store._processed.keys
