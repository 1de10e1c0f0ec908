"""Seconds per test folder (and the slowest tests) from a pytest --junitxml report.

    python scripts/junit_folders.py report.xml               # seconds per folder
    python scripts/junit_folders.py report.xml --slowest 20  # also the 20 slowest tests
    python scripts/junit_folders.py before.xml after.xml     # two runs side by side

A test's time is its setup, call and teardown (what junitxml records as its ``time``); a
folder's is the sum over its tests, by file path (``tests/integration``, ``tests/unit``...).
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Sequence
from pathlib import PurePosixPath


def test_times(path: str) -> dict[str, float]:
    """{test id: seconds} of a junitxml report."""
    times: dict[str, float] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "")
        # classname is dotted (tests.unit.test_x or tests.unit.test_x.TestClass)
        parts = module.split(".")
        cut = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
        file = "/".join(parts[: cut + 1]) + ".py"
        test = "::".join([file, *parts[cut + 1 :], case.get("name", "")])
        times[test] = times.get(test, 0.0) + float(case.get("time") or 0.0)
    return times


def folder_of(test: str, depth: int) -> str:
    return str(PurePosixPath(*PurePosixPath(test.split("::")[0]).parts[:depth]))


def by_folder(times: dict[str, float], depth: int) -> dict[str, tuple[float, int]]:
    total: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for test, seconds in times.items():
        total[folder_of(test, depth)] += seconds
        count[folder_of(test, depth)] += 1
    return {k: (total[k], count[k]) for k in total}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", help="one junitxml report, or two to compare")
    parser.add_argument("--depth", type=int, default=2, help="path parts of a folder (2)")
    parser.add_argument("--slowest", type=int, default=0, help="also list the N slowest tests")
    parser.add_argument("--files", action="store_true", help="per test file, not folder")
    args = parser.parse_args(argv)
    if len(args.reports) > 2:
        parser.error("give one report, or two to compare")
    runs = [test_times(path) for path in args.reports]
    depth = 99 if args.files else args.depth
    folders = [by_folder(times, depth) for times in runs]
    names = sorted(set().union(*folders), key=lambda k: -folders[-1].get(k, (0.0, 0))[0])
    header = (
        "| folder | tests | seconds |"
        if len(runs) == 1
        else ("| folder | tests | seconds before | seconds after | after / before |")
    )
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for name in names:
        cells = [f"{folders[0].get(name, (0.0, 0))[1]}"]
        seconds = [f.get(name, (0.0, 0))[0] for f in folders]
        cells += [f"{s:.1f}" for s in seconds]
        if len(runs) == 2:
            cells[0] = f"{folders[0].get(name, (0, 0))[1]} → {folders[1].get(name, (0, 0))[1]}"
            cells.append(f"{seconds[1] / seconds[0]:.2f}" if seconds[0] else "")
        print(f"| {name} | " + " | ".join(cells) + " |")
    totals = [sum(times.values()) for times in runs]
    print(
        f"| total | {' → '.join(str(len(t)) for t in runs)} | "
        + " | ".join(f"{t:.1f}" for t in totals)
        + (f" | {totals[1] / totals[0]:.2f} |" if len(runs) == 2 and totals[0] else " |")
    )
    if args.slowest:
        print()
        print("| seconds | test |")
        print("| --- | --- |")
        for test, seconds in sorted(runs[-1].items(), key=lambda kv: -kv[1])[: args.slowest]:
            print(f"| {seconds:.2f} | {test} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
