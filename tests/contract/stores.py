"""Store fixtures of the contract suite: every store test runs on every store adapter.

The PostgreSQL parameter carries ``pytest.mark.postgres``, so ``-m "not postgres"``
deselects it before any fixture runs and no server is started.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from apollo_adapters.clock import ManualClock
from apollo_adapters.memory import InMemoryStore
from apollo_app import Apollo
from apollo_domain.ports import Store
from tests.support import FaultInjectingStore, Interleaving, KeyedEmbedder

STORE_KINDS = ["memory", pytest.param("postgres", marks=pytest.mark.postgres)]
#: The store kinds and PostgreSQL through PgBouncer in transaction mode, with a server pool
#: smaller than the store's (``tests.pgbouncer_support``): for the suites that must hold
#: through a transaction-mode pooler (a module takes them by overriding ``store_kind``
#: with :func:`pooled_store_kind`).
POOLED_STORE_KINDS = [
    *STORE_KINDS,
    pytest.param("pgbouncer", marks=[pytest.mark.postgres, pytest.mark.cluster]),
]
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
STORE_DIMENSION = 16
"""The embedding dimension of the bare ``store`` fixture."""

ApolloFactory = Callable[..., Awaitable[Apollo]]


async def open_store(
    kind: str, request: pytest.FixtureRequest, *, dimension: int, model_id: str | None = None
) -> Any:
    """A fresh, empty store of ``kind``; ``model_id`` None is the hashing embedder's."""
    if kind == "memory":
        return InMemoryStore()
    if kind == "pgbouncer":
        from tests.pgbouncer_support import fresh_pooled_store

        bouncer = request.getfixturevalue("pgbouncer")
        return await fresh_pooled_store(bouncer, dimension=dimension, model_id=model_id)
    server = request.getfixturevalue("postgres_server")
    from tests.postgres_support import fresh_store

    return await fresh_store(server, dimension=dimension, model_id=model_id)


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def pooled_store_kind(request: pytest.FixtureRequest) -> str:
    """``store_kind`` over :data:`POOLED_STORE_KINDS`; a module takes it with
    ``store_kind = pytest.fixture(params=POOLED_STORE_KINDS)(pooled_store_kind)``."""
    return str(request.param)


@pytest.fixture
async def store(store_kind: str, request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """A fresh, empty store of the parametrized kind for vectors of ``STORE_DIMENSION``."""
    opened = await open_store(store_kind, request, dimension=STORE_DIMENSION)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def make_apollo(
    store_kind: str, request: pytest.FixtureRequest
) -> AsyncIterator[ApolloFactory]:
    """``await make_apollo(embedder=..., clock=..., faulty=True, ...)`` → an Apollo over a
    fresh store of the parametrized kind. Defaults: a 16-dim keyed embedder, a manual clock.
    ``interleaved=True`` wraps the store in :class:`tests.support.Interleaving` (reach it
    as ``apollo.deps.store``)."""
    opened: list[Any] = []

    async def factory(
        *,
        embedder: Any = None,
        clock: Any = None,
        judge: Any = None,
        llm: Any = None,
        policy: Any = None,
        faulty: bool = False,
        interleaved: bool = False,
    ) -> Apollo:
        embedder = embedder or KeyedEmbedder(16)
        store = await open_store(
            store_kind, request, dimension=embedder.dimension, model_id=embedder.model_id
        )
        opened.append(store)
        if faulty:
            store = FaultInjectingStore(store)
        if interleaved:
            store = opened[-1] = Interleaving(store)  # closes its own monitor too
        return Apollo.with_store(
            store,
            embedder=embedder,
            clock=clock or ManualClock(EPOCH),
            judge=judge,
            llm=llm,
            policy=policy,
        )

    yield factory
    for store in opened:
        await store.close()
