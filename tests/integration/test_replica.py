"""A query's searches on a streaming replica (``APOLLO_READ_DATABASE_URL``).

The replica's replay is paused (``pg_wal_replay_pause``) to make the interleavings
deterministic: a replica that has not replayed a commit shows where a read ran.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from uuid import UUID

import psycopg
import pytest

from apollo_adapters.inprocess import InProcessBus
from apollo_adapters.postgres import PostgresStore
from apollo_adapters.postgres.store import NO_REPLICA, REPLICA_ERROR, WAIT_TIMED_OUT
from apollo_app import Apollo, RemoteClient, Settings
from apollo_app.entrypoints.service import ApolloService
from apollo_app.metrics import Metrics
from apollo_domain.causal import causal_scope
from apollo_domain.model import Entry
from apollo_domain.ports import Reads
from apollo_domain.ports.topology import Topology
from apollo_domain.testing import make_entry
from tests.postgres_support import (
    DisposablePostgresStore,
    PostgresTestServer,
    fresh_store,
    hashing_model_id,
)
from tests.replica_support import Replica

pytestmark = [pytest.mark.postgres, pytest.mark.cluster]

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DIMENSION = 16
#: Long enough for a replica that replays to catch up on a loaded machine; a paused one
#: never does, and the test that needs the bound to pass sets a short one.
CATCH_UP = 30.0


def _entry(content: str) -> Entry:
    return make_entry(content, embedding=[1.0] + [0.0] * (DIMENSION - 1), created_at=T0)


def _lsn(conninfo: str) -> str:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


@contextmanager
def _replay_paused(replica: Replica) -> Iterator[None]:
    with psycopg.connect(replica.conninfo("postgres"), autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
    try:
        yield
    finally:
        with psycopg.connect(replica.conninfo("postgres"), autocommit=True) as conn:
            conn.execute("SELECT pg_wal_replay_resume()")


@pytest.fixture
def paused(replica: Replica) -> Iterator[Replica]:
    """The replica with its replay paused for the test, resumed after it."""
    with _replay_paused(replica):
        yield replica


@pytest.fixture
async def primary_store(
    postgres_server: PostgresTestServer, replica: Replica
) -> AsyncIterator[DisposablePostgresStore]:
    """A store on a new database that the replica has replayed."""
    store = await fresh_store(postgres_server, dimension=DIMENSION)
    replica.wait_for(store.database, _lsn(store.conninfo))
    try:
        yield store
    finally:
        await store.close()


async def _another_process(store: DisposablePostgresStore) -> PostgresStore:
    return await PostgresStore.open(
        store.conninfo,
        embedder_model_id=hashing_model_id(DIMENSION),
        dimension=DIMENSION,
        migrate=False,
        pool_max=2,
    )


async def _seen(store: PostgresStore, entry_id: UUID) -> bool:
    async def read(reads: Reads) -> bool:
        return await reads.entries.get(entry_id) is not None

    async with store.unit_of_work() as uow:
        (found,) = await uow.read_concurrently([read])
    return found


async def _write(store: PostgresStore, entry: Entry) -> None:
    async with store.unit_of_work() as uow:
        await uow.entries.add(entry)
        await uow.commit()


async def test_searches_run_on_the_replica_and_wait_for_this_process_writes(
    primary_store: DisposablePostgresStore, replica: Replica
) -> None:
    await primary_store.with_replica(replica.conninfo(primary_store.database), wait=CATCH_UP)
    other = await _another_process(primary_store)
    try:
        with psycopg.connect(replica.conninfo("postgres"), autocommit=True) as conn:
            conn.execute("SELECT pg_wal_replay_pause()")
            try:
                elsewhere = _entry("written by another process")
                await _write(other, elsewhere)
                # Not replayed yet, and not this process's write: the replica answers.
                assert not await _seen(primary_store, elsewhere.id)
            finally:
                conn.execute("SELECT pg_wal_replay_resume()")
        # This process's own write: the read on the replica waits until it is replayed.
        mine = _entry("written by this process")
        await _write(primary_store, mine)
        assert await _seen(primary_store, mine.id)
        assert await _seen(primary_store, elsewhere.id)
    finally:
        await other.close()
    assert (3, 0) == (primary_store.replica_reads, primary_store.replica_fallbacks)


async def test_a_replica_that_cannot_catch_up_in_time_leaves_that_read_to_the_primary(
    primary_store: DisposablePostgresStore,
    paused: Replica,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Only that read: a replica that is behind is not skipped, so a read that needs
    nothing it lacks still goes there."""
    await primary_store.with_replica(paused.conninfo(primary_store.database), wait=0.2)
    mine = _entry("written while the replica is paused")
    await _write(primary_store, mine)
    with caplog.at_level(logging.INFO, logger="apollo.postgres"):
        assert await _seen(primary_store, mine.id)
    assert (0, 1) == (primary_store.replica_reads, primary_store.replica_fallbacks)
    assert 1 == primary_store.replica_fallback_causes[WAIT_TIMED_OUT]
    assert not any("read replica skipped" in r.getMessage() for r in caplog.records)
    with causal_scope():  # a caller presenting no token: the replica, at once
        assert not await _seen(primary_store, mine.id)
    assert (1, 1) == (primary_store.replica_reads, primary_store.replica_fallbacks)


async def test_each_caller_waits_for_its_own_writes_only(
    primary_store: DisposablePostgresStore, paused: Replica
) -> None:
    """Two callers of one process, the replica paused: the one that wrote presents its
    token and is answered by the primary, with its write; the other presents none and is
    answered by the replica at once, which has not replayed that write yet."""
    await primary_store.with_replica(paused.conninfo(primary_store.database), wait=0.2)
    with causal_scope() as writer:
        mine = _entry("written by one caller while the replica is paused")
        await _write(primary_store, mine)
    assert writer.seen is not None
    with causal_scope():
        assert not await _seen(primary_store, mine.id)
    with causal_scope(writer.seen):
        assert await _seen(primary_store, mine.id)
    assert (1, {NO_REPLICA: 0, WAIT_TIMED_OUT: 1, REPLICA_ERROR: 0}) == (
        primary_store.replica_reads,
        primary_store.replica_fallback_causes,
    )


async def test_a_replica_that_is_down_never_fails_a_read(
    primary_store: DisposablePostgresStore,
    server_folder,  # type: ignore[no-untyped-def]
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tests.processes import free_port

    nowhere = psycopg.conninfo.make_conninfo(
        primary_store.conninfo, host=str(server_folder), port=str(free_port())
    )
    await primary_store.with_replica(nowhere, wait=0.5, retry=3600)
    entry = _entry("readable with the replica down")
    await _write(primary_store, entry)
    with caplog.at_level(logging.WARNING, logger="apollo.postgres"):
        assert await _seen(primary_store, entry.id)
        assert await _seen(primary_store, entry.id)  # skipped for a while: no wait at all
    assert (0, 2) == (primary_store.replica_reads, primary_store.replica_fallbacks)
    assert 2 == primary_store.replica_fallback_causes[NO_REPLICA]
    assert any("read replica skipped" in r.getMessage() for r in caplog.records)


async def test_reads_leave_a_stopped_replica_and_return_once_it_is_back(
    primary_store: DisposablePostgresStore, replica: Replica
) -> None:
    await primary_store.with_replica(
        replica.conninfo(primary_store.database), wait=CATCH_UP, retry=0
    )
    entry = _entry("read across a replica restart")
    await _write(primary_store, entry)
    assert await _seen(primary_store, entry.id)
    replica.stop()
    try:
        assert await _seen(primary_store, entry.id)  # on the primary
        assert (1, 1) == (primary_store.replica_reads, primary_store.replica_fallbacks)
    finally:
        replica.restart()
    replica.wait_for(primary_store.database, _lsn(primary_store.conninfo))
    assert await _seen(primary_store, entry.id)
    assert (2, 1) == (primary_store.replica_reads, primary_store.replica_fallbacks)


async def test_apollo_queries_on_the_replica_of_its_settings(
    postgres_server: PostgresTestServer, replica: Replica
) -> None:
    # migrated before Apollo opens it, and replayed: a replica that has not yet replayed
    # the schema (its vector type) is skipped for a while, and this read would not be there
    database = await postgres_server.create_database(dimension=384)
    replica.wait_for(database, _lsn(postgres_server.conninfo(database)))
    settings = Settings(
        database_url=postgres_server.conninfo(database),
        read_database_url=replica.conninfo(database),
        replica_wait=CATCH_UP,
        embedder="hashing",
        http_enabled=False,
    )
    try:
        async with Apollo.open(settings) as apollo:
            stored = await apollo.client("claude-a").store_knowledge(
                content="OSPF elects a designated router on broadcast segments"
            )
            answer = await apollo.client("claude-a").query_knowledge(
                query="OSPF designated router election"
            )
            store = apollo.deps.store
            assert isinstance(store, PostgresStore)
            assert (1, 0) == (store.replica_reads, store.replica_fallbacks)
            metrics = Metrics()
            metrics.watch_replica(store)
            exposed = metrics.render()[0].decode()
            assert 'apollo_replica_reads_total{served_by="replica"} 1.0' in exposed
            assert 'apollo_replica_reads_total{served_by="primary"} 0.0' in exposed
        assert stored.entry_id in [e.id for e in answer.entries]
    finally:
        await postgres_server.drop_database(database)


async def test_a_reading_unit_of_work_runs_on_the_replica_and_falls_back_when_it_is_behind(
    primary_store: DisposablePostgresStore, paused: Replica
) -> None:
    await primary_store.with_replica(paused.conninfo(primary_store.database), wait=0.2)
    other = await _another_process(primary_store)
    try:
        elsewhere = _entry("written elsewhere while the replica is paused")
        await _write(other, elsewhere)
        async with primary_store.reading() as uow:  # nothing written here: the replica
            assert await uow.entries.get(elsewhere.id) is None
        assert (1, 0) == (primary_store.replica_reads, primary_store.replica_fallbacks)
        mine = _entry("written here while the replica is paused")
        await _write(primary_store, mine)
        async with primary_store.reading() as uow:  # the replica cannot catch up: primary
            assert await uow.entries.get(mine.id) is not None
        assert (1, 1) == (primary_store.replica_reads, primary_store.replica_fallbacks)
    finally:
        await other.close()


async def test_a_commit_heard_back_late_never_lowers_the_position_a_read_waits_for(
    primary_store: DisposablePostgresStore, replica: Replica, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two units of work of one process commit, the first on the server first, but the
    first hears back from its commit only after the second did (a background job's commit
    finishing late, say). The replica has replayed the first commit and not the second: a
    read must still wait for the second (the furthest position), so it runs on the primary
    and sees the second's write; waiting for the last position heard back would read the
    replica and miss it."""
    from apollo_adapters.postgres.session import Session

    await primary_store.with_replica(replica.conninfo(primary_store.database), wait=0.2)
    real_commit = Session.commit
    committed, heard = asyncio.Event(), asyncio.Event()

    async def commit(self: Session, *, position: bool = False) -> str | None:
        written = await real_commit(self, position=position)
        if not committed.is_set():  # the first commit: done on the server, its answer held
            committed.set()
            await heard.wait()
        return written

    monkeypatch.setattr(Session, "commit", commit)
    first, second = _entry("committed first, heard back last"), _entry("committed second")
    late = asyncio.create_task(_write(primary_store, first))
    await committed.wait()
    replica.wait_for(primary_store.database, _lsn(primary_store.conninfo))
    with psycopg.connect(replica.conninfo("postgres"), autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
        try:
            await _write(primary_store, second)
            heard.set()
            await late
            assert await _seen(primary_store, second.id)
        finally:
            conn.execute("SELECT pg_wal_replay_resume()")
    assert (0, 1) == (primary_store.replica_reads, primary_store.replica_fallbacks)


async def test_bus_reads_wait_only_for_the_causal_token_they_present(
    postgres_server: PostgresTestServer, replica: Replica
) -> None:
    """Over the bus, with the replica's replay paused: a client reading its own writes gets
    its write's token in the receipt, and its read, presenting it, leaves the replica that
    has not replayed it for the primary and finds the write; another such client, which
    wrote nothing, presents no position and reads on the replica at once (not seeing the
    write); a client without read-your-writes sends no token header, and the service waits
    for every commit of its process, as before."""
    store = await fresh_store(postgres_server, dimension=384)
    replica.wait_for(store.database, _lsn(store.conninfo))
    await store.with_replica(replica.conninfo(store.database), wait=0.2)
    apollo = Apollo.with_store(store, closers=[store.close])
    topology = Topology()
    bus = InProcessBus(topology, login="alice")
    service = ApolloService(apollo, bus, Settings(embedder="hashing"), topology=topology)
    await service.start()

    def client(agent: str, read_your_writes: bool) -> RemoteClient:
        return RemoteClient(
            bus,
            agent_id=agent,
            topology=topology,
            rpc_timeout=30,
            read_your_writes=read_your_writes,
        )

    writer, reader, legacy = (
        client("claude-w", True),
        client("claude-r", True),
        client("claude-l", False),
    )
    content = "EIGRP feasible successors take over without a recomputation"
    query = "EIGRP feasible successor"
    try:
        with _replay_paused(replica):
            sent = await writer.store_knowledge(content=content)
            assert sent.causal_token is not None
            counted = store.replica_reads, store.replica_fallbacks

            mine = await writer.query_knowledge(query=query, min_confidence=0)
            assert content in [e.content for e in mine.entries]
            assert (counted[0], counted[1] + 1) == (store.replica_reads, store.replica_fallbacks)

            theirs = await reader.query_knowledge(query=query, min_confidence=0)
            assert content not in [e.content for e in theirs.entries]  # the replica's view
            assert (counted[0] + 1, counted[1] + 1) == (
                store.replica_reads,
                store.replica_fallbacks,
            )

            old = await legacy.query_knowledge(query=query, min_confidence=0)
            assert content in [e.content for e in old.entries]
            assert (counted[0] + 1, counted[1] + 2) == (
                store.replica_reads,
                store.replica_fallbacks,
            )
    finally:
        await service.stop()
        await bus.close()
        await apollo.close()
        await postgres_server.drop_database(store.database)
