"""The benchmarks run end to end at their ``--quick`` sizes and report every figure.

No timing is asserted: only that each script's ``main`` completes, writes its JSON with
the expected keys, and that every figure it reports is a positive number.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from benchmarks import (
    content_identity_bench,
    embedder_bench,
    embedder_choice_bench,
    hybrid_bench,
    ingest_recall_bench,
    load_bench,
    mcp_bench,
    memory_bench,
    model_ingest_bench,
    postgres_bench,
    query_cache_bench,
    relevance_floor_bench,
    relevance_rule_bench,
    retrieval_bench,
    text_bench,
    write_path_bench,
)

from tests.postgres_support import PostgresTestServer

ROOT = Path(__file__).resolve().parents[2]


def positive(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def test_memory_bench_quick_reports_every_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ingest rates, query latencies and the numpy baseline are all measured and written;
    the targets, set for 100,000 entries, get no verdict at the quick size."""
    result = memory_bench.main(["--quick", "--output", str(tmp_path)])
    printed = capsys.readouterr().out
    assert "targets are judged at full size only" in printed
    assert not re.search(r"\|\s*(yes|NO)\s*\|", printed), printed

    written = json.loads((tmp_path / "memory_bench_quick.json").read_text())
    assert {"name", "command", "machine", "config", "ingest", "query", "targets"} <= set(written)
    assert "memory_bench" == written["name"]
    ingest, query = written["ingest"], written["query"]
    for phase in ("single_first", "single_at_full_size", "bulk"):
        assert positive(ingest[phase]["entries_per_s"]), phase
        assert sum(ingest[phase]["outcomes"].values()) == ingest[phase]["entries"]
    assert ingest["bulk"]["entries"] == ingest["bulk"]["outcomes"].get("created", 0)
    for path in ("query_knowledge", "store_nearest", "numpy_top10", "embed"):
        for stat in ("mean_ms", "p50_ms", "p95_ms"):
            assert positive(query[path][stat]), (path, stat)
    assert positive(query["query_over_numpy_p50"])
    assert query["results_returned"] > 0
    assert result["config"] == written["config"]


def test_text_bench_quick_reports_every_path_on_every_text(tmp_path: Path) -> None:
    """Every text path and both baselines are timed on every adversarial text and the prose
    reference, and the extraction target is evaluated."""
    result = text_bench.main(["--quick", "--chars", "20000", "--output", str(tmp_path)])

    written = json.loads((tmp_path / "text_bench_quick.json").read_text())
    assert written["ms"] == result["ms"]
    assert {*text_bench.UNITS, "prose (reference)"} == set(written["ms"])
    for kind, figures in written["ms"].items():
        assert {*text_bench.PATHS, *text_bench.BASELINES} == set(figures), kind
        for name, figure in figures.items():
            assert positive(figure), (kind, name)
            assert positive(written["wall_ms"][kind][name]), (kind, name)
    assert positive(written["targets"]["worst_extraction_ms"])
    assert isinstance(written["targets"]["met"], bool)


async def test_retrieval_bench_reports_recall_for_every_mode_and_kind(tmp_path: Path) -> None:
    """A small corpus, hashing embedder, in memory: every variant reports recall per kind."""
    result = await retrieval_bench.main(["--people", "4", "--no-model", "--output", str(tmp_path)])

    written = json.loads((tmp_path / "retrieval.json").read_text())
    run = written["runs"]["memory/hashing-384"]
    assert run == result["runs"]["memory/hashing-384"]
    assert 0 < run["stored"] <= written["notes"]
    for label, _, _ in retrieval_bench.VARIANTS:
        numbers = run[label]
        assert 0 <= numbers["recall@5"] <= numbers["recall@10"] <= 1, label
        assert set(retrieval_bench.KINDS) == set(numbers["by_kind"]), label
        assert 0 < numbers["p50_ms"] <= numbers["p95_ms"], label
    assert positive(run["lexical"]["recall@10"])
    assert positive(run["hybrid"]["recall@10"])


async def test_relevance_floor_bench_proposes_a_floor_no_higher_than_the_noise(
    tmp_path: Path,
) -> None:
    """The calibration reports both cosine distributions and a floor at most the chosen
    percentile of the unrelated maxima, whose recall cost is within the bound."""
    result = await relevance_floor_bench.main(
        ["--people", "4", "--unrelated", "20", "--no-model", "--output", str(tmp_path)]
    )

    written = json.loads((tmp_path / "relevance_floor.json").read_text())
    run = written["runs"]["hashing-384"]
    assert run == result["runs"]["hashing-384"]
    assert 0 < run["floor"] <= run["noise_floor"]
    recall = run["vector_recall@10"]
    assert 0 <= recall["no floor"] - recall["at floor"] <= 0.005
    assert 0.15 == run["declared_floor"]
    assert run["unrelated_max"]["p50"] <= run["unrelated_max"]["max"]


def test_relevance_rule_bench_derives_the_rule_minilm_declares(
    tmp_path: Path, onnx_cache: Path
) -> None:
    """The calibration half yields the constants apollo_adapters.embedders.floors declares
    for MiniLM, and every rule is reported on both halves."""
    from apollo_adapters.embedders.floors import model_relevance_floor, model_relevance_rule

    result = relevance_rule_bench.main(["--cache", str(onnx_cache), "--output", str(tmp_path)])

    written = json.loads((tmp_path / "relevance_rule.json").read_text())
    assert written["constants"] == result["constants"]
    constants = written["constants"]
    declared = model_relevance_rule("all-MiniLM-L6-v2")
    assert declared is not None
    assert model_relevance_floor("all-MiniLM-L6-v2") == constants["floor"]
    assert (
        declared["relevance_margin"],
        declared["relevance_background"],
        declared["relevance_minimum"],
        declared["relevance_single"],
        declared["relevance_growth"],
    ) == (
        constants["union_margin"],
        constants["k"],
        constants["minimum"],
        constants["single"],
        constants["growth"],
    )
    for name, halves in written["results"].items():
        assert {"calibration", "held_out"} == set(halves), name
        for figures in halves.values():
            assert 0 <= figures["recall@1"] <= figures["recall@5"] <= 1, name
            assert 0 <= figures["far"] <= 1, name
    assert 1.0 == written["results"]["none"]["held_out"]["far"]


def test_embedder_choice_bench_reports_every_figure(tmp_path: Path, onnx_cache: Path) -> None:
    """MiniLM fp32 and int8: recall with and without a rule, latency, throughput, size."""
    result = embedder_choice_bench.main(
        ["--cache", str(onnx_cache), "--repeats", "3", "--output", str(tmp_path)]
    )

    written = json.loads((tmp_path / "embedder_choice.json").read_text())
    assert written["rows"] == result["rows"]
    assert 2 == len(written["rows"])
    for row in written["rows"]:
        for key in ("query_p50_ms", "bulk_texts_per_s", "folder_bytes", "graph_bytes"):
            assert positive(row[key]), (row["model"], key)
        for rule in ("none", "calibrated", "declared"):
            assert 0 <= row[rule]["recall@1"] <= row[rule]["recall@5"] <= 1, row["model"]


@pytest.mark.postgres
def test_postgres_bench_quick_reports_every_figure(
    tmp_path: Path, postgres_server: PostgresTestServer
) -> None:
    """Query, recall, ingest and decay figures are measured beside their raw-SQL baselines."""
    postgres_bench.main(
        ["--quick", "--admin-url", postgres_server.admin_conninfo, "--output", str(tmp_path)]
    )

    written = json.loads((tmp_path / "postgres_bench_quick.json").read_text())
    assert {"load", "query", "recall", "ingest", "decay", "server", "targets"} <= set(written)
    query, recall = written["query"], written["recall"]
    for path in ("query_knowledge", "raw_sql", "embed"):
        for stat in ("mean_ms", "p50_ms", "p95_ms"):
            assert positive(query[path][stat]), (path, stat)
    for key in (
        "adapter_unfiltered",
        "adapter_filtered_private_1pct",
        "raw_sql_unfiltered",
        "raw_sql_filtered_iterative_scan",
    ):
        assert 0 < recall[key] <= 1, key
    ingest = written["ingest"]
    for key in (
        "store_knowledge_per_s",
        "store_many_per_s",
        "raw_insert_per_row_tx_per_s",
        "raw_executemany_one_tx_per_s",
        "raw_copy_one_tx_per_s",
    ):
        assert positive(ingest[key]), key
    assert ingest["entries"] == ingest["store_knowledge_outcomes"].get("created", 0)
    decay = written["decay"]
    assert positive(decay["decay_cycle_median_s"]) and positive(decay["raw_update_median_s"])
    assert decay["entries"] == decay["decay_outcomes"][0]["decayed"]
    for key in ("copy_seconds", "hnsw_build_seconds"):
        assert positive(written["load"][key]), key


@pytest.mark.postgres
def test_hybrid_bench_reports_every_path_and_ratio(tmp_path: Path) -> None:
    """A tiny load: every query path has latencies and results, the graph was written, and
    both ingest variants stored entries."""
    argv = ["--quick", "--entries", "300", "--people", "40", "--queries", "8"]
    result = hybrid_bench.main(
        [*argv, "--ingest", "40", "--chunk", "10", "--output", str(tmp_path)]
    )

    written = json.loads((tmp_path / "hybrid_bench_quick.json").read_text())
    assert written["query"] == result["query"]
    load, query, ingest = written["load"], written["query"], written["ingest"]
    assert positive(load["entities"]) and positive(load["edges"]) and positive(load["mentions"])
    for path in hybrid_bench.PATHS:
        assert positive(query["latency"][path]["p50_ms"]), path
        assert positive(query["results_returned"][path]), path
    assert positive(query["hybrid_over_vector_p50"])
    assert positive(query["lexical_over_raw_ts_rank_p50"])
    assert set(hybrid_bench.STAGES) == set(query["stages"]["hybrid"])
    assert {"embed", "vector", "fuse", "read winners", "boost"} == set(query["stages"]["vector"])
    for stages in query["stages"].values():
        for stage in stages.values():
            assert stage["count"] >= 1 and stage["p95_ms"] >= stage["p50_ms"] >= 0
    assert positive(ingest["entries"]["extraction"]) and positive(ingest["entries"]["none"])
    assert positive(ingest["extraction_over_none"])


@pytest.mark.postgres
def test_write_path_bench_quick_counts_statements_per_entry(tmp_path: Path) -> None:
    """Apollo's ingest paths and the raw baselines are each timed and their statements
    counted on the bench's own embedded server (pg_stat_statements loaded)."""
    write_path_bench.main(["--quick", "--output", str(tmp_path)])

    written = json.loads((tmp_path / "write_path_bench_quick.json").read_text())
    assert written["statements_counted"]
    phases = {p["phase"]: p for p in written["phases"]}
    assert {
        "store_many",
        "store_knowledge",
        "raw binary COPY, 1 tx",
        "raw nearest top-5 SELECT + INSERT, 1 tx/row",
        "raw nearest top-5 SELECT at ef_search 64 + INSERT, 1 tx/row",
        "raw nearest top-5 SELECT at ef_search 100 + INSERT, 1 tx/row",
        "raw one-row INSERT, 1 tx/row",
    } == set(phases)
    for name, phase in phases.items():
        for key in ("entries_per_s", "ms_per_entry", "statements_per_entry"):
            assert positive(phase[key]), (name, key)
    for name in ("store_many", "store_knowledge"):
        assert written["config"]["entries"] == phases[name]["entries"]
        assert {"created": written["config"]["entries"]} == phases[name]["outcomes"]
        assert phases[name]["top_statements"], name
    # autocommit: one statement a row; BEGIN, SELECT, INSERT and COMMIT with the nearest SELECT
    assert 1.0 == phases["raw one-row INSERT, 1 tx/row"]["statements_per_entry"]
    assert 4.0 == phases["raw nearest top-5 SELECT + INSERT, 1 tx/row"]["statements_per_entry"]


@pytest.mark.postgres
def test_ingest_recall_bench_quick_compares_every_breadth_with_the_exact_neighbours(
    tmp_path: Path,
) -> None:
    """Each breadth's single and batched searches are scored against the exact neighbours
    at every threshold; the paraphrases have neighbours above the lowest one."""
    ingest_recall_bench.main(["--quick", "--output", str(tmp_path)])

    written = json.loads((tmp_path / "ingest_recall_bench_quick.json").read_text())
    assert [40, 64] == [point["ef_search"] for point in written["sweep"]]
    for point in written["sweep"]:
        assert positive(point["single_ms_per_text"]) and positive(point["bulk_ms_per_text"])
        for path in ("single", "bulk"):
            rows = point[path]["by_threshold"]
            assert list(ingest_recall_bench.THRESHOLDS) == [r["threshold"] for r in rows]
            assert 0 < rows[0]["texts"] <= written["config"]["texts"]
            for row in rows:
                assert 0 <= row["found"] <= row["neighbours"]
                assert 0 <= row["highest_right"] <= row["texts"]


@pytest.mark.postgres
def test_model_ingest_bench_reports_both_rates(tmp_path: Path) -> None:
    """The bundled model embeds the texts alone, then store_many stores them through it,
    and so does apollo ingest's path."""
    result = model_ingest_bench.main(["--entries", "24", "--chunk", "8", "--output", str(tmp_path)])

    written = json.loads((tmp_path / "model_ingest_bench.json").read_text())
    assert written["ratio"] == result["ratio"]
    assert positive(written["model_texts_per_s"]) and positive(written["store_many_texts_per_s"])
    assert positive(written["apollo_ingest_texts_per_s"])
    assert 24 == written["entries_stored"]
    assert positive(written["ratio"]) and positive(written["apollo_ingest_over_store_many"])


def test_query_cache_bench_times_both_passes(tmp_path: Path) -> None:
    """Each question is asked twice: the embed stage and the query are timed each pass."""
    result = query_cache_bench.main(
        ["--embedder", "hashing", "--queries", "6", "--people", "4", "--output", str(tmp_path)]
    )

    written = json.loads((tmp_path / "query_cache_bench.json").read_text())
    assert written["query_p50_hit_over_miss"] == result["query_p50_hit_over_miss"]
    for name in ("miss", "hit"):
        assert 6 == written[name]["query"]["count"] == written[name]["embed"]["count"]
        assert positive(written[name]["query"]["p50_ms"])
    assert positive(written["query_p50_hit_over_miss"])


@pytest.mark.postgres
def test_load_bench_quick_reports_every_level_without_errors() -> None:
    """One request at a time, then 10, 50 and 200 clients: each level's rate and
    percentiles are measured, and no request failed."""
    result = load_bench.run_quick()

    assert [10, 50, 200] == [level["concurrency"] for level in result["levels"]]
    for level in (result["single"], *result["levels"]):
        for figure in ("requests_per_second", "p50_ms", "p95_ms", "p99_ms"):
            assert positive(level[figure]), figure
        assert 0 == level["errors"], result["failures"]
    assert positive(result["target"]["bound_ms"])


def test_embedder_bench_quick_reports_every_runtime(tmp_path: Path, onnx_cache: Path) -> None:
    """PyTorch, ONNX fp32 and ONNX int8 are each timed on queries and in bulk, and compared
    with PyTorch's vectors; the targets get a verdict."""
    result = embedder_bench.main(
        ["--quick", "--threads", "1", "--cache", str(onnx_cache), "--output", str(tmp_path)]
    )

    written = json.loads((tmp_path / "embedder_bench_quick.json").read_text())
    assert written["runtimes"] == result["runtimes"]
    assert 1 == written["threads"]
    assert set(embedder_bench.RUNTIMES) == set(written["runtimes"])
    for name, figures in written["runtimes"].items():
        assert positive(figures["bulk_texts_per_s"]), name
        assert positive(figures["bulk_over_pytorch"]), name
        for stat in ("p50_ms", "p95_ms"):
            assert positive(figures["query"][stat]), (name, stat)
        assert 0.95 <= figures["cosine_min"] <= figures["cosine_mean"] <= 1.0 + 1e-6, name
    assert {"onnx_fp32_query_met", "onnx_fp32_bulk_met"} <= set(written["targets"])
    assert {"onnx_int8_query_met", "onnx_int8_bulk_met"} <= set(written["targets"])
    assert all(isinstance(flag, str) for flag in written["machine"]["cpu_flags"])
    bound = written["int8_bound"]
    assert positive(bound["product_gmacs_fp32"])
    assert positive(bound["product_gmacs_int8"])
    assert 0.0 < bound["weight_product_share_fp32"] <= 1.0
    # Amdahl's law: only the weight products get faster, by the products' own speed-up
    expected = 1.0 / (
        1.0
        - bound["weight_product_share_fp32"]
        + bound["weight_product_share_fp32"] / bound["product_int8_over_fp32"]
    )
    assert expected == pytest.approx(bound["int8_over_fp32_bulk_at_most"])
    assert bound["int8_over_pytorch_bulk_at_most"] == pytest.approx(
        expected * written["runtimes"]["onnx-fp32"]["bulk_over_pytorch"]
    )


def test_content_identity_bench_quick_reports_both_figures_for_every_input() -> None:
    figures = content_identity_bench.main(["--quick"])
    assert 3 == len(figures)
    assert all(positive(v) for row in figures.values() for v in row.values())


def test_mcp_bench_quick_reports_both_edges_for_both_calls_in_both_eras() -> None:
    """Each call as an MCP tool call and as an HTTP API call, taking turns on one server:
    both edges' percentiles and their ratio are measured (no verdict asserted)."""
    result = mcp_bench.run_quick()

    measured = [(row["era"], row["call"]) for row in result["results"]]
    calls = ("store_knowledge", "query_knowledge")
    assert [(era, call) for era in ("auto", "legacy") for call in calls] == measured
    for row in result["results"]:
        for edge in ("mcp", "http"):
            assert 10 == row[edge]["count"]
            assert positive(row[edge]["p50_ms"]) and positive(row[edge]["p95_ms"])
        assert positive(row["p50_ratio"])
    assert 3 == len(result["machine"]["load_average_before"])


def test_flood_bench_prints_every_mode_before_and_after(capsys: pytest.CaptureFixture[str]) -> None:
    """In memory, a flood of 60: a line per flood shape and mode, the flood's share after
    fair pages at most 4 of 10."""
    from benchmarks import flood_bench

    flood_bench.main(["--no-postgres", "--flood", "60"])

    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert 6 == len(rows)
    assert {"hybrid", "vector", "lexical"} == {row[2] for row in rows}
    assert all(int(row[6].split("/")[0]) <= 4 for row in rows), rows


def test_reach_bench_quick_reports_recall_per_kind_and_p50_for_every_method() -> None:
    from benchmarks import reach_bench

    args = reach_bench.parse(["--quick"])
    result = asyncio.run(reach_bench.run(args))
    assert set(reach_bench.METHODS) == set(result["methods"])
    for figures in result["methods"].values():
        assert set(reach_bench.KINDS) == set(figures["recall_at_10"])
        assert all(0 <= r <= 1 for r in figures["recall_at_10"].values())
        assert set(reach_bench.KINDS) == set(figures["hit_at_1"])
        assert positive(figures["query_p50_ms"])
    # only the day tells a temporal question's two statements apart
    cued = result["methods"]["hybrid"]["hit_at_1"]["temporal"]
    assert cued > result["methods"]["no temporal"]["hit_at_1"]["temporal"]
    assert "neighbours" in reach_bench.report(result)


@pytest.mark.parametrize("figure", ["none", "vector", "hybrid", "store_knowledge"])
def test_instruction_figures_run_each_figure(figure: str) -> None:
    """What ``compare.py --instructions`` counts under callgrind runs as a plain program
    (the count itself needs valgrind and minutes: the benchmarks page has the figures)."""
    done = subprocess.run(
        [sys.executable, "benchmarks/instruction_figures.py", f"--figure={figure}", "--count=2"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert 0 == done.returncode, done.stderr[-2000:]


@pytest.mark.postgres
def test_write_rate_bench_quick_times_a_write_with_and_without_its_charge() -> None:
    from benchmarks import write_rate_bench

    result = asyncio.run(write_rate_bench.run(write_rate_bench.parse(["--quick"])))
    assert {"uncharged", "charged", "charge alone"} == set(result["p50_ms"])
    assert all(positive(v) for v in result["p50_ms"].values())
    assert positive(result["ratio_charged_to_uncharged"])
