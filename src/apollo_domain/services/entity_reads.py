"""Reading the entity graph: entities by name or prefix, one entity with its edges and
entries, its typed edges through time, and its neighbourhood (docs/entity-graph.md, "The entity
graph").

Every read sees the graph through the entries the caller may see that are not archived
(the :class:`~apollo_domain.ports.EntityGraph` visibility rule): an entity, an edge, a
neighbour or a count that only other principals' entries (or archived ones) support never
reaches the caller, and an entity it cannot see is :class:`NotFound` like an unknown one.
Every answer is bounded by the constants below.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Final
from uuid import UUID

from .. import bounds
from ..commands import GetEntity, GetEntityHistory, ListEntities, RelatedEntities
from ..entities import CO_OCCURS, Entity, EntityEdge, normalize_entity_name
from ..errors import NotFound, ValidationError
from ..limits import MAX_ENTITIES, MAX_ENTITY_DEPTH
from ..model import ACTIVE_STATUSES, Viewer
from ..ports import EntityGraph, SearchFilter
from ..results import (
    EntityDetail,
    EntityEdgeView,
    EntityHistory,
    EntityMentionView,
    EntitySummary,
    RelatedEntity,
)
from ..validation import shown, storable_text
from .context import Caller, Deps, bounded_int, resolve_viewer
from .graph_fill import query_names

#: ``entity``: at most this many live typed edges, and as many ``co_occurs`` edges, oldest
#: first; ``entity_history``: at most this many typed edges, oldest first.
MAX_ENTITY_EDGES: Final = 100
#: Supporting entry ids shown per edge (``support`` counts them all).
MAX_EDGE_ENTRIES: Final = 10
#: ``entity``: the newest entries mentioning it, and how much of each one's content is shown.
ENTITY_ENTRIES: Final = 10
SNIPPET_CHARS: Final = 200
#: ``related_entities``: most neighbours returned, and the edges read per level.
MAX_RELATED_ENTITIES: Final = 50
RELATED_SCAN: Final = 500


def parse_name(name: object, field: str = "name") -> str:
    """An entity name argument as the key it is resolved by; empty or oversized names are
    refused naming ``field``."""
    if not isinstance(name, str):
        raise ValidationError(field, "must be a string")
    bounds.ENTITY_NAME.check(len(name), field)
    key = normalize_entity_name(storable_text(name))
    if not key:
        raise ValidationError(field, "must name an entity")
    return key


def parse_instant(name: str, value: object) -> datetime | None:
    """``None``, a datetime, or an ISO 8601 text (a date alone is its midnight); a time
    without a zone is UTC. Anything else is refused naming ``name``."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValidationError(
                name, f"must be an ISO 8601 date or time, got {shown(value)}"
            ) from None
    if not isinstance(value, datetime):
        raise ValidationError(name, "must be an ISO 8601 date or time")
    try:  # a zone that shifts the first or last representable day past its edge
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:
        raise ValidationError(
            name, f"is outside the representable range ({datetime.min.year}-{datetime.max.year})"
        ) from None


async def list_entities(deps: Deps, caller: Caller, command: ListEntities) -> list[EntitySummary]:
    """The visible entities a text names (``query``: every run of words, as a query's graph
    signal reads it), or whose name starts with ``prefix``, or both; by name, at most
    ``limit``. With neither, the visible entities by name."""
    top = bounded_int("limit", command.limit, 1, MAX_ENTITIES)
    text = parse_entity_query(command.query)
    start = parse_prefix(command.prefix) or ""
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.reading() as uow:
        if text is None:
            found = await uow.graph.with_prefix(start, viewer, top)
        else:
            names = [n for n in query_names(text) if n.startswith(start)]
            found = (await uow.graph.counted(names, viewer))[:top]
    return [EntitySummary(e.name, e.key, e.kind, count) for e, count in found]


async def get_entity(deps: Deps, caller: Caller, command: GetEntity) -> EntityDetail:
    """The entity ``name`` names, with its live edges (typed first, then ``co_occurs``;
    at most :data:`MAX_ENTITY_EDGES` of each) and its newest :data:`ENTITY_ENTRIES`
    active entries, as the caller may see them. :class:`NotFound` when unknown or not
    visible."""
    key = parse_name(command.name)
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.reading() as uow:
        found, mentions = await _visible_entity(uow.graph, key, viewer)
        typed = await uow.graph.edges([found.id], viewer, typed=True, limit=MAX_ENTITY_EDGES)
        paired = await uow.graph.edges([found.id], viewer, typed=False, limit=MAX_ENTITY_EDGES)
        edges = await _views(uow.graph, [*typed, *paired])
        flt = SearchFilter(viewer, ACTIVE_STATUSES)
        tagged = await uow.graph.entries_mentioning([found.id], flt, ENTITY_ENTRIES)
    entries = tuple(
        EntityMentionView(
            entry.id,
            entry.content[:SNIPPET_CHARS],
            entry.status,
            entry.confidence,
            entry.created_at,
        )
        for entry, _ in tagged
    )
    return EntityDetail(found.name, found.key, found.kind, mentions, edges, entries)


async def entity_history(deps: Deps, caller: Caller, command: GetEntityHistory) -> EntityHistory:
    """The entity's typed edges (either direction) live at ``as_of`` (``valid_from <=
    as_of < valid_to``), or, with ``as_of`` None, all of them, retired ones included with
    their ``valid_to`` and ``superseded_by``; oldest first, at most
    :data:`MAX_ENTITY_EDGES`. :class:`NotFound` when unknown or not visible."""
    key = parse_name(command.name)
    when = parse_instant("as_of", command.as_of)
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.reading() as uow:
        found, _ = await _visible_entity(uow.graph, key, viewer)
        edges = await uow.graph.edges(
            [found.id],
            viewer,
            as_of=when,
            history=when is None,
            typed=True,
            limit=MAX_ENTITY_EDGES,
        )
        views = await _views(uow.graph, edges)
    return EntityHistory(found.name, found.key, when, views)


async def related_entities(
    deps: Deps, caller: Caller, command: RelatedEntities
) -> list[RelatedEntity]:
    """The entities within ``depth`` (1 to :data:`MAX_ENTITY_DEPTH`) live edges of the
    entity ``name``, either direction, breadth first: nearest first, each once, with the
    edge that first reached it (a typed edge rather than ``co_occurs`` when both do). At
    most :data:`MAX_RELATED_ENTITIES`, reading at most :data:`RELATED_SCAN` edges per
    level. :class:`NotFound` when unknown or not visible."""
    key = parse_name(command.name)
    levels = bounded_int("depth", command.depth, 1, MAX_ENTITY_DEPTH)
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.reading() as uow:
        root, _ = await _visible_entity(uow.graph, key, viewer)
        reached: dict[UUID, tuple[int, str, UUID]] = {}  # entity -> (depth, relation, via)
        frontier = [root.id]
        for level in range(1, levels + 1):
            current = set(frontier)
            frontier = []
            edges = await uow.graph.edges(current, viewer, limit=RELATED_SCAN)
            edges.sort(key=lambda edge: edge.relation == CO_OCCURS)  # typed edges first
            for edge in edges:
                for near, far in ((edge.src_id, edge.dst_id), (edge.dst_id, edge.src_id)):
                    if near in current and far != root.id and far not in reached:
                        reached[far] = (level, edge.relation, near)
                        frontier.append(far)
                if len(reached) >= MAX_RELATED_ENTITIES:
                    break
            if not frontier or len(reached) >= MAX_RELATED_ENTITIES:
                break
        named = await uow.graph.get_many({root.id, *reached})
    return [
        RelatedEntity(
            named[entity_id].name,
            named[entity_id].key,
            named[entity_id].kind,
            level,
            relation,
            named[via].name,
        )
        for entity_id, (level, relation, via) in reached.items()
        if entity_id in named and via in named
    ]


def parse_entity_query(query: object) -> str | None:
    """A text to look entity names up in (None: no text); refused naming ``query`` unless a
    string within the ``QUERY`` bound."""
    if query is None:
        return None
    if not isinstance(query, str):
        raise ValidationError("query", "must be a string")
    return storable_text(bounds.QUERY.text(query))


def parse_prefix(prefix: object) -> str | None:
    """A name prefix, normalized like a name (None: no prefix; the empty prefix matches
    every name); refused naming ``prefix`` unless a string of at most
    :data:`MAX_NAME_INPUT` characters."""
    if prefix is None:
        return None
    if not isinstance(prefix, str):
        raise ValidationError("prefix", "must be a string")
    bounds.ENTITY_PREFIX.check(len(prefix))
    return normalize_entity_name(storable_text(prefix))


async def _visible_entity(graph: EntityGraph, key: str, viewer: Viewer) -> tuple[Entity, int]:
    found = await graph.counted([key], viewer)
    if not found:
        raise NotFound(f"entity {key!r} not found")
    return found[0]


async def _views(graph: EntityGraph, edges: Sequence[EntityEdge]) -> tuple[EntityEdgeView, ...]:
    """The edges with their endpoints named."""
    names = await _names(graph, {end for edge in edges for end in (edge.src_id, edge.dst_id)})
    return tuple(
        EntityEdgeView(
            id=edge.id,
            src=names.get(edge.src_id, ""),
            relation=edge.relation,
            dst=names.get(edge.dst_id, ""),
            valid_from=edge.valid_from,
            valid_to=edge.valid_to,
            superseded_by=edge.superseded_by,
            support=len(edge.entry_ids),
            entry_ids=edge.entry_ids[:MAX_EDGE_ENTRIES],
        )
        for edge in edges
    )


async def _names(graph: EntityGraph, entity_ids: Collection[UUID]) -> dict[UUID, str]:
    return {entity_id: e.name for entity_id, e in (await graph.get_many(entity_ids)).items()}


__all__ = [
    "ENTITY_ENTRIES",
    "MAX_EDGE_ENTRIES",
    "MAX_ENTITY_EDGES",
    "MAX_RELATED_ENTITIES",
    "RELATED_SCAN",
    "SNIPPET_CHARS",
    "entity_history",
    "get_entity",
    "list_entities",
    "parse_entity_query",
    "parse_instant",
    "parse_name",
    "parse_prefix",
    "related_entities",
]
