"""The store port: units of work over every repository, and the identity directory.

Errors: adapters raise only :mod:`apollo_domain.errors` types. A lost connection or a
missing table is :class:`~apollo_domain.errors.StoreUnavailable`, and no connection free
in time is :class:`~apollo_domain.errors.StoreBusy`; a unit of work a concurrent one broke
apart (a deadlock, a serialization failure) is
:class:`~apollo_domain.errors.TransientConflict`: all of it rolled back, and it may be
run again whole; a failed write that is not transient is
:class:`~apollo_domain.errors.PersistenceFailed`. Every store adapter passes one contract
suite, which Apollo ships for adapters of other authors too
(``apollo_app.testing.StoreContract``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol, TypeVar

from .entries import EntryRepository
from .graph import EntityGraph, RelationRepository
from .repositories import (
    AccessLog,
    CredibilityRegistry,
    EpisodeRepository,
    EvidenceRepository,
    ExpertiseRepository,
    IdentityDirectory,
    Outbox,
    ProcessedKeys,
)

STORE_PARTS: frozenset[str] = frozenset(
    {
        "entries",
        "evidence",
        "expertise",
        "access_log",
        "relations",
        "outbox",
        "processed",
        "credibility",
        "graph",
        "episodes",
    }
)
"""The parts of a store :meth:`Store.preflight` can check."""


class Reads(Protocol):
    """The repositories a read of :meth:`UnitOfWork.read_concurrently` is given."""

    @property
    def entries(self) -> EntryRepository: ...
    @property
    def graph(self) -> EntityGraph: ...


T = TypeVar("T")


class UnitOfWork(Protocol):
    """One transaction over every repository. Rolls back unless ``commit`` was awaited.

    ``async with store.unit_of_work() as uow: ...; await uow.commit()``.
    ``uow.savepoint()`` is an async context manager: an exception inside it rolls back
    only the work done inside it, then propagates.
    Once committed or left, a unit of work raises :class:`PersistenceFailed` on every
    call (repositories, ``commit``, ``savepoint``) and cannot be entered again.
    """

    @property
    def entries(self) -> EntryRepository: ...
    @property
    def relations(self) -> RelationRepository: ...
    @property
    def evidence(self) -> EvidenceRepository: ...
    @property
    def expertise(self) -> ExpertiseRepository: ...
    @property
    def access_log(self) -> AccessLog: ...
    @property
    def credibility(self) -> CredibilityRegistry: ...
    @property
    def outbox(self) -> Outbox: ...
    @property
    def processed(self) -> ProcessedKeys: ...
    @property
    def graph(self) -> EntityGraph: ...
    @property
    def episodes(self) -> EpisodeRepository: ...

    async def __aenter__(self) -> UnitOfWork: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def commit(self) -> None:
        """Make the writes durable. A commit that wrote something reports the position it
        reached to the running call's causal scope (:mod:`apollo_domain.causal`), if any:
        positions only grow, and a read presenting one sees that commit."""
        ...

    def savepoint(self) -> AbstractAsyncContextManager[None]: ...

    async def read_concurrently(self, reads: Sequence[Callable[[Reads], Awaitable[T]]]) -> list[T]:
        """Each read's result, in order. ``reads`` only read, through the repositories they
        are given, with the same visibility rules as this unit of work's; they may run at
        the same time. Each statement sees what is committed when it runs (whether it also
        sees this unit of work's own uncommitted writes is unspecified: call this before
        writing anything). The PostgreSQL store runs them on separate pooled connections,
        each in a read-only transaction, as far as the pool has connections to spare (the
        rest in turn on this unit of work's own connection); the in-memory store runs them
        in turn. A read's error is raised once no other read is running (those not yet
        begun are not run)."""


class Store(Protocol):
    """A knowledge store: units of work plus the identity directory."""

    @property
    def directory(self) -> IdentityDirectory: ...

    def unit_of_work(self) -> UnitOfWork: ...

    def reading(self) -> UnitOfWork:
        """A unit of work that only reads and never commits (entity reads, expertise
        views, a source's standing). The store may run it on a read replica that has
        replayed the running call's causal token (outside any call's scope: every commit
        of this store); the PostgreSQL store with a replica falls back to its primary when
        the replica is down, failing or behind, never with an error. Otherwise it is
        :meth:`unit_of_work`."""
        ...

    async def preflight(self, parts: Collection[str]) -> None:
        """Raise :class:`StoreUnavailable` unless every named part (see
        :data:`STORE_PARTS`) can be written right now; an unknown name is a
        :class:`ValidationError`."""

    async def close(self) -> None: ...


__all__ = ["STORE_PARTS", "Reads", "Store", "UnitOfWork"]
