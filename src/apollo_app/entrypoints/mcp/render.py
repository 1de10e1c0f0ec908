"""The short text of a tool result, written for a language model to read.

A tool's structured content carries every field; its text says what matters in a few
lines: for each piece of knowledge its content, status, confidence and id, and the signals
that found it; for anything else its fields, one ``name: value`` per line.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import attrs

from apollo_domain.model import Entry, Outcome
from apollo_domain.results import Dispatch, IngestResult, QueryResult

#: At most this many characters of one entry's content in the text (the structured
#: content has all of it).
CONTENT_CHARS = 600
#: At most this many items of a list are written out; the rest are counted.
ITEMS = 50
#: Scores and confidences in the text: two decimals (the structured content has six).
DIGITS = 2


def text_of(result: Any) -> str:
    """The text of ``result``, a use case's result (or the list a tool returns)."""
    if isinstance(result, QueryResult):
        return _query(result)
    if isinstance(result, IngestResult):
        return _ingested(result)
    if isinstance(result, Dispatch):
        return f"sent {result.action} as message {result.message_id}; the service applies it"
    if isinstance(result, list | tuple):
        return _items(result)
    if _is_knowledge(result):
        return _knowledge(result)
    if attrs.has(type(result)):
        return "\n".join(_fields(result))
    return _scalar(result)


def _query(result: QueryResult) -> str:
    if not result.entries:
        return f"no entries found ({result.mode})"
    noun = "entry" if len(result.entries) == 1 else "entries"
    lines = [f"{len(result.entries)} {noun} found ({result.mode}):"]
    lines.extend(f"{n}. {_knowledge(view)}" for n, view in enumerate(result.entries, 1))
    return "\n".join(lines)


def _ingested(result: IngestResult) -> str:
    if result.outcome is Outcome.REJECTED:
        return f"rejected: {result.reason or 'not admitted'}"
    status = result.status.value if result.status is not None else "unknown"
    line = f"{result.outcome.value}: entry {result.entry_id} ({status}"
    if result.confidence is not None:
        line += f", confidence {_number(result.confidence)}"
    line += ")"
    return line + (f"; {result.reason}" if result.reason else "")


def _items(items: Sequence[Any]) -> str:
    if not items:
        return "none"
    lines = [f"{n}. {_one_line(item)}" for n, item in enumerate(items[:ITEMS], 1)]
    if len(items) > ITEMS:
        lines.append(f"... and {len(items) - ITEMS} more (in the structured content)")
    return "\n".join(lines)


def _one_line(item: Any) -> str:
    if isinstance(item, IngestResult):
        return _ingested(item)
    if _is_knowledge(item):
        return _knowledge(item)
    if attrs.has(type(item)):
        return "; ".join(_fields(item))
    return _scalar(item)


def _is_knowledge(value: Any) -> bool:
    """A value that carries a piece of knowledge: an entry, or a view of one."""
    names = {a.name for a in attrs.fields(type(value))} if attrs.has(type(value)) else set()
    return "id" in names and "status" in names and ("content" in names or "snippet" in names)


def _knowledge(value: Any) -> str:
    """``[status, confidence c] content (id ...; found by signal s, ...)`` plus the fields
    that place it (relation, depth, direction, source, domain)."""
    content = getattr(value, "content", None) or getattr(value, "snippet", "")
    content = " ".join(str(content).split())
    if len(content) > CONTENT_CHARS:
        content = content[: CONTENT_CHARS - 1] + "…"
    head = [_scalar(value.status)]
    confidence = getattr(value, "confidence", None)
    if confidence is not None:
        head.append(f"confidence {_number(confidence)}")
    details = [f"id {value.id}"]
    for name in ("relation_type", "direction", "depth", "activation", "knowledge_domain"):
        found = getattr(value, name, None)
        if found is not None and found != "":
            details.append(f"{name.replace('_', ' ')} {_scalar(found)}")
    source = (
        value.source.agent_id if isinstance(value, Entry) else getattr(value, "source_agent", None)
    )
    if source:
        details.append(f"from {source}")
    signals: Mapping[str, float] = getattr(value, "signals", None) or {}
    if signals:
        found_by = ", ".join(f"{name} {_number(score)}" for name, score in signals.items())
        details.append(f"found by {found_by}")
    elif getattr(value, "similarity", None) is not None:
        details.append(f"similarity {_number(value.similarity)}")
    folded = getattr(value, "folded", 0)
    if folded:
        details.append(f"{folded} near-duplicate{'s' if folded != 1 else ''} of it folded in")
    return f"[{', '.join(head)}] {content} ({'; '.join(details)})"


def _fields(value: Any) -> list[str]:
    lines = []
    for attribute in attrs.fields(type(value)):
        if attribute.name == "embedding":
            continue
        found = getattr(value, attribute.name)
        if isinstance(found, list | tuple) and found and not isinstance(found[0], str | int):
            lines.append(f"{attribute.name}: {len(found)}")
            lines.extend(f"  - {_one_line(item)}" for item in found[:ITEMS])
        else:
            lines.append(f"{attribute.name}: {_scalar(found)}")
    return lines


def _number(value: float) -> str:
    return f"{round(value, DIGITS):g}"


def _scalar(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(_scalar(item) for item in value) or "none"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_scalar(v)}" for k, v in value.items()) or "none"
    if attrs.has(type(value)):
        return "; ".join(_fields(value))
    return str(value)


__all__ = ["CONTENT_CHARS", "ITEMS", "text_of"]
