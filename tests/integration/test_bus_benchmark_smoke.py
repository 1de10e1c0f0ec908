"""The RabbitMQ transport benchmark runs end to end at its ``--quick`` size.

No timing is asserted: only that ``benchmarks/bus_bench.py``'s ``main`` completes against
the real broker and a real PostgreSQL server, writes its JSON with the expected keys,
stores every published ingest exactly once, and reports every figure as a positive number.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from benchmarks import bus_bench

from apollo_app import Settings
from tests.postgres_support import PostgresTestServer
from tests.rabbitmq_support import configured_url, ensure_broker

pytestmark = [pytest.mark.rabbitmq, pytest.mark.postgres]


def positive(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def test_bus_bench_quick_reports_every_figure(
    tmp_path: Path, postgres_server: PostgresTestServer
) -> None:
    """Publishing alone (raw aiormq, store_many sequential and pipelined), raw aiormq
    publish+consume, direct store, 1 service with and without group commit and 2 service
    processes, RPC and direct query latency, lone-message latency under load: all
    measured, every message queued or stored once, every service stopped cleanly."""
    ensure_broker(configured_url())
    result = bus_bench.main(
        [
            "--quick",
            "--amqp-url",
            configured_url(),
            "--admin-url",
            postgres_server.admin_conninfo,
            "--output",
            str(tmp_path),
        ]
    )

    written = json.loads((tmp_path / "bus_quick.json").read_text())
    assert {
        "name",
        "command",
        "machine",
        "broker",
        "server",
        "config",
        "publish",
        "ingest",
        "query",
    } <= set(written)
    assert "bus" == written["name"]
    assert result["config"] == written["config"]
    messages = written["config"]["messages"]
    publishing = written["publish"]
    assert {"raw_aiormq", "store_many_sequential", "store_many_pipelined"} == set(publishing)
    for path, figures in publishing.items():
        assert positive(figures["publish_per_s"]), path
        assert (messages, messages) == (figures["messages"], figures["queued"]), path
    ingest = written["ingest"]
    assert {
        "raw_aiormq",
        "direct_store",
        "store_ceiling",
        "services_1_unbatched",
        "services_1",
        "services_2",
    } <= set(ingest)
    raw, direct = ingest["raw_aiormq"], ingest["direct_store"]
    for key in ("publish_per_s", "messages_per_s", "seconds", "body_bytes_mean"):
        assert positive(raw[key]), key
    assert messages == raw["messages"]
    assert positive(direct["messages_per_s"])
    assert {"created": messages} == direct["outcomes"]
    ceiling = ingest["store_ceiling"]
    assert (messages, Settings().ingest_batch) == (ceiling["messages"], ceiling["batch"])
    for copy in ("one_transaction", "per_batch"):
        assert positive(ceiling[copy]["messages_per_s"]), copy
    for run, services in (("services_1_unbatched", 1), ("services_1", 1), ("services_2", 2)):
        figures = ingest[run]
        assert services == figures["services"]
        batch = 1 if run.endswith("unbatched") else Settings().ingest_batch
        assert batch == figures["ingest_batch"], run
        for key in ("messages_per_s", "publish_per_s", "seconds", "service_cpu_ms_per_message"):
            assert positive(figures[key]), (run, key)
        assert (messages, messages) == (figures["stored"], figures["ingest_log_rows"]), run
        assert (0, 0) == (figures["left_in_queue"], figures["dead_letters"]), run
        assert figures["left_unacknowledged"] in (0, None), run
        assert [0] * services == figures["exit_codes"], run
    query = written["query"]
    assert messages == query["store_size"]
    for path in ("remote_query_knowledge", "direct_query_knowledge", "bus_rpc_echo"):
        assert written["config"]["queries"] == query[path]["count"], path
        for stat in ("mean_ms", "p50_ms", "p95_ms"):
            assert positive(query[path][stat]), (path, stat)
    assert positive(query["remote_over_direct_p50"])
    assert query["results_returned"]["remote"] > 0
    assert query["results_returned"]["direct"] > 0
    lone = written["lone_latency"]
    assert {
        "services_1_unbatched_half_unbatched_load",
        "services_1_half_unbatched_load",
        "services_1_half_own_load",
    } == set(lone)
    for path, figures in lone.items():
        assert positive(figures["load_per_s"]) and positive(figures["load_messages"]), path
        assert figures["count"] >= 1, path
        for stat in ("p50_ms", "p95_ms"):
            assert positive(figures[stat]), (path, stat)
