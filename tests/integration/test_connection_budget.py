"""A server that refuses connections for want of slots (SQLSTATE 53300: ``max_connections``,
or here a role's connection limit, which PostgreSQL refuses with the same code) gets an
error that names the connection budget: ``APOLLO_POOL_MAX`` × the processes against the
server's ``max_connections`` or the pooler's size. At start, and when a pool cannot grow.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from apollo_adapters.postgres import PostgresStore
from apollo_adapters.postgres.embedded import temporary_folder
from apollo_domain.errors import StoreBusy, StoreUnavailable
from tests.environ import without_apollo_settings
from tests.pgbouncer_support import PgBouncer, require_pgbouncer
from tests.postgres_support import PostgresTestServer, hashing_model_id
from tests.service_processes import SOURCES, service_environment

pytestmark = pytest.mark.postgres

DIMENSION = 384


class Limited:
    """A login role with a connection limit on a new migrated database of the server."""

    def __init__(self, server: PostgresTestServer, database: str, role: str) -> None:
        self.server = server
        self.database = database
        self.role = role

    @property
    def conninfo(self) -> str:
        return make_conninfo(self.server.conninfo(self.database), user=self.role)

    @property
    def direct(self) -> str:
        """The superuser's connection to the database (migrations, the schema check)."""
        return self.server.conninfo(self.database)

    async def limit(self, connections: int) -> None:
        async with await psycopg.AsyncConnection.connect(
            self.server.admin_conninfo, autocommit=True
        ) as conn:
            await conn.execute(
                sql.SQL("ALTER ROLE {} CONNECTION LIMIT {}").format(
                    sql.Identifier(self.role), sql.Literal(connections)
                )
            )


@pytest.fixture
async def limited(postgres_server: PostgresTestServer) -> AsyncIterator[Limited]:
    database = await postgres_server.create_database(dimension=DIMENSION)
    role = f"apollo_budget_{uuid.uuid4().hex[:8]}"
    async with await psycopg.AsyncConnection.connect(
        postgres_server.admin_conninfo, autocommit=True
    ) as conn:
        await conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        yield Limited(postgres_server, database, role)
    finally:
        await postgres_server.drop_database(database)
        async with await psycopg.AsyncConnection.connect(
            postgres_server.admin_conninfo, autocommit=True
        ) as conn:
            await conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


async def _open(limited: Limited, pool_max: int) -> PostgresStore:
    return await PostgresStore.open(
        limited.conninfo,
        embedder_model_id=hashing_model_id(DIMENSION),
        dimension=DIMENSION,
        pool_max=pool_max,
        pool_timeout=1.0,
        migrate=False,
        migration_conninfo=limited.direct,
    )


def _names_the_budget(message: str) -> None:
    for part in ("53300", "APOLLO_POOL_MAX", "max_connections", "max_client_conn"):
        assert part in message, f"{part!r} not in {message!r}"


async def test_a_server_without_a_free_slot_at_start_names_the_budget(limited: Limited) -> None:
    """The pool cannot make its first connection: opening fails with the budget, not with
    a bare "unavailable"."""
    await limited.limit(0)
    with pytest.raises(StoreUnavailable) as refused:
        await _open(limited, pool_max=4)
    _names_the_budget(str(refused.value))


async def test_a_pool_the_server_stops_from_growing_names_the_budget(
    limited: Limited, caplog: pytest.LogCaptureFixture
) -> None:
    """Two connections allowed, a pool of four: with two lent, a third caller waits out the
    pool's timeout and gets a busy store whose message names the budget (its log line
    names this process's APOLLO_POOL_MAX too); once one is returned, callers are served
    again."""
    await limited.limit(2)
    store = await _open(limited, pool_max=4)
    try:
        async with AsyncExitStack() as held:
            for _ in range(2):
                await held.enter_async_context(store.connection())
            with (
                caplog.at_level(logging.WARNING, "apollo.postgres"),
                pytest.raises(StoreBusy) as busy,
            ):
                async with store.connection():
                    pass
        _names_the_budget(str(busy.value))
        assert any("APOLLO_POOL_MAX=4" in r.getMessage() for r in caplog.records)
        async with store.connection() as conn:
            assert (1,) == await (await conn.execute("SELECT 1")).fetchone()
    finally:
        await store.close()


@pytest.fixture
def no_slot_env(limited: Limited) -> Iterator[dict[str, str]]:
    env = without_apollo_settings()
    env["PYTHONPATH"] = SOURCES
    env.update(
        service_environment(
            database_url=limited.conninfo,
            migration_database_url=limited.direct,
            http_enabled="false",
        )
    )
    yield env


async def test_apollo_serve_stops_at_start_naming_the_budget(
    limited: Limited, no_slot_env: dict[str, str]
) -> None:
    """``apollo serve`` against a server with no slot left for it: exit 1 and one line that
    says what to size."""
    await limited.limit(0)
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "apollo_app.cli", "serve"],
        env=no_slot_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert 1 == done.returncode, done.stderr
    _names_the_budget(done.stderr)


@pytest.mark.cluster
async def test_a_pooler_without_a_free_client_slot_names_the_budget(
    postgres_server: PostgresTestServer,
) -> None:
    """PgBouncer taking two clients, a pool of four behind it: with two lent, the third
    caller is told the budget (PgBouncer's refusal, "no more connections allowed
    (max_client_conn)", says so in words and no SQLSTATE of PostgreSQL's)."""
    require_pgbouncer()
    folder = temporary_folder("apollo-pgbouncer-")
    bouncer = PgBouncer(postgres_server, folder, max_client_conn=2)
    database = await postgres_server.create_database(dimension=DIMENSION)
    try:
        bouncer.start()
        store = await PostgresStore.open(
            bouncer.conninfo(database),
            embedder_model_id=hashing_model_id(DIMENSION),
            dimension=DIMENSION,
            pool_max=4,
            pool_timeout=1.0,
            migrate=False,
            transaction_pooler=True,
            migration_conninfo=postgres_server.conninfo(database),
        )
        try:
            async with AsyncExitStack() as held:
                for _ in range(2):
                    await held.enter_async_context(store.connection())
                with pytest.raises(StoreBusy) as busy:
                    async with store.connection():
                        pass
            _names_the_budget(str(busy.value))
        finally:
            await store.close()
    finally:
        bouncer.stop()
        shutil.rmtree(folder, ignore_errors=True)
        await postgres_server.drop_database(database)
