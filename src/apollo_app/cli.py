"""The ``apollo`` command line: serve, demo, simulate, ingest, query, migrate, stats.

Settings come from the ``APOLLO_*`` environment (:meth:`Settings.from_env`); ``--data-dir``
and ``--database-url`` override them. Exit codes: 0 success, 1 runtime failure (the store
is unavailable, a demo claim did not hold), 2 usage, validation or configuration error —
always with a one-line ``apollo: error: ...`` on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections import Counter
from collections.abc import Coroutine, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO, TypeVar

from attrs import define, field

from apollo_domain.errors import ApolloError, ConfigurationError, ValidationError
from apollo_domain.model import Outcome, Principal
from apollo_domain.ports import StoreStats
from apollo_domain.results import QueryResult

from .settings import Settings

PROG = "apollo"
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
DEFAULT_AGENT = "cli"
#: The fields one JSONL line may carry (``store_knowledge``'s, plus the agent id).
INGEST_FIELDS = frozenset(
    {
        "content",
        "content_type",
        "tags",
        "context",
        "knowledge_domain",
        "access_scope",
        "source_provider",
        "source_channel",
        "submitted_by",
        "submitted_from",
        "agent_id",
    }
)

T = TypeVar("T")


class UsageError(Exception):
    """A bad argument or input that the user must fix (exit 2)."""


class ServiceMissing(ApolloError):
    """``apollo serve`` without the service module (exit 1)."""


# --------------------------------------------------------------------------- helpers


def _error(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def load_settings(args: argparse.Namespace) -> Settings:
    """``Settings.from_env()`` with the command-line overrides applied."""
    settings = Settings.from_env()
    changes: dict[str, Any] = {}
    if getattr(args, "data_dir", None) is not None:
        changes["data_dir"] = Path(args.data_dir)
    database_url = getattr(args, "database_url", None)
    if database_url is not None:
        if not database_url.strip():
            raise ConfigurationError("--database-url", "must not be empty")
        changes["database_url"] = database_url.strip()
    return settings.replace(**changes) if changes else settings


def _principal(args: argparse.Namespace) -> Principal | None:
    value = getattr(args, "principal", None)
    return Principal(value) if value else None


def _one_line(text: str, width: int | None = None) -> str:
    flat = " ".join(text.split())
    if width is not None and len(flat) > width:
        return flat[: width - 3] + "..."
    return flat


# --------------------------------------------------------------------------- serve


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the service (actors, periodic work, HTTP API) until interrupted."""
    settings = load_settings(args)
    try:
        from . import service  # imported lazily: the service pulls in the HTTP stack
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}.service":
            raise
        raise ServiceMissing("the service module is not installed") from None

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

    async def serve() -> None:
        await service.run_service(settings)

    try:
        _run(serve())
    except KeyboardInterrupt:
        return EXIT_OK
    return EXIT_OK


# --------------------------------------------------------------------------- demo


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    ok = _run(run_demo(in_memory=args.in_memory))
    return EXIT_OK if ok else EXIT_FAILURE


# --------------------------------------------------------------------------- simulate


def cmd_simulate(args: argparse.Namespace) -> int:
    from .simulation import format_result, simulate

    result = _run(
        simulate(
            args.agents,
            args.ticks,
            args.domains,
            seed=args.seed,
            noise=args.noise,
            maintenance_every=args.maintenance_every,
        )
    )
    print(format_result(result))
    return EXIT_OK


# --------------------------------------------------------------------------- ingest


class Progress:
    """A progress bar on ``stream``: redrawn in place with ``\\r`` on a terminal, else
    one line about every 10% (every 1,000 lines when the total is unknown)."""

    WIDTH = 30

    def __init__(self, total: int | None, stream: TextIO) -> None:
        self.total = total
        self.stream = stream
        self.interactive = stream.isatty()
        self._last_decile = 0
        self._drawn = False

    def update(self, done: int) -> None:
        if self.interactive:
            self._draw(done)
            return
        if self.total:
            decile = done * 10 // self.total
            if decile > self._last_decile:
                self._last_decile = decile
                print(f"ingest: {decile * 10}% ({done}/{self.total} lines)", file=self.stream)
        elif done % 1000 == 0:
            print(f"ingest: {done} lines", file=self.stream)

    def _draw(self, done: int) -> None:
        if self.total:
            filled = done * self.WIDTH // self.total
            bar = "#" * filled + "." * (self.WIDTH - filled)
            text = f"\r[{bar}] {done * 100 // self.total:3d}% {done}/{self.total} lines"
        else:
            text = f"\r{done} lines"
        self.stream.write(text)
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self.interactive and self._drawn:
            self.stream.write("\n")
            self.stream.flush()


def _open_lines(path: str) -> tuple[Iterator[str], int | None, Any]:
    """The lines of ``path`` (``-`` for stdin), their count when known, and a closer."""
    if path == "-":
        return iter(sys.stdin), None, None
    file = Path(path)
    try:
        with file.open("rb") as counting:
            total = sum(1 for _ in counting)
        handle = file.open(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    return iter(handle), total, handle


def parse_line(text: str) -> dict[str, Any]:
    """One JSONL line → ``store_knowledge`` fields; :class:`ValueError` says what is wrong."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    unknown = sorted(set(value) - INGEST_FIELDS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}")
    if "content" not in value:
        raise ValueError("content: is required")
    agent = value.get("agent_id")
    if agent is not None and (not isinstance(agent, str) or not agent.strip()):
        raise ValueError("agent_id: must be a non-empty string")
    return value


@define
class IngestReport:
    """What a bulk ingest did: outcome counts, rejection reasons, bad lines."""

    outcomes: Counter[str] = field(factory=Counter)
    rejections: Counter[str] = field(factory=Counter)
    bad: list[tuple[int, str]] = field(factory=list)
    failure: ApolloError | None = None

    @property
    def stored(self) -> int:
        return sum(self.outcomes.values())

    def summary(self) -> str:
        text = (
            f"ingested {self.stored} line(s): "
            + ", ".join(f"{o.value} {self.outcomes.get(o.value, 0)}" for o in Outcome)
            + f"; {len(self.bad)} bad line(s) skipped"
        )
        if self.rejections:
            text += "\nrejected by admission: " + ", ".join(
                f"{reason} {count}" for reason, count in sorted(self.rejections.items())
            )
        return text


async def ingest_lines(
    apollo: Any,
    lines: Iterable[str],
    report: IngestReport,
    *,
    agent_id: str,
    principal: Principal | None,
    progress: Progress,
) -> None:
    """Store each valid line, counting into ``report``; a bad line is recorded with its
    number and reason and skipped. A store failure propagates (earlier lines stay stored)."""
    clients: dict[str, Any] = {}
    for number, raw in enumerate(lines, 1):
        text = raw.strip()
        if text:
            try:
                fields = parse_line(text)
                agent = fields.pop("agent_id", None) or agent_id
                client = clients.get(agent)
                if client is None:
                    client = clients[agent] = apollo.client(agent, principal)
                result = await client.store_knowledge(**fields)
            except ValidationError as exc:
                report.bad.append((number, f"{exc.field}: {exc.message}"))
            except ValueError as exc:
                report.bad.append((number, str(exc)))
            else:
                report.outcomes[result.outcome.value] += 1
                if result.outcome is Outcome.REJECTED:
                    report.rejections[(result.reason or "rejected").split(":")[0]] += 1
        progress.update(number)


def cmd_ingest(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    lines, total, handle = _open_lines(args.file)
    progress = Progress(total, sys.stderr)
    report = IngestReport()

    async def run() -> None:
        from .facade import Apollo

        async with Apollo.open(settings) as apollo:
            await ingest_lines(
                apollo,
                lines,
                report,
                agent_id=args.agent,
                principal=_principal(args),
                progress=progress,
            )

    try:
        _run(run())
    except ApolloError as exc:
        if isinstance(exc, ValidationError | ConfigurationError):
            raise
        report.failure = exc
    finally:
        progress.close()
        if handle is not None:
            handle.close()
    for number, reason in report.bad:
        print(f"{PROG}: line {number}: {reason} (skipped)", file=sys.stderr)
    print(report.summary())
    if report.failure is not None:
        raise report.failure
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
                "similarity": v.similarity,
                "confidence": v.confidence,
                "status": v.status.value,
                "tags": list(v.tags),
                "knowledge_domain": v.knowledge_domain,
                "source_agent": v.source_agent,
                "access_scope": v.access_scope.value,
                "created_at": v.created_at.isoformat(),
            }
            for v in result.entries
        ],
    }


def cmd_query(args: argparse.Namespace) -> int:
    settings = load_settings(args)

    async def run() -> QueryResult:
        from .facade import Apollo

        async with Apollo.open(settings) as apollo:
            client = apollo.client(args.agent, _principal(args))
            return await client.query_knowledge(
                args.text, min_confidence=args.min_confidence, limit=args.limit
            )

    result = _run(run())
    if args.json:
        print(json.dumps(query_to_json(result), indent=2))
        return EXIT_OK
    if not result.entries:
        print("no results")
        return EXIT_OK
    print(f"{len(result)} result(s) ({result.mode}):")
    print(f"{'#':>3}  {'similarity':>10}  {'confidence':>10}  {'status':<9}  content")
    for rank, view in enumerate(result.entries, 1):
        similarity = "-" if view.similarity is None else f"{view.similarity:.3f}"
        print(
            f"{rank:>3}  {similarity:>10}  {view.confidence:>10.2f}  {view.status.value:<9}  "
            f"{_one_line(view.content, 100)}"
        )
    return EXIT_OK


# --------------------------------------------------------------------------- migrate


async def migrate_store(settings: Settings) -> tuple[list[int], int]:
    """Apply pending migrations to the configured database (starting the embedded one when
    no URL is set) and check it matches the embedder; returns (applied now, current)."""
    from apollo_adapters.postgres import EmbeddedPostgres, PostgresStore, migrate
    from apollo_adapters.postgres.schema import migrations

    from .runtime import build_embedder

    embedder = build_embedder(settings)
    server = None
    conninfo = settings.database_url
    try:
        if conninfo is None:
            server = EmbeddedPostgres(settings.data_dir / "postgres")
            conninfo = await server.start()
        applied = await migrate(conninfo, dimension=embedder.dimension, model_id=embedder.model_id)
        store = await PostgresStore.open(
            conninfo,
            embedder_model_id=embedder.model_id,
            dimension=embedder.dimension,
            pool_max=1,
            migrate=False,
        )
        await store.close()
    finally:
        close = getattr(embedder, "aclose", None)
        if close is not None:
            await close()
        if server is not None:
            await server.stop()
    return applied, max(m.version for m in migrations())


def cmd_migrate(args: argparse.Namespace) -> int:
    from apollo_adapters.postgres.schema import migrations

    settings = load_settings(args)
    applied, current = _run(migrate_store(settings))
    where = settings.database_url and "the database at APOLLO_DATABASE_URL"
    where = where or f"the embedded PostgreSQL in {settings.data_dir / 'postgres'}"
    names = {m.version: m.name for m in migrations()}
    if applied:
        for version in applied:
            print(f"applied migration {version:04d}_{names.get(version, '?')}")
    else:
        print("no pending migrations")
    print(f"schema version {current} ({names.get(current, '?')}) on {where}")
    return EXIT_OK


# --------------------------------------------------------------------------- stats


def stats_to_json(stats: StoreStats) -> dict[str, Any]:
    return {
        "total": stats.total,
        "last_24h": stats.last_24h,
        "average_confidence": stats.average_confidence,
        "by_status": dict(stats.by_status),
        "by_content_type": dict(stats.by_content_type),
        "total_relations": stats.total_relations,
    }


def cmd_stats(args: argparse.Namespace) -> int:
    settings = load_settings(args)

    async def run() -> StoreStats:
        from .facade import Apollo

        async with Apollo.open(settings) as apollo:
            return await apollo.stats(_principal(args))

    stats = _run(run())
    if args.json:
        print(json.dumps(stats_to_json(stats), indent=2, sort_keys=True))
        return EXIT_OK
    print(f"entries:            {stats.total}")
    print(f"created last 24h:   {stats.last_24h}")
    print(f"average confidence: {stats.average_confidence:.3f}")
    print(
        "by status:          "
        + (", ".join(f"{k} {v}" for k, v in sorted(stats.by_status.items())) or "-")
    )
    print(
        "by content type:    "
        + (", ".join(f"{k} {v}" for k, v in sorted(stats.by_content_type.items())) or "-")
    )
    print(f"relations:          {stats.total_relations}")
    return EXIT_OK


# --------------------------------------------------------------------------- parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _unit_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be within [0, 1], got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Apollo: a shared, durable knowledge store for AI agent meshes.",
        epilog="Settings come from APOLLO_* environment variables; with none set, Apollo "
        "runs an embedded PostgreSQL + pgvector in ./.apollo. "
        "Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    store = argparse.ArgumentParser(add_help=False)
    store.add_argument(
        "--data-dir",
        metavar="DIR",
        help="folder of the embedded PostgreSQL (overrides APOLLO_DATA_DIR)",
    )
    store.add_argument(
        "--database-url",
        metavar="URL",
        help="a PostgreSQL + pgvector server to use instead (overrides APOLLO_DATABASE_URL)",
    )
    identity = argparse.ArgumentParser(add_help=False)
    identity.add_argument(
        "--principal",
        metavar="ID",
        help="act as this principal (sees its private and team entries); default anonymous",
    )

    serve = commands.add_parser(
        "serve",
        parents=[store],
        help="run the service: message actors, periodic work and the HTTP API",
        description="Run the service (message actors, periodic work, HTTP API) until "
        "interrupted. Configure it with APOLLO_* variables (APOLLO_AMQP_URL, "
        "APOLLO_HTTP_HOST, APOLLO_HTTP_PORT, APOLLO_API_TOKENS, ...).",
    )
    serve.set_defaults(handler=cmd_serve)

    demo = commands.add_parser(
        "demo",
        help="a scripted tour of what Apollo does with knowledge, and why",
        description="A scripted tour: agents publish, deduplicate, corroborate, query, "
        "link, contradict, resolve, decay and build expertise. Every claim is checked; "
        "the exit code is 1 if one does not hold. Runs on a throwaway embedded "
        "PostgreSQL (never your data) unless --in-memory.",
    )
    demo.add_argument("--in-memory", action="store_true", help="use the in-memory store instead")
    demo.set_defaults(handler=cmd_demo)

    simulate = commands.add_parser(
        "simulate",
        help="simulate an agent mesh publishing noisy knowledge (in memory)",
        description="An in-memory agent mesh: each tick (one simulated hour) every agent "
        "publishes one fact from its home domains (wrong with probability --noise) and "
        "runs one query; the periodic work runs every few ticks. Deterministic per seed.",
    )
    simulate.add_argument("--agents", type=_positive_int, default=6, help="agents (default 6)")
    simulate.add_argument("--ticks", type=_positive_int, default=30, help="ticks (default 30)")
    simulate.add_argument(
        "--domains", type=_positive_int, default=3, help="knowledge domains (default 3)"
    )
    simulate.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    simulate.add_argument(
        "--noise",
        type=_unit_float,
        default=0.1,
        help="probability that a published fact is wrong (default 0.1)",
    )
    simulate.add_argument(
        "--maintenance-every",
        type=_positive_int,
        default=5,
        metavar="TICKS",
        help="run the periodic work every this many ticks (default 5)",
    )
    simulate.set_defaults(handler=cmd_simulate)

    ingest = commands.add_parser(
        "ingest",
        parents=[store, identity],
        help="bulk-ingest knowledge from a JSONL file",
        description="Store one entry per line of a JSONL file (- for stdin). Each line is "
        "a JSON object with the store_knowledge fields: content (required), content_type, "
        "tags, context, knowledge_domain, access_scope, source_provider, source_channel, "
        "submitted_by, submitted_from, agent_id. Bad lines are reported with their number "
        "and skipped. Exit 0 when every valid line was stored, 1 when the store failed.",
    )
    ingest.add_argument("file", metavar="FILE.jsonl", help="the JSONL file, or - for stdin")
    ingest.add_argument(
        "--agent",
        default=DEFAULT_AGENT,
        metavar="ID",
        help=f"agent id for lines without agent_id (default {DEFAULT_AGENT!r})",
    )
    ingest.set_defaults(handler=cmd_ingest)

    query = commands.add_parser(
        "query",
        parents=[store, identity],
        help="semantic search, ranked by similarity",
        description="Semantic search over the entries the principal may see. Returned "
        "entries get the retrieval boost. Queries under 3 characters browse newest first.",
    )
    query.add_argument("text", help="what to look for")
    query.add_argument(
        "--limit", type=_positive_int, default=10, help="results, at most 100 (default 10)"
    )
    query.add_argument(
        "--min-confidence",
        type=_unit_float,
        default=0.3,
        metavar="X",
        help="lowest confidence returned (default 0.3)",
    )
    query.add_argument("--agent", default=DEFAULT_AGENT, metavar="ID", help="agent id to log")
    query.add_argument("--json", action="store_true", help="print JSON")
    query.set_defaults(handler=cmd_query)

    migrate = commands.add_parser(
        "migrate",
        parents=[store],
        help="create or upgrade the database schema",
        description="Open the store (the embedded PostgreSQL, or APOLLO_DATABASE_URL), apply "
        "pending schema migrations and print the schema version.",
    )
    migrate.set_defaults(handler=cmd_migrate)

    stats = commands.add_parser(
        "stats",
        parents=[store, identity],
        help="counts of the entries the principal may see",
        description="Total, created in the last 24 h, average confidence, by status, by "
        "content type, relations — over the entries the principal may see.",
    )
    stats.add_argument("--json", action="store_true", help="print JSON")
    stats.set_defaults(handler=cmd_stats)
    return parser


def _tolerant_output() -> None:
    """Never crash on a character the terminal cannot encode."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    _tolerant_output()
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(handler(args))
    except UsageError as exc:
        _error(str(exc))
        return EXIT_USAGE
    except ConfigurationError as exc:
        _error(f"{exc.variable}: {exc.message}")
        return EXIT_USAGE
    except ValidationError as exc:
        _error(f"{exc.field}: {exc.message}")
        return EXIT_USAGE
    except ApolloError as exc:
        _error(f"{type(exc).__name__}: {exc}")
        return EXIT_FAILURE
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED


__all__ = ["build_parser", "cmd_serve", "main", "parse_line"]
