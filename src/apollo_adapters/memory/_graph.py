"""The entity graph: nodes by normalized name, mentions per entry, edges with their
supporting entries; every change undone with the unit of work."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from datetime import datetime
from functools import partial
from typing import Protocol
from uuid import UUID

import attrs

from apollo_domain.entities import (
    CO_OCCURS,
    Entity,
    EntityEdge,
    EntityMention,
    co_occurring_pairs,
    normalize_entity_name,
)
from apollo_domain.model import Entry, Status, Viewer
from apollo_domain.ports import SearchFilter
from apollo_domain.rules import is_visible

from ._columns import Undo

EdgeKey = tuple[UUID, UUID, str]


class _Entries(Protocol):
    """What the graph reads of the entry table."""

    def get(self, entry_id: UUID, with_embedding: bool) -> Entry | None: ...

    def browse(self, flt: SearchFilter, limit: int) -> list[Entry]: ...


class GraphTable:
    """Entities, mentions and edges of one store."""

    def __init__(self, entries: _Entries) -> None:
        self._entries = entries
        self._entities: dict[UUID, Entity] = {}
        self._by_key: dict[str, UUID] = {}
        self._mentions: dict[UUID, list[UUID]] = {}  # entry -> entities, in tagging order
        self._mentioned_by: dict[UUID, set[UUID]] = {}  # entity -> entries
        self._edges: dict[UUID, EntityEdge] = {}  # entry_ids kept in ``_support``
        self._support: dict[UUID, list[UUID]] = {}
        self._live: dict[EdgeKey, UUID] = {}
        self._touching: dict[UUID, set[UUID]] = {}  # entity -> edges

    # ------------------------------------------------------------------ writes

    def resolve(self, mentions: Sequence[EntityMention], now: datetime, undo: Undo) -> list[Entity]:
        found: dict[str, Entity] = {}
        for mention in mentions:
            key = normalize_entity_name(mention.name)
            if not key or key in found:
                continue
            existing = self._by_key.get(key)
            if existing is None:
                entity = Entity(uuid.uuid4(), mention.name.strip(), key, mention.kind, now)
                self._entities[entity.id] = entity
                self._by_key[key] = entity.id
                undo.append(partial(self._forget_entity, entity))
                existing = entity.id
            found[key] = self._entities[existing]
        return list(found.values())

    def _forget_entity(self, entity: Entity) -> None:
        del self._entities[entity.id]
        del self._by_key[entity.key]

    def tag(self, entry_id: UUID, entity_ids: Sequence[UUID], undo: Undo) -> None:
        tagged = self._mentions.setdefault(entry_id, [])
        for entity_id in dict.fromkeys(entity_ids):
            if entity_id in tagged:
                continue
            tagged.append(entity_id)
            self._mentioned_by.setdefault(entity_id, set()).add(entry_id)
            undo.append(partial(self._untag, entry_id, entity_id))

    def _untag(self, entry_id: UUID, entity_id: UUID) -> None:
        self._mentions[entry_id].remove(entity_id)
        self._mentioned_by[entity_id].discard(entry_id)

    def link_co_occurring(
        self,
        entry_id: UUID,
        entity_ids: Sequence[UUID],
        now: datetime,
        undo: Undo,
        beside: Sequence[UUID] = (),
    ) -> None:
        for src, dst in co_occurring_pairs(entity_ids, beside):
            edge_id = self._live.get((src, dst, CO_OCCURS))
            if edge_id is None:
                edge_id = self._insert(EntityEdge(uuid.uuid4(), src, dst, CO_OCCURS, (), now), undo)
            self._add_support(edge_id, entry_id, undo)

    def relate(
        self,
        src_id: UUID,
        relation: str,
        dst_id: UUID,
        entry_id: UUID,
        now: datetime,
        undo: Undo,
    ) -> EntityEdge:
        live = self._live.get((src_id, dst_id, relation))
        if live is None:
            live = self._insert(EntityEdge(uuid.uuid4(), src_id, dst_id, relation, (), now), undo)
            for edge_id in list(self._touching.get(src_id, ())):
                old = self._edges[edge_id]
                if (
                    old.live
                    and (old.src_id, old.dst_id) == (src_id, dst_id)
                    and old.relation not in (CO_OCCURS, relation)
                ):
                    self._retire(old, now, live, undo)
        self._add_support(live, entry_id, undo)
        return self._with_support(self._edges[live], None)

    def _insert(self, edge: EntityEdge, undo: Undo) -> UUID:
        self._edges[edge.id] = edge
        self._support[edge.id] = []
        self._live[(edge.src_id, edge.dst_id, edge.relation)] = edge.id
        for end in (edge.src_id, edge.dst_id):
            self._touching.setdefault(end, set()).add(edge.id)
        undo.append(lambda: self._remove_edge(edge))
        return edge.id

    def _remove_edge(self, edge: EntityEdge) -> None:
        del self._edges[edge.id]
        del self._support[edge.id]
        key = (edge.src_id, edge.dst_id, edge.relation)
        if self._live.get(key) == edge.id:
            del self._live[key]
        for end in (edge.src_id, edge.dst_id):
            self._touching[end].discard(edge.id)

    def _retire(self, old: EntityEdge, now: datetime, by: UUID, undo: Undo) -> None:
        key = (old.src_id, old.dst_id, old.relation)
        self._edges[old.id] = attrs.evolve(old, valid_to=now, superseded_by=by)
        del self._live[key]

        def restore() -> None:
            self._edges[old.id] = old
            self._live[key] = old.id

        undo.append(restore)

    def _add_support(self, edge_id: UUID, entry_id: UUID, undo: Undo) -> None:
        support = self._support[edge_id]
        if entry_id not in support:
            support.append(entry_id)
            undo.append(lambda: support.remove(entry_id))

    def drop(self, entry_id: UUID, undo: Undo) -> None:
        """The entry is deleted: it mentions nothing and supports no edge any more."""
        for entity_id in list(self._mentions.get(entry_id, ())):
            self._untag(entry_id, entity_id)
            undo.append(partial(self._retag, entry_id, entity_id))
        for support in self._support.values():
            if entry_id in support:
                position = support.index(entry_id)
                support.remove(entry_id)
                undo.append(partial(support.insert, position, entry_id))

    def _retag(self, entry_id: UUID, entity_id: UUID) -> None:
        self._mentions[entry_id].insert(0, entity_id)
        self._mentioned_by[entity_id].add(entry_id)

    def prune(self, undo: Undo) -> int:
        removed = 0
        for edge in list(self._edges.values()):
            if not self._support[edge.id]:
                self._remove_edge(edge)
                undo.append(partial(self._reinsert, edge))
                removed += 1
        for entity in list(self._entities.values()):
            if not self._mentioned_by.get(entity.id) and not self._touching.get(entity.id):
                self._forget_entity(entity)
                undo.append(partial(self._remember, entity))
                removed += 1
        return removed

    def _reinsert(self, edge: EntityEdge) -> None:
        self._insert(edge, [])

    def _remember(self, entity: Entity) -> None:
        self._entities[entity.id] = entity
        self._by_key[entity.key] = entity.id

    # ------------------------------------------------------------------ reads

    def _visible(self, entry_id: UUID, viewer: Viewer) -> bool:
        """Whether the entry makes what it mentions or supports visible to ``viewer``."""
        entry = self._entries.get(entry_id, False)
        return (
            entry is not None and entry.status is not Status.ARCHIVED and is_visible(entry, viewer)
        )

    def _count(self, entity_id: UUID, viewer: Viewer) -> int:
        return sum(self._visible(e, viewer) for e in self._mentioned_by.get(entity_id, ()))

    def _entity_visible(self, entity_id: UUID, viewer: Viewer) -> bool:
        return any(self._visible(e, viewer) for e in self._mentioned_by.get(entity_id, ()))

    def _with_support(self, edge: EntityEdge, viewer: Viewer | None) -> EntityEdge:
        support = self._support[edge.id]
        if viewer is None:
            return attrs.evolve(edge, entry_ids=tuple(support))
        successor = edge.superseded_by
        if successor is not None and not self._edge_visible(successor, viewer):
            successor = None
        return attrs.evolve(
            edge,
            entry_ids=tuple(e for e in support if self._visible(e, viewer)),
            superseded_by=successor,
        )

    def entities_of(self, entry_id: UUID) -> list[Entity]:
        return [self._entities[e] for e in self._mentions.get(entry_id, ())]

    def find(self, keys: Collection[str], viewer: Viewer) -> list[Entity]:
        found = [self._by_key[k] for k in sorted(set(keys)) if k in self._by_key]
        return [self._entities[e] for e in found if self._entity_visible(e, viewer)]

    def counted(self, keys: Collection[str], viewer: Viewer) -> list[tuple[Entity, int]]:
        found = [self._by_key[k] for k in sorted(set(keys)) if k in self._by_key]
        counts = [(self._entities[e], self._count(e, viewer)) for e in found]
        return [(entity, count) for entity, count in counts if count]

    def get_many(self, entity_ids: Collection[UUID]) -> dict[UUID, Entity]:
        return {e: self._entities[e] for e in entity_ids if e in self._entities}

    def with_prefix(self, prefix: str, viewer: Viewer, limit: int) -> list[tuple[Entity, int]]:
        wanted = normalize_entity_name(prefix)
        found: list[tuple[Entity, int]] = []
        if limit <= 0:
            return found
        for key in sorted(k for k in self._by_key if k.startswith(wanted)):
            entity_id = self._by_key[key]
            count = self._count(entity_id, viewer)
            if count:
                found.append((self._entities[entity_id], count))
                if len(found) >= limit:
                    break
        return found

    def edges(
        self,
        entity_ids: Collection[UUID],
        viewer: Viewer,
        as_of: datetime | None,
        *,
        history: bool = False,
        typed: bool | None = None,
        limit: int | None = None,
    ) -> list[EntityEdge]:
        ids = {edge_id for e in entity_ids for edge_id in self._touching.get(e, ())}
        found = []
        for edge_id in ids:
            edge = self._edges[edge_id]
            if typed is not None and (edge.relation != CO_OCCURS) is not typed:
                continue
            when = history or (edge.live if as_of is None else edge.live_at(as_of))
            if when and self._edge_visible(edge_id, viewer):
                found.append(self._with_support(edge, viewer))
        found.sort(key=lambda edge: (edge.valid_from, edge.id))
        return found if limit is None else found[: max(limit, 0)]

    def neighbours(
        self, entity_ids: Collection[UUID], viewer: Viewer, limit: int
    ) -> list[tuple[UUID, int]]:
        ends = set(entity_ids)
        support: dict[UUID, int] = {}
        for edge in self.edges(ends, viewer, None):
            for end in (edge.src_id, edge.dst_id):
                if end not in ends:
                    support[end] = support.get(end, 0) + len(edge.entry_ids)
        ranked = sorted(support, key=lambda e: (-support[e], str(e)))
        return [(e, support[e]) for e in ranked[: max(limit, 0)]]

    def mentioning_any(self, entity_ids: Collection[UUID]) -> frozenset[UUID]:
        """The entries mentioning any of ``entity_ids``, whatever their visibility."""
        return frozenset(e for entity in entity_ids for e in self._mentioned_by.get(entity, ()))

    def reached(
        self, entity_ids: Collection[UUID], viewer: Viewer, bridges: int
    ) -> dict[UUID, frozenset[UUID]]:
        """The entries mentioning the bridges of :meth:`EntityGraph.hop_search`, each with
        the ids among ``entity_ids`` whose typed edges lead to the bridges it mentions."""
        ends = set(entity_ids)
        support: dict[UUID, int] = {}
        origins: dict[UUID, set[UUID]] = {}
        for edge in self.edges(ends, viewer, None, typed=True):
            for near, far in ((edge.src_id, edge.dst_id), (edge.dst_id, edge.src_id)):
                if near in ends and far not in ends:
                    support[far] = support.get(far, 0) + len(edge.entry_ids)
                    origins.setdefault(far, set()).add(near)
        kept = sorted(support, key=lambda e: (-support[e], str(e)))[: max(bridges, 0)]
        found: dict[UUID, set[UUID]] = {}
        for bridge in kept:
            for entry_id in self._mentioned_by.get(bridge, ()):
                found.setdefault(entry_id, set()).update(origins[bridge])
        return {entry_id: frozenset(seeds) for entry_id, seeds in found.items()}

    def _edge_visible(self, edge_id: UUID, viewer: Viewer) -> bool:
        return any(self._visible(e, viewer) for e in self._support.get(edge_id, ()))

    def entries_mentioning(
        self, entity_ids: Collection[UUID], flt: SearchFilter, limit: int
    ) -> list[tuple[Entry, frozenset[UUID]]]:
        wanted = set(entity_ids)
        mentioning = {e for entity in wanted for e in self._mentioned_by.get(entity, ())}
        if flt.only_ids is not None:
            mentioning &= flt.only_ids
        if not mentioning or limit <= 0:
            return []
        entries = self._entries.browse(attrs.evolve(flt, only_ids=frozenset(mentioning)), limit)
        return [
            (entry, frozenset(wanted.intersection(self._mentions[entry.id]))) for entry in entries
        ]
