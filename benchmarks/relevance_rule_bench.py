"""Which relevance rule of vector retrieval keeps paraphrases and drops unrelated queries.

The labelled set is ``benchmarks/data/paraphrase_set.json`` (written for this project by
its developers; English; short notes; not real user traffic): 250 notes over ten domains,
each with a paraphrase query sharing few or no content words with it, and 130 unrelated
queries (nonsense, off-topic, absent domains, near-topic questions no note answers). Each
pair and each unrelated query falls in the calibration or the held-out half by the
sha256 of its text.

Calibration sees only the calibration half: a store of the calibration notes, queried
with the calibration paraphrases and unrelated queries. Held-out: a store of all 250
notes, queried with the held-out paraphrases and unrelated queries (the calibration half
is shown against the same store for comparison). The rules (the decision is
:meth:`apollo_domain.retrieval.RetrievalSettings.relevance_cutoff`, as the stores run it):

- ``none``: every candidate counts;
- ``floor``: the fixed floor MiniLM declared before this rule (0.36, ``--previous-floor``);
- ``(a) absolute``: a floor at the ``--far`` quantile of the unrelated queries' best
  cosines (the lowest 0.01 step letting at most that share of them through);
- ``(b) standout``: the best cosine minus the mean of the next ``k`` at least a margin,
  and the best at least a minimum. The minimum is the 5th percentile of the calibration
  paraphrases' own cosine with their note (rounded down to 0.01); for each ``k`` of
  ``--backgrounds`` the margin is the lowest 0.01 step letting at most ``--far`` of the
  unrelated queries through, and the ``k`` with the best recall@1 (then @5) is kept;
- ``(c) (a) or (b)``: (a)'s floor, and the margin raised until the union lets at most
  ``--far`` of the unrelated queries through (the ``k`` and minimum of (b)), on the
  calibration store and on average over 100 random stores of 20 and of 50 of its notes;
  below ``1 + k`` candidates, the floor of a store of ``n`` entries,
  ``single + growth * ln(n)``: ``single`` the ``1 - far`` quantile of every (unrelated
  query, calibration note) cosine, ``growth`` what the quantile ``(1 - far) ** (1 / n)``
  gains from n = 1 to n = k, per e-fold.

Per rule: recall@1 and recall@5 of the paraphrases (the note is among the first 1 or 5
candidates the rule admits) and the false-accept rate (share of unrelated queries that
return anything)::

    PYTHONPATH=src python benchmarks/relevance_rule_bench.py [--quantize int8] [--cache DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from attrs import frozen

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apollo_domain.retrieval import RetrievalSettings, standout
from benchmarks._common import machine, table, write_json

DATA = Path(__file__).resolve().parent / "data" / "paraphrase_set.json"
CALIBRATION, HELD_OUT = "calibration", "held_out"
LIMIT = 5
SMALL_SIZES = (1, 2, 3, 5, 10, 20, 50)
SEED = 20261204
DRAWS = 100
#: The sizes of the random calibration stores the union's margin is checked on too.
CALIBRATION_SIZES = (20, 50)


def half_of(text: str) -> str:
    """The half a text falls in: sha256 of its UTF-8 bytes, even → calibration."""
    return CALIBRATION if int(hashlib.sha256(text.encode()).hexdigest(), 16) % 2 == 0 else HELD_OUT


@frozen
class LabelledSet:
    notes: list[str]
    queries: list[str]
    unrelated: list[str]
    note_half: list[str]
    unrelated_half: list[str]

    @classmethod
    def load(cls, path: Path = DATA) -> LabelledSet:
        data = json.loads(path.read_text(encoding="utf-8"))
        pairs, unrelated = data["pairs"], data["unrelated"]
        for item, key in [(p, "note") for p in pairs] + [(u, "query") for u in unrelated]:
            if item["half"] != half_of(item[key]):
                raise ValueError(f"{item[key]!r}: its half is not the hash's")
        return cls(
            notes=[p["note"] for p in pairs],
            queries=[p["query"] for p in pairs],
            unrelated=[u["query"] for u in unrelated],
            note_half=[p["half"] for p in pairs],
            unrelated_half=[u["half"] for u in unrelated],
        )


Vectors = npt.NDArray[np.float32]


@frozen
class Run:
    """The cosines of a set of queries with a store: each query's candidates best first
    (``LIMIT`` plus the deepest background), and for a paraphrase its note's rank (0
    based; ``None`` for an unrelated query) and cosine."""

    candidates: list[list[float]]
    ranks: list[int | None]

    @classmethod
    def of(cls, queries: Vectors, store: Vectors, targets: Sequence[int | None], depth: int) -> Run:
        scores = queries @ store.T
        candidates, ranks = [], []
        for row, target in zip(scores, targets, strict=True):
            order = np.argsort(-row, kind="stable")
            candidates.append([float(row[i]) for i in order[:depth]])
            ranks.append(None if target is None else int(np.where(order == target)[0][0]))
        return cls(candidates, ranks)


def evaluate(rule: RetrievalSettings, paraphrases: Run, unrelated: Run) -> dict[str, float]:
    """recall@1, recall@5 and false-accept rate of ``rule``."""
    hits = {1: 0, LIMIT: 0}
    for candidates, rank in zip(paraphrases.candidates, paraphrases.ranks, strict=True):
        cutoff = rule.relevance_cutoff(candidates)
        assert rank is not None
        admitted = [c for c in candidates[:LIMIT] if c >= cutoff]
        for k in hits:
            if rank < min(k, len(admitted)):
                hits[k] += 1
    accepted = sum(
        1
        for candidates in unrelated.candidates
        if candidates[0] >= rule.relevance_cutoff(candidates)
    )
    n = len(paraphrases.ranks)
    return {
        "recall@1": hits[1] / n,
        "recall@5": hits[LIMIT] / n,
        "far": accepted / len(unrelated.candidates),
    }


def up(value: float) -> float:
    return math.ceil(round(value * 100, 6)) / 100


def down(value: float) -> float:
    return math.floor(round(value * 100, 6)) / 100


def lowest_passing(values: Sequence[float], far: float) -> float:
    """The lowest 0.01 step a value must reach so that at most ``far`` of ``values`` do."""
    allowed = math.floor(far * len(values) + 1e-9)
    ordered = sorted(values, reverse=True)
    if allowed >= len(ordered):
        return -1.0
    return up(ordered[allowed] + 1e-9)


def calibrate(
    paraphrases: Run,
    unrelated: Run,
    cosines: Sequence[float],
    pairs: Sequence[float],
    far: float,
    backgrounds: Sequence[int],
    sized: Sequence[Sequence[tuple[Run, Run]]] = (),
) -> dict[str, Any]:
    """The constants of rules (a), (b) and (c) from the calibration half (module
    docstring): ``cosines`` are the paraphrases' cosines with their own note, ``pairs``
    every (unrelated query, note) cosine, ``sized`` the runs on random stores of a few
    calibration notes, per size (the union's margin holds its FAR on each size too)."""
    floor = lowest_passing([c[0] for c in unrelated.candidates], far)
    minimum = down(float(np.percentile(cosines, 5)))
    sweep = []
    for k in backgrounds:
        eligible = [c for c in unrelated.candidates if c[0] >= minimum]
        margins = [m for c in eligible if (m := standout(c, k)) is not None]
        rest = [-1.0] * (len(unrelated.candidates) - len(margins))
        margin = max(0.0, lowest_passing(margins + rest, far))
        rule = RetrievalSettings(
            relevance_margin=margin, relevance_background=k, relevance_minimum=minimum
        )
        sweep.append({"k": k, "margin": margin, **evaluate(rule, paraphrases, unrelated)})
    best = max(sweep, key=lambda s: (s["recall@1"], s["recall@5"], -s["far"], -s["k"]))
    k, margin = int(best["k"]), float(best["margin"])
    # A store of n entries: an unrelated query's best is the largest of n pair cosines, at
    # most ``far`` above the pair quantile (1 - far) ** (1 / n); its growth per e-fold of n
    # from n = 1 to n = k.
    single = up(float(np.quantile(pairs, 1 - far)))
    top = float(np.quantile(pairs, (1 - far) ** (1 / k)))
    growth = math.ceil(max(0.0, top - single) / math.log(k) * 1000) / 1000 if k > 1 else 0.0
    union = margin
    while union < 2.0:
        rule = union_rule(floor, union, k, minimum, single, growth)
        fars = [evaluate(rule, paraphrases, unrelated)["far"]]
        fars += [float(np.mean([evaluate(rule, *run)["far"] for run in runs])) for runs in sized]
        if max(fars) <= far + 1e-9:
            break
        union = round(union + 0.01, 2)
    return {
        "floor": floor,
        "minimum": minimum,
        "k": k,
        "margin": margin,
        "union_margin": union,
        "single": single,
        "growth": growth,
        "sweep": sweep,
    }


def union_rule(
    floor: float, margin: float, k: int, minimum: float, single: float, growth: float
) -> RetrievalSettings:
    return RetrievalSettings(
        relevance_floor=floor,
        relevance_margin=margin,
        relevance_background=k,
        relevance_minimum=minimum,
        relevance_single=single,
        relevance_growth=growth,
    )


def rules(previous: float | None, c: dict[str, Any]) -> dict[str, RetrievalSettings]:
    k, minimum = c["k"], c["minimum"]
    return {
        "none": RetrievalSettings(),
        f"floor {previous} (the previous rule)": RetrievalSettings(relevance_floor=previous),
        f"(a) absolute {c['floor']}": RetrievalSettings(relevance_floor=c["floor"]),
        f"(b) standout k={k} margin {c['margin']} min {minimum}": RetrievalSettings(
            relevance_margin=c["margin"], relevance_background=k, relevance_minimum=minimum
        ),
        f"(c) {c['floor']} or standout margin {c['union_margin']}": union_rule(
            c["floor"], c["union_margin"], k, minimum, c["single"], c["growth"]
        ),
    }


@frozen
class Measured:
    constants: dict[str, Any]
    results: dict[str, dict[str, dict[str, float]]]  # rule → half → figures
    small: dict[str, dict[int, dict[str, float]]]  # rule → store size → figures
    calibration_store: int
    full_store: int


def measure(
    embed: Any, data: LabelledSet, far: float, backgrounds: Sequence[int], previous: float | None
) -> Measured:
    """Calibrate on the calibration half, then evaluate every rule on both halves against
    the store of all notes. ``embed`` maps texts to unit vectors."""
    notes = embed(data.notes)
    queries = embed(data.queries)
    unrelated = embed(data.unrelated)
    depth = LIMIT + max(backgrounds)
    calib = [i for i, h in enumerate(data.note_half) if h == CALIBRATION]
    held = [i for i, h in enumerate(data.note_half) if h == HELD_OUT]
    u_calib = [i for i, h in enumerate(data.unrelated_half) if h == CALIBRATION]
    u_held = [i for i, h in enumerate(data.unrelated_half) if h == HELD_OUT]
    # Calibration: a store of the calibration notes alone, so no held-out text is seen.
    c_store = notes[calib]
    c_para = Run.of(queries[calib], c_store, list(range(len(calib))), depth)
    c_unrel = Run.of(unrelated[u_calib], c_store, [None] * len(u_calib), depth)
    cosines = [float(queries[i] @ notes[i]) for i in calib]
    pairs = (unrelated[u_calib] @ c_store.T).ravel()
    rng = np.random.default_rng(SEED + 1)
    sized = []
    for n in CALIBRATION_SIZES:
        subsets = [rng.choice(len(calib), n, replace=False) for _ in range(DRAWS)]
        sized.append(
            [
                (
                    Run.of(queries[calib][s], c_store[s], list(range(n)), depth),
                    Run.of(unrelated[u_calib], c_store[s], [None] * len(u_calib), depth),
                )
                for s in subsets
            ]
        )
    constants = calibrate(c_para, c_unrel, cosines, pairs.tolist(), far, backgrounds, sized)
    results: dict[str, dict[str, dict[str, float]]] = {}
    runs = {
        CALIBRATION: (
            Run.of(queries[calib], notes, calib, depth),
            Run.of(unrelated[u_calib], notes, [None] * len(u_calib), depth),
        ),
        HELD_OUT: (
            Run.of(queries[held], notes, held, depth),
            Run.of(unrelated[u_held], notes, [None] * len(u_held), depth),
        ),
    }
    chosen = rules(previous, constants)
    for name, rule in chosen.items():
        results[name] = {half: evaluate(rule, *run) for half, run in runs.items()}
    small = small_stores(chosen, notes[held], queries[held], unrelated[u_held], depth)
    return Measured(constants, results, small, len(calib), len(data.notes))


def small_stores(
    chosen: dict[str, RetrievalSettings],
    notes: Vectors,
    queries: Vectors,
    unrelated: Vectors,
    depth: int,
    sizes: Sequence[int] = SMALL_SIZES,
    draws: int = DRAWS,
) -> dict[str, dict[int, dict[str, float]]]:
    """Each rule on stores of a few held-out notes (``draws`` random subsets per size,
    seeded): recall@1 of the paraphrases of the notes in the store, and the FAR."""
    out: dict[str, dict[int, dict[str, float]]] = {name: {} for name in chosen}
    rng = np.random.default_rng(SEED)
    for n in sizes:
        subsets = [rng.choice(len(notes), n, replace=False) for _ in range(draws)]
        runs = [
            (
                Run.of(queries[subset], notes[subset], list(range(n)), depth),
                Run.of(unrelated, notes[subset], [None] * len(unrelated), depth),
            )
            for subset in subsets
        ]
        for name, rule in chosen.items():
            figures = [evaluate(rule, *run) for run in runs]
            out[name][n] = {
                key: float(np.mean([f[key] for f in figures])) for key in ("recall@1", "far")
            }
    return out


def onnx_embed(model: str | None, cache: Path, quantize: str | None) -> tuple[Any, Any]:
    from apollo_adapters.embedders.onnx import OnnxEmbedder

    embedder = OnnxEmbedder(model, cache_dir=cache, quantize=quantize)

    def embed(texts: Sequence[str]) -> Vectors:
        return np.asarray(embedder.embed_sync(list(texts)), dtype=np.float32)

    return embedder, embed


def report(measured: Measured) -> str:
    rows = []
    for name, halves in measured.results.items():
        c, h = halves[CALIBRATION], halves[HELD_OUT]
        rows.append(
            [
                name,
                f"{c['recall@1']:.3f}",
                f"{c['recall@5']:.3f}",
                f"{c['far']:.3f}",
                f"{h['recall@1']:.3f}",
                f"{h['recall@5']:.3f}",
                f"{h['far']:.3f}",
            ]
        )
    return table(
        rows, ["rule", "calib r@1", "calib r@5", "calib FAR", "held r@1", "held r@5", "held FAR"]
    )


def small_report(measured: Measured) -> str:
    sizes = next(iter(measured.small.values()))
    rows = [
        [name, *(f"{f['recall@1']:.2f} / {f['far']:.3f}" for f in by_size.values())]
        for name, by_size in measured.small.items()
    ]
    return table(rows, ["rule (r@1 / FAR)", *(f"{n} notes" for n in sizes)])


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model folder (default: the packaged MiniLM)")
    parser.add_argument("--quantize", default=None, choices=["int8"])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/apollo-onnx"))
    parser.add_argument("--far", type=float, default=0.02, help="target false-accept rate")
    parser.add_argument("--backgrounds", type=int, nargs="+", default=[3, 5, 8, 10, 15])
    parser.add_argument(
        "--previous-floor", type=float, default=0.36, help="the fixed floor to compare with"
    )
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    data = LabelledSet.load()
    embedder, embed = onnx_embed(args.model, args.cache, args.quantize)
    measured = measure(embed, data, args.far, args.backgrounds, args.previous_floor)
    c = measured.constants
    print(f"model {embedder.model_id}; target FAR {args.far}; limit {LIMIT}")
    print(
        f"calibration store {measured.calibration_store} notes; held-out evaluated against all "
        f"{measured.full_store} notes"
    )
    print(
        table(
            [
                [
                    s["k"],
                    s["margin"],
                    f"{s['recall@1']:.3f}",
                    f"{s['recall@5']:.3f}",
                    f"{s['far']:.3f}",
                ]
                for s in c["sweep"]
            ],
            ["k", "margin", "calib r@1", "calib r@5", "calib FAR"],
        )
    )
    print(
        f"chosen: floor {c['floor']}, minimum {c['minimum']}, k {c['k']}, margin {c['margin']}, "
        f"union margin {c['union_margin']}"
    )
    print(report(measured))
    print("held-out, stores of a few held-out notes (100 random stores per size):")
    print(small_report(measured))
    payload = {
        "machine": machine(),
        "model": embedder.model_id,
        "far": args.far,
        "constants": c,
        "results": measured.results,
        "small_stores": measured.small,
    }
    print(write_json("relevance_rule", payload, args.output))
    return payload


if __name__ == "__main__":
    main()
