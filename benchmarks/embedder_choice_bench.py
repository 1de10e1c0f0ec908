"""Which sentence model and precision: paraphrase recall, the relevance rule, speed, size.

For each model and precision, on the labelled paraphrase set of
``relevance_rule_bench.py`` (``benchmarks/data/paraphrase_set.json``): held-out recall@1
and recall@5 with no rule and with the relevance rule (the union rule, its constants
calibrated for that model on the calibration half by the same procedure; and, for a
model that declares one, the rule it declares), the held-out false-accept rate; query
latency (one text, p50 of ``--repeats`` after a warm-up), bulk throughput (the 250 notes
in one call, best of three) and the size on disk of the model folder and of the exported
ONNX graph. Every figure is printed beside the packaged MiniLM fp32, measured in the same
run.

Models: the packaged all-MiniLM-L6-v2 in fp32 and int8 (ONNX Runtime, ``OnnxEmbedder``),
plus any ``--model`` folder (a sentence-transformers folder: BERT-like, with
``tokenizer.json``) in both precisions, plus any ``--graph`` (an ONNX graph of a BERT-like
model with the packaged model's uncased vocabulary, run with mean pooling)::

    PYTHONPATH=src python benchmarks/embedder_choice_bench.py [--model DIR ...] [--graph FILE ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apollo_adapters.embedders.onnx import OnnxEmbedder
from apollo_adapters.embedders.sentence import default_model_path
from apollo_domain.retrieval import RetrievalSettings
from benchmarks._common import machine, table, write_json
from benchmarks.relevance_rule_bench import (
    HELD_OUT,
    LIMIT,
    LabelledSet,
    Run,
    Vectors,
    evaluate,
    measure,
)

Embed = Callable[[Sequence[str]], Vectors]


def folder_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class GraphEmbedder:
    """An ONNX graph of a BERT-like encoder: the packaged model's tokenizer, the graph's
    last hidden state mean-pooled over the attention mask, L2-normalized."""

    def __init__(self, graph: Path, threads: int) -> None:
        import onnxruntime  # type: ignore[import-untyped]
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))
        self.tokenizer.enable_truncation(256)
        self.tokenizer.enable_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        self.session = onnxruntime.InferenceSession(
            str(graph), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = [i.name for i in self.session.get_inputs()]
        hidden = [o for o in self.session.get_outputs() if len(o.shape) == 3]
        self.output = hidden[0].name
        self.model_id = graph.stem
        self.relevance_floor = None
        self.relevance_rule = None

    def embed_sync(self, texts: Sequence[str]) -> Vectors:
        out = []
        for start in range(0, len(texts), 16):
            encoded = self.tokenizer.encode_batch(list(texts[start : start + 16]))
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            (hidden,) = self.session.run([self.output], feeds)
            pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.concatenate(out).astype(np.float32)


def timings(embed: Embed, texts: Sequence[str], repeats: int) -> dict[str, float]:
    embed(texts[:4])  # warm-up
    single = []
    for text in texts[:repeats]:
        started = time.perf_counter()
        embed([text])
        single.append(time.perf_counter() - started)
    bulk = []
    for _ in range(3):
        started = time.perf_counter()
        embed(texts)
        bulk.append(time.perf_counter() - started)
    return {
        "query_p50_ms": statistics.median(single) * 1000,
        "bulk_texts_per_s": len(texts) / min(bulk),
    }


def declared_rule(embedder: Any) -> RetrievalSettings | None:
    floor = getattr(embedder, "relevance_floor", None)
    rule = getattr(embedder, "relevance_rule", None)
    if floor is None and rule is None:
        return None
    return RetrievalSettings(relevance_floor=floor, **dict(rule or {}))


def row(
    name: str, embedder: Any, sizes: dict[str, int], data: LabelledSet, args: Any
) -> dict[str, Any]:
    def embed(texts: Sequence[str]) -> Vectors:
        return np.asarray(embedder.embed_sync(list(texts)), dtype=np.float32)

    measured = measure(embed, data, args.far, args.backgrounds, None)
    union = next(v for k, v in measured.results.items() if k.startswith("(c)"))
    figures: dict[str, Any] = {
        "model": name,
        "none": measured.results["none"][HELD_OUT],
        "calibrated": union[HELD_OUT],
        "constants": {k: v for k, v in measured.constants.items() if k != "sweep"},
        **sizes,
        **timings(embed, data.notes, args.repeats),
    }
    declared = declared_rule(embedder)
    if declared is not None:
        figures["declared"] = declared_figures(embed, data, declared)
    return figures


def declared_figures(embed: Embed, data: LabelledSet, rule: RetrievalSettings) -> dict[str, float]:
    notes, queries, unrelated = embed(data.notes), embed(data.queries), embed(data.unrelated)
    held = [i for i, h in enumerate(data.note_half) if h == HELD_OUT]
    u_held = [i for i, h in enumerate(data.unrelated_half) if h == HELD_OUT]
    depth = LIMIT + rule.relevance_background
    return evaluate(
        rule,
        Run.of(queries[held], notes, held, depth),
        Run.of(unrelated[u_held], notes, [None] * len(u_held), depth),
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, nargs="*", default=[])
    parser.add_argument("--graph", type=Path, nargs="*", default=[])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/apollo-onnx"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--far", type=float, default=0.02)
    parser.add_argument("--backgrounds", type=int, nargs="+", default=[3, 5, 8, 10, 15])
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    data = LabelledSet.load()
    rows = []
    for folder in [default_model_path(), *args.model]:
        for quantize in (None, "int8"):
            embedder = OnnxEmbedder(
                folder, cache_dir=args.cache, quantize=quantize, threads=args.threads
            )
            sizes = {
                "folder_bytes": folder_size(folder),
                "graph_bytes": folder_size(embedder.graph),
            }
            name = f"{embedder.model_id} ({quantize or 'fp32'})"
            rows.append(row(name, embedder, sizes, data, args))
            print(f"measured {name}", flush=True)
    for graph in args.graph:
        embedder = GraphEmbedder(graph, args.threads)
        sizes = {"folder_bytes": folder_size(graph), "graph_bytes": folder_size(graph)}
        rows.append(row(f"{graph.stem} (ONNX graph, fp32)", embedder, sizes, data, args))
    base = rows[0]
    printed = []
    for r in rows:
        d = r.get("declared")
        printed.append(
            [
                r["model"],
                f"{r['none']['recall@1']:.3f} / {r['none']['recall@5']:.3f}",
                f"{r['calibrated']['recall@1']:.3f} / {r['calibrated']['recall@5']:.3f}"
                f" / {r['calibrated']['far']:.3f}",
                "-" if d is None else f"{d['recall@1']:.3f} / {d['recall@5']:.3f} / {d['far']:.3f}",
                f"{r['query_p50_ms']:.1f} ({r['query_p50_ms'] / base['query_p50_ms']:.2f}x)",
                f"{r['bulk_texts_per_s']:.0f}"
                f" ({r['bulk_texts_per_s'] / base['bulk_texts_per_s']:.2f}x)",
                f"{r['folder_bytes'] / 1e6:.0f} + {r['graph_bytes'] / 1e6:.0f}",
            ]
        )
    print(f"threads {args.threads}; held-out half; rule FAR target {args.far}")
    print(
        table(
            printed,
            [
                "model (precision)",
                "no rule r@1 / r@5",
                "calibrated rule r@1 / r@5 / FAR",
                "declared rule r@1 / r@5 / FAR",
                "query p50 ms (vs fp32)",
                "bulk texts/s (vs fp32)",
                "MB folder + graph",
            ],
        )
    )
    payload = {"machine": machine(), "threads": args.threads, "rows": rows}
    print(write_json("embedder_choice", payload, args.output))
    return payload


if __name__ == "__main__":
    main()
