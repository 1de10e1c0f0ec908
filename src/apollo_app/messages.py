"""The wire format of Apollo's messages: versioned JSON commands, RPC replies, GAS events.

Every command is one JSON object ``{"v": 1, "action": <action>, "payload": {...}}``. The
payload is an attrs body class of this module, (de)structured strictly by the private
converter of :func:`make_converter` (no coercion between strings and numbers, no unknown
fields). A body names the calling agent (``agent_id``, attribution only); it never carries
a principal: the consumer takes identity from the broker-verified ``user_id``.

Which queue carries what:

- ingest queue: ``ingest`` and the other mutations (``link``, ``deprecate``, ``resolve``,
  ``force_decay``, ``archive_stale``);
- query queue (RPC): ``query``, ``retrieve``, ``traverse``, ``expertise``, ``at_risk``,
  ``profile``; answered with ``{"ok": true, "result": ...}`` or
  ``{"ok": false, "error": {"type", "message", "field"}}``;
- writeback-store / writeback-vectorize: ``writeback_store`` (content + embedding +
  metadata) and ``writeback_vectorize`` (content + metadata);
- GAS queue: the ``llm.audit.complete`` event itself, a raw JSON object (not enveloped).

A body that cannot be decoded raises :class:`ValidationError` naming the offending field,
so the consumer dead-letters it with the reason.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from typing import Any, Final, TypeVar

import cattrs
from attrs import field, frozen
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
)

from apollo_domain.errors import (
    ApolloError,
    Conflict,
    EmbeddingError,
    InvalidTransition,
    NotFound,
    PersistenceFailed,
    RpcTimeout,
    StoreUnavailable,
    TransportError,
    UnknownResolution,
    ValidationError,
)
from apollo_domain.expertise import DomainCoverage
from apollo_domain.ports import ExpertiseRecord
from apollo_domain.results import AgentProfile, QueryResult, RelatedEntry
from apollo_domain.topology import Topology

from . import serialization

DEADLINE_HEADER = "x-apollo-deadline"  # RPC requests: epoch seconds after which nobody waits

VERSION: Final = 1
T = TypeVar("T")


class Action(enum.StrEnum):
    INGEST = "ingest"
    LINK = "link"
    DEPRECATE = "deprecate"
    RESOLVE = "resolve"
    FORCE_DECAY = "force_decay"
    ARCHIVE_STALE = "archive_stale"
    QUERY = "query"
    RETRIEVE = "retrieve"
    TRAVERSE = "traverse"
    EXPERTISE = "expertise"
    AT_RISK = "at_risk"
    PROFILE = "profile"
    WRITEBACK_STORE = "writeback_store"
    WRITEBACK_VECTORIZE = "writeback_vectorize"


#: Mutations, published to the ingest queue.
MUTATIONS: Final = frozenset(
    {
        Action.INGEST,
        Action.LINK,
        Action.DEPRECATE,
        Action.RESOLVE,
        Action.FORCE_DECAY,
        Action.ARCHIVE_STALE,
    }
)
#: Read-only requests, answered over RPC on the query queue.
REQUESTS: Final = frozenset(
    {
        Action.QUERY,
        Action.RETRIEVE,
        Action.TRAVERSE,
        Action.EXPERTISE,
        Action.AT_RISK,
        Action.PROFILE,
    }
)

# ------------------------------------------------------------------------------ bodies


@frozen
class IngestBody:
    content: str
    agent_id: str = "unknown"
    content_type: str | None = "observation"
    tags: tuple[str, ...] | None = None
    context: dict[str, Any] | None = None
    source_provider: str | None = None
    source_channel: str | None = None
    knowledge_domain: str | None = None
    access_scope: str = "global"
    submitted_by: str | None = None
    submitted_from: str | None = None


@frozen
class LinkBody:
    from_entry_id: str
    to_entry_id: str
    relation_type: str
    weight: float = 1.0
    agent_id: str = "unknown"


@frozen
class DeprecateBody:
    entry_id: str
    reason: str
    agent_id: str = "unknown"


@frozen
class ResolveBody:
    entry_id: str
    resolution: str
    agent_id: str = "unknown"


@frozen
class ForceDecayBody:
    factor: float
    agent_id: str = "unknown"


@frozen
class ArchiveStaleBody:
    days: float
    agent_id: str = "unknown"


@frozen
class QueryBody:
    query: str
    agent_id: str = "unknown"
    min_confidence: float = 0.3
    limit: int = 10
    status: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None
    knowledge_domain: str | None = None


@frozen
class RetrieveBody:
    query: str
    agent_id: str = "unknown"
    limit: int = 5
    min_confidence: float = 0.3
    tags: tuple[str, ...] | None = None
    knowledge_domain: str | None = None


@frozen
class TraverseBody:
    entry_id: str
    agent_id: str = "unknown"
    depth: int = 2
    relation_types: tuple[str, ...] | None = None


@frozen
class ExpertiseBody:
    domain: str
    agent_id: str = "unknown"
    min_proficiency: float = 0.0


@frozen
class AtRiskBody:
    agent_id: str = "unknown"
    min_agents: int = 2


@frozen
class ProfileBody:
    target_agent_id: str
    agent_id: str = "unknown"


@frozen
class WritebackStoreBody:
    """A qualifying LLM response that already carries its embedding.

    ``metadata`` keys ``content_type``, ``tags``, ``knowledge_domain``, ``source_provider``,
    ``source_channel``, ``access_scope``, ``submitted_by`` and ``submitted_from`` become the
    ingest arguments of the same name; every other key goes into the entry's context.
    """

    content: str
    embedding: tuple[float, ...]
    agent_id: str = "unknown"
    metadata: dict[str, Any] = field(factory=dict)


@frozen
class WritebackVectorizeBody:
    """A qualifying LLM response without an embedding (``metadata`` as for the store body)."""

    content: str
    agent_id: str = "unknown"
    metadata: dict[str, Any] = field(factory=dict)


@frozen
class GasEventBody:
    """An ``llm.audit.complete`` event: the raw JSON object, as the audit exchange carries it."""

    event: dict[str, Any]


Body = (
    IngestBody
    | LinkBody
    | DeprecateBody
    | ResolveBody
    | ForceDecayBody
    | ArchiveStaleBody
    | QueryBody
    | RetrieveBody
    | TraverseBody
    | ExpertiseBody
    | AtRiskBody
    | ProfileBody
    | WritebackStoreBody
    | WritebackVectorizeBody
)

BODIES: Final[Mapping[Action, type[Any]]] = {
    Action.INGEST: IngestBody,
    Action.LINK: LinkBody,
    Action.DEPRECATE: DeprecateBody,
    Action.RESOLVE: ResolveBody,
    Action.FORCE_DECAY: ForceDecayBody,
    Action.ARCHIVE_STALE: ArchiveStaleBody,
    Action.QUERY: QueryBody,
    Action.RETRIEVE: RetrieveBody,
    Action.TRAVERSE: TraverseBody,
    Action.EXPERTISE: ExpertiseBody,
    Action.AT_RISK: AtRiskBody,
    Action.PROFILE: ProfileBody,
    Action.WRITEBACK_STORE: WritebackStoreBody,
    Action.WRITEBACK_VECTORIZE: WritebackVectorizeBody,
}
ACTIONS: Final[Mapping[type[Any], Action]] = {body: action for action, body in BODIES.items()}

#: What an RPC request's reply carries when it succeeds.
RESULT_TYPES: Final[Mapping[Action, Any]] = {
    Action.QUERY: QueryResult,
    Action.RETRIEVE: QueryResult,
    Action.TRAVERSE: list[RelatedEntry],
    Action.EXPERTISE: list[ExpertiseRecord],
    Action.AT_RISK: list[DomainCoverage],
    Action.PROFILE: AgentProfile,
}

WRITEBACK_ARGUMENTS: Final = (
    "content_type",
    "tags",
    "knowledge_domain",
    "source_provider",
    "source_channel",
    "access_scope",
    "submitted_by",
    "submitted_from",
)


def writeback_arguments(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The ingest arguments of a writeback body's ``metadata`` (see :class:`WritebackStoreBody`);
    unrecognised keys, and the ``context`` object if any, make up the context."""
    arguments = {name: metadata[name] for name in WRITEBACK_ARGUMENTS if name in metadata}
    arguments.setdefault("content_type", "observation")
    extra = metadata.get("context")
    context = dict(extra) if isinstance(extra, Mapping) else {}
    context.update(
        (key, value)
        for key, value in metadata.items()
        if key not in WRITEBACK_ARGUMENTS and key != "context"
    )
    arguments["context"] = context
    return arguments


# ---------------------------------------------------------------------------- converter


def make_converter(*, forbid_extra_keys: bool = True) -> cattrs.Converter:
    """The private converter of the message edge: strict JSON types; unknown payload fields
    are refused unless ``forbid_extra_keys`` is false (replies are read tolerantly)."""
    return serialization.make_converter(forbid_extra_keys=forbid_extra_keys)


_commands = make_converter()
_replies = make_converter(forbid_extra_keys=False)


def encode_command(body: Body) -> bytes:
    """``{"v": 1, "action": ..., "payload": ...}`` as UTF-8 JSON."""
    action = ACTIONS.get(type(body))
    if action is None:
        raise ValidationError("action", f"{type(body).__name__} is not a message body")
    try:
        return serialization.encode_json(
            {"v": VERSION, "action": action.value, "payload": _commands.unstructure(body)}
        )
    except (TypeError, ValueError) as exc:
        raise ValidationError("payload", f"cannot be encoded as JSON: {exc}") from None


def payload_of(body: Body) -> dict[str, Any]:
    """The JSON payload of ``body`` (what a :class:`Dispatch` shows)."""
    payload: dict[str, Any] = _commands.unstructure(body)
    return payload


def decode_command(raw: bytes, *, accept: Collection[Action] | None = None) -> Body:
    """The body of a command. Raises :class:`ValidationError` (naming the field) for bad
    JSON, another version, an unknown action or one not in ``accept``, and bad payloads."""
    document = serialization.decode_json(raw)
    if not isinstance(document, dict):
        raise ValidationError("body", "must be a JSON object")
    version = document.get("v")
    if version != VERSION or isinstance(version, bool):
        raise ValidationError("v", f"unsupported message version {version!r}; expected {VERSION}")
    try:
        action = Action(str(document.get("action")))
    except ValueError:
        raise ValidationError("action", f"unknown action {document.get('action')!r}") from None
    if accept is not None and action not in accept:
        raise ValidationError("action", f"{action.value!r} is not accepted here")
    unknown = set(document) - {"v", "action", "payload"}
    if unknown:
        raise ValidationError(sorted(unknown)[0], "unknown envelope field")
    payload = document.get("payload")
    if not isinstance(payload, dict):
        raise ValidationError("payload", "must be a JSON object")
    body: Body = structure(_commands, payload, BODIES[action])
    return body


def encode_gas_event(event: Mapping[str, Any]) -> bytes:
    """An ``llm.audit.complete`` event as published on the audit exchange."""
    try:
        return serialization.encode_json(dict(event))
    except (TypeError, ValueError) as exc:
        raise ValidationError("event", f"cannot be encoded as JSON: {exc}") from None


def decode_gas_event(raw: bytes) -> GasEventBody:
    """The GAS event of a message; :class:`ValidationError` unless it is a JSON object."""
    document = serialization.decode_json(raw, name="event")
    if not isinstance(document, dict):
        raise ValidationError("event", "must be a JSON object")
    return GasEventBody(document)


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
    return ValidationError(path or "payload", message)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# ------------------------------------------------------------------------------ replies


@frozen
class ReplyError:
    type: str
    message: str
    field: str | None = None


_ERRORS: Final[Mapping[str, type[ApolloError]]] = {
    cls.__name__: cls
    for cls in (
        NotFound,
        Conflict,
        InvalidTransition,
        UnknownResolution,
        StoreUnavailable,
        PersistenceFailed,
        EmbeddingError,
        TransportError,
        RpcTimeout,
    )
}


def encode_reply(result: Any) -> bytes:
    """A successful RPC reply carrying ``result``."""
    return serialization.encode_json({"ok": True, "result": _replies.unstructure(result)})


def encode_error_reply(error: BaseException) -> bytes:
    """A failed RPC reply: the error's type, message and (validation errors) field. Errors
    that are not Apollo's own are reported as ``ApolloError`` without their text."""
    if isinstance(error, ValidationError):
        described = ReplyError("ValidationError", error.message, error.field)
    elif isinstance(error, ApolloError):
        described = ReplyError(
            type(error).__name__, str(error), getattr(error, "field", None) or None
        )
    else:
        described = ReplyError("ApolloError", "the service failed to answer the request")
    return serialization.encode_json({"ok": False, "error": _replies.unstructure(described)})


def decode_reply(raw: bytes, result_type: type[T] | Any) -> T:
    """The result of an RPC reply, or the error the service reported, raised as the same
    :mod:`apollo_domain.errors` type (unknown types as :class:`ApolloError`)."""
    try:
        document = serialization.decode_json(raw, name="reply")
    except ValidationError as exc:
        raise TransportError(f"the service sent an unreadable reply: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("ok"), bool):
        raise TransportError("the service sent a reply without 'ok'")
    if not document["ok"]:
        error: ReplyError = structure(_replies, document.get("error"), ReplyError)
        raise _error_of(error)
    try:
        return structure(_replies, document.get("result"), result_type)
    except ValidationError as exc:
        raise TransportError(f"the service sent an unreadable result: {exc}") from None


def _error_of(error: ReplyError) -> ApolloError:
    if error.type == "ValidationError":
        return ValidationError(error.field or "request", error.message)
    kind = _ERRORS.get(error.type)
    if kind is None:
        return ApolloError(f"{error.type}: {error.message}")
    return kind(error.message)


# ----------------------------------------------------------------------------- topology


def topology_from_settings(settings: Any) -> Topology:
    """Apollo's topology named by the settings: queues ``<queue_prefix>.ingest``, ``.query``,
    ``.writeback.store``, ``.writeback.vectorize``, ``.gas`` and ``.dead``; the dead-letter
    exchange ``<exchange>.dlx``; the GAS queue bound to ``audit_exchange``. The defaults give
    the production names, and ``Topology().with_prefix(p)`` equals the topology of settings
    whose exchange, queue prefix and audit exchange all start with ``p``."""
    queues = settings.queue_prefix
    exchange = settings.exchange
    return Topology(
        exchange=exchange,
        ingest_queue=f"{queues}.ingest",
        query_queue=f"{queues}.query",
        writeback_store_queue=f"{queues}.writeback.store",
        writeback_vectorize_queue=f"{queues}.writeback.vectorize",
        gas_queue=f"{queues}.gas",
        audit_exchange=settings.audit_exchange,
        dead_letter_exchange=f"{exchange}.dlx",
        dead_letter_queue=f"{queues}.dead",
    )


__all__ = [
    "ACTIONS",
    "BODIES",
    "MUTATIONS",
    "REQUESTS",
    "RESULT_TYPES",
    "VERSION",
    "Action",
    "ArchiveStaleBody",
    "AtRiskBody",
    "Body",
    "DeprecateBody",
    "ExpertiseBody",
    "ForceDecayBody",
    "GasEventBody",
    "IngestBody",
    "LinkBody",
    "ProfileBody",
    "QueryBody",
    "ReplyError",
    "ResolveBody",
    "RetrieveBody",
    "TraverseBody",
    "WritebackStoreBody",
    "WritebackVectorizeBody",
    "decode_command",
    "decode_gas_event",
    "decode_reply",
    "encode_command",
    "encode_error_reply",
    "encode_gas_event",
    "encode_reply",
    "make_converter",
    "payload_of",
    "structure",
    "topology_from_settings",
    "writeback_arguments",
]
