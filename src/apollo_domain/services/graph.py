"""Concept-graph traversal and manual curation of typed relations."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from uuid import UUID

from ..commands import GetRelations, LinkEntries, RelatedEntries
from ..errors import Forbidden, NotFound, ValidationError
from ..limits import MAX_RELATED
from ..model import Entry, Relation, Viewer
from ..ports import AccessLogRecord, UnitOfWork
from ..results import LinkedEntry, LinkResult, RelatedEntry
from ..rules import dispute_refusal, is_visible
from ..traversal import (
    Activation,
    activation_step,
    parse_relation_types,
    ranked,
    validate_depth,
)
from ..validation import shown
from .context import UNKNOWN_AGENT, Caller, Deps, first_application, resolve_viewer


def parse_id(name: str, value: object) -> UUID:
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        raise ValidationError(name, f"must be a UUID, got {shown(value)}") from None


async def visible_entry(
    uow: UnitOfWork, entry_id: UUID, viewer: Viewer, *, lock: bool = False
) -> Entry:
    """The entry, or :class:`NotFound` when it does not exist or the viewer may not see it.
    ``lock``: read it under its row lock, held until the unit of work ends (a use case
    that writes what it read)."""
    entry = await (uow.entries.lock(entry_id) if lock else uow.entries.get(entry_id))
    if entry is None or not is_visible(entry, viewer):
        raise NotFound(f"entry {entry_id} not found")
    return entry


async def related_entries(
    deps: Deps, caller: Caller, command: RelatedEntries
) -> list[RelatedEntry]:
    """Spreading activation over outgoing relations from a visible root. Invisible and
    archived entries are never returned nor traversed through. At most ``MAX_RELATED``
    entries are returned, highest activation first. One ``traverse`` access-log row when
    the agent the command credits (else the caller's) is known."""
    caller = caller.acting_as(command.agent_id)
    root = parse_id("entry_id", command.entry_id)
    max_depth = validate_depth(command.depth)
    types = parse_relation_types(command.relation_types)
    audited = caller.agent_id != UNKNOWN_AGENT
    store = deps.store
    if audited:
        await store.preflight(("access_log",))
    viewer = await resolve_viewer(store.directory, caller.principal)
    async with store.unit_of_work() as uow:
        await visible_entry(uow, root, viewer)
        seen: dict[UUID, Entry] = {}
        best: dict[UUID, Activation] = {}
        frontier = {root: 1.0}
        for level in range(1, max_depth + 1):
            edges = await uow.relations.outgoing(list(frontier), types)
            unknown = {e.to_id for e in edges} - seen.keys()
            seen.update(await uow.entries.get_many(unknown))

            def admissible(node: UUID) -> bool:
                entry = seen.get(node)
                return entry is not None and entry.is_active and is_visible(entry, viewer)

            frontier = activation_step(root, frontier, edges, level, best, admissible, types)
            if not frontier:
                break
        if audited:
            await uow.access_log.record(
                [
                    AccessLogRecord(
                        "traverse", caller.agent_id, root, deps.clock.now(), {"depth": max_depth}
                    )
                ]
            )
            await uow.commit()
    return [
        RelatedEntry(
            id=a.entry_id,
            relation_type=a.relation_type,
            depth=a.depth,
            activation=a.activation,
            via=a.via,
            content=seen[a.entry_id].content,
            content_type=seen[a.entry_id].content_type,
            confidence=seen[a.entry_id].confidence,
            status=seen[a.entry_id].status,
        )
        for a in ranked(best)[:MAX_RELATED]
    ]


async def get_relations(deps: Deps, caller: Caller, command: GetRelations) -> list[LinkedEntry]:
    """The relations of a visible entry, both ways, each with the entry at its other end:
    outgoing first, then incoming, newest first within each (at most ``MAX_RELATED`` each
    way). Relations to entries the caller may not see are left out; archived entries are
    shown (with their status), so the loser of a dispute stays in view. Writes nothing."""
    root = parse_id("entry_id", command.entry_id)
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.reading() as uow:
        await visible_entry(uow, root, viewer)
        outgoing = await uow.relations.outgoing([root])
        incoming = await uow.relations.incoming([root])
        ends = {r.to_id for r in outgoing} | {r.from_id for r in incoming}
        others = await uow.entries.get_many(ends - {root})
    found: list[LinkedEntry] = []
    for direction, relations in (("out", outgoing), ("in", incoming)):
        newest = sorted(relations, key=lambda r: r.created_at or _EPOCH, reverse=True)
        kept = 0
        for relation in newest:
            other = others.get(relation.to_id if direction == "out" else relation.from_id)
            if other is None or not is_visible(other, viewer) or kept == MAX_RELATED:
                continue
            kept += 1
            found.append(
                LinkedEntry(
                    direction,
                    relation.relation_type,
                    relation.weight,
                    relation.created_at,
                    other.id,
                    other.content,
                    other.content_type,
                    other.confidence,
                    other.status,
                )
            )
    return found


async def link_entries(
    deps: Deps, caller: Caller, command: LinkEntries, idempotency_key: str | None = None
) -> LinkResult:
    """Manual curation: a typed relation between two entries the caller can see; a
    ``contradicts`` or ``supersedes`` link only from one who may make both entries parties
    to a dispute (:func:`~apollo_domain.rules.dispute_refusal`, else :class:`Forbidden`).
    A redelivery of ``idempotency_key`` changes nothing and reports ``created`` False."""
    caller = caller.acting_as(command.agent_id)
    source = parse_id("from_entry_id", command.from_entry_id)
    target = parse_id("to_entry_id", command.to_entry_id)
    relation_type, weight = command.relation_type, command.weight  # as the caller sent them
    types = None
    if relation_type is not None:
        types = parse_relation_types([relation_type], "relation_type")
    if not types:
        raise ValidationError("relation_type", "is required")
    (kind,) = types
    if isinstance(weight, bool):
        raise ValidationError("weight", "must be a number")
    try:
        w = float(weight)
    except (TypeError, ValueError):
        raise ValidationError("weight", f"must be a number, got {weight!r}") from None
    if not math.isfinite(w) or not 0.0 < w <= 1.0:
        raise ValidationError("weight", f"must be within (0, 1], got {weight!r}")
    if source == target:
        raise ValidationError("to_entry_id", "an entry cannot be linked to itself")
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.unit_of_work() as uow:
        now = deps.clock.now()
        if not await first_application(uow, "link", idempotency_key, now):
            return LinkResult(source, target, kind, False)
        source_entry = await visible_entry(uow, source, viewer)
        target_entry = await visible_entry(uow, target, viewer)
        refusal = dispute_refusal(caller.principal, kind, source_entry, target_entry)
        if refusal is not None:
            raise Forbidden(refusal)
        created = await uow.relations.add(
            Relation(source, target, kind, w, now, {"linked_by": caller.agent_id})
        )
        await uow.commit()
    return LinkResult(source, target, kind, created)


_EPOCH = datetime.min.replace(tzinfo=UTC)

__all__ = ["get_relations", "link_entries", "parse_id", "related_entries", "visible_entry"]
