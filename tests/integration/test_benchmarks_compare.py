"""``benchmarks/compare.py`` end to end at tiny sizes, with A = B = HEAD: two temporary
worktrees, alternating rounds, the table and one history JSON. No timing is asserted
(A = B may still cross its noise band): only the format, and that the exit code says
whether a row was flagged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks.guard_figures import FIGURES

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_compare_head_with_itself_prints_every_figure_and_keeps_a_history(tmp_path: Path):
    before = subprocess.run(
        ["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "compare.py"),
            "HEAD",
            "HEAD",
            "--rounds=3",
            "--entries=30",
            "--queries=5",
            "--messages=10",
            f"--history={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("figure "))
    assert ["figure", "A", "median", "B", "median", "B/A", "slower", "band", "verdict"] == lines[
        header
    ].split()
    rows = {line.split()[0]: line.split() for line in lines[header + 1 : header + 1 + len(FIGURES)]}
    assert set(FIGURES) == set(rows)
    for cells in rows.values():
        assert all(float(cell) > 0 for cell in cells[1:5])
        assert cells[5].endswith("%") and cells[6] in ("ok", "REGRESSION")
    (saved,) = tmp_path.glob("*.json")
    document = json.loads(saved.read_text())
    assert document["a"]["commit"] == document["b"]["commit"]
    assert {"hostname", "cpu_count", "cpu_model"} <= set(document["machine"])
    assert all(len(row["a_rounds"]) == 3 == len(row["b_rounds"]) for row in document["results"])
    flagged = any(row["regressed"] for row in document["results"])
    assert done.returncode == (1 if flagged else 0)
    after = subprocess.run(
        ["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert before == after  # the temporary worktrees are gone
