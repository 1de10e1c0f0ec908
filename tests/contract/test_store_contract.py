"""The Store port's contract suite (:class:`apollo_app.testing.StoreContract`, which Apollo
ships for store adapters of other authors) on Apollo's own stores: in memory, on
PostgreSQL, and on PostgreSQL through PgBouncer in transaction mode with fewer server
connections than callers."""

from __future__ import annotations

import pytest

from apollo_adapters.memory import InMemoryStore
from apollo_app.testing import StoreContract
from apollo_domain.ports import Store
from tests.support import lock_waiters


class TestInMemoryStore(StoreContract):
    async def create_store(self, dimension: int) -> Store:
        return InMemoryStore()

    async def lock_waiters(self, store: Store) -> int:
        return await lock_waiters(store)


@pytest.mark.postgres
class TestPostgresStore(StoreContract):
    async def create_store(self, dimension: int) -> Store:
        from tests.postgres_support import fresh_store

        return await fresh_store(
            self.request.getfixturevalue("postgres_server"), dimension=dimension
        )

    async def lock_waiters(self, store: Store) -> int:
        return await lock_waiters(store)


@pytest.mark.postgres
@pytest.mark.cluster
class TestPgBouncerStore(TestPostgresStore):
    async def create_store(self, dimension: int) -> Store:
        from tests.pgbouncer_support import fresh_pooled_store

        bouncer = self.request.getfixturevalue("pgbouncer")
        return await fresh_pooled_store(bouncer, dimension=dimension)
