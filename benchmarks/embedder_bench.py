"""The bundled all-MiniLM-L6-v2 model under PyTorch and ONNX Runtime (fp32 and int8).

In one run, on the same texts (the retrieval benchmark's notes and questions), with the
same thread count for both runtimes (``--threads``, default every core but one):

1. one-sentence query embedding: p50 / p95 of ``embed_sync([question])``, one at a time;
2. bulk embedding: texts/s of ``embed_sync(notes)`` (each runtime in its own batches);
3. agreement: the cosine of each note's ONNX vector with its PyTorch vector (min, mean).

Targets: ONNX query p50 ≤ 3 ms; ONNX bulk ≥ 3 × PyTorch::

    PYTHONPATH=src:. .venv/bin/python benchmarks/embedder_bench.py [--texts 2000]

The ONNX graphs are exported into ``--cache`` (default ``.apollo/onnx``, the embedder's
own default folder) on the first run; later runs load them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apollo_adapters.embedders import OnnxEmbedder, SentenceTransformerEmbedder
from apollo_adapters.embedders.onnx import default_threads
from benchmarks._common import machine, rate, summary_ms, table, write_json
from benchmarks.model_ingest_bench import texts as corpus_texts
from benchmarks.retrieval_bench import corpus

QUERY_P50_MS = 3.0
BULK_RATIO = 3.0
RUNTIMES = ("pytorch", "onnx-fp32", "onnx-int8")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=2_000, help="texts of the bulk run")
    parser.add_argument("--queries", type=int, default=300, help="one-sentence queries timed")
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=Path(".apollo/onnx"))
    parser.add_argument("--quick", action="store_true", help="a few texts: a smoke run")
    parser.add_argument("--output", type=Path, default=None, help="results folder")
    args = parser.parse_args(argv)
    if args.quick:
        args.texts, args.queries = 48, 20
    return args


def questions(count: int, seed: int) -> list[str]:
    _, labelled = corpus(max(4, count // 5), seed)
    asked = [question for _, question, _ in labelled]
    return [asked[i % len(asked)] for i in range(count)]


def query_latencies(embedder: Any, queries: Sequence[str]) -> dict[str, float]:
    for query in queries[:10]:  # warm up
        embedder.embed_sync([query])
    seconds = []
    for query in queries:
        started = time.perf_counter()
        embedder.embed_sync([query])
        seconds.append(time.perf_counter() - started)
    return summary_ms(seconds)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    torch.set_num_threads(args.threads)
    notes = corpus_texts(args.texts, args.seed)
    queries = questions(args.queries, args.seed)
    embedders: dict[str, Any] = {
        "pytorch": SentenceTransformerEmbedder(),
        "onnx-fp32": OnnxEmbedder(cache_dir=args.cache, threads=args.threads),
        "onnx-int8": OnnxEmbedder(cache_dir=args.cache, quantize="int8", threads=args.threads),
    }
    figures: dict[str, dict[str, Any]] = {}
    vectors: dict[str, np.ndarray] = {}
    for name, embedder in embedders.items():
        embedder.embed_sync(notes[:64])  # warm up at every batch shape the run meets
        started = time.perf_counter()
        vectors[name] = embedder.embed_sync(notes)
        bulk_seconds = time.perf_counter() - started
        figures[name] = {
            "model_id": embedder.model_id,
            "query": query_latencies(embedder, queries),
            "bulk_texts_per_s": rate(len(notes), bulk_seconds),
        }
    reference = vectors["pytorch"]
    for name in RUNTIMES:
        agreement = (reference * vectors[name]).sum(axis=1) / (
            np.linalg.norm(reference, axis=1) * np.linalg.norm(vectors[name], axis=1)
        )
        figures[name]["cosine_min"] = float(agreement.min())
        figures[name]["cosine_mean"] = float(agreement.mean())
        figures[name]["bulk_over_pytorch"] = (
            figures[name]["bulk_texts_per_s"] / figures["pytorch"]["bulk_texts_per_s"]
        )
    onnx = figures["onnx-fp32"]
    command = "PYTHONPATH=src:. .venv/bin/python benchmarks/embedder_bench.py"
    command += " --quick" if args.quick else f" --texts {args.texts} --queries {args.queries}"
    return {
        "name": "embedder_bench",
        "command": command + f" --threads {args.threads}",
        "machine": {**machine(), "load_average": os.getloadavg()},
        "config": {k: str(v) for k, v in vars(args).items() if k != "output"},
        "threads": args.threads,
        "runtimes": figures,
        "targets": {
            "query_p50_ms": QUERY_P50_MS,
            "bulk_over_pytorch": BULK_RATIO,
            "onnx_fp32_query_met": onnx["query"]["p50_ms"] <= QUERY_P50_MS,
            "onnx_fp32_bulk_met": onnx["bulk_over_pytorch"] >= BULK_RATIO,
        },
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    result = run(args)
    rows = [
        [
            name,
            result["threads"],
            figures["query"]["p50_ms"],
            figures["query"]["p95_ms"],
            figures["bulk_texts_per_s"],
            figures["bulk_over_pytorch"],
            figures["cosine_min"],
            figures["cosine_mean"],
        ]
        for name, figures in result["runtimes"].items()
    ]
    header = [
        "runtime",
        "threads",
        "query p50 ms",
        "query p95 ms",
        "bulk texts/s",
        "bulk × pytorch",
        "cos min",
        "cos mean",
    ]
    print(f"{args.texts} texts, {args.queries} one-sentence queries, {args.threads} thread(s)")
    print(table(rows, header))
    targets = result["targets"]
    print(
        f"targets (onnx-fp32): query p50 ≤ {QUERY_P50_MS} ms:"
        f" {'yes' if targets['onnx_fp32_query_met'] else 'NO'};"
        f" bulk ≥ {BULK_RATIO} × pytorch: {'yes' if targets['onnx_fp32_bulk_met'] else 'NO'}"
    )
    name = "embedder_bench_quick" if args.quick else "embedder_bench"
    print(write_json(name, result, args.output))
    return result


if __name__ == "__main__":
    main()
