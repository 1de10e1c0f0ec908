"""Cold start of the default embedder: ``apollo query`` in a fresh process, against the model alone.

With the graph already built (the first ``apollo ingest`` builds it into the store's
``onnx`` folder), each run starts a new process and times, wall clock:

1. ``apollo query TEXT`` on a small embedded store (default settings: the packaged
   all-MiniLM-L6-v2 run by ONNX Runtime): imports, settings, the store, the model's
   session, one query embedding, the search and the printing;
2. the model alone: ``python -c`` importing the embedder, opening its ONNX Runtime
   session from the cached graph and embedding one sentence;
3. the interpreter alone (``python -c pass``), the floor under both.

Target: the cold ``apollo query`` ≤ 3 s (median)::

    PYTHONPATH=src:. .venv/bin/python benchmarks/cold_start_bench.py [--runs 5]

``--python`` times another installation (e.g. a plain ``pip install apollo-knowledge``
venv: its interpreter, its ``apollo``). Timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apollo_adapters.postgres.embedded import temporary_folder
from benchmarks._common import machine, median, table, write_json

TARGET_SECONDS = 3.0
NOTES = [
    "The cat sat on the mat",
    "The invoice is due at the end of the month",
    "Raft elects a leader by majority vote",
    "PostgreSQL keeps old row versions until VACUUM removes them",
]
QUERY = "when do we have to pay the bill"
MODEL_ALONE = (
    "import sys; from apollo_adapters.embedders.onnx import OnnxEmbedder;"
    " OnnxEmbedder(cache_dir=sys.argv[1]).embed_sync(['when do we have to pay the bill'])"
)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes timed per kind")
    parser.add_argument(
        "--python", type=Path, default=Path(sys.executable), help="the installation timed"
    )
    parser.add_argument("--quick", action="store_true", help="two runs: a smoke run")
    parser.add_argument("--output", type=Path, default=None, help="results folder")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs = 2
    return args


def timed(command: Sequence[str], environ: dict[str, str], stdin: str | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=environ, input=stdin, capture_output=True, text=True, check=True)
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    folder = temporary_folder("apollo-cold-")
    python = str(args.python)
    apollo = [python, "-m", "apollo_app.cli"]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("APOLLO_")}
    environ["APOLLO_DATA_DIR"] = str(folder / "store")
    if args.python != Path(sys.executable):  # another installation: its own code only
        environ.pop("PYTHONPATH", None)
    cache = folder / "store" / "onnx"
    try:
        notes = "".join(f'{{"content": "{note}"}}\n' for note in NOTES)
        first = timed([*apollo, "ingest", "-"], environ, notes)  # builds the graph
        runs: dict[str, list[float]] = {"apollo query": [], "model alone": [], "python": []}
        for _ in range(args.runs):
            runs["apollo query"].append(timed([*apollo, "query", QUERY], environ))
            runs["model alone"].append(timed([python, "-c", MODEL_ALONE, str(cache)], environ))
            runs["python"].append(timed([python, "-c", "pass"], environ))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    figures = {
        name: {"median_s": median(seconds), "max_s": max(seconds)} for name, seconds in runs.items()
    }
    cold = figures["apollo query"]["median_s"]
    command = "PYTHONPATH=src:. .venv/bin/python benchmarks/cold_start_bench.py"
    command += f" --runs {args.runs}" + (f" --python {python}" if python != sys.executable else "")
    result = {
        "command": command,
        "machine": {**machine(), "load_average": os.getloadavg()},
        "runs": args.runs,
        "first_ingest_with_graph_build_s": first,
        "figures": figures,
        "target_s": TARGET_SECONDS,
        "meets_target": cold <= TARGET_SECONDS,
    }
    rows = [[name, f["median_s"], f["max_s"]] for name, f in figures.items()]
    print(table(rows, ["fresh process", "median s", "max s"]))
    print(f"first apollo ingest (graph built): {first:.2f} s")
    verdict = "meets" if result["meets_target"] else "misses"
    print(f"cold apollo query {cold:.2f} s {verdict} the target of {TARGET_SECONDS:.0f} s")
    write_json("cold_start_bench_quick" if args.quick else "cold_start_bench", result, args.output)
    return result


if __name__ == "__main__":
    main()
