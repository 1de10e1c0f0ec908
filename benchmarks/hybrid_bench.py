"""Hybrid retrieval and entity-graph indexing on PostgreSQL, beside their baselines.

On the embedded PostgreSQL (pgvector), ``--entries`` rows (default 100,000) are loaded by
binary COPY (the HNSW index rebuilt after the load, as the migration defines it); their
lexical ``tsvector`` is the table's generated column and their entity graph (entities,
mentions, ``co_occurs`` edges with their supporting entries) is written by COPY from the
built-in heuristic extractor's output, as ingest would. Each text names two people and a
quantity amid topic words. Then, from the same run on the same server:

- ``query_knowledge`` p50 in ``vector``, ``lexical`` and ``hybrid`` mode, embedding excluded
  (query vectors are computed beforehand), beside a raw ``ts_rank`` SQL query built the
  way the adapter builds its own (the same OR of the query's non-stop-word terms);
- the time of each stage of the hybrid (and vector) queries, p50/p95, as the query
  path's profile hook (``Deps.query_profile``) reports them: the embedding (here a lookup
  of the precomputed vector, behind the query cache), each signal's read (they run at the
  same time, each on its own pooled connection while the pool has them to spare), fusion,
  reading the winners whole, and the boost with its commit;
- ``store_many`` throughput of ``--ingest`` new entries with the heuristic extractor and
  with an extractor that finds nothing, alternating chunks so both see the same table.

Targets: hybrid p50 ≤ 1.3 × vector p50; lexical p50 ≤ 2 × raw ``ts_rank`` p50; ingest with
extraction ≥ 0.8 × without::

    PYTHONPATH=src:. .venv/bin/python benchmarks/hybrid_bench.py [--entries 100000] [--quick]

``--model fp32`` (or ``int8``) puts the real model in the path: the entries are loaded with
the bundled all-MiniLM-L6-v2's vectors (run by ONNX Runtime, ``--threads`` threads) and
every query is embedded by it, uncached, inside ``query_knowledge``: the vector and hybrid
figures are then end to end, the embedding included. ``--model torch`` does the same with
the PyTorch model (sentence-transformers), on the database an fp32 run loads (the same
vectors under the same model id).

``--keep FOLDER`` keeps the server's data folder there and reuses a database loaded by an
earlier run with the same sizes and seed (the entries ``--ingest`` adds are deleted again
after they are timed), so that runs after the first skip the load; ``--ingest 0`` skips
the ingest measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import psycopg
from psycopg.types.json import Jsonb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apollo_adapters.embedders import HashingEmbedder
from apollo_adapters.embedders.onnx import default_threads
from apollo_adapters.heuristics import extract_entities
from apollo_adapters.postgres import PostgresStore
from apollo_app import Apollo
from apollo_domain.entities import Extraction, canonical_pair
from apollo_domain.lexical import STOPWORDS
from benchmarks._common import (
    DOMAINS,
    Stopwatch,
    TextGenerator,
    embedded_database,
    kept_database,
    machine,
    rate,
    summary_ms,
    table,
    write_json,
)
from benchmarks.memory_bench import PrecomputedEmbedder
from benchmarks.postgres_bench import DIMENSION, HNSW_INDEX, connect, copy_rows

HYBRID_OVER_VECTOR_TARGET = 1.3
LEXICAL_OVER_RAW_TARGET = 2.0
EXTRACTION_INGEST_TARGET = 0.8
#: The raw baseline, the three modes of query_knowledge (which also commits the retrieval
#: boost and access-log rows), and lexical ``retrieve`` (the same read, no writes).
PATHS = ("raw_ts_rank", "vector", "lexical", "hybrid", "lexical_retrieve")
#: The stages of a query its profile hook reports, in the order they run.
STAGES = ("embed", "vector", "lexical", "graph", "fuse", "read winners", "boost")
PROFILED = ("vector", "hybrid")


class StageProfile:
    """The query profile hook: each stage's seconds, for the mode being measured."""

    def __init__(self) -> None:
        self.mode: str | None = None
        self.seconds: dict[str, dict[str, list[float]]] = {m: {} for m in PROFILED}

    def stage(self, name: str, seconds: float) -> None:
        if self.mode in self.seconds:
            self.seconds[self.mode].setdefault(name, []).append(seconds)

    def summary(self) -> dict[str, dict[str, dict[str, float]]]:
        return {
            mode: {name: summary_ms(stages[name]) for name in STAGES if name in stages}
            for mode, stages in self.seconds.items()
        }


RAW_TS_RANK = (
    "WITH q AS (SELECT string_agg(DISTINCT '''' || replace(replace(lexeme, '\\', '\\\\'),"
    " '''', '''''') || '''', ' | ')::tsquery AS terms"
    " FROM unnest(to_tsvector('simple'::regconfig, %s)) WHERE lexeme <> ALL(%s))"
    " SELECT id, ts_rank(lexical, q.terms) AS score FROM entries, q"
    " WHERE q.terms IS NOT NULL AND lexical @@ q.terms AND status <> 'archived'"
    " ORDER BY score DESC, id LIMIT 10"
)


class NoEntities:
    """An extractor that finds nothing: ingest without graph indexing."""

    async def extract(self, text: str) -> Extraction:
        return Extraction()


def people(gen: TextGenerator, count: int) -> list[str]:
    """``count`` distinct two-word capitalized names made of the generator's words."""
    names: set[str] = set()
    while len(names) < count:
        names.add(f"{gen.word().capitalize()} {gen.word().capitalize()}")
    return sorted(names)


def texts(gen: TextGenerator, names: Sequence[str], count: int, rng: random.Random) -> list[str]:
    out: list[str] = []
    for body in gen.texts(count, 60, 120):
        a, b = rng.sample(list(names), 2)
        out.append(
            f"{a} told {b} that {body[0].lower()}{body[1:-1]}, about {rng.randint(2, 900)} kg."
        )
    return out


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--people", type=int, default=5_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--ingest", type=int, default=2_000)
    parser.add_argument("--chunk", type=int, default=100, help="store_many chunk size")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--output", type=Path, default=None, help="results folder")
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep (and reuse) the loaded database here"
    )
    parser.add_argument(
        "--model",
        choices=("none", "fp32", "int8", "torch"),
        default="none",
        help="embed entries and every query with the bundled model under ONNX Runtime"
        " (or PyTorch: torch)",
    )
    parser.add_argument("--threads", type=int, default=None, help="ONNX Runtime threads")
    parser.add_argument("--onnx-cache", type=Path, default=Path(".apollo/onnx"))
    args = parser.parse_args(argv)
    if args.quick:  # smaller defaults; sizes given explicitly still win
        quick = {"entries": 2_000, "people": 200, "queries": 30, "ingest": 200}
        given = {a.split("=")[0].lstrip("-") for a in (argv or sys.argv[1:])}
        for name, value in quick.items():
            if name not in given:
                setattr(args, name, value)
    return args


async def load_graph(
    raw: psycopg.AsyncConnection[Any],
    ids: Sequence[uuid.UUID],
    corpus: Sequence[str],
    created_at: datetime,
) -> dict[str, int]:
    """The entity graph ingest would write for these entries (created at ``created_at``),
    by COPY."""
    now = datetime.now(UTC)
    entities: dict[str, tuple[uuid.UUID, str, str | None]] = {}
    mentions: list[tuple[uuid.UUID, uuid.UUID, int]] = []
    edges: dict[tuple[uuid.UUID, uuid.UUID], uuid.UUID] = {}
    supports: list[tuple[uuid.UUID, uuid.UUID]] = []
    for entry_id, text in zip(ids, corpus, strict=True):
        found = [
            entities.setdefault(m.key, (uuid.uuid4(), m.name, m.kind))[0]
            for m in extract_entities(text).resolvable()
        ]
        mentions.extend((entry_id, entity_id, i) for i, entity_id in enumerate(found))
        for a, b in itertools.combinations(found, 2):
            pair = canonical_pair(a, b)
            supports.append((edges.setdefault(pair, uuid.uuid4()), entry_id))
    async with raw.transaction(), raw.cursor() as cur:
        async with cur.copy("COPY entities (id, name, key, kind, created_at) FROM STDIN") as copy:
            for key, (entity_id, name, kind) in entities.items():
                await copy.write_row((entity_id, name, key, kind, now))
        async with cur.copy(
            "COPY entity_mentions (entry_id, entity_id, position, entry_created_at) FROM STDIN"
        ) as copy:
            for row in mentions:
                await copy.write_row((*row, created_at))
        async with cur.copy(
            "COPY entity_edges (id, src_id, dst_id, relation, valid_from) FROM STDIN"
        ) as copy:
            for (src, dst), edge_id in edges.items():
                await copy.write_row((edge_id, src, dst, "co_occurs", now))
        async with cur.copy("COPY entity_edge_entries (edge_id, entry_id) FROM STDIN") as copy:
            for row in supports:
                await copy.write_row(row)
    await raw.execute("VACUUM ANALYZE")
    return {
        "entities": len(entities),
        "mentions": len(mentions),
        "edges": len(edges),
        "edge_supports": len(supports),
    }


async def measure_queries(
    store: PostgresStore,
    raw: psycopg.AsyncConnection[Any],
    embedder: Any,
    queries: Sequence[str],
    *,
    model: bool = False,
) -> dict[str, Any]:
    """The paths' latencies. With the hashing embedder the query vectors are computed
    beforehand (embedding excluded); with the ``model`` every query is embedded by it,
    without a cache, inside ``query_knowledge``."""
    profile = StageProfile()
    if model:
        apollo = Apollo.with_store(store, embedder=embedder)
        apollo.deps = attrs.evolve(
            apollo.deps, embedder=embedder, query_embedder=embedder, query_profile=profile
        )
    else:
        vectors = {q: list(v) for q, v in zip(queries, embedder.embed_sync(queries), strict=True)}
        apollo = Apollo.with_store(store, embedder=PrecomputedEmbedder(embedder, vectors))
        apollo.deps = attrs.evolve(apollo.deps, query_profile=profile)
    client = apollo.client(agent_id="bench-reader")
    stop = sorted(STOPWORDS)
    seconds: dict[str, list[float]] = {m: [] for m in PATHS}
    returned: dict[str, int] = dict.fromkeys(seconds, 0)
    for text in queries:  # one pass to warm caches and plans
        await client.retrieve(text, mode="hybrid", min_confidence=0.0)
    for text in queries:
        t0 = time.perf_counter()
        cur = await raw.execute(RAW_TS_RANK, (text, stop))
        returned["raw_ts_rank"] += len(await cur.fetchall())
        seconds["raw_ts_rank"].append(time.perf_counter() - t0)
        for mode in ("vector", "lexical", "hybrid"):
            profile.mode = mode
            t0 = time.perf_counter()
            result = await client.query_knowledge(text, mode=mode, min_confidence=0.0)
            seconds[mode].append(time.perf_counter() - t0)
            profile.mode = None
            returned[mode] += len(result.entries)
        t0 = time.perf_counter()
        read = await client.retrieve(text, mode="lexical", limit=10, min_confidence=0.0)
        seconds["lexical_retrieve"].append(time.perf_counter() - t0)
        returned["lexical_retrieve"] += len(read.entries)
    latency = {name: summary_ms(values) for name, values in seconds.items()}
    return {
        "queries": len(queries),
        "latency": latency,
        "results_returned": returned,
        "stages": profile.summary(),
        "hybrid_over_vector_p50": latency["hybrid"]["p50_ms"] / latency["vector"]["p50_ms"],
        "lexical_over_raw_ts_rank_p50": latency["lexical"]["p50_ms"]
        / latency["raw_ts_rank"]["p50_ms"],
    }


async def measure_ingest(
    store: PostgresStore, embedder: HashingEmbedder, corpus: Sequence[str], chunk: int
) -> dict[str, Any]:
    with_graph = Apollo.with_store(store, embedder=embedder)
    without = Apollo(attrs.evolve(with_graph.deps, extractor=NoEntities()))
    clients = {
        "extraction": with_graph.client("bench-writer"),
        "none": without.client("bench-writer"),
    }
    seconds = dict.fromkeys(clients, 0.0)
    stored = dict.fromkeys(clients, 0)
    chunks = [corpus[i : i + chunk] for i in range(0, len(corpus), chunk)]
    for index, part in enumerate(chunks):
        name = "extraction" if index % 2 == 0 else "none"
        items = [{"content": text, "knowledge_domain": DOMAINS[0]} for text in part]
        t0 = time.perf_counter()
        results = await clients[name].store_many(items)
        seconds[name] += time.perf_counter() - t0
        stored[name] += sum(1 for r in results if r.entry_id is not None)
    rates = {name: rate(stored[name], seconds[name]) for name in clients}
    return {
        "entries": stored,
        "entries_per_s": rates,
        "extraction_over_none": rates["extraction"] / rates["none"],
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    if args.keep is None:
        async with embedded_database("hybrid") as conninfo:
            result = await _run(args, conninfo)
    else:
        # PyTorch and ONNX fp32 make the same vectors under the same model id: one database
        model = "" if args.model == "none" else f"_{args.model.replace('torch', 'fp32')}"
        name = f"apollo_hybrid_{args.entries}_{args.people}_{args.seed}{model}"
        async with kept_database(args.keep, name) as (conninfo, _):
            result = await _run(args, conninfo)
    result["wall_seconds"] = time.perf_counter() - started
    return result


async def _run(args: argparse.Namespace, conninfo: str) -> dict[str, Any]:
    rng = random.Random(args.seed)
    gen = TextGenerator(args.seed)
    names = people(gen, args.people)
    corpus = texts(gen, names, args.entries + args.ingest, rng)
    loaded, extra = corpus[: args.entries], corpus[args.entries :]
    queries = [
        f"What did {rng.choice(names)} say about {' '.join(rng.sample(text.split()[3:-3], 3))}?"
        for text in rng.sample(loaded, args.queries)
    ]
    embedder = model_embedder(args)
    store = await PostgresStore.open(
        conninfo, embedder_model_id=embedder.model_id, dimension=DIMENSION
    )
    raw = await connect(conninfo)
    try:
        loaded_before = await _loaded(raw)
        if loaded_before is not None:
            load = loaded_before
        else:
            load = await _load(raw, embedder, loaded, keep=args.keep is not None)
        queried = await measure_queries(store, raw, embedder, queries, model=args.model != "none")
        ingest = None
        if args.ingest > 0:
            ingest = await measure_ingest(store, embedder, extra, args.chunk)
            if args.keep is not None:  # the kept database stays as loaded
                await raw.execute("DELETE FROM entries WHERE source_agent = 'bench-writer'")
                async with store.unit_of_work() as uow:
                    await uow.graph.prune()
                    await uow.commit()
    finally:
        await raw.close()
        await store.close()
    return {
        "name": "hybrid_bench",
        "command": "PYTHONPATH=src:. .venv/bin/python benchmarks/hybrid_bench.py"
        + (" --quick" if args.quick else f" --entries {args.entries}")
        + ("" if args.model == "none" else f" --model {args.model}"),
        "embedder": repr(embedder),
        "machine": {**machine(), "load_average": os.getloadavg()},
        "config": {k: v for k, v in vars(args).items() if k not in ("output", "keep")},
        "load": load,
        "reused_load": loaded_before is not None,
        "query": queried,
        "ingest": ingest,
        "targets": {
            "hybrid_over_vector_p50_max": HYBRID_OVER_VECTOR_TARGET,
            "lexical_over_raw_ts_rank_p50_max": LEXICAL_OVER_RAW_TARGET,
            "extraction_over_none_min": EXTRACTION_INGEST_TARGET,
        },
    }


def model_embedder(args: argparse.Namespace) -> Any:
    """The hashing embedder, or the bundled model under ONNX Runtime or PyTorch
    (``--model``), on ``--threads`` threads (every core but one by default)."""
    if args.model == "none":
        return HashingEmbedder(DIMENSION)
    if args.model == "torch":
        import torch

        from apollo_adapters.embedders import SentenceTransformerEmbedder

        torch.set_num_threads(args.threads or default_threads())
        return SentenceTransformerEmbedder()
    from apollo_adapters.embedders import OnnxEmbedder

    quantize = "int8" if args.model == "int8" else None
    return OnnxEmbedder(cache_dir=args.onnx_cache, quantize=quantize, threads=args.threads)


async def _loaded(raw: psycopg.AsyncConnection[Any]) -> dict[str, Any] | None:
    """What an earlier run with ``--keep`` loaded into this database, if it finished."""
    cur = await raw.execute("SELECT to_regclass('bench_loaded') IS NOT NULL")
    row = await cur.fetchone()
    if row is None or not row[0]:
        count = await (await raw.execute("SELECT count(*) FROM entries")).fetchone()
        if count is not None and count[0]:
            raise SystemExit("the kept database holds an unfinished load: remove its folder")
        return None
    cur = await raw.execute("SELECT load FROM bench_loaded")
    found = await cur.fetchone()
    return None if found is None else dict(found[0])


async def _load(
    raw: psycopg.AsyncConnection[Any],
    embedder: Any,
    loaded: Sequence[str],
    *,
    keep: bool,
) -> dict[str, Any]:
    matrix = np.concatenate(
        [embedder.embed_sync(loaded[i : i + 2048]) for i in range(0, len(loaded), 2048)]
    )
    ids = [uuid.uuid4() for _ in loaded]
    created_at = datetime.now(UTC)
    with Stopwatch() as load_sw:
        await raw.execute("DROP INDEX entries_embedding_hnsw")  # rebuilt after the load
        async with raw.transaction():
            await copy_rows(
                raw,
                ids,
                loaded,
                [DOMAINS[0]] * len(loaded),
                [False] * len(loaded),
                matrix,
                created_at,
            )
        graph = await load_graph(raw, ids, loaded, created_at)
        await raw.execute("SET maintenance_work_mem = '1GB'")
        await raw.execute(HNSW_INDEX.format(options=""))
        await raw.execute("RESET maintenance_work_mem")
        await raw.execute("VACUUM ANALYZE entries")
    load = {"seconds": load_sw.seconds, **graph}
    if keep:
        await raw.execute("CREATE TABLE bench_loaded (load jsonb NOT NULL)")
        await raw.execute("INSERT INTO bench_loaded VALUES (%s)", (Jsonb(load),))
    return load


def report(result: dict[str, Any]) -> str:
    query, ingest = result["query"], result["ingest"]
    latency = query["latency"]
    rows = [
        [name, latency[name]["p50_ms"], latency[name]["p95_ms"], query["results_returned"][name]]
        for name in PATHS
    ]
    embedding = (
        "excluded (vectors computed beforehand)"
        if result["config"]["model"] == "none"
        else f"included, every query by {result['embedder']}, uncached"
    )
    lines = [
        f"{result['config']['entries']:,} entries, graph {result['load']}",
        f"query embedding: {embedding}; load average {result['machine']['load_average']}",
        table(rows, ["path", "p50 ms", "p95 ms", "results"]),
        f"hybrid / vector p50: {query['hybrid_over_vector_p50']:.2f}"
        f" (target ≤ {HYBRID_OVER_VECTOR_TARGET})",
        f"lexical / raw ts_rank p50: {query['lexical_over_raw_ts_rank_p50']:.2f}"
        f" (target ≤ {LEXICAL_OVER_RAW_TARGET})",
        "query stages (the profile hook), ms:",
        table(
            [
                [stage]
                + [
                    query["stages"][mode][stage][q] if stage in query["stages"][mode] else "-"
                    for mode in PROFILED
                    for q in ("p50_ms", "p95_ms")
                ]
                for stage in STAGES
            ],
            ["stage"] + [f"{mode} {q}" for mode in PROFILED for q in ("p50", "p95")],
        ),
    ]
    if ingest is not None:
        lines.append(
            f"store_many entries/s: with extraction {ingest['entries_per_s']['extraction']:.0f},"
            f" without {ingest['entries_per_s']['none']:.0f},"
            f" ratio {ingest['extraction_over_none']:.2f} (target ≥ {EXTRACTION_INGEST_TARGET})"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    result = asyncio.run(run(args))
    print(report(result))
    name = "hybrid_bench_quick" if args.quick else "hybrid_bench"
    print(write_json(name, result, args.output))
    return result


if __name__ == "__main__":
    main()
