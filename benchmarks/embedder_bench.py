"""The bundled all-MiniLM-L6-v2 model under PyTorch and ONNX Runtime (fp32 and int8).

In one run, on the same texts (the retrieval benchmark's notes and questions), with the
same thread count for both runtimes (``--threads``, default every core but one):

1. one-sentence query embedding: p50 / p95 of ``embed_sync([question])``, one at a time;
2. bulk embedding: texts/s of ``embed_sync(notes)`` (each runtime in its own batches);
3. agreement: the cosine of each note's ONNX vector with its PyTorch vector (min, mean);
4. the int8 bound: one of the model's weight matrix products (``--bound-tokens`` rows of
   384 times 384 × 1536) timed alone in ONNX Runtime, fp32 and dynamically quantized int8
   (the embedder's own quantizer), and the share of the fp32 graph's kernel time its
   weight matrix products take in bulk (ONNX Runtime's profiler). Quantizing can make
   only those products faster, so int8 bulk is at most ``1 / ((1 - share) + share /
   speed-up)`` times fp32's (Amdahl's law), which with fp32's own ratio to PyTorch bounds
   what int8 can reach against PyTorch on this CPU.

Targets: ONNX query p50 ≤ 3 ms; ONNX bulk ≥ 3 × PyTorch::

    PYTHONPATH=src:. .venv/bin/python benchmarks/embedder_bench.py [--texts 2000]

The ONNX graphs are exported into ``--cache`` (default ``.apollo/onnx``, the embedder's
own default folder) on the first run; later runs load them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
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
    parser.add_argument(
        "--bound-tokens", type=int, default=32, help="rows of the int8 bound's matrix product"
    )
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


def cpu_flags() -> list[str]:
    """The CPU's vector and int8 instruction-set flags (Linux), which set the int8 bound."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = next(
        (line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")),
        [],
    )
    return sorted(f for f in set(flags) if f.startswith(("avx", "fma", "amx")) or "vnni" in f)


def matmul_rates(threads: int, tokens: int, repeats: int) -> dict[str, float]:
    """G multiply-adds/s of one of the model's weight products, ``[1, tokens, 384] ×
    [384, 1536]``, run alone by ONNX Runtime in fp32 and quantized by the embedder's own
    int8 quantizer (dynamic, per-channel weights): the most int8 gains on a product."""
    import onnx
    import onnxruntime  # type: ignore[import-untyped]
    from onnx import TensorProto, helper, numpy_helper

    from apollo_adapters.embedders.onnx import _quantize

    inner, outer = 384, 1536
    generator = np.random.default_rng(0)
    weight = (generator.standard_normal((inner, outer)) * 0.05).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "product",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "tokens", inner])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "tokens", outer])],
        [numpy_helper.from_array(weight, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    x = generator.standard_normal((1, tokens, inner)).astype(np.float32)
    rates: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        fp32, int8 = Path(folder, "fp32.onnx"), Path(folder, "int8.onnx")
        onnx.save(model, str(fp32))
        _quantize(fp32, int8)
        for name, path in (("fp32", fp32), ("int8", int8)):
            session = onnxruntime.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"]
            )
            for _ in range(20):
                session.run(None, {"x": x})
            started = time.perf_counter()
            for _ in range(repeats):
                session.run(None, {"x": x})
            seconds = (time.perf_counter() - started) / repeats
            rates[name] = tokens * inner * outer / seconds / 1e9
    return rates


def weight_product_share(embedder: OnnxEmbedder, texts: Sequence[str]) -> float:
    """The share of ``embedder``'s kernel time, embedding ``texts`` in its own batches, in
    the matrix products by a weight (the ones int8 quantizes), from ONNX Runtime's
    profiler; the products are the graph's ``MatMul`` nodes whose second input is an
    initializer, matched by node name."""
    import onnx
    import onnxruntime  # type: ignore[import-untyped]

    model = onnx.load(str(embedder.graph), load_external_data=False)
    weights = {init.name for init in model.graph.initializer}
    products = {
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul" and len(node.input) > 1 and node.input[1] in weights
    }
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = embedder.threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    with tempfile.TemporaryDirectory() as folder:
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(folder, "profile"))
        profiled = OnnxEmbedder(
            embedder.path, cache_dir=embedder.graph.parent, threads=embedder.threads
        )
        profiled._session = onnxruntime.InferenceSession(
            str(embedder.graph), options, providers=["CPUExecutionProvider"]
        )
        profiled.embed_sync(texts)
        events = json.loads(Path(profiled._session.end_profiling()).read_text())
    total = in_products = 0
    for event in events:
        if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
            continue
        total += event["dur"]
        if event["name"].removesuffix("_kernel_time") in products:
            in_products += event["dur"]
    return in_products / total if total else 0.0


def int8_bound(
    args: argparse.Namespace, embedder: OnnxEmbedder, notes: Sequence[str], fp32_over_pytorch: float
) -> dict[str, float]:
    """What int8 can gain over fp32, and so over PyTorch, in bulk on this CPU (module
    docstring, step 4)."""
    rates = matmul_rates(args.threads, args.bound_tokens, 50 if args.quick else 400)
    share = weight_product_share(embedder, notes[:400])
    speedup = rates["int8"] / rates["fp32"]
    over_fp32 = 1.0 / ((1.0 - share) + share / speedup)
    return {
        "product_gmacs_fp32": rates["fp32"],
        "product_gmacs_int8": rates["int8"],
        "product_int8_over_fp32": speedup,
        "weight_product_share_fp32": share,
        "int8_over_fp32_bulk_at_most": over_fp32,
        "int8_over_pytorch_bulk_at_most": over_fp32 * fp32_over_pytorch,
    }


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
    int8 = figures["onnx-int8"]
    bound = int8_bound(args, embedders["onnx-fp32"], notes, onnx["bulk_over_pytorch"])
    command = "PYTHONPATH=src:. .venv/bin/python benchmarks/embedder_bench.py"
    command += " --quick" if args.quick else f" --texts {args.texts} --queries {args.queries}"
    return {
        "name": "embedder_bench",
        "command": command + f" --threads {args.threads}",
        "machine": {**machine(), "load_average": os.getloadavg(), "cpu_flags": cpu_flags()},
        "config": {k: str(v) for k, v in vars(args).items() if k != "output"},
        "threads": args.threads,
        "runtimes": figures,
        "targets": {
            "query_p50_ms": QUERY_P50_MS,
            "bulk_over_pytorch": BULK_RATIO,
            "onnx_fp32_query_met": onnx["query"]["p50_ms"] <= QUERY_P50_MS,
            "onnx_fp32_bulk_met": onnx["bulk_over_pytorch"] >= BULK_RATIO,
            "onnx_int8_query_met": int8["query"]["p50_ms"] <= QUERY_P50_MS,
            "onnx_int8_bulk_met": int8["bulk_over_pytorch"] >= BULK_RATIO,
        },
        "int8_bound": bound,
    }


def report(result: dict[str, Any]) -> str:
    """The table and verdicts of a run (``result`` as the JSON holds it)."""
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
    lines = [table(rows, header), ""]
    targets = result["targets"]
    for runtime in ("fp32", "int8"):
        if f"onnx_{runtime}_query_met" not in targets:
            continue  # a run from before int8 had targets of its own
        query, bulk = targets[f"onnx_{runtime}_query_met"], targets[f"onnx_{runtime}_bulk_met"]
        lines.append(
            f"targets (onnx-{runtime}): query p50 ≤ {QUERY_P50_MS} ms: {'yes' if query else 'NO'};"
            f" bulk ≥ {BULK_RATIO} × pytorch: {'yes' if bulk else 'NO'}"
        )
    bound = result.get("int8_bound")
    if bound:
        tokens = result["config"].get("bound_tokens", "?")
        lines.append(
            f"int8 bound: a [{tokens} × 384] × [384 × 1536] product alone,"
            f" fp32 {bound['product_gmacs_fp32']:.1f} / int8 {bound['product_gmacs_int8']:.1f}"
            f" G multiply-adds/s ({bound['product_int8_over_fp32']:.2f} ×); weight products"
            f" {bound['weight_product_share_fp32']:.0%} of fp32's bulk kernel time; so int8"
            f" bulk ≤ {bound['int8_over_fp32_bulk_at_most']:.2f} × fp32"
            f" ≤ {bound['int8_over_pytorch_bulk_at_most']:.2f} × pytorch"
        )
    return "\n".join(lines).rstrip()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    result = run(args)
    print(f"{args.texts} texts, {args.queries} one-sentence queries, {args.threads} thread(s)")
    print(report(result))
    name = "embedder_bench_quick" if args.quick else "embedder_bench"
    print(write_json(name, result, args.output))
    return result


if __name__ == "__main__":
    main()
