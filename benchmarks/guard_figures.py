"""The key figures of one build, small and quick, as one JSON document on stdout: what
``benchmarks/compare.py`` measures on each of two commits.

Run from the repository root (``compare.py`` runs it with ``PYTHONPATH`` pointing at each
commit's ``src``, so the same measuring code meets both libraries)::

    PYTHONPATH=src:. .venv/bin/python benchmarks/guard_figures.py --entries 300 --queries 60

Everything runs in this process on the in-memory store with the hashing embedder (the
embedder is not what is compared), after an untimed warm-up store: query p50 by mode
(vector, hybrid), ``store_many`` texts/s, single ``store_knowledge``/s, the bus end to end
(in-process bus, the service consuming its ingest queue; RabbitMQ is left out to keep a
round short), and ``query`` p50 over the HTTP API and over MCP on the same uvicorn server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from apollo_adapters.inprocess import InProcessBus
from apollo_app import Apollo, RemoteClient, Settings
from apollo_app.entrypoints.http import HttpServer, create_app
from apollo_app.entrypoints.service import ApolloService
from apollo_domain.ports.topology import Topology
from benchmarks._common import TextGenerator

#: Each figure: its name, unit, and whether more is better.
FIGURES: dict[str, tuple[str, bool]] = {
    "query_p50_vector_ms": ("ms", False),
    "query_p50_hybrid_ms": ("ms", False),
    "store_many_texts_per_s": ("texts/s", True),
    "store_knowledge_per_s": ("calls/s", True),
    "bus_ingest_end_to_end_per_s": ("messages/s", True),
    "http_query_p50_ms": ("ms", False),
    "mcp_query_p50_ms": ("ms", False),
}


#: Texts stored in a throwaway store before the library's figures are timed: each figure
#: measures the steady state, not a process's first call (lazy imports, compiled patterns).
WARM_UP = 50


async def _p50_ms(call: Callable[[], Awaitable[Any]], times: int) -> float:
    seconds = []
    for _ in range(times):
        start = time.perf_counter()
        await call()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds) * 1000.0


async def library(entries: int, queries: int, texts: TextGenerator) -> dict[str, float]:
    corpus = texts.texts(entries)
    asked = [" ".join(text.split()[:4]) for text in corpus[: max(1, queries)]]
    figures: dict[str, float] = {}
    async with Apollo.in_memory() as warm:  # the first calls' imports and caches, untimed
        await warm.client("claude-warm").store_many(
            items=[{"content": text} for text in texts.texts(WARM_UP)]
        )
    async with Apollo.in_memory() as apollo:
        client = apollo.client("claude-figures")
        start = time.perf_counter()
        await client.store_many(items=[{"content": text} for text in corpus])
        figures["store_many_texts_per_s"] = entries / (time.perf_counter() - start)
        singles = texts.texts(max(10, entries // 5))
        start = time.perf_counter()
        for text in singles:
            await client.store_knowledge(content=text)
        figures["store_knowledge_per_s"] = len(singles) / (time.perf_counter() - start)
        for mode in ("vector", "hybrid"):
            pending = iter(asked * 2)
            figures[f"query_p50_{mode}_ms"] = await _p50_ms(
                lambda mode=mode, pending=pending: client.query_knowledge(
                    query=next(pending), mode=mode, min_confidence=0
                ),
                len(asked),
            )
    return figures


async def bus(messages: int, texts: TextGenerator) -> dict[str, float]:
    async with Apollo.in_memory() as apollo:
        topology = Topology()
        link = InProcessBus(topology, login="figures")
        service = ApolloService(
            apollo, link, Settings(embedder="hashing", prefetch=16), topology=topology
        )
        await service.start()
        remote = RemoteClient(link, agent_id="claude-bus", topology=topology, rpc_timeout=60)
        try:
            start = time.perf_counter()
            for text in texts.texts(messages):
                await remote.store_knowledge(content=text)
            deadline = start + 120
            while (await apollo.stats()).total < messages:
                if time.perf_counter() > deadline:
                    raise RuntimeError("the bus did not store every message in time")
                await asyncio.sleep(0.005)
            return {"bus_ingest_end_to_end_per_s": messages / (time.perf_counter() - start)}
        finally:
            await service.stop()
            await link.close()


async def edges(entries: int, queries: int, texts: TextGenerator) -> dict[str, float]:
    corpus = texts.texts(entries)
    asked = [" ".join(text.split()[:4]) for text in corpus[: max(1, queries)]]
    async with Apollo.in_memory() as apollo:
        await apollo.client("claude-seed").store_many(items=[{"content": t} for t in corpus])
        http_times: list[float] = []
        mcp_times: list[float] = []
        async with (
            HttpServer(create_app(apollo), "127.0.0.1", 0) as server,
            httpx.AsyncClient(base_url=server.url, timeout=60) as http,
            httpx.AsyncClient(timeout=60) as mcp_http,
            Client(
                streamable_http_client(f"{server.url}/mcp", http_client=mcp_http),
                read_timeout_seconds=60,
            ) as mcp,
        ):
            for index, text in enumerate(asked):  # the edges take turns
                calls = [
                    (http_times, lambda t=text: http.post("/api/apollo/query", json={"query": t})),
                    (mcp_times, lambda t=text: mcp.call_tool("query_knowledge", {"query": t})),
                ]
                for times, call in calls if index % 2 else reversed(calls):
                    start = time.perf_counter()
                    await call()
                    times.append(time.perf_counter() - start)
    return {
        "http_query_p50_ms": statistics.median(http_times) * 1000.0,
        "mcp_query_p50_ms": statistics.median(mcp_times) * 1000.0,
    }


async def measure(args: argparse.Namespace) -> dict[str, float]:
    texts = TextGenerator(seed=args.seed)
    figures = await library(args.entries, args.queries, texts)
    figures |= await bus(args.messages, texts)
    figures |= await edges(args.entries, args.queries, texts)
    return figures


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=300, help="entries stored per figure")
    parser.add_argument("--queries", type=int, default=60, help="queries timed per mode")
    parser.add_argument("--messages", type=int, default=200, help="bus ingest messages")
    parser.add_argument("--seed", type=int, default=31)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    figures = asyncio.run(measure(parse(argv)))
    json.dump({"figures": figures}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
