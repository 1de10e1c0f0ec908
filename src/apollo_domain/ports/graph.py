"""The relation repository (typed edges between entries) and the entity graph (entities,
the entries that mention them, and the edges between entities)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID

from attrs import frozen

from ..entities import Entity, EntityEdge, EntityMention
from ..model import Entry, Relation, RelationType, Viewer
from .records import SearchFilter


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

    async def exists(self, from_id: UUID, to_id: UUID, relation_type: RelationType) -> bool:
        """Whether that edge (in that direction) is stored."""

    async def count(self) -> int:
        """How many edges are stored."""

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
    """Entity nodes, the entries that mention them, and the edges between them
    (docs/entity-graph.md, "The
    entity graph"). Writes take effect when the unit of work commits.

    Visibility: an entity is visible to a viewer only when an entry that mentions it is
    (scope rules of :func:`apollo_domain.rules.scope_visible`) and is not archived; an edge
    only when one of the entries supporting it is. Archived and deleted entries make nothing
    visible: what only they mention or support reaches nobody. Every read below applies it.
    """

    async def resolve(self, mentions: Sequence[EntityMention], now: datetime) -> list[Entity]:
        """Find or create the node of each mention's normalized name (``mention.key``), in
        order, one per key. A node created concurrently by another unit of work is re-read,
        never duplicated: the first name written for a key is the node's name."""

    async def index_many(
        self, entries: Sequence[tuple[UUID, Sequence[UUID], Sequence[UUID], datetime]]
    ) -> None:
        """For each ``(entry_id, entity_ids, beside, now)``, in order: record that the entry
        mentions ``entity_ids`` (idempotent), and one ``co_occurs`` edge per pair of
        :func:`~apollo_domain.entities.co_occurring_pairs` (each pair of distinct
        ``entity_ids``, and each of them with each of ``beside``), stored once in canonical
        order (``src_id < dst_id``) and created live at that ``now`` if absent, the entry
        added to the edge's supporting entries. In a few statements for all of them where
        the adapter can (a bulk ingest's chunk)."""

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


__all__ = ["EntityGraph", "GraphSurroundings", "RelationRepository"]
