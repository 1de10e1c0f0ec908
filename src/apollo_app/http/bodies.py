"""Request bodies of the HTTP API: attrs classes that define both parsing and the schema.

Field types are checked strictly at the edge (the converter never coerces); ranges and
vocabularies are the use cases' business and are only *documented* here, through the
``schema`` metadata that the OpenAPI document merges into each property.
"""

from __future__ import annotations

from typing import Any

import attrs
import cattrs
from attrs import field, frozen
from cattrs.errors import IterableValidationError

from apollo_domain.errors import ValidationError
from apollo_domain.model import AccessScope, ContentType, RelationType, Status
from apollo_domain.normalize import MAX_CONTENT_CHARS
from apollo_domain.services.query import MAX_LIMIT
from apollo_domain.traversal import MAX_DEPTH

from ..serialization import describe_type, json_type


def _doc(description: str, **schema: Any) -> dict[str, Any]:
    return {"schema": {"description": description, **schema}}


_UNIT = {"minimum": 0, "maximum": 1}
_AGENT = _doc(
    "Agent credited with the action (attribution only, never identity; truncated to 100 "
    "characters). Default: the caller's principal id, else 'http'."
)


@frozen(kw_only=True)
class IngestBody:
    content: str = field(metadata=_doc("The knowledge to store.", maxLength=MAX_CONTENT_CHARS))
    content_type: str | None = field(
        default=None,
        metadata=_doc(
            "Entry type; aliases are normalized, anything unknown becomes observation.",
            examples=[t.value for t in ContentType],
        ),
    )
    tags: list[str] | None = field(default=None, metadata=_doc("Up to 10 tags."))
    context: dict[str, Any] | None = field(
        default=None, metadata=_doc("Caller context stored with the entry.")
    )
    source_provider: str | None = field(default=None, metadata=_doc("Provider of the source."))
    source_channel: str | None = field(default=None, metadata=_doc("Channel of the source."))
    knowledge_domain: str | None = field(
        default=None, metadata=_doc("Domain; default: the first tag, else general.")
    )
    access_scope: str | None = field(
        default=None,
        metadata=_doc(
            "global (default), team or private; team and private need a bearer token.",
            enum=[s.value for s in AccessScope],
        ),
    )
    agent_id: str | None = field(default=None, metadata=_AGENT)


@frozen(kw_only=True)
class QueryBody:
    query: str = field(metadata=_doc("Search text; under 3 characters browses newest first."))
    min_confidence: float = field(default=0.3, metadata=_doc("Confidence floor.", **_UNIT))
    limit: int = field(
        default=10, metadata=_doc("Maximum entries returned.", minimum=1, maximum=MAX_LIMIT)
    )
    status: list[str] | str | None = field(
        default=None,
        metadata=_doc(
            "Statuses to include (default: confirmed and candidate).",
            examples=[[s.value for s in Status]],
        ),
    )
    tags: list[str] | None = field(default=None, metadata=_doc("Entries having any tag."))
    knowledge_domain: str | None = field(default=None, metadata=_doc("Restrict to a domain."))
    min_similarity: float = field(
        default=0.0,
        metadata=_doc(
            "Only entries more similar than this match (unrelated texts never do).",
            minimum=-1.0,
            maximum=1.0,
        ),
    )
    agent_id: str | None = field(default=None, metadata=_AGENT)


@frozen(kw_only=True)
class RetrieveBody:
    query: str = field(metadata=_doc("Search text; under 3 characters browses newest first."))
    limit: int = field(
        default=5, metadata=_doc("Maximum entries returned.", minimum=1, maximum=MAX_LIMIT)
    )
    min_confidence: float = field(default=0.3, metadata=_doc("Confidence floor.", **_UNIT))
    tags: list[str] | None = field(default=None, metadata=_doc("Entries having any tag."))
    knowledge_domain: str | None = field(default=None, metadata=_doc("Restrict to a domain."))
    min_similarity: float = field(
        default=0.0,
        metadata=_doc(
            "Only entries more similar than this match (unrelated texts never do).",
            minimum=-1.0,
            maximum=1.0,
        ),
    )
    agent_id: str | None = field(default=None, metadata=_AGENT)


@frozen(kw_only=True)
class TraverseBody:
    entry_id: str = field(metadata=_doc("Root entry.", format="uuid"))
    depth: int = field(
        default=2, metadata=_doc("Maximum depth of the walk.", minimum=1, maximum=MAX_DEPTH)
    )
    relation_types: list[str] | None = field(
        default=None,
        metadata=_doc(
            "Relation types to follow (default: all).", examples=[[t.value for t in RelationType]]
        ),
    )
    agent_id: str | None = field(default=None, metadata=_AGENT)


@frozen(kw_only=True)
class DeprecateBody:
    reason: str = field(metadata=_doc("Why the entry is deprecated.", minLength=1))
    agent_id: str | None = field(default=None, metadata=_AGENT)


@frozen(kw_only=True)
class ResolveBody:
    resolution: str = field(metadata=_doc("accept or keep confirm the entry, reject archives it."))
    agent_id: str | None = field(default=None, metadata=_AGENT)


@frozen(kw_only=True)
class DecayBody:
    factor: float | None = field(
        default=None,
        metadata=_doc(
            "With a factor: multiply every non-archived entry's confidence by it. "
            "Without: run the periodic decay cycle.",
            **_UNIT,
        ),
    )


@frozen(kw_only=True)
class ArchiveStaleBody:
    days: float = field(metadata=_doc("Archive entries untouched for this many days.", minimum=0))


for _body in (
    IngestBody,
    QueryBody,
    RetrieveBody,
    TraverseBody,
    DeprecateBody,
    ResolveBody,
    DecayBody,
    ArchiveStaleBody,
):
    attrs.resolve_types(_body)


def structure_body(converter: cattrs.Converter, data: Any, kind: type[Any]) -> Any:
    """A decoded JSON body as ``kind``, or :class:`ValidationError` naming the field."""
    if not isinstance(data, dict):
        raise ValidationError("body", f"must be a JSON object, got {json_type(data)}")
    known = {a.name for a in attrs.fields(kind)}
    unknown = sorted(set(data) - known)
    if unknown:
        listed = ", ".join(repr(name) for name in unknown)
        raise ValidationError(
            unknown[0], f"unknown field{'s' if len(unknown) > 1 else ''} {listed}"
        )
    try:
        return converter.structure(data, kind)
    except cattrs.ClassValidationError as exc:
        name, message = _first_failure(exc, kind)
        raise ValidationError(name, message) from None


def _first_failure(exc: cattrs.ClassValidationError, kind: type[Any]) -> tuple[str, str]:
    failures, _ = exc.group_exceptions()
    if not failures:
        return "body", str(exc)
    error, note = failures[0]
    name = note.name
    if isinstance(error, KeyError):
        return name, "is required"
    path = ""
    while isinstance(error, IterableValidationError):
        inner, _ = error.group_exceptions()
        if not inner:
            break
        error, index_note = inner[0]
        path += f"[{index_note.index}]"
    message = str(error) or f"must be {describe_type(attrs.fields_dict(kind)[name].type)}"
    return name, f"{path}: {message}" if path else message


__all__ = [
    "ArchiveStaleBody",
    "DecayBody",
    "DeprecateBody",
    "IngestBody",
    "QueryBody",
    "ResolveBody",
    "RetrieveBody",
    "TraverseBody",
    "structure_body",
]
