"""Ports: the contracts between Apollo's use cases and the technologies behind them.

Every I/O port is async. Each adapter (in-memory, PostgreSQL, ...) must satisfy the
contract stated in these docstrings; ``tests/contract`` checks it once for all of them.

Errors: adapters raise only :mod:`apollo_domain.errors` types. A lost connection or a
missing table is :class:`StoreUnavailable`; a failed write that is not transient is
:class:`PersistenceFailed`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar, runtime_checkable
from uuid import UUID

from attrs import frozen

from .entities import Entity, EntityEdge, EntityMention, Extraction
from .model import (
    AccessScope,
    ContentType,
    Entry,
    Evidence,
    Relation,
    RelationType,
    SourceRef,
    Status,
    Viewer,
)

# --------------------------------------------------------------------------- public ports


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors. All vectors of one store share ``model_id`` and ``dimension``.

    ``embed`` returns one vector per text, in order, each of length ``dimension``.
    Raises :class:`EmbeddingError` on failure.

    An embedder may also declare ``relevance_floor`` (a float, or None): the cosine under
    which its query matches say nothing, calibrated per model. The composition root makes
    it the retrieval settings' floor unless one is configured.
    """

    model_id: str
    dimension: int

    async def embed(self, texts: Sequence[str]) -> list[Sequence[float]]: ...


@runtime_checkable
class ContradictionJudge(Protocol):
    """Decides whether ``new`` contradicts ``existing`` (both plain texts)."""

    async def contradicts(self, new: str, existing: str) -> bool: ...


@runtime_checkable
class EntityExtractor(Protocol):
    """Finds the entities a text mentions and the typed relations it states between them.

    ``extract`` returns an :class:`~apollo_domain.entities.Extraction`: entity mentions in
    order of appearance (names as written; kinds optional) and typed edges
    ``(src, relation, dst)`` named by those mentions. Raises only :class:`ApolloError`
    types; ingest treats a failure as "no entities", never as a failed ingest.
    """

    async def extract(self, text: str) -> Extraction: ...


@runtime_checkable
class Clock(Protocol):
    """The source of every timestamp Apollo writes. ``now`` is timezone-aware UTC."""

    def now(self) -> datetime: ...


class QueryProfile(Protocol):
    """Told how long each stage of a query took (a benchmark's or an operator's probe):
    ``embed`` (the query text), ``vector``, ``lexical`` and ``graph`` (each signal's read;
    they may run at the same time), ``fuse``, ``read winners`` (the fused winners read
    whole) and ``boost`` (the boost, the access log and the commit). A stage that did not
    run is not reported. Seconds are measured on the use cases' :class:`Clock`."""

    def stage(self, name: str, seconds: float) -> None: ...


@runtime_checkable
class GasLanguageModel(Protocol):
    """The language model behind GAS (knowledge from LLM audit events).

    - ``comprehend`` → ``[{content, content_type}]`` facts stated by the response.
    - ``relate`` → ``[{relation_type, confidence}]`` from ``fact`` to ``candidate``.
    - ``synthesize`` → ``[{content, content_type, source_indices}]`` over the facts.
    - ``anticipate`` → questions the facts suggest will be asked next.
    """

    async def comprehend(
        self, messages: Sequence[Mapping[str, Any]], response: str
    ) -> list[Mapping[str, Any]]: ...

    async def relate(self, fact: str, candidate: str) -> list[Mapping[str, Any]]: ...

    async def synthesize(self, facts: Sequence[str]) -> list[Mapping[str, Any]]: ...

    async def anticipate(self, facts: Sequence[str]) -> list[str]: ...


# --------------------------------------------------------------------------- store values

STORE_PARTS: frozenset[str] = frozenset(
    {
        "entries",
        "evidence",
        "expertise",
        "access_log",
        "relations",
        "outbox",
        "processed",
        "credibility",
        "graph",
    }
)
"""The parts of a store :meth:`Store.preflight` can check."""


@frozen
class SearchFilter:
    """What a read may return. Every read applies ``viewer`` visibility (DESIGN §2).

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


# --------------------------------------------------------------------------- repositories


class EntryRepository(Protocol):
    """Entries and their embeddings.

    Reads never return an entry the filter's viewer may not see. Writes take effect only
    when the enclosing unit of work commits.
    """

    async def add(self, entry: Entry) -> None:
        """Insert a new entry (with ``entry.embedding`` when present).

        Raises :class:`Conflict` when an active entry with the same
        (content_hash, access_scope, owner_id) exists — the dedup uniqueness rule — and
        then writes nothing: the unit of work goes on as if the call had not been made.
        """

    async def get(self, entry_id: UUID, *, with_embedding: bool = False) -> Entry | None:
        """The entry regardless of visibility (callers check it), or None."""

    async def get_many(
        self, entry_ids: Collection[UUID], *, with_embedding: bool = False
    ) -> dict[UUID, Entry]:
        """Entries by id (missing ids are absent from the result); their embeddings only
        when ``with_embedding``. One statement where the adapter can."""

    async def find_by_hash(
        self,
        content_hash: str,
        access_scope: AccessScope,
        owner_id: str | None,
        *,
        lock: bool = False,
    ) -> Entry | None:
        """The non-archived entry of that dedup partition with that content hash, or None.

        The partition is (access_scope, owner_id), except that every global entry belongs
        to one partition whatever its owner (``owner_id`` is ignored for global).

        ``lock``: the entry is returned with its row locked until the unit of work ends, as
        by :meth:`lock`. A concurrent unit of work that holds the row lock is waited for,
        then the entry is judged as it committed: one it archived is not found."""

    async def find_by_hashes(
        self, keys: Sequence[tuple[str, AccessScope, str | None]]
    ) -> list[Entry | None]:
        """:meth:`find_by_hash` for each ``(content_hash, access_scope, owner_id)``, in order
        (one statement where the adapter can)."""

    async def nearest(
        self, embedding: Sequence[float], flt: SearchFilter, limit: int, *, ingest: bool = False
    ) -> list[ScoredEntry]:
        """Up to ``limit`` entries matching ``flt``, by cosine similarity, highest first.

        Returns ``limit`` rows whenever that many entries match the filter, however
        selective it is. Ties broken by id for determinism.

        ``ingest``: the search is an ingest's look for the neighbours it acts on (near
        duplicates, entries it may corroborate or agree with, its novelty), which lie close
        to the text. An approximate adapter may then search with less breadth than for a
        query (PostgreSQL: its ingest ``hnsw.ef_search``); an exact one ignores it.
        """

    async def nearest_many(
        self,
        embeddings: Sequence[Sequence[float]],
        flt: SearchFilter,
        limit: int,
        *,
        ingest: bool = False,
    ) -> list[list[ScoredEntry]]:
        """``nearest`` for each embedding, in order, against the same filter (one pass over
        the store where the adapter can batch it)."""

    async def nearest_batch(
        self, embeddings: Sequence[Sequence[float]], flt: SearchFilter, limit: int
    ) -> list[BatchNeighbours]:
        """The neighbours of a batch of new entries that are to be stored in order, each as if
        searched with :meth:`nearest` once the earlier ones of the batch were stored (the caller
        guarantees that their entries would match ``flt``). One :class:`BatchNeighbours` per
        embedding, in order: ``stored`` is ``nearest(embeddings[i], flt, limit, ingest=True)``
        over the entries stored now; ``earlier`` holds every ``j < i`` whose similarity to
        ``i`` is at least the lowest similarity in ``stored`` (every ``j < i`` when ``stored``
        has fewer than ``limit`` entries), the similarity computed exactly as :meth:`nearest`
        computes it for a stored entry. Where the adapter can, the whole batch is one pass over
        the store."""

    async def lexical_search(self, query: str, flt: SearchFilter, limit: int) -> list[ScoredEntry]:
        """Up to ``limit`` entries matching ``flt`` that hold at least one of the query's
        terms (:func:`apollo_domain.lexical.query_terms`: stop words never match), most
        relevant first; ties broken by id. ``similarity`` is the entry's
        :func:`apollo_domain.lexical.rank` for the query, the same on every adapter
        (PostgreSQL's ``ts_rank`` over its ``simple`` full-text configuration, which the
        in-memory store computes the same way): positive, higher is better, and a function
        of the entry and the query alone. Sees the entries written earlier in the same
        unit of work, and nothing that unit of work rolled back."""

    async def nearest_ids(
        self, embedding: Sequence[float], flt: SearchFilter, limit: int
    ) -> list[tuple[UUID, float]]:
        """:meth:`nearest` (a query's search, not an ingest's) as ``(entry id, similarity)``
        pairs: the same entries, in the same order, with the same similarities and tie
        rule, without reading the entries whole (a caller that keeps only a few of many
        candidates reads those afterwards)."""

    async def lexical_search_ids(
        self, query: str, flt: SearchFilter, limit: int
    ) -> list[tuple[UUID, float]]:
        """:meth:`lexical_search` as ``(entry id, score)`` pairs: the same entries, in the
        same order, with the same scores and tie rule, without reading the entries whole."""

    async def browse(self, flt: SearchFilter, limit: int) -> list[Entry]:
        """Up to ``limit`` entries matching ``flt``, newest first (created_at, then id)."""

    async def lock(self, entry_id: UUID) -> Entry | None:
        """The entry (no embedding) with its row locked until the unit of work ends, or
        None. A use case that reads an entry's state (its evidence included) and then
        writes on its strength locks it first: a concurrent unit of work locking the same
        entry waits, then sees the first one's committed writes."""

    async def lock_many(self, entry_ids: Collection[UUID]) -> dict[UUID, Entry]:
        """:meth:`lock` for each id (missing ids are absent from the result), the locks taken
        in id order so that two units of work locking overlapping sets cannot deadlock."""

    async def add_many(self, entries: Sequence[Entry]) -> set[UUID]:
        """:meth:`add` for each entry, in order, except that an entry whose dedup partition
        already holds an active entry with its content hash is skipped, not raised; returns
        the ids of the entries inserted. The entries' own (content_hash, access_scope,
        owner_id) keys must be distinct."""

    async def update(self, entry: Entry) -> None:
        """Replace the mutable fields of an existing entry (status, confidence, tags,
        source, owner, source_context, confirmed_at, updated_at). Raises NotFound."""

    async def boost(
        self,
        entry_ids: Sequence[UUID],
        amount: float,
        now: datetime,
        *,
        count_access: bool,
        earner: str | None = None,
        window: timedelta = timedelta(0),
    ) -> dict[UUID, float]:
        """Atomically ``confidence = LEAST(confidence + amount, 1.0)`` (and
        ``access_count += 1`` when ``count_access``) for each id; returns the confidences
        after it.

        With an ``earner`` (a retrieval boost: the principal whose query returned the
        entries), an entry gains ``amount`` only when that earner earned none on it within
        ``window`` before ``now``; the earning is recorded (entry, earner) → ``now`` in the
        same atomic step. The others are counted, not boosted. The records go with their
        entry, and :meth:`forget_earner` erases an earner's.

        Archived entries are never boosted: they are skipped and absent from the result,
        like unknown ids. Concurrent boosts are never lost (no read-modify-write), and the
        rows are locked in id order, so boosts and other writers locking several entries
        in id order never deadlock."""

    async def forget_earner(self, earner: str) -> int:
        """Erasure: forget when ``earner`` earned retrieval boosts (see :meth:`boost`);
        returns how many records there were."""

    async def forget_boosts_before(self, cutoff: datetime) -> int:
        """Forget every record of a retrieval boost earned at or before ``cutoff`` (one a
        window ending at or before now no longer holds back: see :meth:`boost`); returns
        how many there were."""

    async def boost_each(self, boosts: Sequence[tuple[UUID, float, datetime]]) -> dict[UUID, float]:
        """:meth:`boost` (``count_access=False``) of each ``(entry_id, amount, now)``, in
        order: an entry named twice is boosted twice. Returns the final confidences."""

    async def decay(
        self, now: datetime, factor_per_hour: float, archive_below: float
    ) -> DecayOutcome:
        """One set-based pass: each active entry's confidence times
        ``factor_per_hour ** hours since its last decay (or creation)``, then archive active
        entries below ``archive_below`` with ``source_context.archive_reason = 'decayed'``."""

    async def scale_confidence(self, factor: float, now: datetime) -> int:
        """Multiply the confidence of every non-archived entry; returns the count."""

    async def archive_stale(self, cutoff: datetime, now: datetime) -> int:
        """Archive non-archived entries with COALESCE(updated_at, created_at) < cutoff."""

    async def candidates(self, limit: int, now: datetime) -> list[Entry]:
        """Up to ``limit`` candidate entries with embeddings, least recently checked first
        (never checked first, then created_at, id), each stamped as checked at ``now``; the
        stamps commit with the unit of work, so successive runs reach every candidate.
        The candidates are returned with their rows locked, as by :meth:`lock`: one a
        concurrent unit of work holds is waited for, and left out when it committed a
        status other than candidate. The stamp changes no field of the entry."""

    async def agent_domain_stats(
        self,
        viewer: Viewer | None = None,
        *,
        domain: str | None = None,
        agent_id: str | None = None,
    ) -> list[AgentDomainStats]:
        """Per (source agent, domain) with active entries: their count, average confidence
        and confirmed count, and the corroboration and agreement evidence the agent holds on
        active entries of the domain; over the entries ``viewer`` may see (``None``: every
        entry), optionally of one domain or one agent; ordered by agent, then domain."""

    async def stats(self, viewer: Viewer, now: datetime) -> StoreStats:
        """Counts over the entries the viewer can see (total relations included)."""

    async def by_agent(self, agent_id: str) -> list[Entry]:
        """Every entry whose source agent is ``agent_id`` (any status)."""

    async def delete(self, entry_ids: Collection[UUID]) -> int:
        """Delete entries with their evidence and relations; returns the count deleted."""

    async def redact_context(self, agent_id: str, replacement: str, now: datetime) -> int:
        """Erasure: in every entry's ``source_context``, replace each string equal to
        ``agent_id`` (a value or a key, at any depth; see
        :func:`apollo_domain.redaction.redact_value`) with ``replacement`` and set
        ``updated_at = now``; returns the number of entries changed."""


class RelationRepository(Protocol):
    async def add(self, relation: Relation) -> bool:
        """Persist a typed edge; False (and no change) if (from, to, type) exists.
        Raises NotFound when an endpoint does not exist."""

    async def outgoing(
        self, entry_ids: Collection[UUID], types: Collection[RelationType] | None = None
    ) -> list[Relation]:
        """Edges leaving any of ``entry_ids``, optionally restricted to ``types``."""

    async def incoming(
        self, entry_ids: Collection[UUID], types: Collection[RelationType] | None = None
    ) -> list[Relation]:
        """Edges arriving at any of ``entry_ids``, optionally restricted to ``types``, in
        insertion order."""

    async def exists(self, from_id: UUID, to_id: UUID, relation_type: RelationType) -> bool: ...

    async def count(self) -> int: ...

    async def redact_context(self, agent_id: str, replacement: str) -> int:
        """Erasure: :meth:`EntryRepository.redact_context` for the ``source_context`` of
        relations (e.g. ``linked_by``); returns the number of relations changed."""


@frozen
class GraphSurroundings:
    """What :meth:`EntityGraph.surroundings` reads: the seeds' ``neighbours`` (entity id,
    support), the entries ``mentioning`` the seeds or those neighbours (entry id, the
    entities of either it mentions), and the ``hops`` across the seeds' typed edges
    (entry id, score, the seeds whose edges reached it), each as the single read says."""

    neighbours: list[tuple[UUID, int]]
    mentioning: list[tuple[UUID, frozenset[UUID]]]
    hops: list[tuple[UUID, float, frozenset[UUID]]]


class EntityGraph(Protocol):
    """Entity nodes, the entries that mention them, and the edges between them (DESIGN §2
    "Entities and the knowledge graph"). Writes take effect when the unit of work commits.

    Visibility: an entity is visible to a viewer only when an entry that mentions it is
    (scope rules of :func:`apollo_domain.rules.scope_visible`) and is not archived; an edge
    only when one of the entries supporting it is. Archived and deleted entries make nothing
    visible: what only they mention or support reaches nobody. Every read below applies it.
    """

    async def resolve(self, mentions: Sequence[EntityMention], now: datetime) -> list[Entity]:
        """Find or create the node of each mention's normalized name (``mention.key``), in
        order, one per key. A node created concurrently by another unit of work is re-read,
        never duplicated: the first name written for a key is the node's name."""

    async def tag(self, entry_id: UUID, entity_ids: Sequence[UUID]) -> None:
        """Record that the entry mentions these entities (idempotent)."""

    async def link_co_occurring(
        self, entry_id: UUID, entity_ids: Sequence[UUID], now: datetime
    ) -> None:
        """One ``co_occurs`` edge per pair of distinct ids, stored once in canonical order
        (``src_id < dst_id``) and created live at ``now`` if absent; the entry is added to the
        edge's supporting entries."""

    async def relate(
        self, src_id: UUID, relation: str, dst_id: UUID, entry_id: UUID, now: datetime
    ) -> EntityEdge:
        """A typed edge ``src -relation-> dst`` stated by the entry (relation normalized, not
        ``co_occurs``). An identical live edge is kept (the entry added to its support), never
        duplicated; otherwise a new live edge is created at ``now`` and every live typed edge
        of the same (src, dst) pair with another relation is retired: ``valid_to = now``,
        ``superseded_by`` = the new edge. Nothing is ever deleted. Returns the live edge."""

    async def entities_of(self, entry_id: UUID) -> list[Entity]:
        """The entities the entry mentions, in the order they were tagged."""

    async def find(self, keys: Collection[str], viewer: Viewer) -> list[Entity]:
        """The visible entities whose normalized name is one of ``keys``, by key."""

    async def counted(self, keys: Collection[str], viewer: Viewer) -> list[tuple[Entity, int]]:
        """:meth:`find`, each entity with the number of entries mentioning it that make it
        visible to ``viewer`` (at least 1)."""

    async def with_prefix(
        self, prefix: str, viewer: Viewer, limit: int
    ) -> list[tuple[Entity, int]]:
        """Up to ``limit`` visible entities whose key starts with ``prefix`` (normalized; the
        empty prefix matches every key), by key, each with the number of entries mentioning
        it that make it visible. Walks the keys in order (an index on PostgreSQL) and stops
        at ``limit``."""

    async def get_many(self, entity_ids: Collection[UUID]) -> dict[UUID, Entity]:
        """Entities by id, regardless of visibility (callers name only entities they reached
        through something visible: a visible edge's endpoints); unknown ids are absent."""

    async def edges(
        self,
        entity_ids: Collection[UUID],
        viewer: Viewer,
        *,
        as_of: datetime | None = None,
        history: bool = False,
        typed: bool | None = None,
        limit: int | None = None,
    ) -> list[EntityEdge]:
        """The visible edges touching any of ``entity_ids`` in either direction: the live
        ones (``as_of`` None), those live at ``as_of`` (``valid_from <= as_of <
        valid_to``), or with ``history`` every edge whatever its time, retired ones included
        (``as_of`` ignored). ``typed`` True keeps only typed edges, False only ``co_occurs``,
        None both. Each edge carries its visible supporting entries (``entry_ids``) and its
        ``superseded_by`` only when the superseding edge is visible too (None otherwise: an
        edge the viewer may not see is never named). Ordered by ``valid_from``, id; at most
        ``limit`` (None: all)."""

    async def neighbours(
        self, entity_ids: Collection[UUID], viewer: Viewer, limit: int
    ) -> list[tuple[UUID, int]]:
        """The entities other than ``entity_ids`` at the far end of the live visible edges
        touching any of them (those :meth:`edges` returns with ``as_of`` None), each with
        its support: the number of visible supporting entries, summed over those edges.
        Most supported first, then by id; at most ``limit``."""

    async def entries_mentioning(
        self, entity_ids: Collection[UUID], flt: SearchFilter, limit: int
    ) -> list[tuple[Entry, frozenset[UUID]]]:
        """Up to ``limit`` entries matching ``flt`` that mention any of ``entity_ids``, newest
        first (created_at, then id), each with the ids among ``entity_ids`` it mentions."""

    async def mentioning(
        self, entity_ids: Collection[UUID], flt: SearchFilter, limit: int
    ) -> list[tuple[UUID, frozenset[UUID]]]:
        """:meth:`entries_mentioning` with each entry's id in place of the entry."""

    async def hop_search(
        self,
        entity_ids: Collection[UUID],
        text: str,
        flt: SearchFilter,
        limit: int,
        *,
        bridges: int,
    ) -> list[tuple[UUID, float, frozenset[UUID]]]:
        """One step of a search across typed edges, from ``entity_ids`` (the seeds).

        - The bridges: the entities other than the seeds at the far end of the live typed
          edges (not ``co_occurs``; either direction) touching a seed that the viewer may
          see, at most ``bridges``, the most supported first (then by id), as
          :meth:`neighbours` ranks them.
        - The open terms: the terms of ``text`` (stop words dropped) that no entry matching
          ``flt`` and mentioning a seed holds: what the seeds' own entries leave unanswered.

        Returns up to ``limit`` entries matching ``flt`` that mention a bridge and hold an
        open term, ranked by ``text`` as :meth:`EntryRepository.lexical_search_ids` ranks
        it (the same scores, highest first, then by id), each with its score and the seeds
        whose edges reached it."""

    async def surroundings(
        self,
        entity_ids: Collection[UUID],
        flt: SearchFilter,
        *,
        neighbours: int,
        scan: int,
        hop_text: str | None = None,
        hop_limit: int = 0,
        bridges: int = 0,
    ) -> GraphSurroundings:
        """What the graph fill reads once its seeds (``entity_ids``) are known, in one read
        (one round trip on PostgreSQL), with the results of these calls:
        :meth:`neighbours` ``(entity_ids, flt.viewer, neighbours)``; :meth:`mentioning` of
        ``entity_ids`` and those neighbours ``(…, flt, scan)``; and, unless ``hop_text`` is
        None, :meth:`hop_search` ``(entity_ids, hop_text, flt, hop_limit, bridges=…)``."""

    async def prune(self) -> int:
        """Erasure: delete the edges no remaining entry supports and the entities no entry
        mentions and no edge touches; returns the number of rows deleted."""


class EvidenceRepository(Protocol):
    async def add(self, evidence: Evidence) -> bool:
        """Record a source's evidence on an entry. False (and no change) when that exact
        source (agent_id, provider, channel) is already recorded on the entry."""

    async def add_many(self, evidence: Sequence[Evidence]) -> list[bool]:
        """:meth:`add` for each item, in order (one statement where the adapter can); True
        for each item recorded. Raises :class:`NotFound` when an entry does not exist."""

    async def add_origin(self, evidence: Evidence) -> None:
        """Record the origin evidence of an entry this unit of work has just added, which
        carries no evidence yet. Nothing is reported back, so the adapter may send it with
        its next statement or the commit; an error (a missing entry) fails the unit of work
        there."""

    async def for_entry(self, entry_id: UUID) -> list[Evidence]:
        """Evidence on the entry in insertion order."""

    async def for_entries(self, entry_ids: Collection[UUID]) -> dict[UUID, list[Evidence]]: ...

    async def forget_agent(self, agent_id: str, redacted: SourceRef) -> int:
        """Erasure: delete the agent's corroboration/deduplication evidence everywhere and
        replace the source of its origin evidence with ``redacted``; returns the rows
        touched."""


class ExpertiseRepository(Protocol):
    async def record_activity(self, agent_id: str, domain: str, now: datetime) -> None:
        """entry_count + 1 and last_active_at = now for (agent, domain), creating the row."""

    async def record_activities(self, activities: Sequence[tuple[str, str, datetime]]) -> None:
        """:meth:`record_activity` for each ``(agent_id, domain, now)``, in order (one
        statement where the adapter can)."""

    async def replace_all(self, records: Sequence[ExpertiseRecord]) -> None:
        """Replace proficiency and counts with the aggregator's recomputation."""

    async def for_domain(self, domain: str, min_proficiency: float) -> list[ExpertiseRecord]:
        """Agents with proficiency ≥ min in the domain, highest proficiency first."""

    async def all(self) -> list[ExpertiseRecord]: ...

    async def for_agent(self, agent_id: str) -> list[ExpertiseRecord]: ...

    async def forget_agent(self, agent_id: str) -> int:
        """Erasure: delete the agent's rows; returns how many there were."""


class AccessLog(Protocol):
    async def record(self, records: Sequence[AccessLogRecord]) -> None:
        """Append the rows, in order (one statement where the adapter can)."""

    async def count(self, action: str | None = None) -> int: ...

    async def for_agent(self, agent_id: str) -> list[AccessLogRecord]:
        """The agent's rows, oldest first."""

    async def redact_agent(self, agent_id: str, replacement: str) -> int:
        """Erasure: the agent's rows keep their action, entry and time but name
        ``replacement`` instead; returns the number of rows rewritten."""

    async def trim(self, cutoff: datetime, limit: int) -> int:
        """Retention: delete the oldest rows created before ``cutoff``, at most ``limit`` of
        them (one set-based statement where the adapter can); returns how many went. A
        caller empties a large backlog in several bounded calls, each committed alone."""


class CredibilityRegistry(Protocol):
    async def get(self, agent_id: str) -> CredibilityRecord:
        """The agent's record; a new agent gets Beta(1, 1) with no label."""

    async def save(self, record: CredibilityRecord) -> None:
        """Replace the agent's whole record (administration and tests)."""

    async def add(self, agent_id: str, alpha_delta: float, beta_delta: float) -> CredibilityRecord:
        """Atomically ``α += alpha_delta`` and ``β += beta_delta`` (a new agent starts from
        Beta(1, 1)), counting one validated item when ``alpha_delta > 0`` and one refuted
        item when ``beta_delta > 0``; the label is kept. Returns the new record. Concurrent
        additions are never lost (no read-modify-write)."""

    async def set_label(self, agent_id: str, label: str | None) -> CredibilityRecord:
        """Set (or with None clear) the agent's label, keeping α, β and the counts; returns
        the new record."""

    async def forget(self, agent_id: str) -> bool:
        """Erasure: delete the agent's record (it is new again); True when there was one."""


class Outbox(Protocol):
    """Work queued in the same transaction as the change that caused it.

    An item is *due* when it is pending, its next attempt time (none until it fails) is
    not after ``now`` and it is not under an unexpired lease. Claiming leases items: the
    lease is written with the claim (PostgreSQL: one ``UPDATE … FOR UPDATE SKIP LOCKED``
    statement) and commits with the claiming unit of work, so the claimer can commit at
    once and work on the items outside any transaction while no other claimer, in this
    process or another, sees them until the lease ends or they are completed or failed.
    """

    async def enqueue(self, kind: str, payload: Mapping[str, Any], now: datetime) -> None: ...

    async def enqueue_many(self, items: Sequence[tuple[str, Mapping[str, Any], datetime]]) -> None:
        """:meth:`enqueue` for each ``(kind, payload, now)``, in order (one statement where
        the adapter can)."""

    async def claim(self, limit: int, now: datetime, *, lease_until: datetime) -> list[OutboxItem]:
        """Up to ``limit`` items due at ``now``, oldest first, each leased until
        ``lease_until``. Items locked by a concurrent claimer that has not committed are
        skipped, never waited for."""

    async def complete(self, item_id: int) -> None:
        """The item is done (never claimed again); an unknown or finished id is a no-op."""

    async def fail(self, item_id: int, error: str, *, retry_at: datetime | None) -> None:
        """Count a failed attempt, keep ``error`` and end the lease: the item is due again
        at ``retry_at``, or dead (kept, never claimed again) when ``retry_at`` is None. An
        unknown or no longer pending id is a no-op."""

    async def pending(self) -> int:
        """Items neither done nor dead, due or waiting for their next attempt."""


class ProcessedKeys(Protocol):
    """Idempotency keys (GAS request ids, message ids), recorded in the transaction of the
    effects they guard. The keys arrive whole: the command layer has already scoped each
    by the principal that sent it (:func:`~apollo_domain.services.context.scoped_key`)."""

    async def mark(self, key: str, now: datetime) -> bool:
        """Record ``key``; True when it was new, False when already recorded.

        A unique insert in this unit of work: it is undone when the unit of work does not
        commit, and while another open unit of work has recorded the same key this call
        waits for that one to end (PostgreSQL; the in-memory store runs units of work one
        at a time), then answers False if it committed. So of two units of work marking
        one key, exactly one gets True."""

    async def mark_many(self, keys: Sequence[str], now: datetime) -> list[bool]:
        """:meth:`mark` for each of ``keys`` (distinct), in one statement where the adapter
        can: for each, True when it was new. Keys are recorded in sorted order, so two units
        of work marking overlapping sets wait for each other instead of deadlocking."""

    async def forget_many(self, keys: Sequence[str]) -> None:
        """Remove ``keys`` recorded by this unit of work (an application that wrote nothing
        keeps no key, as a unit of work that does not commit keeps none); undone with
        the unit of work."""

    async def seen(self, key: str) -> bool: ...


class IdentityDirectory(Protocol):
    """Group membership of principals; identity itself is resolved at the edge."""

    async def add_membership(self, principal_id: str, group: str) -> None: ...

    async def remove_membership(self, principal_id: str, group: str) -> None: ...

    async def groups_of(self, principal_id: str) -> frozenset[str]: ...

    async def members_of(self, groups: Collection[str]) -> frozenset[str]:
        """Every principal id belonging to at least one of ``groups``."""


class Reads(Protocol):
    """The repositories a read of :meth:`UnitOfWork.read_concurrently` is given."""

    @property
    def entries(self) -> EntryRepository: ...
    @property
    def graph(self) -> EntityGraph: ...


T = TypeVar("T")


class UnitOfWork(Protocol):
    """One transaction over every repository. Rolls back unless ``commit`` was awaited.

    ``async with store.unit_of_work() as uow: ...; await uow.commit()``.
    ``uow.savepoint()`` is an async context manager: an exception inside it rolls back
    only the work done inside it, then propagates.
    Once committed or left, a unit of work raises :class:`PersistenceFailed` on every
    call (repositories, ``commit``, ``savepoint``) and cannot be entered again.
    """

    @property
    def entries(self) -> EntryRepository: ...
    @property
    def relations(self) -> RelationRepository: ...
    @property
    def evidence(self) -> EvidenceRepository: ...
    @property
    def expertise(self) -> ExpertiseRepository: ...
    @property
    def access_log(self) -> AccessLog: ...
    @property
    def credibility(self) -> CredibilityRegistry: ...
    @property
    def outbox(self) -> Outbox: ...
    @property
    def processed(self) -> ProcessedKeys: ...
    @property
    def graph(self) -> EntityGraph: ...

    async def __aenter__(self) -> UnitOfWork: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def commit(self) -> None: ...

    def savepoint(self) -> AbstractAsyncContextManager[None]: ...

    async def read_concurrently(self, reads: Sequence[Callable[[Reads], Awaitable[T]]]) -> list[T]:
        """Each read's result, in order. ``reads`` only read, through the repositories they
        are given, with the same visibility rules as this unit of work's; they may run at
        the same time. Each statement sees what is committed when it runs (whether it also
        sees this unit of work's own uncommitted writes is unspecified: call this before
        writing anything). The PostgreSQL store runs them on separate pooled connections,
        each in a read-only transaction, as far as the pool has connections to spare (the
        rest in turn on this unit of work's own connection); the in-memory store runs them
        in turn. A read's error is raised once no other read is running (those not yet
        begun are not run)."""


class Store(Protocol):
    """A knowledge store: units of work plus the identity directory."""

    @property
    def directory(self) -> IdentityDirectory: ...

    def unit_of_work(self) -> UnitOfWork: ...

    def reading(self) -> UnitOfWork:
        """A unit of work that only reads and never commits (entity reads, expertise
        views, a source's standing). The store may run it on a read replica that has
        replayed every commit of this store (the PostgreSQL store with a replica; it
        falls back to its primary when the replica is down or behind); otherwise it is
        :meth:`unit_of_work`."""
        ...

    async def preflight(self, parts: Collection[str]) -> None:
        """Raise :class:`StoreUnavailable` unless every named part (see
        :data:`STORE_PARTS`) can be written right now; an unknown name is a
        :class:`ValidationError`."""

    async def close(self) -> None: ...


__all__ = [
    "STORE_PARTS",
    "AccessLog",
    "AccessLogRecord",
    "AgentDomainStats",
    "BatchNeighbours",
    "Clock",
    "ContradictionJudge",
    "CredibilityRecord",
    "CredibilityRegistry",
    "DecayOutcome",
    "Embedder",
    "EntityExtractor",
    "EntityGraph",
    "EntryRepository",
    "EvidenceRepository",
    "ExpertiseRecord",
    "ExpertiseRepository",
    "GasLanguageModel",
    "GraphSurroundings",
    "IdentityDirectory",
    "Outbox",
    "OutboxItem",
    "ProcessedKeys",
    "QueryProfile",
    "Reads",
    "RelationRepository",
    "ScoredEntry",
    "SearchFilter",
    "Store",
    "StoreStats",
    "UnitOfWork",
]
