"""MCP tool calls over streamable HTTP beside the same calls over the HTTP API, on one
server in one run: p50/p95 of ``store_knowledge`` and ``query_knowledge``.

Run from the repository root::

    PYTHONPATH=src:. .venv/bin/python benchmarks/mcp_bench.py            # full size
    PYTHONPATH=src:. .venv/bin/python benchmarks/mcp_bench.py --quick    # smoke run

The server is ``apollo serve``'s HTTP server (``serve_http``: bearer tokens, admission
sized from the pool, ``/mcp`` mounted beside ``/api/apollo``) in this process, on an
embedded PostgreSQL + pgvector server in a temporary folder, with the hashing embedder,
seeded with ``--seed`` entries. One writer token makes every call. The MCP calls go through
the SDK's own client (``mcp.Client`` over ``streamable_http_client``, the protocol version
it negotiates by default, and also the 2025-11-25 handshake era), the HTTP calls through
the same HTTP client library (``httpx2``) on a kept-alive connection: ``POST /ingest`` of a
new text, ``POST /query`` of a seeded text. The two edges take turns call by call (which
goes first alternates), so both see the same store, the same load and the same noise.
Latency is ``time.perf_counter`` around each call as its caller sees it (the SDK's client
parses and checks the result against the tool's output schema; the HTTP baseline parses
the JSON body).

Target: MCP p50 at most 1.3 x the HTTP API's p50, for each call. The results go to
``benchmarks/results/mcp_bench.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from apollo_app import Apollo, Settings
from apollo_app.entrypoints.http import listen, serve_http
from benchmarks._common import (
    COMPARISON_HEADER,
    RESULTS,
    TextGenerator,
    comparison_row,
    embedded_database,
    machine,
    summary_ms,
    table,
)

API = "/api/apollo"
TOKEN = "mcp-bench-writer"
TOKENS = {TOKEN: "bench:writer"}
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
TARGET_RATIO = 1.3
ERAS = {"auto": "negotiated (2026-07-28)", "legacy": "2025-11-25 handshake"}

Call = Callable[[], Awaitable[None]]


@asynccontextmanager
async def serving(conninfo: str) -> AsyncIterator[tuple[Apollo, str]]:
    """Apollo on ``conninfo``, served as ``apollo serve`` serves it; yields its base URL."""
    settings = Settings(
        embedder="hashing",
        database_url=conninfo,
        api_tokens=TOKENS,
        # charged as always, but past this benchmark's own writes: it measures serving
        write_rate=1_000_000.0,
        http_host="127.0.0.1",
        http_port=0,
    )
    async with Apollo.open(settings) as apollo:
        sock = listen("127.0.0.1", 0)
        port = sock.getsockname()[1]
        ready = asyncio.Event()
        task = asyncio.create_task(serve_http(apollo, settings, None, ready=ready, sock=sock))
        try:
            await asyncio.wait_for(ready.wait(), timeout=60)
            yield apollo, f"http://127.0.0.1:{port}"
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task


async def seed(url: str, texts: Sequence[str]) -> None:
    async with httpx2.AsyncClient(base_url=url, headers=HEADERS, timeout=60) as http:
        for start in range(0, len(texts), 200):
            for text in texts[start : start + 200]:
                response = await http.post(f"{API}/ingest", json={"content": text})
                response.raise_for_status()


async def timed(call: Call) -> float:
    started = time.perf_counter()
    await call()
    return time.perf_counter() - started


async def compare(
    name: str, mcp_call: Callable[[int], Call], http_call: Callable[[int], Call], count: int
) -> dict[str, Any]:
    """``count`` calls of each edge, taking turns; the first of each pair alternates."""
    mcp: list[float] = []
    http: list[float] = []
    for i in range(count):
        pair = [(mcp, mcp_call(i)), (http, http_call(i))]
        for seen, call in pair if i % 2 == 0 else pair[::-1]:
            seen.append(await timed(call))
    mcp_ms, http_ms = summary_ms(mcp), summary_ms(http)
    ratio = mcp_ms["p50_ms"] / http_ms["p50_ms"]
    return {
        "call": name,
        "mcp": mcp_ms,
        "http": http_ms,
        "p50_ratio": ratio,
        "p95_ratio": mcp_ms["p95_ms"] / http_ms["p95_ms"],
        "met": ratio <= TARGET_RATIO,
    }


async def measure_era(
    url: str, mode: str, texts: TextGenerator, queries: Sequence[str], count: int, warmup: int
) -> list[dict[str, Any]]:
    async with (
        httpx2.AsyncClient(headers=HEADERS, timeout=60) as mcp_http,
        httpx2.AsyncClient(base_url=url, headers=HEADERS, timeout=60) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=mcp_http), mode=mode) as client,
    ):
        await client.list_tools()  # the client checks results against the output schemas
        new = texts.texts(2 * (count + warmup))

        def mcp_store(i: int) -> Call:
            async def call() -> None:
                result = await client.call_tool("store_knowledge", {"content": new[2 * i]})
                assert not result.is_error, result

            return call

        def http_store(i: int) -> Call:
            async def call() -> None:
                response = await http.post(f"{API}/ingest", json={"content": new[2 * i + 1]})
                assert response.status_code in (200, 201), response.text
                response.json()

            return call

        def mcp_query(i: int) -> Call:
            async def call() -> None:
                arguments = {"query": queries[i % len(queries)], "limit": 10}
                result = await client.call_tool("query_knowledge", arguments)
                assert not result.is_error, result

            return call

        def http_query(i: int) -> Call:
            async def call() -> None:
                body = {"query": queries[i % len(queries)], "limit": 10}
                response = await http.post(f"{API}/query", json=body)
                assert response.status_code == 200, response.text
                response.json()

            return call

        for i in range(warmup):  # connections, caches, the first plans
            for call in (mcp_store(count + i), http_store(count + i), mcp_query(i), http_query(i)):
                await call()
        return [
            {"era": mode, **await compare("store_knowledge", mcp_store, http_store, count)},
            {"era": mode, **await compare("query_knowledge", mcp_query, http_query, count)},
        ]


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="calls of each kind per edge")
    parser.add_argument("--seed", type=int, default=2000, help="entries stored before the run")
    parser.add_argument("--quick", action="store_true", help="a smoke run (small sizes)")
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.seed = 10, 20
    return args


async def run(args: argparse.Namespace) -> dict[str, Any]:
    texts = TextGenerator(seed=11)
    seeded = texts.texts(args.seed)
    queries = [" ".join(text.split()[:4]) for text in seeded[:: max(1, len(seeded) // 100)]]
    load = os.getloadavg()
    async with embedded_database("mcp") as conninfo, serving(conninfo) as (_, url):
        await seed(url, seeded)
        rows = []
        for mode in ERAS:
            rows.extend(await measure_era(url, mode, texts, queries, args.calls, warmup=10))
    return {
        "benchmark": "mcp_bench",
        "command": "PYTHONPATH=src:. .venv/bin/python benchmarks/mcp_bench.py"
        + (" --quick" if args.quick else ""),
        "machine": {
            **machine(),
            "load_average_before": load,
            "load_average_after": os.getloadavg(),
        },
        "settings": {"calls": args.calls, "seed_entries": args.seed, "embedder": "hashing"},
        "results": rows,
        "target": {"p50_ratio_at_most": TARGET_RATIO, "met": all(row["met"] for row in rows)},
    }


def run_quick() -> dict[str, Any]:
    """The ``--quick`` run's result (nothing written)."""
    return asyncio.run(run(parse(["--quick"])))


def report(result: dict[str, Any]) -> str:
    rows = []
    for row in result["results"]:
        label = f"{row['call']} p50 ms, {ERAS[row['era']]}"
        rows.append(
            comparison_row(
                label,
                row["mcp"]["p50_ms"],
                row["http"]["p50_ms"],
                f"<= {TARGET_RATIO} x HTTP",
                row["met"],
            )
        )
        rows.append(
            comparison_row(
                f"{row['call']} p95 ms, {ERAS[row['era']]}",
                row["mcp"]["p95_ms"],
                row["http"]["p95_ms"],
                "",
                None,
            )
        )
    header = ("measurement", "MCP", "HTTP API", "ratio", "target", "met")
    assert len(header) == len(COMPARISON_HEADER)
    before, after = (
        result["machine"]["load_average_before"],
        result["machine"]["load_average_after"],
    )
    load = f"load average (1, 5, 15 min) before {before}, after {after}"
    return table(rows, header) + "\n\n" + load


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    result = asyncio.run(run(args))
    print(report(result))
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "mcp_bench.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
