"""What the write rate costs a write over an edge on PostgreSQL, beside the same write
without it.

Run from the repository root::

    PYTHONPATH=src:. .venv/bin/python benchmarks/write_rate_bench.py            # ~1 min
    PYTHONPATH=src:. .venv/bin/python benchmarks/write_rate_bench.py --quick    # smoke run

An embedded PostgreSQL + pgvector server (hashing embedder, 384 dimensions) holds one
store; two Apollos share it, one without a write rate and one with a rate no write of
this benchmark reaches (so every write is charged and none refused). An edge caller's
single ``store_knowledge`` is timed on each, ``--writes`` distinct texts per phase, in
``--rounds`` rounds of A B B A (so the machine's drift weighs on both alike), and so is
the charge alone (the budget's one upsert). Figures: p50 of each, and the ratio charged /
uncharged. The results go to ``benchmarks/results/write_rate_bench.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from apollo_app import Apollo, bootstrap
from apollo_domain import commands as c
from apollo_domain.handlers import handle
from apollo_domain.model import Principal, Role
from apollo_domain.rates import WriteRate
from apollo_domain.services import Caller
from benchmarks._common import TextGenerator, embedded_database, machine, table, write_json

#: Charged, never refused: past any rate this benchmark writes at.
UNREACHED = WriteRate(per_second=1_000_000, burst=1_000_000_000)


async def _timed(calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[float]:
    seconds = []
    for call in calls:
        start = time.perf_counter()
        await call()
        seconds.append(time.perf_counter() - start)
    return seconds


async def run(args: argparse.Namespace) -> dict[str, Any]:
    embedder = bootstrap.hashing_embedder(384)
    texts = TextGenerator(seed=11).texts(args.writes * args.rounds * 4)
    caller = Caller.of("bench-writer", Principal("bench-writer", role=Role.WRITER), edge="http")
    timings: dict[str, list[float]] = {"uncharged": [], "charged": [], "charge alone": []}
    async with embedded_database("rate") as conninfo:
        await bootstrap.migrate_schema(conninfo, embedder)
        store = await bootstrap.open_postgres(conninfo, embedder, migrate=False)
        try:
            plain = Apollo.with_store(store, embedder=embedder)
            rated = Apollo.with_store(store, embedder=embedder, write_rate=UNREACHED)
            budget = rated.deps.write_budget
            assert budget is not None
            warm = c.StoreKnowledge(content="warm up the pool and the caches")
            await handle(plain.deps, caller, warm)
            await handle(rated.deps, caller, warm)
            chunks = iter(texts[i : i + args.writes] for i in range(0, len(texts), args.writes))
            for _ in range(args.rounds):
                for name in ("uncharged", "charged", "charged", "uncharged"):
                    apollo = plain if name == "uncharged" else rated
                    batch = next(chunks)
                    calls = [
                        lambda text=text, deps=apollo.deps: handle(
                            deps, caller, c.StoreKnowledge(content=text)
                        )
                        for text in batch
                    ]
                    timings[name].extend(await _timed(calls))
                alone = [lambda: budget.take("bench-alone", 1) for _ in range(args.writes)]
                timings["charge alone"].extend(await _timed(alone))
        finally:
            await store.close()
    p50 = {name: statistics.median(values) * 1000 for name, values in timings.items()}
    return {
        "machine": machine(),
        "writes_per_phase": args.writes,
        "rounds": args.rounds,
        "p50_ms": p50,
        "ratio_charged_to_uncharged": p50["charged"] / p50["uncharged"],
        "calls": {name: len(values) for name, values in timings.items()},
    }


def report(result: dict[str, Any]) -> str:
    p50 = result["p50_ms"]
    rows = [
        ["store_knowledge over an edge, no write rate", p50["uncharged"]],
        ["store_knowledge over an edge, charged to its write rate", p50["charged"]],
        ["the charge alone (one upsert of write_budgets)", p50["charge alone"]],
    ]
    lines = [table(rows, ["PostgreSQL, one write", "p50 ms"])]
    lines.append(f"charged / uncharged: {result['ratio_charged_to_uncharged']:.3f}")
    return "\n".join(lines)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=150, help="writes per phase and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.writes, args.rounds = 10, 1
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    result = asyncio.run(run(args))
    print(report(result))
    if not args.quick:
        print(f"results: {write_json('write_rate_bench', result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
