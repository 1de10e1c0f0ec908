"""Every bound Apollo puts on what callers send, in one table (docs/concepts.md, "The rules in one
page").

Each :class:`Bound` names the field a violation is reported on, its limit and the unit the
limit counts. The use cases check their inputs against these rows and nothing else; the
edges (HTTP, the bus, GAS events, the CLI, the library) all reach the same checks, so an
input refused on one edge is refused on every edge, with a :class:`ValidationError` naming
the field. Over-limit input is never truncated: it is refused and nothing is written.

Two rules stand beside the table (docs/security.md, "Input that could mean two things"): a
JSON message holding one key twice is refused at every edge
(:func:`apollo_app.wire.codec.decode_json`, ``refuse_duplicate_keys`` for MCP), and every
stored string loses the bidirectional controls (:func:`apollo_domain.validation.storable_text`).
"""

from __future__ import annotations

import enum
from typing import Final

from attrs import frozen

from .errors import ValidationError


class Unit(enum.StrEnum):
    """What a bound counts."""

    CHARACTERS = "characters"  # Unicode code points of the text as given (or as stated)
    ITEMS = "items"  # members of a list
    BYTES = "bytes"  # UTF-8 bytes of a serialized value or of a raw message
    LEVELS = "levels"  # nesting of JSON objects and arrays; the value itself is level 1


@frozen
class Bound:
    """One row of the table: ``field`` (the name a violation names) holds at most ``limit``
    ``unit``; ``what`` says what is measured, for people."""

    name: str  # the row's own key, unique in the table
    field: str
    limit: int
    unit: Unit
    what: str

    def check(self, measure: int, field: str | None = None) -> None:
        """:class:`ValidationError` naming ``field`` (default: the row's) when ``measure``
        exceeds the limit."""
        if measure > self.limit:
            raise self.exceeded(measure, field)

    def exceeded(self, measure: int | None = None, field: str | None = None) -> ValidationError:
        """The error an input of ``measure`` units (unknown: None) over the limit gets."""
        name = field or self.field
        if self.unit is Unit.LEVELS:
            return ValidationError(name, f"is nested more than {self.limit} levels deep")
        most = f"at most {self.limit:,} {self.unit.value} are allowed ({self.name})"
        if measure is None:
            return ValidationError(name, f"is too long; {most}")
        if self.unit is Unit.ITEMS:
            return ValidationError(name, f"has {measure:,} items; {most}")
        long = " long" if self.unit is Unit.CHARACTERS else ""
        return ValidationError(name, f"is {measure:,} {self.unit.value}{long}; {most}")

    def text(self, value: str, field: str | None = None) -> str:
        """``value`` itself, when it holds at most ``limit`` characters."""
        self.check(len(value), field)
        return value

    def describe(self) -> str:
        """The row as docs/concepts.md lists it."""
        most = f"at most {self.limit:,} {self.unit.value}"
        return f"`{self.field}` ({self.name}): {most}, {self.what}"


# -------------------------------------------------------------------------------- writes

CONTENT: Final = Bound(
    "content", "content", 100_000, Unit.CHARACTERS, "an entry's text once cleaned"
)
TAG_COUNT: Final = Bound(
    "tag_count", "tags", 10, Unit.ITEMS, "an entry's distinct tags once normalized"
)
TAG: Final = Bound("tag", "tags", 64, Unit.CHARACTERS, "one tag once normalized")
DOMAIN: Final = Bound(
    "knowledge_domain", "knowledge_domain", 64, Unit.CHARACTERS, "a domain once normalized"
)
AGENT_ID: Final = Bound(
    "agent_id", "agent_id", 100, Unit.CHARACTERS, "the agent credited (stripped)"
)
PROVIDER: Final = Bound(
    "source_provider", "source_provider", 50, Unit.CHARACTERS, "a source's provider (stripped)"
)
CHANNEL: Final = Bound(
    "source_channel", "source_channel", 100, Unit.CHARACTERS, "a source's channel (stripped)"
)
SUBMITTED_BY: Final = Bound(
    "submitted_by", "submitted_by", 255, Unit.CHARACTERS, "who submitted it (stripped)"
)
SUBMITTED_FROM: Final = Bound(
    "submitted_from", "submitted_from", 255, Unit.CHARACTERS, "where from (stripped)"
)
CONTEXT_BYTES: Final = Bound(
    "context_bytes", "context", 65_536, Unit.BYTES, "a caller's context serialized as JSON"
)
JSON_DEPTH: Final = Bound(
    "json_depth",
    "context",
    32,
    Unit.LEVELS,
    "nesting of a caller's JSON value (context, GAS events, writeback metadata)",
)
STORE_MANY: Final = Bound("store_many", "items", 10_000, Unit.ITEMS, "the items of one bulk store")
REASON: Final = Bound("reason", "reason", 2_000, Unit.CHARACTERS, "a deprecation reason")

# ------------------------------------------------------------------------ texts (store_text)

TEXT: Final = Bound(
    "text",
    "text",
    100_000,
    Unit.CHARACTERS,
    "a text given to store_text, all its turns",
)
TURNS: Final = Bound("turns", "text", 2_000, Unit.ITEMS, "the turns of one conversation")
SPEAKER: Final = Bound("speaker", "speaker", 100, Unit.CHARACTERS, "a turn's speaker (stripped)")
STATEMENTS: Final = Bound(
    "statements",
    "text",
    256,
    Unit.ITEMS,
    "the statements one text is split into (one episode is stored in one transaction)",
)
STATEMENT: Final = Bound(
    "statement",
    "text",
    4_000,
    Unit.CHARACTERS,
    "one statement a text is split into (a sentence, or a language model's fact)",
)

# --------------------------------------------------------------------------------- reads

QUERY: Final = Bound("query", "query", 10_000, Unit.CHARACTERS, "a query's text")
QUERY_LIMIT: Final = Bound("query_limit", "limit", 100, Unit.ITEMS, "entries a query returns")
RELATION_TYPES: Final = Bound(
    "relation_types", "relation_types", 10, Unit.ITEMS, "relation types a traversal follows"
)
ENTITY_NAME: Final = Bound(
    "entity_name", "name", 1_000, Unit.CHARACTERS, "an entity name asked for"
)
ENTITY_PREFIX: Final = Bound(
    "entity_prefix", "prefix", 1_000, Unit.CHARACTERS, "an entity name prefix asked for"
)
ENTITY_LIMIT: Final = Bound(
    "entity_limit", "limit", 100, Unit.ITEMS, "entities an entity listing returns"
)

# ------------------------------------------------------------------------------ GAS events

REQUEST_ID: Final = Bound(
    "request_id", "request_id", 255, Unit.CHARACTERS, "a GAS event's request id"
)
RESPONSE: Final = Bound(
    "response_content", "response_content", 100_000, Unit.CHARACTERS, "a GAS event's response"
)
ROUTING: Final = Bound(
    "routing", "routing", 65_536, Unit.BYTES, "a GAS event's routing, serialized as JSON"
)

# ------------------------------------------------------------------------------- messages

MESSAGE: Final = Bound(
    "message",
    "message",
    2 * 1024 * 1024,
    Unit.BYTES,
    "an HTTP body, a bus message or a CLI line, measured before it is parsed",
)

#: The table: every bound, in the order docs/concepts.md lists them.
BOUNDS: Final[tuple[Bound, ...]] = (
    CONTENT,
    TAG_COUNT,
    TAG,
    DOMAIN,
    AGENT_ID,
    PROVIDER,
    CHANNEL,
    SUBMITTED_BY,
    SUBMITTED_FROM,
    CONTEXT_BYTES,
    JSON_DEPTH,
    STORE_MANY,
    REASON,
    TEXT,
    TURNS,
    SPEAKER,
    STATEMENTS,
    STATEMENT,
    QUERY,
    QUERY_LIMIT,
    RELATION_TYPES,
    ENTITY_NAME,
    ENTITY_PREFIX,
    ENTITY_LIMIT,
    REQUEST_ID,
    RESPONSE,
    ROUTING,
    MESSAGE,
)


def bound_named(name: str) -> Bound:
    """The row whose ``name`` is ``name``."""
    for bound in BOUNDS:
        if bound.name == name:
            return bound
    raise KeyError(name)


__all__ = [
    "AGENT_ID",
    "BOUNDS",
    "CHANNEL",
    "CONTENT",
    "CONTEXT_BYTES",
    "DOMAIN",
    "ENTITY_LIMIT",
    "ENTITY_NAME",
    "ENTITY_PREFIX",
    "JSON_DEPTH",
    "MESSAGE",
    "PROVIDER",
    "QUERY",
    "QUERY_LIMIT",
    "REASON",
    "RELATION_TYPES",
    "REQUEST_ID",
    "RESPONSE",
    "ROUTING",
    "SPEAKER",
    "STATEMENT",
    "STATEMENTS",
    "STORE_MANY",
    "SUBMITTED_BY",
    "SUBMITTED_FROM",
    "TAG",
    "TAG_COUNT",
    "TEXT",
    "TURNS",
    "Bound",
    "Unit",
    "bound_named",
]
