"""Bulk ingest with the bundled all-MiniLM-L6-v2 model, beside the model's own rate.

On the embedded PostgreSQL, the same ``--entries`` texts (conversation-like notes from the
retrieval benchmark's generator, repeated with numbered variations) are

1. embedded by the model alone, in its own batches (``embed_sync``),
2. stored with ``Client.store_many`` through Apollo with that model as the embedder (a
   fresh instance, so nothing is cached), on a fresh database, and
3. stored by ``apollo ingest``'s path (:func:`apollo_app.cli.ingest.ingest_lines`, the
   texts as JSONL lines) the same way, on another fresh database,

in one run. ``--embedder`` picks the model's runtime (``pytorch``, ``onnx``: fp32 ONNX
Runtime) or the hashing embedder (no model: the store's own cost). Targets: bulk ingest
≥ 0.8 × the model's rate, ``apollo ingest`` ≥ 0.8 × ``store_many``::

    PYTHONPATH=src:. .venv/bin/python benchmarks/model_ingest_bench.py [--entries 2000]
        [--embedder pytorch|onnx|hashing]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apollo_adapters.embedders import HashingEmbedder, OnnxEmbedder, SentenceTransformerEmbedder
from apollo_adapters.embedders.sentence import default_model_path
from apollo_adapters.postgres import PostgresStore
from apollo_app import Apollo
from apollo_app.cli.ingest import IngestReport, Progress, ingest_lines
from benchmarks._common import embedded_database, machine, rate, table, write_json
from benchmarks.retrieval_bench import corpus

TARGET = 0.8
EMBEDDERS = ("pytorch", "onnx", "hashing")


def make_embedder(args: argparse.Namespace) -> Any:
    """A fresh instance of the chosen embedder (nothing cached), loaded and warmed."""
    if args.embedder == "hashing":
        embedder: Any = HashingEmbedder()
    elif args.embedder == "onnx":
        embedder = OnnxEmbedder(cache_dir=args.cache)
    else:
        embedder = SentenceTransformerEmbedder(default_model_path())
    embedder.embed_sync(["warm up"])
    return embedder


async def store_many_seconds(conninfo: str, args: argparse.Namespace, texts: list[str]) -> float:
    """Seconds ``Client.store_many`` takes to store ``texts``, ``--chunk`` at a time."""
    embedder = make_embedder(args)
    store = await PostgresStore.open(
        conninfo, embedder_model_id=embedder.model_id, dimension=embedder.dimension
    )
    try:
        client = Apollo.with_store(store, embedder=embedder).client("bench-writer")
        started = time.perf_counter()
        for start in range(0, len(texts), args.chunk):
            await client.store_many([{"content": t} for t in texts[start : start + args.chunk]])
        return time.perf_counter() - started
    finally:
        await store.close()


async def ingest_command_seconds(
    conninfo: str, args: argparse.Namespace, texts: list[str]
) -> tuple[float, int]:
    """Seconds ``apollo ingest``'s path takes to store ``texts`` as JSONL lines, and the
    lines it stored."""
    embedder = make_embedder(args)
    store = await PostgresStore.open(
        conninfo, embedder_model_id=embedder.model_id, dimension=embedder.dimension
    )
    try:
        apollo = Apollo.with_store(store, embedder=embedder)
        lines = [json.dumps({"content": t}) for t in texts]
        report = IngestReport()
        started = time.perf_counter()
        await ingest_lines(
            apollo,
            lines,
            report,
            agent_id="bench-writer",
            principal=None,
            progress=Progress(len(lines), io.StringIO()),
        )
        return time.perf_counter() - started, report.stored
    finally:
        await store.close()


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
    parser.add_argument("--embedder", choices=EMBEDDERS, default="pytorch")
    parser.add_argument("--cache", type=Path, default=Path(".apollo/onnx"), help="ONNX graphs")
    parser.add_argument("--output", type=Path, default=None, help="results folder")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    corpus_texts = texts(args.entries, args.seed)
    model = make_embedder(args)
    model.embed_sync(corpus_texts[:32])  # load and warm the model
    started = time.perf_counter()
    model.embed_sync(corpus_texts)
    model_seconds = time.perf_counter() - started
    async with embedded_database("model") as conninfo:
        ingest_seconds = await store_many_seconds(conninfo, args, corpus_texts)
    async with embedded_database("model-cli") as conninfo:
        command_seconds, stored = await ingest_command_seconds(conninfo, args, corpus_texts)
    model_rate = rate(len(corpus_texts), model_seconds)
    ingest_rate = rate(len(corpus_texts), ingest_seconds)
    command_rate = rate(len(corpus_texts), command_seconds)
    return {
        "name": "model_ingest_bench",
        "command": "PYTHONPATH=src:. .venv/bin/python benchmarks/model_ingest_bench.py"
        + f" --entries {args.entries} --embedder {args.embedder}",
        "machine": {**machine(), "load_average": os.getloadavg()},
        "config": {k: v for k, v in vars(args).items() if k != "output"},
        "model_texts_per_s": model_rate,
        "store_many_texts_per_s": ingest_rate,
        "apollo_ingest_texts_per_s": command_rate,
        "entries_stored": stored,
        "ratio": ingest_rate / model_rate,
        "apollo_ingest_over_store_many": command_rate / ingest_rate,
        "target_min": TARGET,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    result = asyncio.run(run(args))
    rows = [
        ["model alone (embed_sync)", result["model_texts_per_s"]],
        ["store_many on PostgreSQL", result["store_many_texts_per_s"]],
        ["apollo ingest (JSONL lines) on PostgreSQL", result["apollo_ingest_texts_per_s"]],
    ]
    print(table(rows, ["path", "texts/s"]))
    print(
        f"store_many / model {result['ratio']:.2f} (target ≥ {TARGET}); apollo ingest /"
        f" store_many {result['apollo_ingest_over_store_many']:.2f} (target ≥ {TARGET});"
        f" {result['entries_stored']} stored by apollo ingest"
    )
    print(write_json("model_ingest_bench", result, args.output))
    return result


if __name__ == "__main__":
    main()
