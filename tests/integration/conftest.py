"""Fixtures of the integration tests: one PostgreSQL server per session, a fresh store per test,
and this run's RabbitMQ broker with a topology per test.

``tests/postgres_support.py`` and ``tests/rabbitmq_support.py`` hold the machinery; other
suites reuse it the same way (``from tests.postgres_support import fresh_store,
postgres_server``) and share the server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.postgres_support import (
    DisposablePostgresStore,
    PostgresTestServer,
    fresh_store,
    postgres_server,
)
from tests.rabbitmq_support import rabbitmq_url, topology

__all__ = ["pg_store", "postgres_server", "rabbitmq_url", "topology"]


@pytest.fixture
async def pg_store(postgres_server: PostgresTestServer) -> AsyncIterator[DisposablePostgresStore]:
    """A store of dimension 8 on its own empty database."""
    store = await fresh_store(postgres_server, dimension=8)
    try:
        yield store
    finally:
        await store.close()
