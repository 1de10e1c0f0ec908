"""Text paths on adversarial texts at the 100,000-character content bound.

Run from the repository root::

    PYTHONPATH=src:. .venv/bin/python benchmarks/text_bench.py            # 5 repeats
    PYTHONPATH=src:. .venv/bin/python benchmarks/text_bench.py --quick    # smoke run, < 30 s

Each text is one short unit repeated to ``--chars`` characters (100,000, the content
bound), then ``x``: the runs that made backtracking patterns quadratic (commas, dashes,
dots, apostrophes, quotes, letter-dash and digit-dot alternations, capitalized words, stop
words, scheme and e-mail characters, underscores, capitalized words opening sentences),
plus ordinary prose of the same length for reference. Every text path an agent's text goes
through reads each of them: entity extraction, GAS entity names, content identity
(``content_hash``), lexical terms (``occurrences``), the hashing embedder
(``embed_sync``), redaction and the contradiction heuristic (the text against ``"not "`` +
the text, so it reads 200,000 characters). Each run reads a new text (its last characters
changed), so that no path answers from a cache.

Beside them, two baselines over the same text in the same run: ``str.split`` (C, one pass)
and a one-pass regular-expression tokenization (``re.findall(r"\\w+|[^\\w\\s]+", text)``),
the least any reader of the text's words must do. Each figure is the median of ``--repeats``
runs of the CPU time the process spent (``time.process_time``): on a shared machine, wall
time measures the neighbours too (it is written to the JSON beside, ``wall_ms``).

Target: extraction of each 100,000-character adversarial text ≤ 100 ms.
Writes ``benchmarks/results/text_bench.json`` (``--quick``: ``text_bench_quick.json``).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from apollo_adapters.embedders import HashingEmbedder
from apollo_adapters.heuristics import extract_entities
from apollo_domain.contradiction import heuristic_contradicts
from apollo_domain.gas_rules import extract_entities as gas_entity_names
from apollo_domain.lexical import occurrences
from apollo_domain.normalize import MAX_CONTENT_CHARS, content_hash
from apollo_domain.secrets import redact
from benchmarks._common import (
    ADVERSARIAL_UNITS,
    TextGenerator,
    fmt,
    machine,
    median,
    table,
    write_json,
)

UNITS = ADVERSARIAL_UNITS
EXTRACTION_TARGET_MS = 100.0
_TOKENS = re.compile(r"\w+|[^\w\s]+")
_EMBEDDER = HashingEmbedder()

PATHS: dict[str, Callable[[str], object]] = {
    "extraction": extract_entities,
    "GAS entity names": lambda text: gas_entity_names([text]),
    "content identity": content_hash,
    "lexical terms": occurrences,
    "hashing embedder": lambda text: _EMBEDDER.embed_sync([text]),
    "redaction": redact,
    "contradiction heuristic": lambda text: heuristic_contradicts(text, "not " + text),
}
BASELINES: dict[str, Callable[[str], object]] = {
    "baseline str.split": str.split,
    "baseline one-pass regex tokens": _TOKENS.findall,
}


def texts(chars: int, seed: int) -> dict[str, str]:
    """The adversarial texts and a prose text, each ``chars`` characters long."""
    found = {
        name: (unit * (chars // len(unit) + 1))[: chars - 1] + "x" for name, unit in UNITS.items()
    }
    generator = TextGenerator(seed)
    prose: list[str] = []
    length = 0
    while length < chars:
        prose.append(generator.text())
        length += len(prose[-1]) + 1
    found["prose (reference)"] = " ".join(prose)[:chars]
    return found


def timed_ms(function: Callable[[str], object], text: str, repeats: int) -> tuple[float, float]:
    """Median CPU and wall milliseconds of ``function`` over ``text`` (its last characters
    changed run by run)."""
    cpu, wall = [], []
    for repeat in range(repeats):
        tag = f"x{repeat}"  # a new text each run: no path may answer from a cache
        variant = text[: -len(tag)] + tag
        started, started_cpu = time.perf_counter(), time.process_time()
        function(variant)
        cpu.append(time.process_time() - started_cpu)
        wall.append(time.perf_counter() - started)
    return median(cpu) * 1000.0, median(wall) * 1000.0


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=MAX_CONTENT_CHARS)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="one repeat (smoke run)")
    parser.add_argument("--output", type=Path, default=None, help="results folder")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats = 1
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    measured: dict[str, dict[str, float]] = {}
    wall: dict[str, dict[str, float]] = {}
    for kind, text in texts(args.chars, args.seed).items():
        measured[kind], wall[kind] = {}, {}
        for name, function in {**PATHS, **BASELINES}.items():
            measured[kind][name], wall[kind][name] = timed_ms(function, text, args.repeats)
    adversarial = [kind for kind in measured if kind in UNITS]
    worst = max(measured[kind]["extraction"] for kind in adversarial)
    return {
        "name": "text_bench",
        "command": "PYTHONPATH=src:. .venv/bin/python benchmarks/text_bench.py"
        + (" --quick" if args.quick else ""),
        "machine": machine(),
        "config": {"chars": args.chars, "repeats": args.repeats, "seed": args.seed},
        "ms": measured,
        "wall_ms": wall,
        "targets": {
            "extraction_ms_max": EXTRACTION_TARGET_MS,
            "worst_extraction_ms": worst,
            "met": worst <= EXTRACTION_TARGET_MS,
        },
        "wall_seconds": time.perf_counter() - started,
    }


def report(result: dict[str, Any]) -> str:
    columns = [*PATHS, *BASELINES]
    rows = [[kind, *(figures[name] for name in columns)] for kind, figures in result["ms"].items()]
    targets = result["targets"]
    lines = [
        f"- {result['config']['chars']:,} characters per text, CPU milliseconds, median of "
        f"{result['config']['repeats']} run(s)",
        f"- worst extraction of an adversarial text: {fmt(targets['worst_extraction_ms'])} ms"
        f" (target ≤ {fmt(targets['extraction_ms_max'])} ms: "
        f"{'met' if targets['met'] else 'NOT met'})",
        f"- wall time {result['wall_seconds']:.1f} s",
    ]
    return table(rows, ["text", *columns]) + "\n\n" + "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    result = run(args)
    name = "text_bench_quick" if args.quick else "text_bench"
    path = write_json(name, result, args.output)
    print(report(result))
    print(f"\nwritten to {path}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
