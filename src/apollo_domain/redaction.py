"""Erasure's rule for the JSON Apollo keeps beside knowledge (docs/architecture.md, "The use
cases").

An erased agent's id must not survive in any ``source_context``: neither in the caller
context it passed with its own entries (``{"caller": {"agent_id": ...}}``, GAS routing)
nor where Apollo recorded it elsewhere (``linked_by`` of a relation, the sources of an
agreement). Every JSON string equal to the agent id — a value or an object key, at any
depth — becomes :data:`REDACTED`; free text that merely contains it is left alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REDACTED = "redacted"
"""The agent id and source of everything an erased agent leaves behind."""

HIDDEN = "hidden"
"""The agent name an anonymous caller sees in place of every real one
(:mod:`apollo_domain.disclosure`)."""


def redact_value(value: Any, agent_id: str, replacement: str = REDACTED) -> Any:
    """``value`` (JSON-like: mappings, lists, tuples, scalars) with every string equal to
    ``agent_id`` replaced by ``replacement``, keys included; other values are returned
    as they are (the same objects where nothing changed)."""
    if isinstance(value, str):
        return replacement if value == agent_id else value
    if isinstance(value, Mapping):
        return {
            redact_value(key, agent_id, replacement): redact_value(item, agent_id, replacement)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(redact_value(item, agent_id, replacement) for item in value)
    return value


def redact_context(
    context: Mapping[str, Any], agent_id: str, replacement: str = REDACTED
) -> dict[str, Any] | None:
    """The redacted copy of a ``source_context``, or None when it does not name the agent."""
    redacted = redact_value(context, agent_id, replacement)
    return None if redacted == dict(context) else redacted


__all__ = ["HIDDEN", "REDACTED", "redact_context", "redact_value"]
