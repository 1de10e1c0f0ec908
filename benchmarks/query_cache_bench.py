"""The query-embedding cache: a query's time the first time it is asked and when repeated.

On the in-memory store (``--postgres``: a fresh embedded PostgreSQL) holding the retrieval
benchmark's notes, ``--queries`` distinct one-sentence questions are asked through
``query_knowledge`` (``--mode``, hybrid by default) twice over: the first pass runs the
model for each (a cache miss), the second finds each embedding in the query cache (a
hit). The query path's profile hook reports the ``embed`` stage beside the end-to-end
time, p50/p95, in the same run::

    PYTHONPATH=src:. .venv/bin/python benchmarks/query_cache_bench.py [--embedder onnx]
        [--cache .apollo/onnx] [--queries 200] [--postgres] [--mode hybrid|vector]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apollo_adapters.embedders import HashingEmbedder, OnnxEmbedder, SentenceTransformerEmbedder
from apollo_adapters.embedders.onnx import default_threads
from apollo_adapters.embedders.sentence import default_model_path
from apollo_adapters.postgres import PostgresStore
from apollo_app import Apollo
from benchmarks._common import embedded_database, machine, summary_ms, table, write_json
from benchmarks.embedder_bench import questions
from benchmarks.retrieval_bench import corpus

EMBEDDERS = ("onnx", "pytorch", "hashing")


class EmbedStage:
    """The query profile hook, keeping the ``embed`` stage's seconds."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    def stage(self, name: str, seconds: float) -> None:
        if name == "embed":
            self.seconds.append(seconds)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", choices=EMBEDDERS, default="onnx")
    parser.add_argument("--cache", type=Path, default=Path(".apollo/onnx"), help="ONNX graphs")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--people", type=int, default=30, help="size of the stored corpus")
    parser.add_argument("--postgres", action="store_true", help="on embedded PostgreSQL")
    parser.add_argument("--mode", choices=("hybrid", "vector"), default="hybrid")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--output", type=Path, default=None, help="results folder")
    return parser.parse_args(argv)


def make_embedder(args: argparse.Namespace) -> Any:
    if args.embedder == "hashing":
        return HashingEmbedder()
    if args.embedder == "onnx":
        return OnnxEmbedder(cache_dir=args.cache)
    return SentenceTransformerEmbedder(default_model_path())


async def measure(apollo: Apollo, args: argparse.Namespace) -> dict[str, Any]:
    """How many notes and questions, and each pass's query and embed-stage latencies."""
    notes, _ = corpus(args.people, args.seed)
    asked = list(dict.fromkeys(questions(args.queries * 2, args.seed + 1)))[: args.queries]
    client = apollo.client("bench-writer")
    for start in range(0, len(notes), 256):
        await client.store_many([{"content": n} for n in notes[start : start + 256]])
    await client.query_knowledge("warm up the model and the store")
    figures: dict[str, Any] = {"notes": len(notes), "queries": len(asked)}
    for name in ("miss", "hit"):
        stage = EmbedStage()
        apollo.deps = attrs.evolve(apollo.deps, query_profile=stage)
        reader = apollo.client("bench-reader")
        seconds = []
        for text in asked:
            t0 = time.perf_counter()
            await reader.query_knowledge(text, min_confidence=0.0, mode=args.mode)
            seconds.append(time.perf_counter() - t0)
        figures[name] = {"query": summary_ms(seconds), "embed": summary_ms(stage.seconds)}
    return figures


async def run(args: argparse.Namespace) -> dict[str, Any]:
    embedder = make_embedder(args)
    if not args.postgres:
        async with Apollo.in_memory(embedder=embedder) as apollo:
            figures = await measure(apollo, args)
    else:
        async with embedded_database("query-cache") as conninfo:
            store = await PostgresStore.open(
                conninfo, embedder_model_id=embedder.model_id, dimension=embedder.dimension
            )
            try:
                figures = await measure(Apollo.with_store(store, embedder=embedder), args)
            finally:
                await store.close()
    threads = getattr(embedder, "threads", None)
    return {
        "name": "query_cache_bench",
        "command": "PYTHONPATH=src:. .venv/bin/python benchmarks/query_cache_bench.py"
        + f" --embedder {args.embedder} --queries {args.queries} --mode {args.mode}"
        + (" --postgres" if args.postgres else ""),
        "machine": machine(),
        "config": {
            **{k: str(v) for k, v in vars(args).items() if k != "output"},
            "threads": threads if threads is not None else default_threads(),
            "notes": figures.pop("notes"),
            "queries": figures.pop("queries"),
        },
        **figures,
        "query_p50_hit_over_miss": figures["hit"]["query"]["p50_ms"]
        / figures["miss"]["query"]["p50_ms"],
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    result = asyncio.run(run(args))
    rows = [
        [
            f"{name} ({'model runs' if name == 'miss' else 'query cache'})",
            result[name]["embed"]["p50_ms"],
            result[name]["embed"]["p95_ms"],
            result[name]["query"]["p50_ms"],
            result[name]["query"]["p95_ms"],
        ]
        for name in ("miss", "hit")
    ]
    print(
        f"{result['config']['embedder']} embedder, {result['config']['queries']}"
        f" {result['config']['mode']} queries"
        f" on {result['config']['notes']} notes"
        f" ({'PostgreSQL' if args.postgres else 'in memory'})"
    )
    print(table(rows, ["pass", "embed p50 ms", "embed p95 ms", "query p50 ms", "query p95 ms"]))
    print(f"query p50, repeated / first: {result['query_p50_hit_over_miss']:.2f}")
    print(write_json("query_cache_bench", result, args.output))
    return result


if __name__ == "__main__":
    main()
