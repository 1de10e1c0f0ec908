"""The ``apollo`` subcommands other than ingest: serve, demo, simulate, query, migrate,
reembed, stats."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from apollo_domain import commands as c
from apollo_domain.model import Status
from apollo_domain.ports import StoreStats
from apollo_domain.results import QueryResult

from .. import bootstrap
from ..logs import configure_logging
from ..wire.codec import format_datetime, rounded
from .common import (
    EXIT_FAILURE,
    EXIT_OK,
    ServiceMissing,
    load_settings,
    one_line,
    open_apollo,
    principal_of,
    run_async,
)

# --------------------------------------------------------------------------- serve


#: Loggers of libraries that narrate at INFO what only matters when something is wrong
#: (the embedded server logs every line of initdb and of its start).
def cmd_serve(args: argparse.Namespace) -> int:
    """Run the service (actors, periodic work, HTTP API) until interrupted."""
    settings = load_settings(args)
    try:
        from ..entrypoints import service  # lazily: the service pulls in the HTTP stack
    except ModuleNotFoundError as exc:
        if exc.name != "apollo_app.entrypoints.service":
            raise
        raise ServiceMissing("the service module is not installed") from None

    configure_logging(settings.secrets, verbose=args.verbose)

    async def serve() -> None:
        await service.run_service(settings)

    try:
        run_async(serve())
    except KeyboardInterrupt:
        return EXIT_OK
    return EXIT_OK


# --------------------------------------------------------------------------- demo


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import run_demo

    ok = run_async(run_demo(in_memory=args.in_memory))
    return EXIT_OK if ok else EXIT_FAILURE


# --------------------------------------------------------------------------- simulate


def cmd_simulate(args: argparse.Namespace) -> int:
    from ..simulation import format_result, simulate

    result = run_async(
        simulate(
            args.agents,
            args.ticks,
            args.domains,
            seed=args.seed,
            noise=args.noise,
            maintenance_every=args.maintenance_every,
            review=args.review,
        )
    )
    print(format_result(result))
    return EXIT_OK


# --------------------------------------------------------------------------- query


def query_to_json(result: QueryResult) -> dict[str, Any]:
    return {
        "mode": result.mode,
        "entries": [
            {
                "id": str(v.id),
                "content": v.content,
                "content_type": v.content_type.value,
                "similarity": None if v.similarity is None else rounded(v.similarity),
                "signals": {name: rounded(value) for name, value in v.signals.items()},
                "score": None if v.score is None else rounded(v.score),
                "folded": v.folded,
                "confidence": rounded(v.confidence),
                "status": v.status.value,
                "tags": list(v.tags),
                "knowledge_domain": v.knowledge_domain,
                "source_agent": v.source_agent,
                "access_scope": v.access_scope.value,
                "created_at": format_datetime(v.created_at),
            }
            for v in result.entries
        ],
    }


def cmd_query(args: argparse.Namespace) -> int:
    settings = load_settings(args)

    async def run() -> QueryResult:
        async with open_apollo(settings, migrate=False) as apollo:
            client = apollo.client(args.agent, principal_of(args))
            return await client.run(
                c.QueryKnowledge(
                    query=args.text,
                    min_confidence=args.min_confidence,
                    limit=args.limit,
                    mode=args.mode,
                    min_similarity=args.min_similarity,
                )
            )

    result = run_async(run())
    if args.json:
        print(json.dumps(query_to_json(result), indent=2))
        return EXIT_OK
    if not result.entries:
        print("no results")
        return EXIT_OK
    print(f"{len(result)} result(s) ({result.mode}):")
    print(
        f"{'#':>3}  {'similarity':>10}  {'confidence':>10}  {'status':<9}  {'signals':<20}  content"
    )
    for rank, view in enumerate(result.entries, 1):
        similarity = "-" if view.similarity is None else f"{view.similarity:.3f}"
        signals = ",".join(view.signals) or "-"
        print(
            f"{rank:>3}  {similarity:>10}  {view.confidence:>10.2f}  {view.status.value:<9}  "
            f"{signals:<20}  {one_line(view.content, 80)}"
        )
    return EXIT_OK


# --------------------------------------------------------------------------- migrate


def cmd_migrate(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    applied, current, names = run_async(bootstrap.migrate_database(settings))
    where = settings.database_url and "the database at APOLLO_DATABASE_URL"
    where = where or f"the embedded PostgreSQL in {settings.data_dir / 'postgres'}"
    if applied:
        for version in applied:
            print(f"applied migration {version:04d}_{names.get(version, '?')}")
    else:
        print("no pending migrations")
    print(f"schema version {current} ({names.get(current, '?')}) on {where}")
    return EXIT_OK


# --------------------------------------------------------------------------- reembed


def cmd_reembed(args: argparse.Namespace) -> int:
    """Move the store to the embedder configured now (``APOLLO_EMBEDDER`` and the rest)."""
    from ..reembed import ProgressBar

    settings = load_settings(args)
    bar = ProgressBar(sys.stderr.write, sys.stderr.isatty())
    report = run_async(bootstrap.reembed_store(settings, batch_size=args.batch_size, progress=bar))
    if not report.switched:
        print(f"the store already holds vectors of model {report.to_model!r}: nothing to move")
        return EXIT_OK
    resumed = " (resumed a move that had stopped)" if report.resumed else ""
    late = f", {report.late} of them stored during the move" if report.late else ""
    print(
        f"moved the store from model {report.from_model!r} to {report.to_model!r}{resumed}:"
        f" {report.moved} entries embedded by this run{late}, {report.total} in all"
    )
    print("restart every process that serves this store with the embedder configured now")
    return EXIT_OK


# --------------------------------------------------------------------------- stats


def statuses_of(stats: StoreStats) -> tuple[int, dict[str, int]]:
    """The active count (candidate, confirmed, disputed) and the count of each status."""
    by_status = {s.value: int(stats.by_status.get(s.value, 0)) for s in Status}
    return sum(by_status[s.value] for s in Status if s.is_active), by_status


def stats_to_json(stats: StoreStats) -> dict[str, Any]:
    """The stats as the HTTP API shows them."""
    active, by_status = statuses_of(stats)
    return {
        "total": stats.total,
        "active": active,
        "last_24h": stats.last_24h,
        "average_confidence": rounded(stats.average_confidence),
        "by_status": by_status,
        "by_content_type": dict(stats.by_content_type),
        "total_relations": stats.total_relations,
    }


def cmd_stats(args: argparse.Namespace) -> int:
    settings = load_settings(args)

    async def run() -> StoreStats:
        async with open_apollo(settings, migrate=False) as apollo:
            return await apollo.stats(principal_of(args))

    stats = run_async(run())
    if args.json:
        print(json.dumps(stats_to_json(stats), indent=2, sort_keys=True))
        return EXIT_OK
    active, by_status = statuses_of(stats)
    print(f"entries:            {stats.total} ({active} active)")
    print(f"created last 24h:   {stats.last_24h}")
    print(f"average confidence: {stats.average_confidence:.3f} (active entries)")
    print("by status:          " + ", ".join(f"{k} {v}" for k, v in by_status.items()))
    print(
        "by content type:    "
        + (", ".join(f"{k} {v}" for k, v in sorted(stats.by_content_type.items())) or "-")
    )
    print(f"relations:          {stats.total_relations}")
    return EXIT_OK


__all__ = [
    "cmd_demo",
    "cmd_label",
    "cmd_migrate",
    "cmd_query",
    "cmd_reembed",
    "cmd_serve",
    "cmd_simulate",
    "cmd_stats",
    "query_to_json",
    "stats_to_json",
    "statuses_of",
]


# --------------------------------------------------------------------------- label


def cmd_label(args: argparse.Namespace) -> int:
    """Label a source, remove its label, or show its standing; runs as the embedding
    program (an admin), since whoever runs the CLI holds the store itself."""
    settings = load_settings(args)

    async def run() -> Any:
        async with open_apollo(settings) as apollo:
            if args.remove:
                return await apollo.run(c.UnlabelSource(target_agent_id=args.agent_id))
            if args.label:
                return await apollo.run(
                    c.LabelSource(target_agent_id=args.agent_id, label=args.label)
                )
            return await apollo.run(c.GetSource(target_agent_id=args.agent_id))

    report = run_async(run())
    print(
        f"{report.agent_id}: credibility {report.credibility:.3f} "
        f"(alpha {report.alpha:g}, beta {report.beta:g}), label {report.label or 'none'}, "
        f"{report.validated} validated, {report.refuted} refuted"
    )
    return EXIT_OK
