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
through PgBouncer at most 1.2 × direct.

Then the fleet (``tests/service_processes.py``): 1, then 3 ``apollo serve`` processes,
each on its own clone of the seeded database, through a PgBouncer of ten server
connections (transaction mode), their searches on the replica. 50 concurrent agents (a
writer token each: its own source) send requests over HTTP to the processes in turn.
First ``--ingests`` ingests offered at ``--rate`` per second (the same load whatever
serves it: the primary's time per statement grows with the rate of concurrent writes,
whoever sends them): the primary's server time per ingest, its contradiction scan
included (read once the outbox is drained), and each process's CPU seconds (from
``/proc``) per message it answered. Then a mixed load of ``--mixed`` requests (one ingest
to two queries) as fast as the fleet answers, where any answer but 2xx is an error and
an acknowledged ingest missing from the store is a lost message. Target: from 1 to 3
processes the server time per ingest stays within ±15 %, with no error and no lost
message.

Two cores run everything here, so the figures show where the work goes, not how a
fleet of machines would scale. The results go to ``benchmarks/results/fleet_bench.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql
from tests.pgbouncer_support import PgBouncer
from tests.postgres_support import TEST_SETTINGS, PostgresTestServer
from tests.replica_support import Replica
from tests.service_processes import ServiceProcesses, service_environment

from apollo_adapters.postgres import EmbeddedPostgres
from apollo_adapters.postgres.embedded import _binaries, temporary_folder
from apollo_app import Apollo, Settings
from benchmarks._common import TextGenerator, machine, table, write_json

TOPICS = ("BGP", "OSPF", "TLS", "DNS", "Kafka", "Redis", "PostgreSQL", "RabbitMQ")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--seed", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--ingests", type=int, default=1000, help="per fleet set-up")
    parser.add_argument("--mixed", type=int, default=1500, help="per fleet set-up")
    parser.add_argument("--agents", type=int, default=50, help="concurrent HTTP agents")
    parser.add_argument(
        "--rate", type=float, default=15.0, help="ingests per second offered to the fleet"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seed, args.queries, args.ingests, args.mixed = 200, 40, 100, 150
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


async def _clone(server: PostgresTestServer, template: str, name: str) -> str:
    """A copy of ``template`` (nothing may be connected to it)."""
    async with await psycopg.AsyncConnection.connect(
        server.admin_conninfo, autocommit=True
    ) as conn:
        await conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    return name


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


def _cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds ``pid`` has used so far (``/proc/<pid>/stat``)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _agents(
    http: httpx.AsyncClient,
    apis: list[str],
    agents: int,
    requests: list[tuple[str, Any]],
    rate: float | None = None,
) -> dict[str, Any]:
    """``requests`` ((path, body), in order) sent by ``agents`` concurrent callers, each
    to the next process in turn, never again; with ``rate``, request k is sent no sooner
    than k / rate seconds after the first (an offered load, the same whatever serves it).
    Returns how many each process answered, the errors (any answer but 2xx, or none), and
    the entry ids of the acknowledged ingests."""
    pending = list(enumerate(requests))
    pending.reverse()
    answered = [0] * len(apis)
    errors: list[str] = []
    stored: list[str] = []
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def agent(token: str) -> None:
        while pending:
            turn, (path, body) = pending.pop()
            if rate is not None:
                await asyncio.sleep(max(0.0, start + turn / rate - loop.time()))
            api = turn % len(apis)
            try:
                response = await http.post(
                    f"{apis[api]}{path}", json=body, headers={"Authorization": f"Bearer {token}"}
                )
            except httpx.HTTPError as exc:
                errors.append(type(exc).__name__)
                continue
            if not response.is_success:
                errors.append(f"{response.status_code} {response.text[:200]}")
                continue
            answered[api] += 1
            if path == "/ingest":
                stored.append(response.json()["entry_id"])

    await asyncio.gather(*(agent(_token(k)) for k in range(agents)))
    return {"answered": answered, "errors": errors, "stored": stored}


def _token(agent: int) -> str:
    return f"bench-token-{agent}"


def _tokens(agents: int) -> str:
    """``APOLLO_API_TOKENS``: one writer per agent (its own source, its own expertise)."""
    return ",".join(f"{_token(k)}=claude-bench-{k}:writer" for k in range(agents))


async def _drained(conninfo: str) -> None:
    """Until no contradiction scan is pending (the drainers finished the ingests' scans)."""
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        while True:
            cur = await conn.execute("SELECT count(*) FROM outbox WHERE status = 'pending'")
            row = await cur.fetchone()
            if row is not None and row[0] == 0:
                return
            await asyncio.sleep(0.1)


async def _missing(conninfo: str, ids: list[str]) -> int:
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM unnest(%s::uuid[]) AS i(id)"
            " WHERE NOT EXISTS (SELECT 1 FROM entries e WHERE e.id = i.id)",
            (ids,),
        )
        row = await cur.fetchone()
    return int(row[0]) if row else len(ids)


async def _fleet(
    args: argparse.Namespace,
    server: PostgresTestServer,
    replica: Replica,
    bouncer: PgBouncer,
    database: str,
    processes: int,
) -> dict[str, Any]:
    """One fleet set-up: ``processes`` service processes on ``database`` (see the module's
    docstring)."""
    admin, direct = server.admin_conninfo, server.conninfo(database)
    folder = temporary_folder("apollo-fleet-services-")
    settings = service_environment(
        database_url=bouncer.conninfo(database),
        pooler="transaction",
        migration_database_url=direct,
        read_database_url=replica.conninfo(database),
        api_tokens=_tokens(args.agents),
    )
    services = ServiceProcesses(processes, settings, folder)
    texts = TextGenerator(seed=7).texts(args.ingests + args.mixed)
    ingests = [("/ingest", {"content": text}) for text in texts[: args.ingests]]
    mixed: list[tuple[str, Any]] = []
    for i, text in enumerate(texts[args.ingests :]):
        mixed.append(("/ingest", {"content": text}))
        mixed.extend(
            ("/query", {"query": f"{TOPICS[(i + k) % len(TOPICS)]} traffic", "limit": 5})
            for k in range(2)
        )
    mixed = mixed[: args.mixed]
    await asyncio.to_thread(services.start)
    try:
        # idle connections let go before the server's keep-alive (5 s) closes them
        limits = httpx.Limits(
            max_connections=args.agents, max_keepalive_connections=args.agents, keepalive_expiry=2
        )
        async with httpx.AsyncClient(timeout=120, limits=limits) as http:
            for api in services.apis:  # each process's pools warmed
                warm = {"Authorization": f"Bearer {_token(0)}"}
                await http.post(f"{api}/query", json={"query": "warm up"}, headers=warm)
            await _drained(direct)
            await _reset(admin)
            cpu = [_cpu_seconds(pid) for pid in services.pids]
            started = time.perf_counter()
            loaded = await _agents(http, services.apis, args.agents, ingests, args.rate)
            await _drained(direct)
            elapsed = time.perf_counter() - started
            server_ms = await _server_ms(admin, database)
            cpu = [_cpu_seconds(pid) - c for pid, c in zip(services.pids, cpu, strict=True)]
            mixed_run = await _agents(http, services.apis, args.agents, mixed)
        acknowledged = loaded["stored"] + mixed_run["stored"]
        lost = await _missing(direct, acknowledged)
    finally:
        await asyncio.to_thread(services.stop)
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "processes": processes,
        "ingests": args.ingests,
        "ingests_per_s": args.ingests / elapsed,
        "offered_per_s": args.rate,
        "primary_ms_per_ingest": server_ms / args.ingests,
        "ingest_errors": len(loaded["errors"]),
        "cpu_s_per_message": [
            c / n if n else 0.0 for c, n in zip(cpu, loaded["answered"], strict=True)
        ],
        "mixed_requests": len(mixed),
        "mixed_errors": len(mixed_run["errors"]),
        "error_samples": (loaded["errors"] + mixed_run["errors"])[:5],
        "acknowledged_ingests": len(acknowledged),
        "lost": lost,
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
    fleet_bouncer = PgBouncer(server, temporary_folder("apollo-fleet-pgbouncer-"), pool_size=10)
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
        clones = {n: await _clone(server, database, f"{database}_fleet{n}") for n in (1, 3)}
        replica.start()
        bouncer.start()
        fleet_bouncer.start()
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
        fleet = {
            str(n): await _fleet(args, server, replica, fleet_bouncer, clones[n], n) for n in (1, 3)
        }
    finally:
        fleet_bouncer.stop()
        bouncer.stop()
        replica.stop()
        await embedded.stop()
        for path in (folder, replica_folder, bouncer.folder, fleet_bouncer.folder):
            shutil.rmtree(path, ignore_errors=True)
    direct_result = results["direct"]
    ratios = {
        "replica_primary_time_ratio": results["replica"]["primary_ms_per_query"]
        / direct_result["primary_ms_per_query"],
        "pgbouncer_p50_ratio": results["pgbouncer"]["p50_ms"] / direct_result["p50_ms"],
        "ingest_primary_time_3_to_1": fleet["3"]["primary_ms_per_ingest"]
        / fleet["1"]["primary_ms_per_ingest"],
    }
    return {
        "machine": machine(),
        "seed": args.seed,
        "queries": args.queries,
        "setups": results,
        "fleet": fleet,
        "ratios": ratios,
        "targets": {
            "replica_primary_time_ratio": 0.3,
            "pgbouncer_p50_ratio": 1.2,
            "ingest_primary_time_3_to_1": 1.15,
        },
        "load_average": os.getloadavg(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    result = asyncio.run(run(args))
    rows = [
        [name, r["p50_ms"], r["primary_ms_per_query"], r["replica_reads"]]
        for name, r in result["setups"].items()
    ]
    print(table(rows, ["set-up", "query p50 ms", "primary ms/query", "replica reads"]))
    fleet_rows = [
        [
            f"{f['processes']} process(es)",
            f["primary_ms_per_ingest"],
            f["ingests_per_s"],
            " / ".join(f"{c * 1000:.1f}" for c in f["cpu_s_per_message"]),
            f"{f['ingest_errors'] + f['mixed_errors']} of {f['ingests'] + f['mixed_requests']}",
            f"{f['lost']} of {f['acknowledged_ingests']}",
        ]
        for f in result["fleet"].values()
    ]
    headers = ["fleet", "primary ms/ingest", "ingests/s", "CPU ms/message", "errors", "lost"]
    print(table(fleet_rows, headers))
    for fleet in result["fleet"].values():
        for sample in fleet["error_samples"]:
            print(f"  {fleet['processes']} process(es), error: {sample}")
    for name, value in result["ratios"].items():
        target = result["targets"][name]
        if name == "ingest_primary_time_3_to_1":
            verdict = "met" if 2 - target <= value <= target else "missed"
            print(f"{name}: {value:.2f} (target within ±15%: {verdict})")
            continue
        verdict = "met" if value <= target else "missed"
        print(f"{name}: {value:.2f} (target <= {target}: {verdict})")
    print(
        "load average (1, 5, 15 min) at the end: {:.2f} {:.2f} {:.2f}".format(
            *result["load_average"]
        )
    )
    if not args.quick:
        write_json("fleet_bench", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
