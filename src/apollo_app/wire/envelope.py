"""Commands on the bus: versioned JSON envelopes around :mod:`apollo_domain.commands`.

Every command message is one JSON object ``{"v": 1, "action": <action>, "payload": {...}}``
whose payload is the command's fields, (de)structured strictly by the private converter of
this module (no coercion between strings and numbers, no unknown fields; the aliases of
:data:`apollo_domain.commands.FIELD_ALIASES` are read as their fields). A payload names the
calling agent (``agent_id``, or lex-apollo's ``source_agent``; attribution only); it never
carries a principal: the consumer takes identity from the broker-verified ``user_id``.

Which queue carries what is each action's record (:mod:`apollo_domain.actions`):

- ingest queue (:data:`MUTATIONS`): ``store_knowledge``, ``link_entries``,
  ``deprecate_entry``, ``resolve_dispute``, ``force_decay``, ``archive_stale``;
- query queue (:data:`REQUESTS`, RPC): ``query_knowledge``, ``retrieve``,
  ``related_entries``, ``get_expertise``, ``domains_at_risk``, ``agent_profile``, and the
  entity graph's ``entities``, ``entity``, ``entity_history``, ``related_entities``,
  answered as :mod:`apollo_app.wire.replies` says;
- writeback-store / writeback-vectorize: ``writeback_store`` (content + embedding +
  metadata) and ``writeback_vectorize`` (content + metadata);
- GAS queue: the ``llm.audit.complete`` event itself, a raw JSON object (not enveloped).

Messages name an action by its one name; the names actions had before (``ingest``,
``query``, ``traverse``, ``link``, ``deprecate``, ``resolve``, ``expertise``, ``at_risk``,
``profile``: the records' aliases) are still read. A ``query`` message of those days may
carry ``count_access``: ``true`` is what ``query_knowledge`` does, ``false`` was
``retrieve`` (without statuses).

A message that cannot be decoded raises :class:`ValidationError` naming the offending
field, so the consumer dead-letters it with the reason.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final, TypeVar

import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
)

from apollo_domain import commands as c
from apollo_domain.actions import ACTIONS as RECORDS
from apollo_domain.actions import Bus
from apollo_domain.bounds import MESSAGE
from apollo_domain.errors import ValidationError

from . import codec

VERSION: Final = 1
#: RPC requests: epoch seconds after which nobody waits for the answer.
DEADLINE_HEADER: Final = "x-apollo-deadline"
#: A read's causal token (apollo_domain.causal): present, the read waits only for what it
#: names ("" or garbage: for nothing); absent, for every commit of the serving process.
CAUSAL_HEADER: Final = "x-apollo-causal-token"
T = TypeVar("T")

#: The action name of each command that travels on the bus in an envelope.
ACTIONS: Final[Mapping[type[c.Command[Any]], str]] = {
    kind: record.name
    for kind, record in RECORDS.items()
    if record.bus is not None and record.bus.enveloped
}
#: Every name a message may give an action (aliases included) → its command.
COMMANDS: Final[Mapping[str, type[c.Command[Any]]]] = {
    name: kind for kind in ACTIONS for name in RECORDS[kind].names
}


def names_on(queue: Bus) -> frozenset[str]:
    """The action names (aliases included) that ``queue`` carries."""
    return frozenset(name for name, kind in COMMANDS.items() if RECORDS[kind].bus is queue)


#: Mutations, published to the ingest queue.
MUTATIONS: Final = names_on(Bus.INGEST)
#: Read-only requests, answered over RPC on the query queue.
REQUESTS: Final = names_on(Bus.QUERY)
#: The name ``query_knowledge`` had when it also carried ``retrieve`` (``count_access``).
_LEGACY_QUERY = "query"


#: The private converter of command payloads: strict JSON types, unknown fields refused,
#: numbers as sent.
_commands = codec.make_converter(forbid_extra_keys=True, round_scores=False)


def action_of(command: c.Command[Any]) -> str:
    """The action name a message carrying ``command`` gives; :class:`ValidationError`
    naming ``action`` for a command that does not travel on the bus in an envelope."""
    action = ACTIONS.get(type(command))
    if action is None:
        raise ValidationError("action", f"{type(command).__name__} does not travel on the bus")
    return action


def payload_of(command: c.Command[Any]) -> dict[str, Any]:
    """The JSON payload of ``command`` (what a :class:`Dispatch` shows)."""
    payload: dict[str, Any] = _commands.unstructure(command)
    return payload


def encode_command(command: c.Command[Any]) -> bytes:
    """``{"v": 1, "action": ..., "payload": ...}`` as UTF-8 JSON; one over the ``MESSAGE``
    bound is refused here, as the service would refuse it."""
    action = action_of(command)
    try:
        body = codec.encode_json({"v": VERSION, "action": action, "payload": payload_of(command)})
    except (TypeError, ValueError) as exc:
        raise ValidationError("payload", f"cannot be encoded as JSON: {exc}") from None
    MESSAGE.check(len(body))
    return body


def decode_command(raw: bytes, *, accept: Collection[str] | None = None) -> c.Command[Any]:
    """The command of a message. Raises :class:`ValidationError` (naming the field) for a
    message over the ``MESSAGE`` bound (measured before it is parsed), bad JSON, another
    version, an unknown action or one not in ``accept``, and bad payloads."""
    MESSAGE.check(len(raw))
    try:
        document = codec.decode_json(raw, field_steps=2)
    except ValidationError as exc:  # a payload member nested too deeply: name it as below
        raise ValidationError(exc.field.removeprefix("payload."), exc.message) from None
    if not isinstance(document, dict):
        raise ValidationError("body", "must be a JSON object")
    version = document.get("v")
    if version != VERSION or isinstance(version, bool):
        raise ValidationError("v", f"unsupported message version {version!r}; expected {VERSION}")
    action = document.get("action")
    kind = COMMANDS.get(action) if isinstance(action, str) else None
    if kind is None:
        raise ValidationError("action", f"unknown action {action!r}")
    if accept is not None and action not in accept:
        raise ValidationError("action", f"{action!r} is not accepted here")
    unknown = set(document) - {"v", "action", "payload"}
    if unknown:
        raise ValidationError(sorted(unknown)[0], "unknown envelope field")
    payload = document.get("payload")
    if not isinstance(payload, dict):
        raise ValidationError("payload", "must be a JSON object")
    if action == _LEGACY_QUERY and "count_access" in payload:
        kind, payload = _legacy_query(payload)
    command: c.Command[Any] = structure(_commands, c.unalias(kind, payload), kind)
    return command


def _legacy_query(payload: Mapping[str, Any]) -> tuple[type[c.Command[Any]], dict[str, Any]]:
    """The command of a ``query`` payload that carries ``count_access``: the same search;
    ``false`` is :class:`~apollo_domain.commands.Retrieve`, which takes no statuses."""
    fields = dict(payload)
    counted = fields.pop("count_access")
    if not isinstance(counted, bool):
        raise ValidationError("count_access", "must be a boolean")
    if counted:
        return c.QueryKnowledge, fields
    if fields.pop("status", None) is not None:
        raise ValidationError("status", "is not taken by a query without counted access")
    return c.Retrieve, fields


def encode_gas_event(event: Mapping[str, Any]) -> bytes:
    """An ``llm.audit.complete`` event as published on the audit exchange (within the
    ``MESSAGE`` bound)."""
    try:
        body = codec.encode_json(dict(event))
    except (TypeError, ValueError) as exc:
        raise ValidationError("event", f"cannot be encoded as JSON: {exc}") from None
    MESSAGE.check(len(body))
    return body


def decode_gas_event(raw: bytes) -> c.ProcessGasEvent:
    """The GAS command of a message; :class:`ValidationError` unless it is a JSON object
    within the ``MESSAGE`` bound (measured before it is parsed)."""
    MESSAGE.check(len(raw))
    document = codec.decode_json(raw, name="event", field_steps=0)
    if not isinstance(document, dict):
        raise ValidationError("event", "must be a JSON object")
    return c.ProcessGasEvent(event=document)


def structure(converter: cattrs.Converter, value: Any, kind: type[T] | Any) -> T:
    """``converter.structure`` with cattrs' errors turned into one :class:`ValidationError`
    naming the first offending field (dotted path)."""
    try:
        result: T = converter.structure(value, kind)
    except Exception as exc:
        raise _validation_error(exc, "") from None
    return result


def _validation_error(exc: BaseException, path: str) -> ValidationError:
    if isinstance(exc, ForbiddenExtraKeysError):
        name = sorted(exc.extra_fields)[0] if exc.extra_fields else "?"
        return ValidationError(_join(path, name), "unknown field")
    if isinstance(exc, ClassValidationError):
        attributes, others = exc.group_exceptions()
        if attributes:
            inner, note = attributes[0]
            return _validation_error(inner, _join(path, note.name))
        if others:
            return _validation_error(others[0], path)
    if isinstance(exc, IterableValidationError):
        items, others = exc.group_exceptions()
        if items:
            inner, item = items[0]
            return _validation_error(inner, f"{path or 'value'}[{item.index}]")
        if others:
            return _validation_error(others[0], path)
    if isinstance(exc, ValidationError):
        return ValidationError(_join(path, exc.field) if path else exc.field, exc.message)
    if isinstance(exc, KeyError):
        return ValidationError(path or "payload", "is required")
    notes = [n for n in getattr(exc, "__notes__", ()) if isinstance(n, AttributeValidationNote)]
    if notes and not path:
        path = notes[0].name
    message = str(exc) or type(exc).__name__
    if len(message) > _MESSAGE_CHARS:  # never a megabyte of the input back
        message = message[:_MESSAGE_CHARS] + "…"
    return ValidationError(path or "payload", message)


#: The longest message a structuring failure is reported with.
_MESSAGE_CHARS = 300


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


__all__ = [
    "ACTIONS",
    "CAUSAL_HEADER",
    "COMMANDS",
    "DEADLINE_HEADER",
    "MUTATIONS",
    "REQUESTS",
    "VERSION",
    "action_of",
    "decode_command",
    "decode_gas_event",
    "encode_command",
    "encode_gas_event",
    "names_on",
    "payload_of",
    "structure",
]
