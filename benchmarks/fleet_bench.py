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
the primary with ``APOLLO_READ_DATABASE_URL`` set to the replica; ``--query-rounds``
rounds of the three, in ABC CBA order, so that a drift of the machine's load weighs on
each alike.

Figures: each set-up's query p50 over its rounds (``time.perf_counter`` around each
query; each round's too) and the primary's server time per query (the sum of
``pg_stat_statements.total_exec_time`` of the benchmark's database over the queries,
reset before each round). Targets: with a
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
from apollo_app.entrypoints.http.headers import CAUSAL_TOKEN_HEADER
from benchmarks._common import TextGenerator, machine, table, write_json

TOPICS = ("BGP", "OSPF", "TLS", "DNS", "Kafka", "Redis", "PostgreSQL", "RabbitMQ")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--seed", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=300, help="per set-up and round")
    parser.add_argument(
        "--query-rounds", type=int, default=2, help="query rounds per set-up, in ABC CBA order"
    )
    parser.add_argument("--ingests", type=int, default=500, help="per fleet round")
    parser.add_argument("--mixed", type=int, default=1500, help="per fleet set-up")
    parser.add_argument("--agents", type=int, default=50, help="concurrent HTTP agents")
    parser.add_argument(
        "--rate", type=float, default=15.0, help="ingests per second offered to the fleet"
    )
    parser.add_argument(
        "--rounds", type=int, default=2, help="ingest rounds per fleet set-up, in ABBA order"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seed, args.queries, args.ingests, args.mixed, args.rounds = 200, 40, 100, 150, 1
        args.query_rounds = 1
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
    """One set-up's round: ``count`` hybrid queries one at a time, each one's latency, the
    primary's server time over them, and how many ran their searches on the replica."""
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
    return {"latencies": latencies, "server_ms": server_ms, "replica_reads": on_replica}


async def _query_setups(
    setups: dict[str, Settings], server: PostgresTestServer, database: str, args: Any
) -> dict[str, Any]:
    """Each set-up's query p50, primary server time per query and replica reads, over
    ``args.query_rounds`` rounds of ``args.queries`` queries in ABC CBA order (a drift of
    the machine's load over the run weighs on every set-up alike); each round's p50 too."""
    names = list(setups)
    done: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for r in range(args.query_rounds):
        for name in names if r % 2 == 0 else reversed(names):
            done[name].append(await _queries(setups[name], server, database, args.queries))
    results: dict[str, Any] = {}
    for name, rounds in done.items():
        latencies = [t for one in rounds for t in one["latencies"]]
        results[name] = {
            "p50_ms": statistics.median(latencies) * 1000,
            "round_p50_ms": [statistics.median(one["latencies"]) * 1000 for one in rounds],
            "primary_ms_per_query": sum(one["server_ms"] for one in rounds) / len(latencies),
            "replica_reads": sum(one["replica_reads"] for one in rounds),
        }
    return results


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command (field 3, the state, first)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds ``pid`` has used so far (``/proc/<pid>/stat``)."""
    if pid is None:
        return 0.0
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _server_cpu_seconds(pgdata: Path) -> float:
    """CPU seconds the PostgreSQL server of ``pgdata`` has used so far: its postmaster's,
    its live processes' (backends, WAL sender, background workers) and, through the
    postmaster's children times, those of the processes that ended. Unlike the statements'
    time it does not grow while another program has the cores."""
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    fields = _stat(postmaster)
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime, stime, cutime, cstime
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            child = _stat(int(entry.name))
        except (OSError, ValueError):
            continue  # gone meanwhile
        if int(child[1]) == postmaster:
            ticks += int(child[11]) + int(child[12])
    return ticks / os.sysconf("SC_CLK_TCK")


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
    the entry ids of the acknowledged ingests. Each agent presents the causal token of its
    latest write with every request after it, as ``Client`` does: it reads its own
    writes, whichever process answers."""
    pending = list(enumerate(requests))
    pending.reverse()
    answered = [0] * len(apis)
    errors: list[str] = []
    stored: list[str] = []
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def agent(token: str) -> None:
        causal: str | None = None
        while pending:
            turn, (path, body) = pending.pop()
            if rate is not None:
                await asyncio.sleep(max(0.0, start + turn / rate - loop.time()))
            api = turn % len(apis)
            headers = _bearer(token)
            if causal is not None:
                headers[CAUSAL_TOKEN_HEADER] = causal
            try:
                response = await http.post(f"{apis[api]}{path}", json=body, headers=headers)
            except httpx.HTTPError as exc:
                errors.append(type(exc).__name__)
                continue
            if not response.is_success:
                errors.append(f"{response.status_code} {response.text[:200]}")
                continue
            answered[api] += 1
            causal = response.headers.get(CAUSAL_TOKEN_HEADER, causal)
            if path == "/ingest":
                stored.append(response.json()["entry_id"])

    await asyncio.gather(*(agent(_token(k)) for k in range(agents)))
    return {"answered": answered, "errors": errors, "stored": stored}


def _token(agent: int) -> str:
    return f"bench-token-{agent}"


#: The token that reads each process's /metrics.
ADMIN_TOKEN = "bench-admin"


def _tokens(agents: int) -> str:
    """``APOLLO_API_TOKENS``: one writer per agent (its own source, its own expertise), and
    an admin that reads the metrics."""
    writers = [f"{_token(k)}=claude-bench-{k}:writer" for k in range(agents)]
    return ",".join([*writers, f"{ADMIN_TOKEN}=bench-ops:admin"])


def _counter(text: str, name: str, label: str) -> float:
    prefix = f"{name}{{{label}}} "
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix) :])
    return 0.0


FALLBACK_CAUSES = ("no_replica", "wait_timed_out", "replica_error")


async def _replica_counts(http: httpx.AsyncClient, apis: list[str]) -> list[float]:
    """Queries meant for the replica so far, summed over the processes: ran on the
    replica, ran on the primary, then the primary's by cause (:data:`FALLBACK_CAUSES`)."""
    counts = [0.0] * (2 + len(FALLBACK_CAUSES))
    for api in apis:
        base = api.removesuffix("/api/apollo")
        text = (await http.get(f"{base}/metrics", headers=_bearer(ADMIN_TOKEN))).text
        found = [
            _counter(text, "apollo_replica_reads_total", 'served_by="replica"'),
            _counter(text, "apollo_replica_reads_total", 'served_by="primary"'),
            *(
                _counter(text, "apollo_replica_fallbacks_total", f'cause="{cause}"')
                for cause in FALLBACK_CAUSES
            ),
        ]
        counts = [a + b for a, b in zip(counts, found, strict=True)]
    return counts


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


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
    *,
    pgdata: Path,
    mixed_load: bool,
) -> dict[str, Any]:
    """One round of a fleet set-up: ``processes`` service processes on ``database`` (see
    the module's docstring); the mixed load only with ``mixed_load``."""
    admin, direct = server.admin_conninfo, server.conninfo(database)
    folder = temporary_folder("apollo-fleet-services-")
    settings = service_environment(
        database_url=bouncer.conninfo(database),
        pooler="transaction",
        migration_database_url=direct,
        read_database_url=replica.conninfo(database),
        api_tokens=_tokens(args.agents),
        write_rate=1_000_000,  # charged as always, past the benchmark's own writes
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
    mixed = mixed[: args.mixed] if mixed_load else []
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
            primary_cpu = _server_cpu_seconds(pgdata)
            started = time.perf_counter()
            loaded = await _agents(http, services.apis, args.agents, ingests, args.rate)
            await _drained(direct)
            elapsed = time.perf_counter() - started
            server_ms = await _server_ms(admin, database)
            primary_cpu = _server_cpu_seconds(pgdata) - primary_cpu
            cpu = [_cpu_seconds(pid) - c for pid, c in zip(services.pids, cpu, strict=True)]
            replica_before = await _replica_counts(http, services.apis)
            mixed_run = await _agents(http, services.apis, args.agents, mixed)
            replica_after = await _replica_counts(http, services.apis)
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
        "primary_cpu_ms_per_ingest": primary_cpu * 1000 / args.ingests,
        "ingest_errors": len(loaded["errors"]),
        "cpu_s_per_message": [
            c / n if n else 0.0 for c, n in zip(cpu, loaded["answered"], strict=True)
        ],
        "mixed_requests": len(mixed),
        "mixed_errors": len(mixed_run["errors"]),
        "mixed_queries_on_replica": replica_after[0] - replica_before[0],
        "mixed_queries_on_primary": replica_after[1] - replica_before[1],
        "mixed_fallbacks": {
            cause: replica_after[2 + i] - replica_before[2 + i]
            for i, cause in enumerate(FALLBACK_CAUSES)
        },
        "error_samples": (loaded["errors"] + mixed_run["errors"])[:5],
        "acknowledged_ingests": len(acknowledged),
        "lost": lost,
    }


def _summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """A set-up's rounds: the means of the per-ingest figures, the sums of the counts."""
    first = rounds[0]

    def mean(name: str) -> float:
        return statistics.fmean(r[name] for r in rounds)

    return {
        **first,
        "rounds": rounds,
        "ingests": sum(r["ingests"] for r in rounds),
        "ingests_per_s": mean("ingests_per_s"),
        "primary_ms_per_ingest": mean("primary_ms_per_ingest"),
        "primary_cpu_ms_per_ingest": mean("primary_cpu_ms_per_ingest"),
        "ingest_errors": sum(r["ingest_errors"] for r in rounds),
        "cpu_s_per_message": [
            statistics.fmean(values)
            for values in zip(*(r["cpu_s_per_message"] for r in rounds), strict=True)
        ],
        "acknowledged_ingests": sum(r["acknowledged_ingests"] for r in rounds),
        "lost": sum(r["lost"] for r in rounds),
        "mixed_queries_on_replica": sum(r["mixed_queries_on_replica"] for r in rounds),
        "mixed_queries_on_primary": sum(r["mixed_queries_on_primary"] for r in rounds),
        "mixed_fallbacks": {
            cause: sum(r["mixed_fallbacks"][cause] for r in rounds) for cause in FALLBACK_CAUSES
        },
        "error_samples": [e for r in rounds for e in r["error_samples"]][:5],
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    load_at_start = os.getloadavg()
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
        # 1, 3, 3, 1 ...: a drift of the machine's load over the run weighs on both alike
        order = [n for r in range(args.rounds) for n in ((1, 3) if r % 2 == 0 else (3, 1))]
        clones = [
            await _clone(server, database, f"{database}_fleet{i}_{n}") for i, n in enumerate(order)
        ]
        replica.start()
        bouncer.start()
        fleet_bouncer.start()
        setups = {
            "direct": base,
            "pgbouncer": base.replace(
                database_url=bouncer.conninfo(database),
                database_pooler="transaction",
                migration_database_url=direct,
            ),
            "replica": base.replace(read_database_url=replica.conninfo(database), replica_wait=5.0),
        }
        results = await _query_setups(setups, server, database, args)
        rounds: dict[str, list[dict[str, Any]]] = {"1": [], "3": []}
        for n, clone in zip(order, clones, strict=True):
            done = rounds[str(n)]
            done.append(
                await _fleet(
                    args,
                    server,
                    replica,
                    fleet_bouncer,
                    clone,
                    n,
                    pgdata=embedded.data_dir,
                    mixed_load=not done,
                )
            )
        fleet = {n: _summary(done) for n, done in rounds.items()}
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
        "ingest_primary_cpu_3_to_1": fleet["3"]["primary_cpu_ms_per_ingest"]
        / fleet["1"]["primary_cpu_ms_per_ingest"],
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
            "ingest_primary_cpu_3_to_1": 1.15,
        },
        "load_average": {"start": load_at_start, "end": os.getloadavg()},
    }


def report(result: dict[str, Any]) -> str:
    """The tables and verdicts of a run (``result`` as the JSON holds it)."""
    lines: list[str] = []
    rows = [
        [name, r["p50_ms"], r["primary_ms_per_query"], r["replica_reads"]]
        for name, r in result["setups"].items()
    ]
    lines.append(table(rows, ["set-up", "query p50 ms", "primary ms/query", "replica reads"]))
    fleet_rows = [
        [
            f"{f['processes']} process(es)",
            f["primary_ms_per_ingest"],
            f["primary_cpu_ms_per_ingest"],
            f["ingests_per_s"],
            " / ".join(f"{c * 1000:.1f}" for c in f["cpu_s_per_message"]),
            f"{f['ingest_errors'] + f['mixed_errors']} of {f['ingests'] + f['mixed_requests']}",
            f"{f['lost']} of {f['acknowledged_ingests']}",
        ]
        for f in result["fleet"].values()
    ]
    headers = [
        "fleet",
        "primary ms/ingest",
        "primary CPU ms/ingest",
        "ingests/s",
        "CPU ms/message",
        "errors",
        "lost",
    ]
    lines.append(table(fleet_rows, headers))
    for fleet in result["fleet"].values():
        rounds = ", ".join(f"{r['primary_ms_per_ingest']:.2f}" for r in fleet["rounds"])
        lines.append(f"  {fleet['processes']} process(es): primary ms/ingest by round {rounds}")
        for sample in fleet["error_samples"]:
            lines.append(f"  {fleet['processes']} process(es), error: {sample}")
        on_replica = fleet.get("mixed_queries_on_replica", 0)  # runs before it was counted
        meant = on_replica + fleet.get("mixed_queries_on_primary", 0)
        if meant:
            lines.append(
                f"  {fleet['processes']} process(es), mixed load (1 ingest : 2 queries, each"
                f" agent presenting its own causal token): queries on the replica"
                f" {on_replica:.0f} of {meant:.0f} ({on_replica / meant:.1%}; target ≥ 90 %);"
                f" on the primary by cause {fleet.get('mixed_fallbacks', {})}"
            )
    for name, r in result["setups"].items():
        lines.append(
            f"  {name}: query p50 by round " + ", ".join(f"{v:.1f}" for v in r["round_p50_ms"])
        )
    for name, value in result["ratios"].items():
        target = result["targets"][name]
        if name.startswith("ingest_"):
            verdict = "met" if 2 - target <= value <= target else "missed"
            lines.append(f"{name}: {value:.2f} (target within ±15%: {verdict})")
            continue
        verdict = "met" if value <= target else "missed"
        lines.append(f"{name}: {value:.2f} (target <= {target}: {verdict})")
    for when, load in result["load_average"].items():
        lines.append(
            f"load average (1, 5, 15 min) at the {when}: " + " ".join(f"{x:.2f}" for x in load)
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    result = asyncio.run(run(args))
    if not args.quick:
        write_json("fleet_bench", result)
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
