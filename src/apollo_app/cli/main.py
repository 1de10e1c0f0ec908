"""The ``apollo`` command line: serve, mcp, demo, simulate, ingest, query, entity, entities,
migrate, label, stats.

Settings come from the ``APOLLO_*`` environment (:meth:`Settings.from_env`); ``--data-dir``
and ``--database-url`` override them. Exit codes: 0 success, 1 runtime failure (the store
is unavailable, the HTTP port is busy, a demo claim did not hold), 2 usage, validation or
configuration error — always with a one-line ``apollo: error: ...`` on stderr, never a
traceback. A reader that closes stdout early (``apollo stats | head -2``) ends the command
quietly with 141, the status of a process ended by SIGPIPE; the store is still closed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from apollo_domain import commands as c
from apollo_domain.commands import defaults_of
from apollo_domain.errors import ApolloError, ConfigurationError, ValidationError
from apollo_domain.limits import (
    MAX_ENTITIES,
    MAX_ENTITY_DEPTH,
    MAX_LIMIT,
    QUERY_MODES,
)
from apollo_domain.model import Role

from .. import __version__
from ..reembed import DEFAULT_BATCH as DEFAULT_REEMBED_BATCH
from ..reembed import MAX_BATCH as MAX_REEMBED_BATCH
from ..simulation import DEFAULT_NOISE
from .commands import (
    cmd_demo,
    cmd_label,
    cmd_migrate,
    cmd_query,
    cmd_reembed,
    cmd_serve,
    cmd_simulate,
    cmd_stats,
)
from .common import (
    DEFAULT_AGENT,
    EXIT_BROKEN_PIPE,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    PROG,
    UsageError,
    as_typed,
    error,
)
from .entities import cmd_entities, cmd_entity
from .ingest import cmd_ingest
from .mcp import cmd_mcp


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _int_between(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high] (outside: usage error, exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {value}")
        return value

    return parse


def _float_between(low: float, high: float) -> Callable[[str], float]:
    """An argparse type: a finite number in [low, high]."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be within [{low:g}, {high:g}], got {text}")
        return value

    return parse


_unit_float = _float_between(0.0, 1.0)
#: The defaults of ``apollo query``: the command's own.
_QUERY = defaults_of(c.QueryKnowledge)
_ENTITIES = defaults_of(c.ListEntities)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Apollo: a shared, durable knowledge store for AI agent meshes.",
        epilog="Settings come from APOLLO_* environment variables; with none set, Apollo "
        "runs an embedded PostgreSQL + pgvector in ./.apollo. "
        "Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error.",
    )
    parser.add_argument(
        "--version", action="version", version=f"{PROG} {__version__}", help="print the version"
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
    reader = argparse.ArgumentParser(add_help=False)  # the reads, logged under an agent
    reader.add_argument(
        "--agent",
        default=DEFAULT_AGENT,
        metavar="ID",
        help=f"agent id the reads are logged under (default {DEFAULT_AGENT!r})",
    )
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true", help="print JSON")

    serve = commands.add_parser(
        "serve",
        parents=[store],
        help="run the service: message actors, periodic work and the HTTP API",
        description="Run the service (message actors, periodic work, HTTP API) until "
        "interrupted. Configure it with APOLLO_* variables (APOLLO_AMQP_URL, "
        "APOLLO_HTTP_HOST, APOLLO_HTTP_PORT, APOLLO_API_TOKENS, ...).",
    )
    serve.add_argument(
        "--verbose",
        action="store_true",
        help="also log the embedded PostgreSQL's progress (initdb, start, stop)",
    )
    serve.set_defaults(handler=cmd_serve)

    mcp = commands.add_parser(
        "mcp",
        parents=[store],
        help="serve MCP over stdio for one local agent (Claude Desktop, Claude Code, ...)",
        description="Speak the Model Context Protocol on stdin and stdout: Apollo's tools "
        "and resources for the agent that started this process, on the embedded store (or "
        "APOLLO_DATABASE_URL). The caller is the local identity given here; logs go to "
        "stderr. `apollo serve` serves the same tools over HTTP at /mcp.",
    )
    mcp.add_argument(
        "--principal",
        metavar="ID",
        help="act as this principal (default: the login name of the user running it)",
    )
    mcp.add_argument(
        "--role",
        choices=[role.value for role in Role],
        default=Role.WRITER.value,
        help="the principal's role: which tools it sees and may call (default writer)",
    )
    mcp.add_argument(
        "--agent",
        metavar="ID",
        help="the one agent its work is credited to (default: the principal)",
    )
    mcp.set_defaults(handler=cmd_mcp)

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
        "runs one query. Every few ticks a moderator who knows the truth resolves the "
        "disputes raised so far (unless --no-review), then the periodic work runs. The "
        "summary ends with what its numbers mean. Deterministic per seed.",
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
        default=DEFAULT_NOISE,
        help=f"probability that a published fact is wrong (default {DEFAULT_NOISE})",
    )
    simulate.add_argument(
        "--no-review",
        dest="review",
        action="store_false",
        help="nobody resolves disputes: they accumulate",
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
        "submitted_by, submitted_from, agent_id (or source_agent). Bad lines are reported "
        "with their number and skipped. A progress bar shows on a terminal only; the last "
        "line sums up. Exit 0 when the valid lines were stored, 1 when the store failed or "
        "when no line could be stored because every line was bad. With --text, FILE is "
        "one text instead: a document, or a conversation as a JSON list of {speaker, text, "
        "at} turns, stored as one episode of statements (store_text).",
    )
    ingest.add_argument(
        "file", metavar="FILE", help="the JSONL file (or, with --text, the text), - for stdin"
    )
    ingest.add_argument(
        "--text",
        action="store_true",
        help="FILE is one text: a JSON list of turns is a conversation, anything else a "
        "document; printed: the episode id and one line per statement",
    )
    ingest.add_argument(
        "--tag",
        action="append",
        default=None,
        metavar="TAG",
        help="with --text: a tag of every statement (repeatable)",
    )
    ingest.add_argument(
        "--scope",
        choices=("global", "team", "private"),
        default="global",
        help="with --text: the episode's access scope (team and private need --principal)",
    )
    ingest.add_argument(
        "--agent",
        default=DEFAULT_AGENT,
        metavar="ID",
        help=f"agent id for lines without agent_id (default {DEFAULT_AGENT!r})",
    )
    ingest.set_defaults(handler=cmd_ingest)

    query = commands.add_parser(
        "query",
        parents=[store, identity, reader, output],
        help="search: vector similarity, lexical matches and the entity graph, fused",
        description="Search over the entries the principal may see. Returned entries get "
        "the retrieval boost. Queries under 3 characters browse newest first.",
    )
    query.add_argument("text", help="what to look for")
    query.add_argument(
        "--limit",
        type=_int_between(1, MAX_LIMIT),
        default=_QUERY["limit"],
        metavar="N",
        help=f"results, 1 to {MAX_LIMIT} (default {_QUERY['limit']})",
    )
    query.add_argument(
        "--min-confidence",
        type=_unit_float,
        default=_QUERY["min_confidence"],
        metavar="X",
        help=f"lowest confidence returned (default {_QUERY['min_confidence']})",
    )
    query.add_argument(
        "--mode",
        choices=QUERY_MODES,
        default=_QUERY["mode"],
        help=f"hybrid fuses every signal; vector or lexical use one (default {_QUERY['mode']})",
    )
    query.add_argument(
        "--min-similarity",
        type=_float_between(-1.0, 1.0),
        default=_QUERY["min_similarity"],
        metavar="S",
        help="only entries whose cosine similarity to the text is above S, in [-1, 1] "
        f"(default {_QUERY['min_similarity']}: anything related at all; raise it, e.g. to 0.5, "
        "for close matches only)",
    )
    query.set_defaults(handler=cmd_query)

    entity = commands.add_parser(
        "entity",
        parents=[store, identity, reader, output],
        help="one entity of the knowledge graph: its edges, entries, history or neighbours",
        description="An entity as the principal may see it (only through entries it may "
        "see that are not archived): its live edges and newest entries; with --history its "
        "typed edges through time (every one, retired ones included, or those live at "
        "--as-of); with --related the entities within --depth live edges. Exit 1 when the "
        "entity is unknown or not visible.",
    )
    entity.add_argument("name", help="the entity's name (case and spacing do not matter)")
    entity.add_argument(
        "--history", action="store_true", help="its typed edges through time (bi-temporal)"
    )
    entity.add_argument(
        "--as-of",
        metavar="TIME",
        help="with --history: the edges live at this ISO 8601 date or time (no zone: UTC)",
    )
    entity.add_argument(
        "--related", action="store_true", help="the entities within --depth live edges"
    )
    entity.add_argument(
        "--depth",
        type=_int_between(1, MAX_ENTITY_DEPTH),
        metavar="N",
        help=f"with --related: edges walked, 1 to {MAX_ENTITY_DEPTH} (default 1)",
    )
    entity.set_defaults(handler=cmd_entity)

    entities = commands.add_parser(
        "entities",
        parents=[store, identity, reader, output],
        help="list the entities of the knowledge graph the principal may see",
        description="The entities the principal may see, by name, each with the number of "
        "entries it may see that mention it; --prefix keeps names starting with it, --query "
        "the names a text mentions.",
    )
    entities.add_argument("--prefix", metavar="TEXT", help="only names starting with TEXT")
    entities.add_argument("--query", metavar="TEXT", help="only the names TEXT mentions")
    entities.add_argument(
        "--limit",
        type=_int_between(1, MAX_ENTITIES),
        default=_ENTITIES["limit"],
        metavar="N",
        help=f"entities, 1 to {MAX_ENTITIES} (default {_ENTITIES['limit']})",
    )
    entities.set_defaults(handler=cmd_entities)

    migrate = commands.add_parser(
        "migrate",
        parents=[store],
        help="create or upgrade the database schema",
        description="Open the store (the embedded PostgreSQL, or APOLLO_DATABASE_URL), apply "
        "pending schema migrations and print the schema version.",
    )
    migrate.set_defaults(handler=cmd_migrate)

    reembed = commands.add_parser(
        "reembed",
        parents=[store],
        help="move the store's vectors to the embedder configured now",
        description="Embed every entry again with the embedder configured now (APOLLO_EMBEDDER"
        " and the settings that go with it) and switch the store to it in one transaction;"
        " queries answer from the old vectors until then. Progress goes to stderr; a run"
        " that is killed resumes where it stopped when started again.",
    )
    reembed.add_argument(
        "--batch-size",
        type=_int_between(1, MAX_REEMBED_BATCH),
        default=DEFAULT_REEMBED_BATCH,
        metavar="N",
        help=f"texts embedded and committed at a time, 1 to {MAX_REEMBED_BATCH}"
        f" (default {DEFAULT_REEMBED_BATCH})",
    )
    reembed.set_defaults(handler=cmd_reembed)

    label = commands.add_parser(
        "label",
        parents=[store],
        help="label a source (moderator, admin, troll, flagged), or show its standing",
        description="Credibility labels override what a source's track record says: "
        "moderator/admin → 1.0, troll/flagged → 0.05. Without a label, shows the source's "
        "alpha, beta, credibility and validated/refuted evidence.",
    )
    label.add_argument("agent_id", metavar="AGENT", help="the source's agent id")
    label.add_argument(
        "label", nargs="?", choices=["moderator", "admin", "troll", "flagged"], help="the label"
    )
    label.add_argument("--remove", action="store_true", help="remove the source's label")
    label.set_defaults(handler=cmd_label)

    stats = commands.add_parser(
        "stats",
        parents=[store, identity, output],
        help="counts of the entries the principal may see",
        description="Total, created in the last 24 h, average confidence, by status, by "
        "content type, relations — over the entries the principal may see.",
    )
    stats.set_defaults(handler=cmd_stats)
    return parser


def _tolerant_output() -> None:
    """Never crash on a character the terminal cannot encode."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def _silence_stdout() -> None:
    """The reader of stdout went away (``apollo stats | head -2``): send what is still
    buffered to /dev/null, so the flush at exit does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    _tolerant_output()
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        status = int(handler(args))
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return status
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except UsageError as exc:
        error(str(exc))
        return EXIT_USAGE
    except ConfigurationError as exc:
        typed = as_typed(exc, args)
        error(f"{typed.variable}: {typed.message}")
        return EXIT_USAGE
    except ValidationError as exc:
        error(f"{exc.field}: {exc.message}")
        return EXIT_USAGE
    except ApolloError as exc:
        error(f"{type(exc).__name__}: {exc}")
        return EXIT_FAILURE
    except KeyboardInterrupt:
        error("interrupted")
        return EXIT_INTERRUPTED


__all__ = ["build_parser", "main"]
