"""``apollo ingest``: bulk-ingest a JSONL file, with a progress bar on a terminal.

Each line is checked alone (a bad one is reported by its number and skipped); the good
ones are stored in chunks of ``CHUNK`` through the bulk path (one embedding call, one
search pass and one transaction per chunk), with the outcomes storing them one by one in
order would have."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

import attrs
from attrs import define, field

from apollo_domain.bounds import MESSAGE
from apollo_domain.commands import StoreKnowledge, aliases_of, unalias
from apollo_domain.errors import ApolloError, ConfigurationError, ValidationError
from apollo_domain.handlers import store_item
from apollo_domain.model import Outcome, Principal
from apollo_domain.results import TextResult
from apollo_domain.services import IngestItem, ingest_each
from apollo_domain.services.bulk_ingest import BATCH_SIZE
from apollo_domain.validation import MAX_JSON_DEPTH

from ..facade.client import command_of
from .common import (
    EXIT_FAILURE,
    EXIT_OK,
    PROG,
    UsageError,
    error,
    load_settings,
    open_apollo,
    principal_of,
    run_async,
)

#: The fields one JSONL line may carry: the store command's, the agent id included (also
#: as lex-apollo's ``source_agent``).
INGEST_FIELDS = frozenset(a.name for a in attrs.fields(StoreKnowledge)) | set(
    aliases_of(StoreKnowledge)
)

#: The good lines stored together: one bulk chunk.
CHUNK = BATCH_SIZE


class Progress:
    """A progress bar (rich) on ``stream`` while it is a terminal, counting the lines read
    and showing the entries stored per second; elsewhere (a log, a pipe) nothing at all:
    the summary line printed at the end says what happened."""

    def __init__(self, total: int | None, stream: TextIO) -> None:
        self.total = total
        self.interactive = stream.isatty()
        self._started = time.monotonic()
        self._bar: Any = None
        self._task: Any = None
        if self.interactive:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TaskProgressColumn,
                TextColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as Bar

            self._bar = Bar(
                TextColumn("ingest"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                console=Console(file=stream),
            )
            self._task = self._bar.add_task("ingest", total=total, rate=self.rate(0))
            self._bar.start()

    def rate(self, stored: int) -> str:
        """``stored`` entries since the start, per second."""
        elapsed = max(time.monotonic() - self._started, 1e-9)
        return f"{stored / elapsed:,.0f} entries/s"

    def update(self, done: int, stored: int | None = None) -> None:
        """``done`` lines of ``total`` are read (``stored`` entries stored so far)."""
        if self._bar is not None:
            fields = {} if stored is None else {"rate": self.rate(stored)}
            self._bar.update(self._task, completed=done, **fields)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


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
    """One JSONL line → ``store_knowledge`` fields; :class:`ValueError` says what is wrong
    (a line over the ``MESSAGE`` bound is refused before it is parsed)."""
    try:
        MESSAGE.check(len(text.encode("utf-8", "surrogatepass")))
    except ValidationError as exc:
        raise ValueError(f"{exc.field}: {exc.message}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    unknown = sorted(set(value) - INGEST_FIELDS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}")
    value = unalias(StoreKnowledge, value)
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
    chunk: int = CHUNK,
) -> None:
    """Store each valid line, counting into ``report``; a bad line is recorded with its
    number and reason and skipped. The valid lines are stored ``chunk`` at a time, in
    order, in one unit of work each (:func:`ingest_each`: the results storing them one by
    one would give). A store failure propagates (earlier chunks stay stored); so does a
    refusal of the caller (the valid lines before it are stored first)."""
    callers: dict[str, Any] = {}
    pending: list[IngestItem] = []

    async def flush() -> None:
        if pending:
            results = await ingest_each(apollo.deps, pending)
            pending.clear()
            for result in results:
                report.outcomes[result.outcome.value] += 1
                if result.outcome is Outcome.REJECTED:
                    report.rejections[(result.reason or "rejected").split(":")[0]] += 1

    number = 0
    for number, raw in enumerate(lines, 1):
        text = raw.strip()
        if text:
            try:
                fields = parse_line(text)
                agent = fields.pop("agent_id", None) or agent_id
                caller = callers.get(agent)
                if caller is None:
                    caller = callers[agent] = apollo.client(agent, principal).caller
                pending.append(store_item(caller, command_of(StoreKnowledge, fields), None))
            except ValidationError as exc:
                report.bad.append((number, f"{exc.field}: {exc.message}"))
            except ValueError as exc:
                report.bad.append((number, str(exc)))
            except ApolloError:
                await flush()
                raise
        if len(pending) >= chunk:
            await flush()
        progress.update(number, report.stored)
    await flush()
    progress.update(number, report.stored)


def read_text(path: str) -> str | list[Any]:
    """What ``apollo ingest --text`` stores: the file (``-``: stdin) as one text, a JSON list
    (of turns) as a conversation. A file over the ``MESSAGE`` bound is refused unread."""
    try:
        if path == "-":
            raw = sys.stdin.buffer.read(MESSAGE.limit + 1)
        else:
            with Path(path).open("rb") as handle:
                raw = handle.read(MESSAGE.limit + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MESSAGE.limit:
        raise UsageError(f"{path} is over {MESSAGE.limit:,} bytes ({MESSAGE.name})")
    text = raw.decode("utf-8", errors="replace")
    if text.lstrip().startswith("["):
        try:
            turns = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return text
        if isinstance(turns, list):
            return turns
    return text


def cmd_ingest_text(args: argparse.Namespace) -> int:
    """``apollo ingest --text FILE``: one ``store_text``; prints the episode and each
    statement's outcome."""
    settings = load_settings(args)
    text = read_text(args.file)

    async def run() -> TextResult:
        async with open_apollo(settings) as apollo:
            client = apollo.client(args.agent, principal_of(args))
            return await client.store_text(text, tags=args.tag, access_scope=args.scope)

    told = run_async(run())
    print(f"episode {told.episode_id}: {len(told.statements)} statement(s)")
    for position, result in enumerate(told.statements):
        said = result.outcome.value
        if result.entry_id is not None:
            said += f" {result.entry_id}"
        if result.reason:
            said += f" ({result.reason})"
        print(f"  {position}: {said}")
    return EXIT_OK


def cmd_ingest(args: argparse.Namespace) -> int:
    if getattr(args, "text", False):
        return cmd_ingest_text(args)
    settings = load_settings(args)
    lines, total, handle = _open_lines(args.file)
    progress = Progress(total, sys.stderr)
    report = IngestReport()

    async def run() -> None:
        async with open_apollo(settings) as apollo:
            await ingest_lines(
                apollo,
                lines,
                report,
                agent_id=args.agent,
                principal=principal_of(args),
                progress=progress,
            )

    try:
        run_async(run())
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
    if report.bad and not report.stored:
        error(f"nothing was stored: every one of the {len(report.bad)} line(s) was bad")
        return EXIT_FAILURE
    return EXIT_OK


__all__ = [
    "CHUNK",
    "INGEST_FIELDS",
    "IngestReport",
    "Progress",
    "cmd_ingest",
    "cmd_ingest_text",
    "ingest_lines",
    "parse_line",
    "read_text",
]
