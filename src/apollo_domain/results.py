"""What use cases return: plain frozen values, ready to serialize at any edge."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final
from uuid import UUID

from attrs import Attribute, Factory, field, frozen

from .model import AccessScope, ContentType, Entry, Evidence, Outcome, RelationType, Status
from .rules import independent

#: Decimal places of the numbers Apollo computes (confidence, similarity, activation,
#: proficiency, ...) in what it returns: ``0.52``, not ``0.5199999723187102`` nor
#: ``0.5800000000000001``. The same on every store and every edge (the library's results,
#: HTTP, the bus, the CLI); an entry's record (``get_entry``) keeps full precision.
SCORE_DIGITS: Final = 6


def reported(value: float) -> float:
    """``value`` to :data:`SCORE_DIGITS` decimal places, as results report it."""
    return round(value, SCORE_DIGITS)


def _reported_or_none(value: float | None) -> float | None:
    return None if value is None else reported(value)


def _check_same_id(given: UUID | None, entry_id: UUID | None) -> None:
    if given != entry_id:
        raise ValueError(f"id {given} is not entry_id {entry_id}")


@frozen
class IngestResult:
    outcome: Outcome
    entry_id: UUID | None = None
    status: Status | None = None
    confidence: float | None = field(default=None, converter=_reported_or_none)
    reason: str | None = None
    #: The entry's id under the name every result gives it (``entry_id`` is the same id,
    #: under the name it had first).
    id: UUID | None = field(default=Factory(lambda self: self.entry_id, takes_self=True))

    @id.validator
    def _same_id(self, attribute: Attribute[UUID | None], value: UUID | None) -> None:
        _check_same_id(value, self.entry_id)

    @property
    def ok(self) -> bool:
        return self.outcome is not Outcome.REJECTED


@frozen
class Neighbour:
    """An entry shown beside a query's result for its context: a statement of the same
    episode, ``position`` its place there."""

    id: UUID
    position: int
    content: str
    content_type: ContentType
    confidence: float = field(converter=reported)
    status: Status
    source_agent: str
    created_at: datetime

    @classmethod
    def of(cls, entry: Entry) -> Neighbour:
        return cls(
            id=entry.id,
            position=entry.position or 0,
            content=entry.content,
            content_type=entry.content_type,
            confidence=entry.confidence,
            status=entry.status,
            source_agent=entry.source.agent_id,
            created_at=entry.created_at,
        )


@frozen
class EntryView:
    """An entry as a query shows it."""

    id: UUID
    content: str
    content_type: ContentType
    confidence: float = field(converter=reported)
    status: Status
    similarity: float | None
    tags: tuple[str, ...]
    knowledge_domain: str
    source_agent: str
    access_scope: AccessScope
    created_at: datetime
    #: The signals that found the entry and each one's own score (``vector``: cosine
    #: similarity, ``lexical``: the store's relevance score, ``graph``: entity matches),
    #: and ``temporal`` (1) when it was said or stored in the time the query names.
    signals: Mapping[str, float] = field(factory=dict)
    #: The score that ordered the results (after those of a time the query names): the
    #: fused score weighed by the entry's evidence (docs/retrieval.md, "Fair pages"; None
    #: when browsing).
    score: float | None = None
    #: How many near-duplicates of the same source were folded into this result (the best
    #: of them is the one shown; 0 when none, and when browsing).
    folded: int = 0
    #: The episode it was stored from (``store_text``) and its statement's place there.
    episode_id: UUID | None = None
    position: int | None = None
    #: With ``context_window=k``: the visible statements up to k places before and after it
    #: in its episode, in order (never boosted, counted or logged; not results themselves).
    neighbours: tuple[Neighbour, ...] = ()

    @classmethod
    def of(
        cls,
        entry: Entry,
        similarity: float | None = None,
        confidence: float | None = None,
        *,
        signals: Mapping[str, float] | None = None,
        score: float | None = None,
        folded: int = 0,
    ) -> EntryView:
        return cls(
            id=entry.id,
            content=entry.content,
            content_type=entry.content_type,
            confidence=entry.confidence if confidence is None else confidence,
            status=entry.status,
            similarity=similarity,
            tags=entry.tags,
            knowledge_domain=entry.knowledge_domain,
            source_agent=entry.source.agent_id,
            access_scope=entry.access_scope,
            created_at=entry.created_at,
            signals=dict(signals or {}),
            score=score,
            folded=folded,
            episode_id=entry.episode_id,
            position=entry.position,
        )


@frozen
class QueryResult:
    mode: str  # the search mode that ran ("hybrid" | "vector" | "lexical") or "browse"
    entries: tuple[EntryView, ...]

    def __len__(self) -> int:
        return len(self.entries)


@frozen
class RelatedEntry:
    id: UUID
    relation_type: RelationType
    depth: int
    activation: float
    via: UUID
    content: str
    content_type: ContentType
    confidence: float = field(converter=reported)
    status: Status


@frozen
class LinkedEntry:
    """One relation of an entry, with the entry at its other end (``direction`` ``out``:
    this entry → ``id``; ``in``: ``id`` → this entry)."""

    direction: str  # "out" | "in"
    relation_type: RelationType
    weight: float
    created_at: datetime | None
    id: UUID
    content: str
    content_type: ContentType
    confidence: float = field(converter=reported)
    status: Status


@frozen
class EvidenceView:
    """One source's evidence on an entry, as the entry's page shows it. ``independent``:
    the source is independent of every earlier source that counted, so it counts towards the
    entry's independent support (the origin, listed first, always does)."""

    agent_id: str
    provider: str
    channel: str | None
    kind: str
    similarity: float
    credibility: float | None
    created_at: datetime
    independent: bool

    @classmethod
    def list_of(cls, evidence: Sequence[Evidence]) -> list[EvidenceView]:
        """``evidence`` in order, each marked independent when its source is independent of
        every source marked so before it (the count of the marks is the entry's number of
        mutually independent sources)."""
        counted: list[Evidence] = []
        views = []
        for item in evidence:
            alone = all(independent(item.source, other.source) for other in counted)
            if alone:
                counted.append(item)
            views.append(
                cls(
                    item.source.agent_id,
                    item.source.provider,
                    item.source.channel,
                    item.kind.value,
                    item.similarity,
                    item.credibility,
                    item.created_at,
                    alone,
                )
            )
        return views


@frozen
class LifecycleResult:
    entry_id: UUID
    status: Status
    changed: bool
    confidence: float = field(converter=reported)
    #: The entry's id under the name every result gives it (``entry_id`` is the same id,
    #: under the name it had first).
    id: UUID = field(default=Factory(lambda self: self.entry_id, takes_self=True))

    @id.validator
    def _same_id(self, attribute: Attribute[UUID], value: UUID) -> None:
        _check_same_id(value, self.entry_id)


@frozen
class MaintenanceResult:
    action: str
    affected: int
    archived: int = 0


@frozen
class DomainExpertise:
    knowledge_domain: str
    entry_count: int
    proficiency: float
    average_confidence: float = field(converter=reported)
    last_active_at: datetime | None


@frozen
class AgentProfile:
    """An agent's expertise per domain, plus its credibility as a source."""

    agent_id: str
    domains: tuple[DomainExpertise, ...]
    total_entries: int
    average_confidence: float = field(converter=reported)
    last_active_at: datetime | None
    credibility: float = 0.5


@frozen
class SourceReport:
    """A source's standing: Beta(α, β), its label, the credibility they give, and how many
    of its evidence items dispute resolutions validated and refuted."""

    agent_id: str
    alpha: float
    beta: float
    credibility: float
    label: str | None
    validated: int
    refuted: int


@frozen
class CorroborationReport:
    scanned: int
    promoted: int
    bootstrapped: int


@frozen
class ContradictionReport:
    processed: int
    contradictions: int
    failed: int


@frozen
class GasResult:
    request_id: str
    phases_completed: tuple[str, ...]
    facts: int
    entities: int
    relations: int
    synthesis: int
    anticipations: int
    deposited: Mapping[str, int] = field(factory=dict)
    replayed: bool = False


@frozen
class TextResult:
    """What ``store_text`` did: the episode the text is (new, or the one the same text made
    before) and one ingest result per statement, in order."""

    episode_id: UUID
    statements: tuple[IngestResult, ...]


@frozen
class EpisodeView:
    """An episode as ``get_episode`` shows it: the text in the shape it was given (a string,
    or the list of ``{speaker, text, at}`` turns), and the statements stored from it that
    the caller may see, in order."""

    id: UUID
    agent_id: str
    access_scope: AccessScope
    created_at: datetime
    text: str | tuple[Mapping[str, Any], ...]
    statements: tuple[EntryView, ...]


@frozen
class ErasureResult:
    """What one erasure changed; every count is 0 when the agent left nothing behind.

    ``deleted``/``redacted`` count entries; ``evidence`` the evidence rows removed or
    redacted; ``credibility`` the credibility records removed (0 or 1); ``expertise`` the
    expertise rows removed; ``access_log`` the access-log rows rewritten; ``contexts`` the
    entries and relations whose ``source_context`` named the agent; ``episodes`` the
    episodes (texts) it gave, deleted.
    """

    agent_id: str
    deleted: int
    redacted: int
    evidence: int = 0
    credibility: int = 0
    expertise: int = 0
    access_log: int = 0
    contexts: int = 0
    episodes: int = 0


@frozen
class LinkResult:
    from_entry_id: UUID
    to_entry_id: UUID
    relation_type: RelationType
    created: bool


# ------------------------------------------------------------------ the entity graph


@frozen
class EntitySummary:
    """An entity a caller may see, with the number of entries it may see that mention it
    (archived entries not counted)."""

    name: str  # as first written
    key: str  # the normalized name
    kind: str | None
    mentions: int


@frozen
class EntityEdgeView:
    """An edge between two entities as a caller sees it: endpoints by name; ``entry_ids``
    the first supporting entries it may see (``support`` counts them all); ``superseded_by``
    only when the edge that retired it is visible too."""

    id: UUID
    src: str
    relation: str
    dst: str
    valid_from: datetime
    valid_to: datetime | None
    superseded_by: UUID | None
    support: int
    entry_ids: tuple[UUID, ...]


@frozen
class EntityMentionView:
    """An entry that mentions an entity: its id, the start of its content, its standing."""

    id: UUID
    snippet: str
    status: Status
    confidence: float = field(converter=reported)
    created_at: datetime


@frozen
class EntityDetail:
    """An entity with its live edges (typed ones first) and the newest entries mentioning
    it, all as the caller may see them."""

    name: str
    key: str
    kind: str | None
    mentions: int
    edges: tuple[EntityEdgeView, ...]
    entries: tuple[EntityMentionView, ...]


@frozen
class EntityHistory:
    """An entity's typed edges live at ``as_of``, or every one of them, retired ones
    included, when ``as_of`` is None; oldest first."""

    name: str
    key: str
    as_of: datetime | None
    edges: tuple[EntityEdgeView, ...]


@frozen
class RelatedEntity:
    """An entity reached from another over live edges: how many edges away, and the edge
    (relation, neighbour it was reached from) that first reached it."""

    name: str
    key: str
    kind: str | None
    depth: int
    relation: str
    via: str


@frozen
class Dispatch:
    """What a client-mode call returns: the action published, not a claimed mutation; with
    read-your-writes on, also the causal token of its commit (the service's receipt)."""

    action: str
    payload: Mapping[str, Any]
    message_id: str
    causal_token: str | None = None


__all__ = [
    "AgentProfile",
    "ContradictionReport",
    "CorroborationReport",
    "Dispatch",
    "DomainExpertise",
    "EntityDetail",
    "EntityEdgeView",
    "EntityHistory",
    "EntityMentionView",
    "EntitySummary",
    "EntryView",
    "EpisodeView",
    "ErasureResult",
    "EvidenceView",
    "GasResult",
    "IngestResult",
    "LifecycleResult",
    "LinkResult",
    "LinkedEntry",
    "MaintenanceResult",
    "Neighbour",
    "QueryResult",
    "RelatedEntity",
    "RelatedEntry",
    "SourceReport",
    "TextResult",
]
