"""The in-memory store: every store port over dicts and numpy columns, with real rollback.

Units of work are serialized (one writer at a time, an ``asyncio.Lock`` held from
``__aenter__`` to ``__aexit__``). Each mutation pushes its inverse onto the unit of work's
undo log; rolling back replays the log in reverse, a savepoint remembers a log position.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TypeVar

from apollo_domain.causal import CausalToken, current_scope
from apollo_domain.errors import PersistenceFailed, StoreUnavailable, ValidationError
from apollo_domain.ports import STORE_PARTS, Reads

from ._columns import Undo
from ._entries import EntryTable
from ._records import (
    AccessLogTable,
    CredibilityTable,
    EpisodeTable,
    ExpertiseTable,
    OutboxTable,
    ProcessedTable,
)
from ._reembed import InMemoryReembedding
from ._repositories import (
    InMemoryAccessLog,
    InMemoryCredibilityRegistry,
    InMemoryEntityGraph,
    InMemoryEntryRepository,
    InMemoryEpisodeRepository,
    InMemoryEvidenceRepository,
    InMemoryExpertiseRepository,
    InMemoryOutbox,
    InMemoryProcessedKeys,
    InMemoryRelationRepository,
)

PARTS = STORE_PARTS
T = TypeVar("T")


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
        self._waiting = 0
        self._closed = False
        self._entries = EntryTable(dimension, capacity)
        self._expertise = ExpertiseTable()
        self._access_log = AccessLogTable()
        self._credibility = CredibilityTable()
        self._outbox = OutboxTable()
        self._processed = ProcessedTable()
        self._episodes = EpisodeTable()
        #: how many units of work have committed writes: the position a causal token names
        self._commits = 0
        self._reembedding = False  # a move to another embedder runs (see :meth:`reembedding`)

    @property
    def waiting(self) -> int:
        """How many units of work wait for the running one to end (the store runs one at a
        time: its lock over every row)."""
        return self._waiting

    def set_unavailable(self, parts: Collection[str]) -> None:
        """Make exactly ``parts`` unavailable (an empty collection restores every part)."""
        self._unavailable = _parts(parts)

    def unit_of_work(self) -> InMemoryUnitOfWork:
        return InMemoryUnitOfWork(self)

    def reading(self) -> InMemoryUnitOfWork:
        return InMemoryUnitOfWork(self)  # one store: there is no replica

    def reembedding(self, model_id: str, dimension: int) -> InMemoryReembedding:
        """A move of this store's vectors to another embedder (``apollo reembed``)."""
        return InMemoryReembedding(self, model_id, dimension)

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
        self.graph = InMemoryEntityGraph(self)
        self.episodes = InMemoryEpisodeRepository(self)

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
        self._store._waiting += 1
        try:
            await self._store._lock.acquire()
        finally:
            self._store._waiting -= 1
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
        wrote = bool(self._undo)
        self._undo.clear()
        self._state = _COMMITTED
        scope = current_scope()
        if wrote:
            self._store._commits += 1
            if scope is not None:  # one copy, always current: the token only keeps step
                scope.observe(CausalToken(self._store._commits))

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

    async def read_concurrently(self, reads: Sequence[Callable[[Reads], Awaitable[T]]]) -> list[T]:
        if self._state != _ACTIVE:
            raise PersistenceFailed("the unit of work is not active")
        return [await read(self) for read in reads]
