"""Tagging entries with their entities and wiring the entity graph (docs/entity-graph.md, "The
entity graph")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from uuid import UUID

from ..entities import (
    CO_OCCURS,
    Entity,
    EntityMention,
    Extraction,
    normalize_entity_name,
    normalize_relation,
)
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
    mention them, it was said beside them. (:func:`index_entries` of this one entry.)"""
    await index_entries(uow, [(entry_id, extraction, now)])


async def _relate(
    uow: UnitOfWork,
    entry_id: UUID,
    extraction: Extraction,
    entities: Mapping[str, Entity],
    now: datetime,
) -> None:
    """The typed edges the extraction read, between resolved entities."""
    for edge in extraction.edges:
        src = entities.get(normalize_entity_name(edge.src))
        dst = entities.get(normalize_entity_name(edge.dst))
        relation = normalize_relation(edge.relation)
        if src is None or dst is None or src.id == dst.id or relation in ("", CO_OCCURS):
            continue
        await uow.graph.relate(src.id, relation, dst.id, entry_id, now)


async def index_entries(
    uow: UnitOfWork, entries: Sequence[tuple[UUID, Extraction, datetime]]
) -> None:
    """:func:`index_entry` for each ``(entry_id, extraction, created_at)``, in order, as one
    batch: the entities of all of them resolved in one call (at the first entry's time; the
    first name written for a key is still the earliest entry's), tagged and linked in one
    more, then each entry's typed edges in order."""
    planned = [(entry_id, _mentions(extraction)) for entry_id, extraction, _ in entries]
    mentions = [m for _, (own, beside) in planned for m in (*own, *beside)]
    if not mentions:
        return
    first = min(created_at for _, _, created_at in entries)
    entities = {e.key: e for e in await uow.graph.resolve(mentions, first)}
    await uow.graph.index_many(
        [
            (
                entry_id,
                [entities[m.key].id for m in own if m.key in entities],
                [entities[m.key].id for m in beside if m.key in entities],
                created_at,
            )
            for (entry_id, (own, beside)), (_, _, created_at) in zip(planned, entries, strict=True)
            if own
        ]
    )
    for (entry_id, extraction, created_at), (_, (own, _beside)) in zip(
        entries, planned, strict=True
    ):
        if own:
            await _relate(uow, entry_id, extraction, entities, created_at)


def _mentions(
    extraction: Extraction,
) -> tuple[tuple[EntityMention, ...], tuple[EntityMention, ...]]:
    """The mentions an entry is tagged with (its first :data:`MAX_ENTITIES_PER_ENTRY`) and
    those of its episode neighbours it is linked with within the same cap."""
    own = extraction.resolvable()[:MAX_ENTITIES_PER_ENTRY]
    if not own:
        return (), ()
    keys = {m.key for m in own}
    beside = list({m.key: m for m in extraction.nearby if m.key and m.key not in keys}.values())
    return own, tuple(beside[: MAX_ENTITIES_PER_ENTRY - len(own)])
