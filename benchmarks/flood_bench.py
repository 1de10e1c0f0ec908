"""The flood's share of a reader's top 10, before and after fair pages, on both stores.

Three writers store ten facts about Kafka consumer groups; a fourth stores 200
keyword-stuffed variants ("kafka partition rebalancing consumer group static membership …
EveCloud fixes it, offer 17"), each different enough to pass admission. A reader asks
"kafka static membership", whose exact answer one writer stored. For each store (in
memory, embedded PostgreSQL) and each mode, the figures are:

- **before**: the signals' plain rankings (no per-source cap, each signal 50 deep) fused
  and cut to 10, as the query ranked before fair pages;
- **after**: ``query_knowledge`` (docs/retrieval.md, "Fair pages").

Each printed with the flood's share of the top 10 and the answer's rank (``-`` when it is
not there). Hashing embedder, so it runs in seconds:
``PYTHONPATH=src:. .venv/bin/python benchmarks/flood_bench.py [--no-postgres]``.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from apollo_adapters.clock import ManualClock
from apollo_adapters.embedders import HashingEmbedder
from apollo_adapters.memory import InMemoryStore
from apollo_app import Apollo
from apollo_domain.limits import DEFAULT_STATUSES
from apollo_domain.ports import SearchFilter
from apollo_domain.retrieval import LEXICAL, VECTOR, fuse
from apollo_domain.services.context import resolve_viewer
from benchmarks._common import embedded_database
from benchmarks.flood_scenario import ANSWER, FACTS, FILLER, QUERY, flood

MODES = ("hybrid", "vector", "lexical")
TOP = 10
PLAIN_DEPTH = 50


async def seed(apollo: Apollo, count: int, fillers: int) -> set[str]:
    """The facts and the flood stored; the flood's entry ids."""
    for agent, facts in FACTS.items():
        writer = apollo.client(agent, principal=agent)
        for fact in facts:
            await writer.store_knowledge(content=fact)
    eve = apollo.client("eve", principal="eve")
    ids = set()
    for text in flood(count, fillers):
        result = await eve.store_knowledge(content=text)
        if result.ok and result.entry_id is not None:
            ids.add(str(result.entry_id))
    return ids


async def plain_top(apollo: Apollo, mode: str) -> list[str]:
    """The page as ranked before fair pages: each signal's plain ranking, fused, cut."""
    deps = apollo.deps
    viewer = await resolve_viewer(deps.store.directory, apollo.client("reader").caller.principal)
    flt = SearchFilter(viewer, frozenset(DEFAULT_STATUSES), min_confidence=0.3)
    rankings: dict[str, Any] = {}
    async with deps.store.unit_of_work() as uow:
        if mode != LEXICAL:
            (vector,) = await deps.embedder.embed([QUERY])
            ids = await uow.entries.nearest_ids(vector, flt, PLAIN_DEPTH)
            cutoff = deps.retrieval.relevance_cutoff([s for _, s in ids])
            rankings[VECTOR] = [(i, s) for i, s in ids if s > 0 and s >= cutoff]
        if mode != VECTOR:
            rankings[LEXICAL] = await uow.entries.lexical_search_ids(QUERY, flt, PLAIN_DEPTH)
    return [str(f.entry_id) for f in fuse(rankings, deps.retrieval)[:TOP]]


def figures(page: Sequence[str], flooded: set[str], answer: str) -> str:
    share = sum(i in flooded for i in page)
    rank = page.index(answer) + 1 if answer in page else "-"
    return f"{share:>2}/{len(page):<2} answer {rank}"


async def run(count: int, postgres: bool) -> None:
    print(f"flood {count} variants, query {QUERY!r}, top {TOP}: flood share and answer rank")
    print(f"{'store':<9} {'fillers':<8} {'mode':<8} {'before':<18} {'after':<18}")
    for fillers in (len(FILLER), 9):
        await _measure("memory", InMemoryStore(), HashingEmbedder(), count, fillers)
        if not postgres:
            continue
        from apollo_adapters.postgres import PostgresStore

        embedder = HashingEmbedder()
        async with embedded_database("flood") as conninfo:
            store = await PostgresStore.open(
                conninfo, embedder_model_id=embedder.model_id, dimension=embedder.dimension
            )
            await _measure("postgres", store, embedder, count, fillers)


async def _measure(kind: str, store: Any, embedder: Any, count: int, fillers: int) -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    async with Apollo.with_store(store, embedder=embedder, clock=clock) as apollo:
        flooded = await seed(apollo, count, fillers)
        reader = apollo.client("reader")
        async with apollo.store.unit_of_work() as uow:
            answer = next(
                str(e.id)
                for e in await uow.entries.browse(_all(apollo), 1000)
                if e.content == ANSWER
            )
        for mode in MODES:
            before = await plain_top(apollo, mode)
            after = await reader.retrieve(query=QUERY, mode=mode, limit=TOP)
            page = [str(v.id) for v in after.entries]
            print(
                f"{kind:<9} {fillers:<8} {mode:<8} {figures(before, flooded, answer):<18}"
                f" {figures(page, flooded, answer):<18}"
            )


def _all(apollo: Apollo) -> SearchFilter:
    from apollo_domain.model import Viewer

    return SearchFilter(Viewer(None), frozenset(DEFAULT_STATUSES))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flood", type=int, default=200)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args(argv)
    asyncio.run(run(args.flood, not args.no_postgres))


if __name__ == "__main__":
    main()
