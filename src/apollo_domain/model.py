"""Apollo's domain values: entries, sources, evidence, relations, principals."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from attrs import field, frozen

from .errors import ValidationError


class ContentType(enum.StrEnum):
    FACT = "fact"
    CONCEPT = "concept"
    PROCEDURE = "procedure"
    ASSOCIATION = "association"
    OBSERVATION = "observation"


class Status(enum.StrEnum):
    CANDIDATE = "candidate"
    CONFIRMED = "confirmed"
    DISPUTED = "disputed"
    ARCHIVED = "archived"

    @property
    def is_active(self) -> bool:
        return self is not Status.ARCHIVED


ACTIVE_STATUSES: frozenset[Status] = frozenset(
    {Status.CANDIDATE, Status.CONFIRMED, Status.DISPUTED}
)


class AccessScope(enum.StrEnum):
    GLOBAL = "global"
    TEAM = "team"
    PRIVATE = "private"


class RelationType(enum.StrEnum):
    IS_A = "is_a"
    HAS_A = "has_a"
    PART_OF = "part_of"
    CAUSES = "causes"
    SIMILAR_TO = "similar_to"
    CONTRADICTS = "contradicts"
    SUPERSEDES = "supersedes"
    DEPENDS_ON = "depends_on"
    SUPPORTS_BY = "supports_by"
    EXTENDS = "extends"


class Outcome(enum.StrEnum):
    CREATED = "created"
    DEDUPLICATED = "deduplicated"
    CORROBORATED = "corroborated"
    REJECTED = "rejected"


def _frozen_groups(value: Any) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset({value})
    return frozenset(str(v) for v in value)


class Role(enum.StrEnum):
    """What a principal may do (decided by the command handlers, for every edge).

    ``reader`` reads what it may see; ``writer`` also ingests, links entries it may see and
    deprecates its own entries, always as its own agent; ``gateway`` is a writer that speaks
    for many agents (an orchestrator); ``admin`` may do everything: deprecate any visible
    entry, resolve disputes, run maintenance, label sources, erase agents.
    """

    READER = "reader"
    WRITER = "writer"
    GATEWAY = "gateway"
    ADMIN = "admin"

    @property
    def writes(self) -> bool:
        return self is not Role.READER

    @property
    def administers(self) -> bool:
        return self is Role.ADMIN

    @property
    def speaks_for_others(self) -> bool:
        """Whether work may be attributed to agent ids other than the caller's own."""
        return self in (Role.GATEWAY, Role.ADMIN)


def _role(value: Any) -> Role:
    if isinstance(value, Role):
        return value
    try:
        return Role(str(value).strip().lower())
    except ValueError:
        allowed = ", ".join(r.value for r in Role)
        raise ValidationError("role", f"unknown role {value!r}; expected {allowed}") from None


@frozen
class Principal:
    """Who is calling. ``id`` None means unresolved: such a caller sees only global entries.

    ``groups`` are the groups known at the edge; the identity directory adds the rest.
    ``role`` says what it may do (a library caller is a ``writer`` unless the embedding
    program says otherwise). ``agent`` is the one agent a writer acts as (default: its id).
    """

    id: str | None
    groups: frozenset[str] = field(factory=frozenset, converter=_frozen_groups)
    role: Role = field(default=Role.WRITER, converter=_role)
    agent: str | None = None

    @classmethod
    def anonymous(cls) -> Principal:
        return cls(None)


@frozen
class Viewer:
    """A principal resolved for visibility checks.

    ``team_owners`` are the principal ids that share at least one group with the caller
    (resolved through the identity directory), the caller itself included when it has a group.
    """

    principal_id: str | None
    team_owners: frozenset[str] = frozenset()

    @classmethod
    def anonymous(cls) -> Viewer:
        return cls(None)


@frozen
class SourceRef:
    """Where a piece of knowledge came from: (agent_id, provider, channel) plus who submitted it."""

    agent_id: str
    provider: str = "unknown"
    channel: str | None = None
    submitted_by: str | None = None
    submitted_from: str | None = None


class EvidenceKind(enum.StrEnum):
    """Why a source's evidence is on an entry.

    ``origin``: the source that wrote it. ``corroboration``: an independent source
    supporting a confirmed entry (or the confirmed entry that promoted a candidate).
    ``agreement``: an independent source that said the same thing (the exact text or a
    restatement) of a candidate. ``deduplication``: a repeat that passed none of the
    corroboration rules (a source not independent of the recorded ones, another domain
    or content type).
    """

    ORIGIN = "origin"
    CORROBORATION = "corroboration"
    AGREEMENT = "agreement"
    DUPLICATE = "deduplication"


@frozen
class Evidence:
    """One source's support for an entry.

    ``credibility`` is the source's credibility when the evidence was recorded (None for
    evidence recorded before Apollo kept it).
    """

    entry_id: UUID
    source: SourceRef
    similarity: float
    created_at: datetime
    kind: EvidenceKind = field(default=EvidenceKind.CORROBORATION, converter=EvidenceKind)
    credibility: float | None = None


@frozen
class Relation:
    from_id: UUID
    to_id: UUID
    relation_type: RelationType
    weight: float = 1.0
    created_at: datetime | None = None
    source_context: Mapping[str, Any] = field(factory=dict)


DedupKey = tuple[str, AccessScope, str | None]
"""``(content_hash, access_scope, owner_id)`` of :func:`dedup_key`."""


def dedup_key(content_hash: str, access_scope: AccessScope, owner_id: str | None) -> DedupKey:
    """The deduplication rule: two entries with one key hold the same content in one
    partition, and at most one of them is active. The partition is (access scope, owner),
    except that every global entry shares one whoever owns it (its owner is then None).
    Every store keeps the rule by this key (the in-memory store) or by an index that
    computes the same (PostgreSQL's ``entries_dedup``)."""
    return (content_hash, access_scope, None if access_scope is AccessScope.GLOBAL else owner_id)


@frozen
class Entry:
    """A piece of knowledge. Values only: use cases produce changed copies with ``attrs.evolve``."""

    id: UUID
    content: str
    content_hash: str
    content_type: ContentType
    knowledge_domain: str
    tags: tuple[str, ...]
    confidence: float
    status: Status
    source: SourceRef
    access_scope: AccessScope
    owner_id: str | None
    created_at: datetime
    updated_at: datetime
    source_context: Mapping[str, Any] = field(factory=dict)
    embedding: tuple[float, ...] | None = field(default=None, eq=False, repr=False)
    access_count: int = 0
    confirmed_at: datetime | None = None
    decayed_at: datetime | None = None
    #: the episode (``store_text``) this entry was stored from and its statement's place
    #: there (0-based), None for an entry stored on its own
    episode_id: UUID | None = None
    position: int | None = None

    @property
    def is_active(self) -> bool:
        return self.status is not Status.ARCHIVED

    @property
    def dedup_key(self) -> DedupKey:
        """This entry's content in its deduplication partition (:func:`dedup_key`)."""
        return dedup_key(self.content_hash, self.access_scope, self.owner_id)


__all__ = [
    "ACTIVE_STATUSES",
    "AccessScope",
    "ContentType",
    "DedupKey",
    "Entry",
    "Evidence",
    "EvidenceKind",
    "Outcome",
    "Principal",
    "Relation",
    "RelationType",
    "SourceRef",
    "Status",
    "Viewer",
    "dedup_key",
]
