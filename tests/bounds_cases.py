"""One over-limit input for every row of :data:`apollo_domain.bounds.BOUNDS`, shaped as the
command that carries it, for the tests of every edge (library on both stores, HTTP, the
in-process and RabbitMQ buses, GAS events, the CLI).

The over-limit value is derived from the row (its limit and unit), so a changed limit is
tested at its new value; a new row without a case here fails
``test_every_bound_has_an_over_limit_case``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from uuid import uuid4

from attrs import frozen

from apollo_domain import bounds as b
from apollo_domain import commands as c
from apollo_domain.bounds import Bound, Unit
from tests.support import nested


def over_text(bound: Bound) -> str:
    """One character more than ``bound`` allows (ASCII letters: a tag or domain keeps them
    all once normalized)."""
    assert bound.unit is Unit.CHARACTERS
    return "x" * (bound.limit + 1)


def over_items(bound: Bound, item: Callable[[int], Any] = lambda i: f"t{i}") -> list[Any]:
    """One distinct item more than ``bound`` allows."""
    assert bound.unit is Unit.ITEMS
    return [item(i) for i in range(bound.limit + 1)]


def over_bytes(bound: Bound) -> dict[str, str]:
    """A JSON object whose compact serialization is a few bytes over ``bound``."""
    assert bound.unit is Unit.BYTES
    return {"k": "x" * bound.limit}


def over_depth(bound: Bound) -> dict[str, Any]:
    """An object nested one level deeper than ``bound`` allows."""
    assert bound.unit is Unit.LEVELS
    return nested(bound.limit + 1)


@frozen
class Case:
    """An over-limit input for ``bound``: the command ``kind`` with ``payload`` (its JSON
    fields), refused naming ``field``."""

    bound: Bound
    kind: type[c.Command[Any]]
    payload: Mapping[str, Any]
    field: str

    @property
    def id(self) -> str:
        return self.bound.name

    def command(self) -> c.Command[Any]:
        if self.kind is c.StoreMany:
            items = tuple(c.StoreKnowledge(**item) for item in self.payload["items"])
            return c.StoreMany(items=items)
        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in self.payload.items()}
        return self.kind(**fields)

    @property
    def gas(self) -> bool:
        return self.kind is c.ProcessGasEvent


def _store(bound: Bound, **fields: Any) -> Case:
    return Case(bound, c.StoreKnowledge, {"content": "within every bound", **fields}, bound.field)


def _text(bound: Bound, text: Any, field: str = "text") -> Case:
    return Case(bound, c.StoreText, {"text": text}, field)


def _gas(bound: Bound, **fields: Any) -> Case:
    event = {"request_id": uuid4().hex, "response_content": "a response", **fields}
    return Case(bound, c.ProcessGasEvent, {"event": event}, bound.field)


ENTRY = str(uuid4())  # a well-formed id: each bound is checked before the entry is read

CASES: dict[str, Case] = {
    case.id: case
    for case in (
        _store(b.CONTENT, content=over_text(b.CONTENT)),
        _store(b.TAG_COUNT, tags=over_items(b.TAG_COUNT)),
        _store(b.TAG, tags=["fine", over_text(b.TAG)]),
        _store(b.DOMAIN, knowledge_domain=over_text(b.DOMAIN)),
        _store(b.AGENT_ID, agent_id=over_text(b.AGENT_ID)),
        _store(b.PROVIDER, source_provider=over_text(b.PROVIDER)),
        _store(b.CHANNEL, source_channel=over_text(b.CHANNEL)),
        _store(b.SUBMITTED_BY, submitted_by=over_text(b.SUBMITTED_BY)),
        _store(b.SUBMITTED_FROM, submitted_from=over_text(b.SUBMITTED_FROM)),
        _store(b.CONTEXT_BYTES, context=over_bytes(b.CONTEXT_BYTES)),
        _store(b.JSON_DEPTH, context=over_depth(b.JSON_DEPTH)),
        Case(
            b.STORE_MANY,
            c.StoreMany,
            {"items": over_items(b.STORE_MANY, lambda i: {"content": f"bulk item {i}"})},
            b.STORE_MANY.field,
        ),
        Case(
            b.REASON,
            c.DeprecateEntry,
            {"entry_id": ENTRY, "reason": over_text(b.REASON)},
            b.REASON.field,
        ),
        _text(b.TEXT, over_text(b.TEXT)),
        _text(b.TURNS, over_items(b.TURNS, lambda i: {"speaker": "ann", "text": f"turn {i}"})),
        _text(b.SPEAKER, [{"speaker": over_text(b.SPEAKER), "text": "hi"}], "text[0].speaker"),
        _text(
            b.STATEMENTS,
            " ".join(f"Statement number {i} stands alone." for i in range(b.STATEMENTS.limit + 1)),
        ),
        _text(b.STATEMENT, over_text(b.STATEMENT)),
        Case(b.QUERY, c.QueryKnowledge, {"query": over_text(b.QUERY)}, b.QUERY.field),
        Case(
            b.QUERY_LIMIT,
            c.QueryKnowledge,
            {"query": "kafka partitions", "limit": b.QUERY_LIMIT.limit + 1},
            b.QUERY_LIMIT.field,
        ),
        Case(
            b.RELATION_TYPES,
            c.RelatedEntries,
            {"entry_id": ENTRY, "relation_types": over_items(b.RELATION_TYPES, lambda i: "is_a")},
            b.RELATION_TYPES.field,
        ),
        Case(b.ENTITY_NAME, c.GetEntity, {"name": over_text(b.ENTITY_NAME)}, "name"),
        Case(b.ENTITY_PREFIX, c.ListEntities, {"prefix": over_text(b.ENTITY_PREFIX)}, "prefix"),
        Case(b.ENTITY_LIMIT, c.ListEntities, {"limit": b.ENTITY_LIMIT.limit + 1}, "limit"),
        _gas(b.REQUEST_ID, request_id=over_text(b.REQUEST_ID)),
        _gas(b.RESPONSE, response_content=over_text(b.RESPONSE)),
        _gas(b.ROUTING, routing=over_bytes(b.ROUTING)),
        # a message is measured before it is parsed: its content (within every other
        # bound but this one) never reaches the command
        _store(b.MESSAGE, content="x" * b.MESSAGE.limit),
    )
}

#: The cases of bounds on a command's fields: what the library (no message) is given.
FIELD_CASES = [case for case in CASES.values() if case.bound is not b.MESSAGE]
#: The cases whose command a bus message or an HTTP body carries (not a bulk store).
EDGE_CASES = [case for case in FIELD_CASES if case.kind is not c.StoreMany]
#: The cases a JSONL line of ``apollo ingest`` can carry.
LINE_CASES = [case for case in EDGE_CASES if case.kind is c.StoreKnowledge]
