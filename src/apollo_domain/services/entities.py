"""Tagging entries with their entities and wiring the entity graph (docs/entity-graph.md, "The
entity graph")."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from ..entities import CO_OCCURS, Extraction, normalize_entity_name, normalize_relation
from ..errors import ApolloError
from ..ports import EntityExtractor, UnitOfWork

#: An entry's first this-many entities are tagged and paired (at most 276 co_occurs pairs).
MAX_ENTITIES_PER_ENTRY = 24


async def extract(extractor: EntityExtractor, text: str) -> Extraction:
    """The extractor's reading of ``text``; a failing extractor means no entities."""
    try:
        return await extractor.extract(text)
    except ApolloError:
        return Extraction()


async def index_entry(
    uow: UnitOfWork, entry_id: UUID, extraction: Extraction, now: datetime
) -> None:
    """Resolve the entry's entities, tag the entry with them, connect every pair with a
    ``co_occurs`` edge and record the typed edges the extractor read (in ``uow``). The
    entities its episode neighbours name (``extraction.nearby``) are connected with its
    own too, within the same cap, but the entry is not tagged with them: it does not
    mention them, it was said beside them."""
    mentions = extraction.resolvable()[:MAX_ENTITIES_PER_ENTRY]
    if not mentions:
        return
    own = {m.key for m in mentions}
    beside = list({m.key: m for m in extraction.nearby if m.key and m.key not in own}.values())
    beside = beside[: MAX_ENTITIES_PER_ENTRY - len(mentions)]
    entities = {e.key: e for e in await uow.graph.resolve([*mentions, *beside], now)}
    ids = [entities[m.key].id for m in mentions if m.key in entities]
    await uow.graph.tag(entry_id, ids)
    near = [entities[m.key].id for m in beside if m.key in entities]
    await uow.graph.link_co_occurring(entry_id, ids, now, beside=near)
    for edge in extraction.edges:
        src = entities.get(normalize_entity_name(edge.src))
        dst = entities.get(normalize_entity_name(edge.dst))
        relation = normalize_relation(edge.relation)
        if src is None or dst is None or src.id == dst.id or relation in ("", CO_OCCURS):
            continue
        await uow.graph.relate(src.id, relation, dst.id, entry_id, now)
