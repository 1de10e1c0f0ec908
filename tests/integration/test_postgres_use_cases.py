"""Use cases on PostgreSQL under real concurrency, and the embedded default of Apollo.open."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from apollo_adapters.embedders import HashingEmbedder
from apollo_app import Apollo, ConfigurationError, Outcome, Settings
from tests.postgres_support import fresh_store

pytestmark = pytest.mark.postgres


@pytest.fixture
async def apollo(postgres_server):
    store = await fresh_store(postgres_server, dimension=384, pool_max=20)
    async with Apollo.with_store(store, closers=[store.close]) as apollo:
        yield apollo


@pytest.mark.parametrize("queries", [20, 50])
async def test_concurrent_queries_never_lose_a_boost(apollo, queries):
    """n concurrent queries each boost the entry once: min(0.5 + n · 0.02, 1.0) exactly."""
    stored = await apollo.client("claude-a").store_knowledge(
        content="Kafka keeps order per partition"
    )
    clients = [apollo.client(f"reader-{i}") for i in range(queries)]
    results = await asyncio.gather(
        *(c.query_knowledge(query="kafka order partition", min_confidence=0.0) for c in clients)
    )
    assert all(stored.entry_id == r.entries[0].id for r in results)
    entry = await apollo.get_entry(stored.entry_id)
    assert min(0.5 + queries * 0.02, 1.0) == pytest.approx(entry.confidence, abs=1e-12)
    assert queries == entry.access_count


async def test_a_query_that_postgresql_breaks_for_a_deadlock_runs_again_whole(apollo):
    """Another transaction locks the later of two entries; a query's boost locks the
    earlier one and waits for it; that transaction then asks for the earlier one: a
    deadlock, which PostgreSQL resolves by aborting the query's transaction (the other
    waits far longer before it checks). The query runs again whole once the other has
    committed: the caller gets its result, each entry is boosted and counted once."""
    client = apollo.client("claude-a")
    stored = [
        await client.store_knowledge(content=text)
        for text in ("Kafka keeps order per partition", "Kafka partitions keep their order")
    ]
    first, second = sorted(r.entry_id for r in stored)
    conninfo = apollo.store.conninfo
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as other:
        await other.execute("SET deadlock_timeout = '60s'")
        await other.execute("BEGIN")
        await other.execute("SELECT 1 FROM entries WHERE id = %s FOR UPDATE", (second,))
        querying = asyncio.create_task(
            apollo.client("reader").query_knowledge(query="kafka order partition")
        )
        await _until_waiting_for_a_lock(conninfo)
        await other.execute("SELECT 1 FROM entries WHERE id = %s FOR UPDATE", (first,))
        await other.execute("COMMIT")
        result = await asyncio.wait_for(querying, timeout=60)
    assert {first, second} <= {e.id for e in result.entries}
    for entry_id in (first, second):
        entry = await apollo.get_entry(entry_id)
        assert (0.52, 1) == (round(entry.confidence, 6), entry.access_count)


async def _until_waiting_for_a_lock(conninfo: str) -> None:
    """Until some session of the database waits for a lock (a guard of 30 s)."""
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        for _ in range(6000):
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            row = await cur.fetchone()
            if row is not None and row[0] > 0:
                return
            await asyncio.sleep(0.005)
    raise AssertionError("no session ever waited for a lock")


async def test_concurrent_identical_ingests_from_independent_agents(apollo):
    """8 agents store the same text at once: one entry, 7 more evidence rows, no error."""
    agents = ["claude-1", "openai-2", "gemini-3", "human-4", "system-5", "ax-6", "bx-7", "cx-8"]
    results = await asyncio.gather(
        *(
            apollo.client(a).store_knowledge(content="Raft elects one leader per term")
            for a in agents
        )
    )
    assert 1 == len({r.entry_id for r in results})
    assert [Outcome.CREATED] + [Outcome.DEDUPLICATED] * 7 == sorted(
        (r.outcome for r in results), key=lambda o: o is not Outcome.CREATED
    )
    evidence = await apollo.get_evidence(results[0].entry_id)
    assert 7 == sum(e.kind != "origin" for e in evidence)
    assert sorted(agents) == sorted(e.source.agent_id for e in evidence)


async def test_embedded_default_persists_across_reopen(server_folder):
    """Apollo.open(Settings(embedder="hashing", data_dir=...)) starts the embedded server,
    migrates, and keeps what was stored after closing and reopening."""
    settings = Settings(embedder="hashing", data_dir=server_folder / "apollo")
    async with Apollo.open(settings) as apollo:
        stored = await apollo.client("claude-a").store_knowledge(content="Durable across restarts")
    async with Apollo.open(settings) as apollo:
        entry = await apollo.get_entry(stored.entry_id)
        assert "Durable across restarts" == entry.content
    with pytest.raises(ConfigurationError):  # the store was made for 384 dimensions
        async with Apollo.open(settings, embedder=HashingEmbedder(64)):
            pass


async def test_open_takes_the_outbox_backoff_from_the_settings(postgres_server):
    """Apollo.open wires the settings' outbox backoff and lease into the use cases."""
    database = await postgres_server.create_database(dimension=384)
    settings = Settings(
        embedder="hashing",
        database_url=postgres_server.conninfo(database),
        outbox_retry_base=2.0,
        outbox_retry_max=60.0,
        outbox_max_attempts=7,
        outbox_lease=30.0,
    )
    try:
        async with Apollo.open(settings) as apollo:
            assert settings.outbox_retry == apollo.deps.outbox_retry
            assert (2.0, 60.0, 7, 30.0) == (
                apollo.deps.outbox_retry.base_seconds,
                apollo.deps.outbox_retry.max_seconds,
                apollo.deps.outbox_retry.max_attempts,
                apollo.deps.outbox_retry.lease_seconds,
            )
    finally:
        await postgres_server.drop_database(database)
