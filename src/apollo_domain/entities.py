"""Entities and the knowledge graph (docs/entity-graph.md, "The entity graph").

An entry mentions entities (people, places, products, dates, quantities, identifiers);
entities are nodes resolved by their normalized name, so the same name from different
entries is one node. Edges join entities: ``co_occurs`` for each pair mentioned by one
entry (undirected, stored once in canonical order, keeping the entries that support it) and
typed edges (``works_at``, ``uses``, ...) that an extractor reads from the text. Typed edges
are bi-temporal: a new relation between the same (src, dst) pair retires the live one
(``valid_to``, ``superseded_by``), which is kept, never deleted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from itertools import combinations
from typing import Final
from uuid import UUID

from attrs import frozen

CO_OCCURS: Final = "co_occurs"
MAX_NAME_CHARS: Final = 200

_SPACES = re.compile(r"\s+")
_RELATION_JUNK = re.compile(r"[^a-z0-9]+")


def normalize_entity_name(name: str) -> str:
    """Strip, lowercase, squeeze whitespace: the key an entity is resolved by."""
    return _SPACES.sub(" ", name.strip().lower())[:MAX_NAME_CHARS]


def normalize_relation(relation: str) -> str:
    """A relation label: lowercase, runs of anything but letters and digits → ``_``."""
    return _RELATION_JUNK.sub("_", relation.strip().lower()).strip("_")


@frozen
class EntityMention:
    """An entity as a text names it; ``kind`` says what the extractor took it for
    (``name``, ``date``, ``quantity``, ``identifier``, ``quoted``)."""

    name: str
    kind: str | None = None

    @property
    def key(self) -> str:
        return normalize_entity_name(self.name)


@frozen
class TypedMention:
    """A typed relation a text states between two entities it names."""

    src: str
    relation: str
    dst: str


@frozen
class Extraction:
    """What an extractor found in one text; ``nearby``: the entities the statements next to
    it in its episode name (``store_text``), which co-occur with its own without being
    mentioned by it."""

    entities: tuple[EntityMention, ...] = ()
    edges: tuple[TypedMention, ...] = ()
    nearby: tuple[EntityMention, ...] = ()

    def resolvable(self) -> tuple[EntityMention, ...]:
        """The mentions with a non-empty key, first mention of each key only; the
        endpoints of typed edges included."""
        seen: dict[str, EntityMention] = {}
        mentions = [
            *self.entities,
            *(EntityMention(e.src) for e in self.edges),
            *(EntityMention(e.dst) for e in self.edges),
        ]
        for mention in mentions:
            if mention.key and mention.key not in seen:
                seen[mention.key] = mention
        return tuple(seen.values())


@frozen
class Entity:
    """A node of the graph."""

    id: UUID
    name: str  # as first written
    key: str  # the normalized name it is resolved by
    kind: str | None
    created_at: datetime


@frozen
class EntityEdge:
    """An edge between two entities. ``co_occurs`` edges have ``src_id < dst_id`` and keep
    every supporting entry; a typed edge keeps the entry that stated it."""

    id: UUID
    src_id: UUID
    dst_id: UUID
    relation: str
    entry_ids: tuple[UUID, ...]
    valid_from: datetime
    valid_to: datetime | None = None
    superseded_by: UUID | None = None

    @property
    def live(self) -> bool:
        return self.valid_to is None

    def live_at(self, when: datetime) -> bool:
        return self.valid_from <= when and (self.valid_to is None or when < self.valid_to)


def co_occurring_pairs(
    entity_ids: Sequence[UUID], beside: Sequence[UUID] = ()
) -> list[tuple[UUID, UUID]]:
    """The ``co_occurs`` pairs an entry makes, each once in canonical order, sorted: every
    pair of distinct ``entity_ids`` (the entities it names), and each of them with each of
    ``beside`` (those named next to it in its episode), never two of ``beside`` together."""
    own = list(dict.fromkeys(entity_ids))
    pairs = {canonical_pair(a, b) for a, b in combinations(own, 2)}
    pairs.update(canonical_pair(a, b) for a in own for b in dict.fromkeys(beside) if a != b)
    return sorted(pairs)


def canonical_pair(a: UUID, b: UUID) -> tuple[UUID, UUID]:
    """The stored order of an undirected pair."""
    return (a, b) if a < b else (b, a)


__all__ = [
    "CO_OCCURS",
    "Entity",
    "EntityEdge",
    "EntityMention",
    "Extraction",
    "TypedMention",
    "canonical_pair",
    "co_occurring_pairs",
    "normalize_entity_name",
    "normalize_relation",
]
