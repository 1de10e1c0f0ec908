"""The PostgreSQL store through PgBouncer in transaction mode (``APOLLO_DATABASE_POOLER``).

A transaction-mode pooler gives each transaction whichever server connection is free, so
nothing a connection keeps past a transaction may be relied on. The store and the
concurrency contract suites also run through it (``POOLED_STORE_KINDS``); these tests
drive what those do not: many callers, more than the pooler's server connections, each
repeating the same statements (a statement psycopg would prepare server-side on its fifth
run) and the preflight, through the ``apollo`` settings; and a unit of work's reads at once
(a hybrid query's searches) with no deadlock over the pooler's server connections.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest

from apollo_app import Apollo, Settings, bootstrap
from apollo_domain.model import Viewer
from apollo_domain.ports import Reads
from tests.pgbouncer_support import POOL_SIZE, PgBouncer, fresh_pooled_store

pytestmark = [pytest.mark.postgres, pytest.mark.cluster]

CALLERS = 4 * POOL_SIZE
ROUNDS = 12  # past psycopg's prepare threshold (5) on every client connection
#: How long reads that can only finish together are given before the test calls it a hang.
TOGETHER_SECONDS = 30.0
NOW = datetime(2026, 1, 1, tzinfo=UTC)


async def test_repeated_statements_from_more_callers_than_server_connections_all_succeed(
    pgbouncer: PgBouncer,
) -> None:
    store = await fresh_pooled_store(pgbouncer, dimension=16, pool_max=CALLERS)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    try:

        async def caller() -> int:
            done = 0
            for _ in range(ROUNDS):
                await store.preflight(["entries", "evidence", "outbox"])
                async with store.unit_of_work() as uow:
                    assert await uow.entries.get(uuid.uuid4()) is None
                    await uow.entries.stats(Viewer.anonymous(), now)
                    done += 1
            return done

        finished = await asyncio.wait_for(
            asyncio.gather(*(caller() for _ in range(CALLERS))), timeout=120
        )
    finally:
        await store.close()
    assert [ROUNDS] * CALLERS == finished


async def test_apollo_migrates_past_the_pooler_and_serves_through_it(
    pgbouncer: PgBouncer,
) -> None:
    server = pgbouncer.server
    database = await server.create_database()  # empty: no Apollo schema yet
    settings = Settings(
        database_url=pgbouncer.conninfo(database),
        database_pooler="transaction",
        migration_database_url=server.conninfo(database),
        embedder="hashing",
        http_enabled=False,
    )
    try:
        applied, current, _ = await bootstrap.migrate_database(settings)
        assert current == applied[-1]
        async with Apollo.open(settings, migrate=False) as apollo:
            writer = apollo.client("claude-a")
            stored = [
                await writer.store_knowledge(content=f"Router r{i} peers over BGP on TCP 179")
                for i in range(8)
            ]
            answers = await asyncio.gather(
                *(
                    apollo.client(f"claude-{i}").query_knowledge(query="BGP TCP 179 peers")
                    for i in range(CALLERS)
                )
            )
        found = {s.entry_id for s in stored}
        assert all(found & {e.id for e in answer.entries} for answer in answers)
    finally:
        await server.drop_database(database)


async def test_a_unit_of_works_reads_run_at_once_through_the_pooler(pgbouncer: PgBouncer) -> None:
    """Each read holds its transaction (so a server connection of the pooler) open until
    every other one has done the same: they finish only if they all run at once, each on a
    connection of its own."""
    store = await fresh_pooled_store(pgbouncer, dimension=16)
    together = asyncio.Barrier(POOL_SIZE)

    async def read(reads: Reads) -> bool:
        await reads.entries.get(uuid.uuid4())  # its transaction begun
        await together.wait()
        return await reads.entries.get(uuid.uuid4()) is None

    try:
        async with store.unit_of_work() as uow:
            found = await asyncio.wait_for(
                uow.read_concurrently([read] * POOL_SIZE), timeout=TOGETHER_SECONDS
            )
    finally:
        await store.close()
    assert [True] * POOL_SIZE == found


async def test_units_of_work_reading_at_once_never_wait_on_each_others_server_connections(
    pgbouncer: PgBouncer,
) -> None:
    """As many units of work as the pooler has server connections, each reading at once and
    then writing. Each one's first read holds a server connection until all of them hold
    one; its other reads start only then. A unit of work that kept a server connection of
    its own through its reads (its transaction begun by one of them) would leave none for
    those others: every unit of work would wait on the others for good."""
    callers = POOL_SIZE
    store = await fresh_pooled_store(pgbouncer, dimension=16, pool_max=4 * callers * callers)
    all_hold = asyncio.Barrier(callers)
    held = asyncio.Event()

    async def first(reads: Reads) -> bool:
        await reads.entries.get(uuid.uuid4())  # its transaction holds a server connection
        await all_hold.wait()
        held.set()
        return True

    async def then(reads: Reads) -> bool:
        await held.wait()
        return await reads.entries.get(uuid.uuid4()) is None

    async def caller(i: int) -> list[bool]:
        async with store.unit_of_work() as uow:
            found = await uow.read_concurrently([first, then, then])
            await uow.processed.mark(f"caller {i}", NOW)
            await uow.commit()
        return found

    try:
        found = await asyncio.wait_for(
            asyncio.gather(*(caller(i) for i in range(callers))), timeout=TOGETHER_SECONDS
        )
        async with store.unit_of_work() as uow:
            marked = [await uow.processed.seen(f"caller {i}") for i in range(callers)]
    finally:
        await store.close()
    assert [[True, True, True]] * callers == found
    assert [True] * callers == marked
