"""Bulk ingest with the bundled all-MiniLM-L6-v2 model, beside the model's own rate.

On the embedded PostgreSQL, the same ``--entries`` texts (conversation-like notes from the
retrieval benchmark's generator, repeated with numbered variations) are

1. embedded by the model alone, in its own batches (``embed_sync``), and
2. stored with ``Client.store_many`` through Apollo with that model as the embedder (a
   fresh instance, so nothing is cached), on a fresh database,

in one run. Target: bulk ingest ≥ 0.8 × the model's rate::

    PYTHONPATH=src:. .venv/bin/python benchmarks/model_ingest_bench.py [--entries 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apollo_adapters.embedders import SentenceTransformerEmbedder
from apollo_adapters.embedders.sentence import default_model_path
from apollo_adapters.postgres import PostgresStore
from apollo_app import Apollo
from benchmarks._common import embedded_database, machine, rate, table, write_json
from benchmarks.retrieval_bench import corpus

TARGET = 0.8


def texts(count: int, seed: int) -> list[str]:
    notes, _ = corpus(max(4, count // 15), seed)
    out = [f"{note} (entry {i})" for i, note in enumerate(notes)]
    while len(out) < count:
        out.extend(f"{note} (entry {len(out) + i})" for i, note in enumerate(notes))
    return out[:count]


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=2_000)
    parser.add_argument("--chunk", type=int, default=256, help="items per store_many call")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--output", type=Path, default=None, help="results folder")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    corpus_texts = texts(args.entries, args.seed)
    model = SentenceTransformerEmbedder(default_model_path())
    model.embed_sync(corpus_texts[:32])  # load and warm the model
    started = time.perf_counter()
    model.embed_sync(corpus_texts)
    model_seconds = time.perf_counter() - started

    async with embedded_database("model") as conninfo:
        fresh = SentenceTransformerEmbedder(default_model_path())
        fresh.embed_sync(["warm up"])
        store = await PostgresStore.open(
            conninfo, embedder_model_id=fresh.model_id, dimension=fresh.dimension
        )
        try:
            client = Apollo.with_store(store, embedder=fresh).client("bench-writer")
            stored = 0
            started = time.perf_counter()
            for start in range(0, len(corpus_texts), args.chunk):
                chunk = corpus_texts[start : start + args.chunk]
                results = await client.store_many([{"content": t} for t in chunk])
                stored += sum(1 for r in results if r.entry_id is not None)
            ingest_seconds = time.perf_counter() - started
        finally:
            await store.close()
    model_rate = rate(len(corpus_texts), model_seconds)
    ingest_rate = rate(len(corpus_texts), ingest_seconds)
    return {
        "name": "model_ingest_bench",
        "command": "PYTHONPATH=src:. .venv/bin/python benchmarks/model_ingest_bench.py"
        + f" --entries {args.entries}",
        "machine": {**machine(), "load_average": os.getloadavg()},
        "config": {k: v for k, v in vars(args).items() if k != "output"},
        "model_texts_per_s": model_rate,
        "store_many_texts_per_s": ingest_rate,
        "entries_stored": stored,
        "ratio": ingest_rate / model_rate,
        "target_min": TARGET,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    result = asyncio.run(run(args))
    rows = [
        ["model alone (embed_sync)", result["model_texts_per_s"]],
        ["store_many on PostgreSQL", result["store_many_texts_per_s"]],
    ]
    print(table(rows, ["path", "texts/s"]))
    print(f"ratio {result['ratio']:.2f} (target ≥ {TARGET}); {result['entries_stored']} stored")
    print(write_json("model_ingest_bench", result, args.output))
    return result


if __name__ == "__main__":
    main()
