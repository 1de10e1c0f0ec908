"""The judgement-lag benchmark runs end to end at its ``--quick`` size and reports every
figure (no timing is asserted)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from benchmarks import judgement_lag_bench


@pytest.mark.postgres
def test_judgement_lag_bench_quick_reports_the_lags_beside_the_ingest_rate(tmp_path: Path):
    judgement_lag_bench.main(["--quick", "--output", str(tmp_path)])

    written = json.loads((tmp_path / "judgement_lag_bench_quick.json").read_text())
    assert 300 == written["settings"]["messages"]
    for key in ("ingest_rate_per_s", "idle_lag_s", "loaded_lag_s", "outbox_empty_after_flood_s"):
        value = written[key]
        assert isinstance(value, float) and math.isfinite(value) and value > 0, key
    assert 0 <= written["backlog_at_pair"] <= 302
