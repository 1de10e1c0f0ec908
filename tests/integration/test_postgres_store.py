"""What only the PostgreSQL store has: migrations, units of work open at once on separate
connections, the HNSW index under a selective filter, error translation and reconnection.

The Store port's contract, which it shares with the in-memory store, is checked by
:class:`apollo_app.testing.StoreContract` (``tests/contract/test_store_contract.py``)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import re
import sys
import unicodedata
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from apollo_adapters.postgres import EmbeddedPostgres, PostgresStore, migrate
from apollo_adapters.postgres.schema import migrations
from apollo_app.entrypoints.http.errors import map_error
from apollo_domain.errors import (
    ConfigurationError,
    NotFound,
    PersistenceFailed,
    StoreBusy,
    StoreUnavailable,
)
from apollo_domain.model import (
    ACTIVE_STATUSES,
    AccessScope,
    Entry,
    SourceRef,
    Viewer,
)
from apollo_domain.normalize import content_hash
from apollo_domain.ports import (
    SearchFilter,
)
from apollo_domain.testing import make_entry
from tests.postgres_support import (
    DisposablePostgresStore,
    PostgresTestServer,
    fresh_store,
    hashing_model_id,
)

pytestmark = pytest.mark.postgres

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SRC = Path(__file__).resolve().parents[2] / "src"


def unit(*components: float, dimension: int = 8) -> tuple[float, ...]:
    padded = list(components) + [0.0] * (dimension - len(components))
    norm = math.sqrt(sum(x * x for x in padded))
    return tuple(x / norm for x in padded)


def entry(
    content: str = "water boils at 100 C",
    *,
    embedding: Sequence[float] | None = (1.0,),
    created_at: datetime = NOW,
    **changes: Any,
) -> Entry:
    """A physics candidate of ``agent-a`` with a unit embedding of this suite's dimension."""
    return make_entry(
        content,
        knowledge_domain="physics",
        tags=("science",),
        source=SourceRef("agent-a", "openai", "chat"),
        created_at=created_at,
        embedding=None if embedding is None else unit(*embedding),
        **changes,
    )


async def add(store: PostgresStore, *entries: Entry) -> None:
    async with store.unit_of_work() as uow:
        for e in entries:
            await uow.entries.add(e)
        await uow.commit()


async def get(store: PostgresStore, entry_id: uuid.UUID) -> Entry | None:
    async with store.unit_of_work() as uow:
        return await uow.entries.get(entry_id)


async def _activity(store: PostgresStore) -> list[int]:
    """The entry counts ``agent-1``'s recorded activity has, domain by domain."""
    async with store.unit_of_work() as uow:
        return [r.entry_count for r in await uow.expertise.for_agent("agent-1")]


async def sql_rows(conninfo: str, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        cur = await conn.execute(query, params)  # type: ignore[arg-type]
        return await cur.fetchall() if cur.description else []


# --------------------------------------------------------------------------- migrations


_MIGRATE_SCRIPT = """
import asyncio, json, sys
from apollo_adapters.postgres import migrate
print(json.dumps(asyncio.run(migrate(sys.argv[1], dimension=8, model_id="m"))))
"""


async def test_two_processes_and_two_tasks_migrating_at_once_apply_each_version_once(
    postgres_server: PostgresTestServer,
) -> None:
    """Concurrent migrations serialise on the advisory lock: one schema, one row per version."""
    database = await postgres_server.create_database()
    conninfo = postgres_server.conninfo(database)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _MIGRATE_SCRIPT,
            conninfo,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]
    tasks = [migrate(conninfo, dimension=8, model_id="m") for _ in range(2)]
    applied_in_tasks, *outputs = await asyncio.gather(
        asyncio.gather(*tasks), *(p.communicate() for p in processes)
    )
    assert [p.returncode for p in processes] == [0, 0], [o[1].decode() for o in outputs]

    versions = [m.version for m in migrations()]
    applied = [*applied_in_tasks, *(json.loads(o[0]) for o in outputs)]
    assert sorted(v for run in applied for v in run) == versions
    rows = await sql_rows(conninfo, "SELECT version FROM apollo_schema_migrations ORDER BY 1")
    assert [r[0] for r in rows] == versions
    meta = await sql_rows(conninfo, "SELECT embedding_dimension FROM apollo_store_meta")
    assert meta == [(8,)]
    await postgres_server.drop_database(database)


async def test_migrating_an_up_to_date_database_applies_nothing(
    pg_store: DisposablePostgresStore,
) -> None:
    assert await migrate(pg_store.conninfo, dimension=8, model_id=hashing_model_id(8)) == []


def _legacy_hash(text: str) -> str:
    """The content hash before migration 3: lowercased, whitespace runs collapsed."""
    return hashlib.sha256(" ".join(text.lower().split()).encode()).hexdigest()


async def test_migration_3_rehashes_content_and_merges_entries_that_now_collide(
    postgres_server: PostgresTestServer,
) -> None:
    """NFC and NFD spellings of one text were two active entries under the old hash: the
    later one is archived as merged into the older, which gains its evidence as duplicate
    evidence; every hash is recomputed; the dedup index holds again afterwards."""
    database = await postgres_server.create_database()
    conninfo = postgres_server.conninfo(database)
    assert [1, 2] == await migrate(conninfo, dimension=8, model_id="m", until=2)
    rows = {
        "nfc": ("Caf\u00e9 cr\u00e8me", "candidate", NOW, "claude-a", "claude"),
        "nfd": (
            "Cafe\u0301 cre\u0300me",
            "candidate",
            NOW + timedelta(hours=1),
            "openai-b",
            "openai",
        ),
        "gone": ("Caf\u200b\u00e9 cr\u00e8me", "archived", NOW, "gemini-c", "gemini"),
        "plain": ("plain ascii text", "candidate", NOW, "claude-a", "claude"),
    }
    ids = {name: uuid.uuid4() for name in rows}
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        for name, (content, state, at, agent, provider) in rows.items():
            await conn.execute(
                "INSERT INTO entries (id, content, content_hash, content_type, knowledge_domain,"
                " confidence, status, source_agent, source_provider, access_scope, created_at,"
                " updated_at) VALUES (%s, %s, %s, 'fact', 'food', 0.5, %s, %s, %s, 'global',"
                " %s, %s)",
                (
                    ids[name],
                    content,
                    _legacy_hash(content),
                    state,
                    agent,
                    provider,
                    at,
                    at,
                ),
            )
            await conn.execute(
                "INSERT INTO evidence (entry_id, agent_id, provider, similarity, kind,"
                " created_at) VALUES (%s, %s, %s, 1.0, 'origin', %s)",
                (ids[name], agent, provider, at),
            )
        for agent, provider in (("gemini-c", "gemini"), ("claude-a", "claude")):
            await conn.execute(
                "INSERT INTO evidence (entry_id, agent_id, provider, similarity, kind,"
                " created_at) VALUES (%s, %s, %s, 1.0, 'agreement', %s)",
                (ids["nfd"], agent, provider, NOW),
            )

    assert 3 in await migrate(conninfo, dimension=8, model_id="m")

    found = await sql_rows(
        conninfo, "SELECT id, content, content_hash, status, source_context FROM entries"
    )
    assert all(content_hash(content) == digest for _, content, digest, _, _ in found)
    by_id = {row[0]: row for row in found}
    assert "candidate" == by_id[ids["nfc"]][3]
    assert "archived" == by_id[ids["nfd"]][3]
    assert {"archive_reason": "merged_duplicate", "merged_into": str(ids["nfc"])} == by_id[
        ids["nfd"]
    ][4]
    assert {} == by_id[ids["gone"]][4]
    evidence = await sql_rows(
        conninfo,
        "SELECT agent_id, kind FROM evidence WHERE entry_id = %s ORDER BY id",
        (ids["nfc"],),
    )
    assert [
        ("claude-a", "origin"),
        ("openai-b", "deduplication"),
        ("gemini-c", "deduplication"),
    ] == evidence
    with pytest.raises(psycopg.errors.UniqueViolation):
        await sql_rows(
            conninfo,
            "UPDATE entries SET status = 'candidate' WHERE id = %s",
            (ids["nfd"],),
        )
    await postgres_server.drop_database(database)


def _hash_before_15(text: str) -> str:
    """The content hash of migrations 3 to 14: only zero-width characters were dropped."""
    text = unicodedata.normalize("NFKC", re.sub("[\u200b-\u200d\u2060\ufeff]", "", text))
    text = unicodedata.normalize("NFKC", text.lower())
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


async def test_migration_15_rehashes_default_ignorable_copies_into_one_entry(
    postgres_server: PostgresTestServer,
) -> None:
    """A copy of a text with a soft hyphen (or a combining grapheme joiner) was its own
    entry under the hash of migration 3: migration 15 re-hashes every entry, and the later
    copy is archived as merged into the older one."""
    database = await postgres_server.create_database()
    conninfo = postgres_server.conninfo(database)
    applied = await migrate(conninfo, dimension=8, model_id="m", until=14)
    assert 15 not in applied
    rows = {
        "plain": ("Kafka keeps offsets", NOW),
        "shy": ("Kaf\u00adka keeps off\u034fsets", NOW + timedelta(hours=1)),
    }
    ids = {name: uuid.uuid4() for name in rows}
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        for name, (content, at) in rows.items():
            await conn.execute(
                "INSERT INTO entries (id, content, content_hash, content_type, knowledge_domain,"
                " confidence, status, source_agent, source_provider, access_scope, created_at,"
                " updated_at) VALUES (%s, %s, %s, 'fact', 'kafka', 0.5, 'candidate',"
                " 'claude-a', 'claude', 'global', %s, %s)",
                (ids[name], content, _hash_before_15(content), at, at),
            )
    assert _hash_before_15(rows["plain"][0]) != _hash_before_15(rows["shy"][0])

    assert 15 in await migrate(conninfo, dimension=8, model_id="m")

    found = await sql_rows(conninfo, "SELECT id, content, content_hash, status FROM entries")
    assert all(content_hash(content) == digest for _, content, digest, _ in found)
    assert {ids["plain"]: "candidate", ids["shy"]: "archived"} == {row[0]: row[3] for row in found}
    await postgres_server.drop_database(database)


@pytest.mark.parametrize(
    ("model_id", "dimension"), [("another-model", 8), (hashing_model_id(8), 16)]
)
async def test_a_store_built_for_another_embedder_refuses_to_open(
    pg_store: DisposablePostgresStore, model_id: str, dimension: int
) -> None:
    with pytest.raises(ConfigurationError, match="configured embedder"):
        await PostgresStore.open(pg_store.conninfo, embedder_model_id=model_id, dimension=dimension)


# --------------------------------------------------------------------------- atomicity


async def test_fifty_concurrent_boosts_on_separate_connections_are_never_lost(
    pg_store: DisposablePostgresStore,
) -> None:
    capped, uncapped = entry("capped"), entry("uncapped")
    await add(pg_store, capped, uncapped)

    async def boost_once() -> None:
        async with pg_store.unit_of_work() as uow:
            await uow.entries.boost([capped.id], 0.02, NOW, count_access=True)
            await uow.entries.boost([uncapped.id], 0.001, NOW, count_access=True)
            await uow.commit()

    await asyncio.gather(*(boost_once() for _ in range(50)))

    async with pg_store.unit_of_work() as uow:
        found = await uow.entries.get_many([capped.id, uncapped.id])
    assert found[capped.id].confidence == min(0.5 + 50 * 0.02, 1.0)
    assert found[uncapped.id].confidence == pytest.approx(0.5 + 50 * 0.001)
    assert [found[capped.id].access_count, found[uncapped.id].access_count] == [50, 50]


async def test_open_units_of_work_claim_disjoint_outbox_items(
    pg_store: DisposablePostgresStore,
) -> None:
    """An item claimed by a unit of work that has not committed is skipped by a concurrent
    claimer, never waited for. (The in-memory store runs one unit of work at a time: this
    interleaving exists only on PostgreSQL; the committed lease is a contract test.)"""
    async with pg_store.unit_of_work() as uow:
        await uow.outbox.enqueue("contradiction_scan", {"id": 1}, NOW)
        await uow.outbox.enqueue("contradiction_scan", {"id": 2}, NOW)
        await uow.commit()

    async with pg_store.unit_of_work() as first, pg_store.unit_of_work() as second:
        lease = NOW + timedelta(minutes=5)
        claimed = await first.outbox.claim(1, NOW, lease_until=lease)
        assert [{"id": 1}] == [i.payload for i in claimed]
        assert [{"id": 2}] == [
            i.payload for i in await second.outbox.claim(5, NOW, lease_until=lease)
        ]
        assert [] == await first.outbox.claim(5, NOW, lease_until=lease)
        await first.outbox.fail(claimed[0].id, "judge down", retry_at=None)
        await first.commit()

    async with pg_store.unit_of_work() as uow:
        assert 1 == await uow.outbox.pending()
        assert [{"id": 2}] == [i.payload for i in await uow.outbox.claim(5, NOW, lease_until=NOW)]


# --------------------------------------------------------------------------- search


_OTHERS = (
    "INSERT INTO entries (id, content, content_hash, content_type, knowledge_domain,"
    " confidence, status, source_agent, source_provider, access_scope, owner_id,"
    " embedding, created_at, updated_at)"
    " SELECT gen_random_uuid(), 'other ' || g, 'h' || g, 'fact', %(domain)s, 0.5, 'confirmed',"
    " 'agent-x', 'p', %(scope)s, CASE WHEN %(scope)s = 'private' THEN 'someone-' || mod(g, 50) END,"
    " (SELECT array_agg(CASE WHEN d = %(axis)s THEN 1.0 ELSE random() * 0.2 END + g * 0)"
    "  FROM generate_series(1, %(dimension)s) AS d)::real[]::vector, %(now)s, %(now)s"
    " FROM generate_series(1, %(count)s) AS g"
)


def _at_the_cluster_edge(i: int) -> list[float]:
    """Components 2..16 of a vector like those of the ``near`` cluster of ``_OTHERS`` (axis 1
    at 1.0, each other component uniform in [0, 0.2): squared sum 0.20 ± 0.05), with one
    component, a different one for each ``i``, raised to 0.4 (squared sum about 0.30): a
    little farther from axis 1 than almost all of the cluster, and no nearer to each other
    than to the cluster."""
    components = [0.1] * 15
    components[i] = 0.4
    return components


async def test_a_query_filtered_to_ten_private_entries_among_20000_returns_all_ten(
    postgres_server: PostgresTestServer,
) -> None:
    """A selective filter never starves the result: the planner's exact plan, the HNSW
    iterative scan past almost 10,000 nearer invisible entries (at least nine of them: the
    index is approximate), and the exact fallback when the scan budget runs out all return
    the ten.

    The ten lie at the edge of the invisible cluster, each in its own direction, so the
    graph links to them as to any other entry of the cluster. (Ten nearly identical entries
    inserted after the build, all in one direction, may end up with no link leading to
    them: HNSW does not promise to reach such an island, and only an exact scan finds it.)"""
    dimension = 16
    store = await fresh_store(postgres_server, dimension=dimension)
    try:
        # Bulk load without the HNSW index, then build it once: far faster than 20,000
        # index insertions.
        [(index,)] = await sql_rows(
            store.conninfo, "SELECT pg_get_indexdef('entries_embedding_hnsw'::regclass)"
        )
        await sql_rows(store.conninfo, "DROP INDEX entries_embedding_hnsw")
        common = {"dimension": dimension, "now": NOW, "count": 10_000}
        near = {"scope": "private", "domain": "physics", "axis": 1}
        far = {"scope": "global", "domain": "filler", "axis": 3}
        await sql_rows(store.conninfo, _OTHERS, {**common, **near})
        await sql_rows(store.conninfo, _OTHERS, {**common, **far})
        await sql_rows(store.conninfo, index)
        await sql_rows(store.conninfo, "ANALYZE entries")
        mine = [
            entry(
                f"mine {i}",
                access_scope=AccessScope.PRIVATE,
                owner_id="me",
                embedding=unit(1.0, *_at_the_cluster_edge(i), dimension=dimension),
            )
            for i in range(10)
        ]
        await add(store, *mine)
        query = unit(1.0, dimension=dimension)
        only_mine = SearchFilter(Viewer("me"), ACTIVE_STATUSES, knowledge_domain="physics")
        all_visible = SearchFilter(Viewer("me"), ACTIVE_STATUSES)
        expected = {e.id for e in mine}

        async with store.unit_of_work() as uow:
            selective = await uow.entries.nearest(query, only_mine, 10)
            iterative = await uow.entries.nearest(query, all_visible, 10)
        assert {s.entry.id for s in selective} == expected
        # The index is approximate: in rare builds one of the ten is left without a link
        # leading to it (as any entry may be), and the scan fills its place with the
        # nearest visible entry it does reach. Every row is visible, and never more than one
        # of the ten is missed.
        assert 10 == len(iterative)
        assert all(
            s.entry.knowledge_domain == "filler" or s.entry.id in expected for s in iterative
        )
        assert len({s.entry.id for s in iterative} & expected) >= 9
        assert [s.similarity for s in iterative] == sorted(
            (s.similarity for s in iterative), reverse=True
        )

        small_budget = await PostgresStore.open(
            store.conninfo,
            embedder_model_id=hashing_model_id(dimension),
            dimension=dimension,
            max_scan_tuples=50,
        )
        try:
            async with small_budget.unit_of_work() as uow:
                found = await uow.entries.nearest(query, all_visible, 10)
            assert {s.entry.id for s in found} == expected
        finally:
            await small_budget.close()
    finally:
        await store.close()


# --------------------------------------------------------------------------- round trips


async def _waits(store: PostgresStore, trace: Path, work: Any) -> int:
    """How many times the client waited for the server (``ReadyForQuery`` messages in the
    libpq trace of the store's one pooled connection) while ``work`` ran, the pool's check
    of each checkout included."""
    with trace.open("w+") as out:
        async with store.connection() as conn:
            conn.pgconn.trace(out.fileno())
        try:
            await work()
        finally:
            async with store.connection() as conn:
                conn.pgconn.untrace()  # flushes the trace
        out.seek(0)
        return sum(1 for line in out.read().splitlines() if "\tReadyForQuery" in line)


async def test_an_ingest_searches_at_its_own_breadth_and_a_query_at_the_store_s(
    postgres_server: PostgresTestServer,
) -> None:
    """``nearest(..., ingest=True)`` and ``nearest_batch`` (an ingest's neighbours) run the
    HNSW search at the ingest breadth; a query's ``nearest`` and ``nearest_many`` at the
    store's ``ef_search``. The breadth is set for the transaction, so the unit of work's
    connection shows the last search's."""
    store = await fresh_store(postgres_server, dimension=8, ef_search=120, ingest_ef_search=30)
    try:
        e = entry("searched")
        await add(store, e)
        flt = SearchFilter(Viewer.anonymous(), ACTIVE_STATUSES)
        v = unit(1.0)

        async def breadth(uow: Any) -> str:
            row = await uow._session.row("SELECT current_setting('hnsw.ef_search') AS ef")
            return str(row["ef"])

        async with store.unit_of_work() as uow:
            assert [e.id] == [s.entry.id for s in await uow.entries.nearest(v, flt, 5)]
            assert "120" == await breadth(uow)
            assert [e.id] == [s.entry.id for s in await uow.entries.nearest(v, flt, 5, ingest=True)]
            assert "30" == await breadth(uow)
            await uow.entries.nearest_many([v], flt, 5)
            assert "120" == await breadth(uow)
            await uow.entries.nearest_many([v], flt, 5, ingest=True)
            assert "30" == await breadth(uow)
            await uow.entries.nearest(v, flt, 5)
            [found] = await uow.entries.nearest_batch([v], flt, 5)
            assert [e.id] == [s.entry.id for s in found.stored]
            assert "30" == await breadth(uow)
    finally:
        await store.close()


async def test_begin_travels_with_the_first_statement_and_writes_with_the_commit(
    postgres_server: PostgresTestServer, tmp_path: Path
) -> None:
    """A unit of work sends its BEGIN with its first statement and its deferred writes with
    its COMMIT: a read and a commit are two waits for the server, a read left uncommitted
    is two (the ROLLBACK), and a unit of work that sends nothing opens no transaction. The
    pool hands out a quiet connection without a round trip to check it (one the server
    closed is replaced: ``test_the_pool_recovers_when_its_connections_are_terminated``)."""
    store = await fresh_store(postgres_server, dimension=8, pool_min=1, pool_max=1)
    try:
        e = entry("counted")
        await add(store, e)

        async def read_and_write() -> None:
            async with store.unit_of_work() as uow:
                assert await uow.entries.get(e.id) == e
                await uow.expertise.record_activity("agent-1", "physics", NOW)
                await uow.commit()

        async def read_only() -> None:
            assert await get(store, e.id) == e

        async def nothing() -> None:
            async with store.unit_of_work():
                pass

        assert 2 == await _waits(store, tmp_path / "trace", read_and_write)
        assert 2 == await _waits(store, tmp_path / "trace", read_only)
        assert 0 == await _waits(store, tmp_path / "trace", nothing)
        assert await _activity(store) == [1]
    finally:
        await store.close()


async def test_statements_stay_prepared_across_units_of_work_that_roll_back(
    postgres_server: PostgresTestServer,
) -> None:
    """Rolled-back units of work (every read) keep the connection's prepared statements:
    a statement run often is parsed and planned once, not once per unit of work."""
    store = await fresh_store(postgres_server, dimension=8, pool_min=1, pool_max=1)
    try:
        e = entry("prepared")
        await add(store, e)
        for _ in range(8):
            assert await get(store, e.id) == e
        async with store.connection() as conn:
            cur = await conn.execute("SELECT statement FROM pg_prepared_statements")
            prepared = [str(row[0]) for row in await cur.fetchall()]
        assert any("FROM entries WHERE id = $1" in statement for statement in prepared)
    finally:
        await store.close()


# --------------------------------------------------------------------------- failures


async def test_library_errors_are_translated(pg_store: DisposablePostgresStore) -> None:
    async with pg_store.unit_of_work() as uow:
        with pytest.raises(PersistenceFailed):
            await uow.entries.add(entry("too sure", confidence=1.5))
    async with pg_store.unit_of_work() as uow:
        with pytest.raises(NotFound):
            await uow.entries.update(entry("missing"))


async def test_a_translated_error_and_its_http_body_carry_nothing_of_the_server_s_text(
    pg_store: DisposablePostgresStore,
) -> None:
    """PostgreSQL's message names the relation and its DETAIL the failing row; the error a
    caller sees (and the 500 body made of it) names only the kind of failure and the
    SQLSTATE, while the cause keeps the server's text for the log."""
    with pytest.raises(PersistenceFailed) as failed:
        async with pg_store.unit_of_work() as uow:
            await uow.entries.add(entry("too sure", confidence=1.5))
    server_text = str(failed.value.__cause__)
    assert "entries" in server_text and "DETAIL" in server_text
    response = map_error(failed.value)
    body = bytes(response.body).decode()
    assert 500 == response.status_code
    assert "PostgreSQL failed (SQLSTATE 23514)" == str(failed.value)
    for internal in ("entries", "DETAIL", "Failing row", "constraint"):
        assert internal not in body


async def test_an_unreachable_server_is_store_unavailable() -> None:
    with pytest.raises(StoreUnavailable):
        await PostgresStore.open(
            "host=127.0.0.1 port=1 dbname=apollo user=apollo connect_timeout=2",
            embedder_model_id="m",
            dimension=8,
        )


async def test_preflight_names_the_missing_part(pg_store: DisposablePostgresStore) -> None:
    await pg_store.preflight(["entries", "evidence", "outbox", "processed", "credibility"])
    await sql_rows(pg_store.conninfo, "DROP TABLE outbox")
    with pytest.raises(StoreUnavailable, match="outbox"):
        await pg_store.preflight(["entries", "outbox"])


async def test_the_pool_recovers_when_its_connections_are_terminated(
    pg_store: DisposablePostgresStore, postgres_server: PostgresTestServer
) -> None:
    e = entry("survivor")
    await add(pg_store, e)
    killed = await sql_rows(
        postgres_server.admin_conninfo,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = %s AND pid <> pg_backend_pid()",
        (pg_store.database,),
    )
    assert killed
    assert await get(pg_store, e.id) == e


async def _end_sessions(postgres_server: PostgresTestServer, database: str) -> int:
    """End every session of ``database`` and wait (up to 10 s) until each has exited: its
    connection is then closed on the server's side."""
    ended = await sql_rows(
        postgres_server.admin_conninfo,
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
        " WHERE datname = %s AND pid <> pg_backend_pid()",
        (database,),
    )
    assert all(row[0] for row in ended)
    return len(ended)


async def test_a_unit_of_work_whose_connection_the_server_closed_before_its_first_statement_runs(
    postgres_server: PostgresTestServer,
) -> None:
    """The pool checked the connection; the server closed it before the unit of work sent
    anything. Nothing of the transaction reached the server, so it runs on another one."""
    store = await fresh_store(postgres_server, dimension=8, pool_min=1, pool_max=1)
    try:
        e = entry("handed out")
        await add(store, e)
        async with store.unit_of_work() as uow:
            assert await _end_sessions(postgres_server, store.database) == 1
            assert await uow.entries.get(e.id) == e
            await uow.expertise.record_activity("agent-1", "physics", NOW)
            await uow.commit()
        assert await _activity(store) == [1]
    finally:
        await store.close()


async def test_a_unit_of_work_whose_connection_the_server_closed_after_it_began_fails_whole(
    postgres_server: PostgresTestServer,
) -> None:
    """Once a statement of the transaction ran, a closed connection is not retried: the
    unit of work fails and none of its writes are kept."""
    store = await fresh_store(postgres_server, dimension=8, pool_min=1, pool_max=1)
    try:
        e = entry("begun")
        await add(store, e)
        with pytest.raises(StoreUnavailable):
            async with store.unit_of_work() as uow:
                await uow.expertise.record_activity("agent-1", "physics", NOW)
                assert await uow.entries.get(e.id) == e  # sends the write and BEGIN
                assert await _end_sessions(postgres_server, store.database) == 1
                await uow.expertise.record_activity("agent-1", "physics", NOW)
                await uow.commit()
        assert await _activity(store) == []
        assert await get(store, e.id) == e
    finally:
        await store.close()


async def test_the_store_works_again_after_the_server_restarts(server_folder: Path) -> None:
    server = EmbeddedPostgres(server_folder / "pgdata", settings={"fsync": "off"})
    conninfo = await server.start()
    store = await PostgresStore.open(conninfo, embedder_model_id="m", dimension=8, pool_timeout=1.0)
    try:
        e = entry("durable")
        await add(store, e)
        await server.stop()
        with pytest.raises(StoreUnavailable):
            await get(store, e.id)
        assert await server.start() == conninfo
        assert await get(store, e.id) == e
    finally:
        await store.close()
        await server.stop()


async def test_a_busy_pool_is_back_pressure_and_is_never_closed_under_its_callers(
    postgres_server: PostgresTestServer,
) -> None:
    """A pool of 2: two units of work hold their connections past the pool's timeout while
    nine more wait for one, and nine others start waiting half a timeout later. Every
    waiter is told the store is busy when its own wait ends: not that it is down, and not
    that its pool was closed (a pool timeout taken for an outage replaced the pool and
    closed it under the later nine, and let the first nine past the pool's bound). The
    holders commit; then 20 units at once all pass."""
    store = await fresh_store(
        postgres_server, dimension=8, pool_min=1, pool_max=2, pool_timeout=1.0
    )
    release = asyncio.Event()
    holding: list[str] = []
    both_held = asyncio.Event()

    async def hold(agent: str) -> None:
        async with store.unit_of_work() as uow:
            await uow.expertise.record_activity(agent, "physics", NOW)
            await uow.entries.get(uuid.uuid4())  # sends the write: the connection is taken
            holding.append(agent)
            if len(holding) == 2:
                both_held.set()
            await release.wait()
            await uow.commit()

    async def wait_for_a_connection() -> None:
        async with store.unit_of_work() as uow:
            await uow.entries.get(uuid.uuid4())

    async def until_waiting(count: int) -> None:
        for _ in range(10_000):  # a guard, not a timing
            if store._pool.get_stats().get("requests_waiting", 0) >= count:
                return
            await asyncio.sleep(0.001)
        raise AssertionError(f"{count} callers never waited for a connection")

    try:
        holders = [asyncio.create_task(hold(agent)) for agent in ("agent-1", "agent-2")]
        await asyncio.wait_for(both_held.wait(), timeout=30)  # a guard, not a timing
        first = [asyncio.create_task(wait_for_a_connection()) for _ in range(9)]
        await until_waiting(9)
        await asyncio.sleep(0.5)  # staggers the waits; no outcome depends on how much
        later = [asyncio.create_task(wait_for_a_connection()) for _ in range(9)]
        waited = await asyncio.gather(*first, *later, return_exceptions=True)
        assert [StoreBusy] * 18 == [type(outcome) for outcome in waited], waited
        release.set()
        await asyncio.gather(*holders)
        assert [1] == await _activity(store)
        await asyncio.gather(*(wait_for_a_connection() for _ in range(20)))
    finally:
        release.set()
        await store.close()


# --------------------------------------------------------------------------- concurrent reads


async def test_concurrent_reads_run_at_once_on_connections_of_their_own(
    pg_store: DisposablePostgresStore,
) -> None:
    """Each read waits until every other one has started: they can only all finish when
    they run at the same time. Each of the others runs in a read-only transaction."""
    started = [asyncio.Event() for _ in range(3)]

    def read(i: int) -> Any:
        async def run(reads: Any) -> int:
            started[i].set()
            for event in started:
                await asyncio.wait_for(event.wait(), timeout=30)  # a guard, not a timing
            return int(await reads.entries.find_by_hashes([]) == [])

        return run

    async def write(reads: Any) -> None:
        await reads.entries.add(entry("written by a read"))

    async with pg_store.unit_of_work() as uow:
        assert [1, 1, 1] == await uow.read_concurrently([read(0), read(1), read(2)])
        with pytest.raises(PersistenceFailed):  # a read-only transaction refuses writes
            await uow.read_concurrently([read_nothing, write])
    assert 0 == pg_store._in_use  # every connection given back


async def read_nothing(reads: Any) -> None:
    return None


async def test_concurrent_reads_take_turns_when_the_pool_has_no_connection_to_spare(
    pg_store: DisposablePostgresStore,
) -> None:
    """With every other pooled connection taken, the reads run one after another on the
    unit of work's own connection instead of waiting for one."""
    single = await PostgresStore.open(
        pg_store.conninfo, embedder_model_id=hashing_model_id(8), dimension=8, pool_max=1
    )
    order: list[int] = []

    def read(i: int) -> Any:
        async def run(reads: Any) -> int:
            order.append(i)
            await reads.entries.get(uuid.uuid4())
            order.append(i)
            return i

        return run

    try:
        async with single.unit_of_work() as uow:
            assert [0, 1, 2] == await uow.read_concurrently([read(0), read(1), read(2)])
        assert [0, 0, 1, 1, 2, 2] == order
    finally:
        await single.close()


async def test_the_planner_statistics_follow_the_stores_own_bulk_writes(
    postgres_server: PostgresTestServer,
) -> None:
    """A bulk load past the threshold is analyzed in the background at once, not a minute
    later by autovacuum: the planner then knows the tables are no longer empty."""
    from apollo_app import Apollo

    store = await fresh_store(postgres_server)
    async with Apollo.with_store(store, closers=[store.close]) as apollo:

        async def estimated() -> float:
            async with store.connection() as conn:
                cur = await conn.execute(
                    "SELECT reltuples FROM pg_class WHERE oid = 'entries'::regclass"
                )
                row = await cur.fetchone()
            assert row is not None
            return float(row[0])

        assert await estimated() <= 0  # never analyzed: the planner assumes it empty
        items = [{"content": f"note {i} about shard {i % 17} of the index"} for i in range(300)]
        await apollo.client("bulk-agent").store_many(items)
        await store.statistics.settled()
        # the first chunk (256) passed the threshold; the 44 after it (below 50 + 10 %
        # of 256) wait for more
        assert (1, 256) == (store.statistics.analyses, await estimated())
        more = [{"content": f"later note {i} on replica {i % 5}"} for i in range(40)]
        await apollo.client("bulk-agent").store_many(more)
        await store.statistics.settled()
        assert (2, 340) == (store.statistics.analyses, await estimated())
