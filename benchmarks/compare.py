"""Compare the key figures of two commits on this machine: a guard against performance
regressions.

Run from the repository root::

    .venv/bin/python benchmarks/compare.py v0.1.0 HEAD
    .venv/bin/python benchmarks/compare.py v0.1.0 HEAD --rounds 5 --entries 500

Both commits are checked out into temporary git worktrees (the caller's tree is never
touched), and ``benchmarks/guard_figures.py`` of *this* checkout runs in a subprocess for
each, with this interpreter (one venv) and ``PYTHONPATH`` at that worktree's ``src``: the
same measuring code meets both libraries. Rounds alternate (A B A B ...), so a change of
machine load falls on both sides alike. ``--instructions`` counts instead what one query
(vector, hybrid) and one ``store_knowledge`` cost in machine instructions, under valgrind's
callgrind (``benchmarks/instruction_figures.py``): the same count from run to run on a
busy machine, so one round and a 2 % band. Per figure the table shows A's median, B's
median, the ratio B/A (for a rate, A/B: above 1 is always slower) and a flag when the
slowdown exceeds the noise band: the relative spread of A's own rounds ((max - min) /
median), never less than ``--min-band``. One JSON per run goes to
``benchmarks/results/history/``, named by the two commits and the machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIGURES_SCRIPT = ROOT / "benchmarks" / "guard_figures.py"
INSTRUCTIONS_SCRIPT = ROOT / "benchmarks" / "instruction_figures.py"
#: What one figure's calls are counted over (``--instructions``).
INSTRUCTION_CALLS = 100
HISTORY = ROOT / "benchmarks" / "results" / "history"
#: The calls ``--instructions`` counts (``benchmarks/instruction_figures.py``).
INSTRUCTION_FIGURES = ("vector", "hybrid", "store_knowledge")
#: Figures where more is better (rates); the rest are latencies.
RATES = ("_per_s",)


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = platform.processor()
    return {
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "load_average_before": os.getloadavg(),
    }


def tree_env(tree: Path) -> dict[str, str]:
    """The environment a figures script runs in against ``tree``'s library: its ``src``
    first on the path (then this checkout, for the measuring code), a fixed hash seed."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tree / "src"), str(ROOT)]),
        "PYTHONHASHSEED": "0",
    }


def run_round(tree: Path, sizes: Sequence[str]) -> dict[str, float]:
    env = tree_env(tree)
    done = subprocess.run(
        [sys.executable, str(FIGURES_SCRIPT), *sizes],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"figures failed in {tree}:\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])["figures"]
    return figures


def instructions(tree: Path, figure: str) -> int:
    """The instructions callgrind counts for ``instruction_figures.py --figure figure``
    against ``tree``'s library."""
    env = tree_env(tree)
    # One BLAS thread: idle BLAS threads spin, and what they count depends on the
    # scheduler (identical runs differed by 1.5 billion instructions; with one, by 1.5 M).
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with tempfile.TemporaryDirectory(prefix="apollo-callgrind-") as scratch:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={scratch}/out",
                sys.executable,
                str(INSTRUCTIONS_SCRIPT),
                f"--figure={figure}",
                f"--count={INSTRUCTION_CALLS}",
            ],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind failed in {tree}:\n{done.stderr[-3000:]}")
    return int(found.group(1))


def instruction_round(tree: Path) -> dict[str, float]:
    """Each figure's instructions per call: its run's count less the run without calls,
    over the calls. A plain run first compiles the worktree's modules, so that no counted
    run pays for it."""
    subprocess.run(
        [sys.executable, str(INSTRUCTIONS_SCRIPT), "--figure=vector", "--count=1"],
        cwd=tree,
        env=tree_env(tree),
        capture_output=True,
        check=True,
    )
    base = instructions(tree, "none")
    return {
        f"{figure}_instructions_per_call": (instructions(tree, figure) - base) / INSTRUCTION_CALLS
        for figure in INSTRUCTION_FIGURES
    }


def slowdown(name: str, a: float, b: float) -> float:
    """How many times slower B is than A (above 1: slower), for a rate or a latency."""
    if name.endswith(RATES):
        return a / b if b else float("inf")
    return b / a if a else float("inf")


def spread(values: Sequence[float]) -> float:
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle else 0.0


def compare(
    rounds_a: list[dict[str, float]], rounds_b: list[dict[str, float]], min_band: float
) -> list[dict[str, Any]]:
    rows = []
    for name in rounds_a[0]:
        a_values = [r[name] for r in rounds_a]
        b_values = [r[name] for r in rounds_b]
        a, b = statistics.median(a_values), statistics.median(b_values)
        band = max(spread(a_values), min_band)
        slower = slowdown(name, a, b)
        rows.append(
            {
                "figure": name,
                "a_median": a,
                "b_median": b,
                "ratio_b_over_a": b / a if a else float("inf"),
                "slowdown": slower,
                "noise_band": band,
                "regressed": slower > 1 + band,
                "a_rounds": a_values,
                "b_rounds": b_values,
            }
        )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{'figure':32} {'A median':>12} {'B median':>12} {'B/A':>7} {'slower':>7} "
        f"{'band':>6}  verdict",
    ]
    for row in rows:
        verdict = "REGRESSION" if row["regressed"] else "ok"
        lines.append(
            f"{row['figure']:32} {row['a_median']:12.3f} {row['b_median']:12.3f} "
            f"{row['ratio_b_over_a']:7.3f} {row['slowdown']:7.3f} "
            f"{row['noise_band']:6.1%}  {verdict}"
        )
    return "\n".join(lines)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="the base commit (a tag, branch or hash)")
    parser.add_argument("b", help="the commit compared with it")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per side (at least 3)")
    parser.add_argument("--entries", type=int, default=300)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument(
        "--min-band", type=float, default=0.05, help="smallest noise band (a fraction)"
    )
    parser.add_argument("--history", type=Path, default=HISTORY, help="where the JSON goes")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count each call's instructions under valgrind (one round: counts repeat)",
    )
    args = parser.parse_args(argv)
    if args.instructions:
        if shutil.which("valgrind") is None:
            parser.error("--instructions: valgrind is not installed")
        args.rounds, args.min_band = 1, min(args.min_band, 0.02)
    elif args.rounds < 3:
        parser.error("--rounds: at least 3")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    commits = {
        side: git("rev-parse", "--verify", f"{ref}^{{commit}}")
        for side, ref in (("a", args.a), ("b", args.b))
    }
    sizes = [
        f"--entries={args.entries}",
        f"--queries={args.queries}",
        f"--messages={args.messages}",
    ]
    started = time.time()
    where = machine()
    with tempfile.TemporaryDirectory(prefix="apollo-compare-") as scratch:
        trees = {side: Path(scratch) / side for side in commits}
        try:
            for side, commit in commits.items():
                git("worktree", "add", "--detach", str(trees[side]), commit)
            rounds: dict[str, list[dict[str, float]]] = {"a": [], "b": []}
            for index in range(args.rounds):
                for side in ("a", "b"):
                    print(
                        f"round {index + 1}/{args.rounds}: {side.upper()} ({commits[side][:10]})",
                        file=sys.stderr,
                        flush=True,
                    )
                    tree = trees[side]
                    rounds[side].append(
                        instruction_round(tree) if args.instructions else run_round(tree, sizes)
                    )
        finally:
            for tree in trees.values():
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(tree)],
                    cwd=ROOT,
                    capture_output=True,
                    check=False,
                )
            subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True, check=False)
    rows = compare(rounds["a"], rounds["b"], args.min_band)
    how = (
        f"instructions per call under callgrind ({INSTRUCTION_CALLS} calls)"
        if args.instructions
        else f"{args.rounds} alternating rounds"
    )
    print(
        f"A = {args.a} ({commits['a'][:10]}), B = {args.b} ({commits['b'][:10]}); "
        f"{how}; {where['cpu_count']} CPUs, {where['cpu_model']}"
    )
    print("slower: B over A in time (A/B for a rate); band: spread of A's own rounds")
    print(table(rows))
    where["load_average_after"] = os.getloadavg()
    document = {
        "benchmark": "compare",
        "a": {"ref": args.a, "commit": commits["a"]},
        "b": {"ref": args.b, "commit": commits["b"]},
        "machine": where,
        "settings": {
            "rounds": args.rounds,
            "sizes": sizes,
            "instructions": args.instructions,
            "min_band": args.min_band,
            "store": "in-memory",
            "embedder": "hashing",
            "bus": "in-process",
        },
        "seconds": time.time() - started,
        "results": rows,
    }
    machine_key = hashlib.sha256(
        f"{where['hostname']}|{where['cpu_count']}|{where['cpu_model']}".encode()
    ).hexdigest()[:8]
    args.history.mkdir(parents=True, exist_ok=True)
    path = args.history / (
        f"{commits['a'][:10]}-{commits['b'][:10]}-{where['hostname']}-{machine_key}-"
        f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(started))}.json"
    )
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    print(f"history: {path}")
    return 1 if any(row["regressed"] for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
