"""The values the store ports take and return: filters, scored entries, statistics and
the records of the bookkeeping repositories."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from attrs import frozen

from ..model import AccessScope, ContentType, Entry, Status, Viewer


@frozen
class SearchFilter:
    """What a read may return. Every read applies ``viewer`` visibility (docs/concepts.md, "The
    rules in
    one page").

    ``access_scope`` restricts to entries of that scope. ``partition`` restricts to one
    dedup partition (access scope, owner); for ``global`` the owner is ignored (all global
    entries form one partition). None means any.
    """

    viewer: Viewer
    statuses: frozenset[Status]
    min_confidence: float | None = None
    tags: tuple[str, ...] | None = None  # entries having ANY of these tags
    knowledge_domain: str | None = None
    content_type: ContentType | None = None
    access_scope: AccessScope | None = None
    partition: tuple[AccessScope, str | None] | None = None
    exclude_ids: frozenset[UUID] = frozenset()
    only_ids: frozenset[UUID] | None = None  # restrict to these entries


@frozen
class ScoredEntry:
    entry: Entry
    similarity: float


@frozen
class BatchNeighbours:
    """What :meth:`EntryRepository.nearest_batch` finds for one embedding of a batch.

    ``stored``: the nearest stored entries, as :meth:`EntryRepository.nearest` returns them.
    ``earlier``: ``(j, similarity)`` for the earlier embeddings ``j`` of the batch (``j`` less
    than this one's index) that could rank among this one's nearest once their entries are
    stored, highest similarity first (then lowest ``j``).
    """

    stored: list[ScoredEntry]
    earlier: list[tuple[int, float]]


@frozen
class DecayOutcome:
    decayed: int
    archived: int


@frozen
class AgentDomainStats:
    """Aggregate of one agent's active entries in one domain: how many, their average
    confidence, how many of them are confirmed, and how many corroborations and agreements
    the agent earned in the domain (its evidence of those kinds on active entries)."""

    agent_id: str
    knowledge_domain: str
    entry_count: int
    average_confidence: float
    last_active_at: datetime | None
    confirmed_count: int = 0
    corroboration_count: int = 0


@frozen
class ExpertiseRecord:
    agent_id: str
    knowledge_domain: str
    entry_count: int
    proficiency: float
    last_active_at: datetime | None


@frozen
class StoreStats:
    total: int
    last_24h: int
    average_confidence: float
    by_status: Mapping[str, int]
    by_content_type: Mapping[str, int]
    total_relations: int


@frozen
class AccessLogRecord:
    action: str  # "ingest" | "query" | "traverse" | ...
    agent_id: str
    entry_id: UUID | None
    created_at: datetime
    detail: Mapping[str, Any] = {}


@frozen
class OutboxItem:
    """A claimed outbox item; ``attempts`` counts its failures so far."""

    id: int
    kind: str  # "contradiction_scan"
    payload: Mapping[str, Any]
    attempts: int
    created_at: datetime


@frozen
class CredibilityRecord:
    """A source's Beta(α, β), its label, and how many of its evidence items were
    validated and refuted (dispute verdicts)."""

    agent_id: str
    alpha: float = 1.0
    beta: float = 1.0
    label: str | None = None
    validated: int = 0
    refuted: int = 0


__all__ = [
    "AccessLogRecord",
    "AgentDomainStats",
    "BatchNeighbours",
    "CredibilityRecord",
    "DecayOutcome",
    "ExpertiseRecord",
    "OutboxItem",
    "ScoredEntry",
    "SearchFilter",
    "StoreStats",
]
