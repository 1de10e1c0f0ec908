"""Fleet benchmark: what a streaming replica takes off the primary, and what PgBouncer in
transaction mode costs a query.

Run from the repository root::

    PYTHONPATH=src:. .venv/bin/python benchmarks/fleet_bench.py            # full size
    PYTHONPATH=src:. .venv/bin/python benchmarks/fleet_bench.py --quick    # smoke run

On the test harness (``tests/pgbouncer_support.py``, ``tests/replica_support.py``): an
embedded PostgreSQL + pgvector primary with ``pg_stat_statements`` loaded, a streaming
replica of it (``pg_basebackup -R``), and Debian's PgBouncer in transaction mode in front
of it (three server connections). Apollo (hashing embedder, 384 dimensions) is seeded with
``--seed`` entries, then answers the same ``--queries`` hybrid queries one at a time in
three set-ups: straight to the primary (the baseline), through PgBouncer, and straight to
the primary with ``APOLLO_READ_DATABASE_URL`` set to the replica.

Figures: each set-up's query p50 (``time.perf_counter`` around each query) and the
primary's server time per query (the sum of ``pg_stat_statements.total_exec_time`` of
the benchmark's database over the queries, reset before each set-up). Targets: with a
replica, the primary's server time per query at most 0.3 × without; the query p50
through PgBouncer at most 1.2 × direct. Two cores run everything here, so the figures
show where the work goes, not how a fleet of machines would scale. The results go to
``benchmarks/results/fleet_bench.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import psycopg
from tests.pgbouncer_support import PgBouncer
from tests.postgres_support import TEST_SETTINGS, PostgresTestServer
from tests.replica_support import Replica

from apollo_adapters.postgres import EmbeddedPostgres
from apollo_adapters.postgres.embedded import _binaries, temporary_folder
from apollo_app import Apollo, Settings
from benchmarks._common import machine, table, write_json

TOPICS = ("BGP", "OSPF", "TLS", "DNS", "Kafka", "Redis", "PostgreSQL", "RabbitMQ")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--seed", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args(argv)
    if args.quick:
        args.seed, args.queries = 200, 40
    return args


def _text(i: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    return f"{topic} note {i}: node n{i % 97} handles {topic} traffic on port {1000 + i}"


async def _server_ms(conninfo: str, database: str) -> float:
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT coalesce(sum(s.total_exec_time), 0) FROM pg_stat_statements s"
            " JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s",
            (database,),
        )
        row = await cur.fetchone()
    return float(row[0]) if row else 0.0


async def _reset(conninfo: str) -> None:
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        await conn.execute("SELECT pg_stat_statements_reset()")


async def _queries(
    settings: Settings, server: PostgresTestServer, database: str, count: int
) -> dict[str, Any]:
    admin = server.admin_conninfo
    latencies: list[float] = []
    async with Apollo.open(settings, migrate=False) as apollo:
        client = apollo.client("bench-reader")
        await client.query_knowledge(query="warm up the pool")
        await _reset(admin)
        for i in range(count):
            started = time.perf_counter()
            await client.query_knowledge(query=f"{TOPICS[i % len(TOPICS)]} traffic port")
            latencies.append(time.perf_counter() - started)
        server_ms = await _server_ms(admin, database)
        store = apollo.deps.store
        on_replica = getattr(store, "replica_reads", 0)
    return {
        "p50_ms": statistics.median(latencies) * 1000,
        "primary_ms_per_query": server_ms / count,
        "replica_reads": on_replica,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    folder = temporary_folder("apollo-fleet-")
    # Commits flushed at once (synchronous_commit on, as in production): with it off, the
    # WAL writer may sleep up to 25 × wal_writer_delay before a commit reaches a replica.
    settings = {
        **TEST_SETTINGS,
        "synchronous_commit": "on",
        "shared_preload_libraries": "pg_stat_statements",
    }
    embedded = EmbeddedPostgres(folder / "pgdata", database="postgres", settings=settings)
    await embedded.start()
    await embedded.stop()  # the preloaded library needs a restart
    await embedded.start()
    server = PostgresTestServer(embedded.admin_conninfo, embedded=embedded, workdir=folder)
    replica_folder = temporary_folder("apollo-fleet-replica-")
    _binaries().own(replica_folder)
    replica = Replica(server, replica_folder)
    bouncer = PgBouncer(server, temporary_folder("apollo-fleet-pgbouncer-"))
    try:
        async with await psycopg.AsyncConnection.connect(server.admin_conninfo) as conn:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            await conn.commit()
        database = await server.create_database()
        direct = server.conninfo(database)
        base = Settings(database_url=direct, embedder="hashing", http_enabled=False)
        async with Apollo.open(base) as apollo:  # migrates
            writer = apollo.client("bench-writer")
            for i in range(args.seed):
                await writer.store_knowledge(content=_text(i))
        replica.start()
        bouncer.start()
        results = {
            "direct": await _queries(base, server, database, args.queries),
            "pgbouncer": await _queries(
                base.replace(
                    database_url=bouncer.conninfo(database),
                    database_pooler="transaction",
                    migration_database_url=direct,
                ),
                server,
                database,
                args.queries,
            ),
            "replica": await _queries(
                base.replace(read_database_url=replica.conninfo(database), replica_wait=5.0),
                server,
                database,
                args.queries,
            ),
        }
    finally:
        bouncer.stop()
        replica.stop()
        await embedded.stop()
        for path in (folder, replica_folder, bouncer.folder):
            shutil.rmtree(path, ignore_errors=True)
    direct_result = results["direct"]
    ratios = {
        "replica_primary_time_ratio": results["replica"]["primary_ms_per_query"]
        / direct_result["primary_ms_per_query"],
        "pgbouncer_p50_ratio": results["pgbouncer"]["p50_ms"] / direct_result["p50_ms"],
    }
    return {
        "machine": machine(),
        "seed": args.seed,
        "queries": args.queries,
        "setups": results,
        "ratios": ratios,
        "targets": {"replica_primary_time_ratio": 0.3, "pgbouncer_p50_ratio": 1.2},
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    result = asyncio.run(run(args))
    rows = [
        [name, r["p50_ms"], r["primary_ms_per_query"], r["replica_reads"]]
        for name, r in result["setups"].items()
    ]
    print(table(rows, ["set-up", "query p50 ms", "primary ms/query", "replica reads"]))
    for name, value in result["ratios"].items():
        target = result["targets"][name]
        verdict = "met" if value <= target else "missed"
        print(f"{name}: {value:.2f} (target <= {target}: {verdict})")
    if not args.quick:
        write_json("fleet_bench", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
