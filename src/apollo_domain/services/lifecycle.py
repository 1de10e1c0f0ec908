"""Deprecating entries and resolving disputes: the lifecycle transitions a caller asks for
(docs/architecture.md, "The use cases"); credibility learns from each resolution."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from ..bounds import REASON
from ..commands import DeprecateEntry, ResolveDispute
from ..credibility import evidence_weight
from ..errors import Forbidden, NotFound, ValidationError
from ..lifecycle import (
    Resolution,
    deprecate,
    lose_dispute,
    parse_resolution,
    settle,
)
from ..lifecycle import (
    resolve_dispute as resolve,
)
from ..model import Entry, RelationType
from ..normalize import bounded_text
from ..ports import (
    AccessLogRecord,
    UnitOfWork,
)
from ..redaction import REDACTED
from ..results import (
    LifecycleResult,
)
from ..rules import is_visible
from .context import Caller, Deps, first_application, resolve_viewer
from .graph import parse_id, visible_entry


async def deprecate_entry(
    deps: Deps, caller: Caller, command: DeprecateEntry, idempotency_key: str | None = None
) -> LifecycleResult:
    """Archive the entry with ``deprecation_reason``; an identical repeat is a no-op.

    ``idempotency_key`` (a message id) is recorded with the change: a redelivery reports
    the entry as it is now, ``changed`` False."""
    caller = caller.acting_as(command.agent_id)
    target = parse_id("entry_id", command.entry_id)
    given: object = command.reason
    reason = bounded_text(given, REASON) if isinstance(given, str) else None
    if not reason:
        raise ValidationError("reason", "must be a non-empty string")
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.unit_of_work() as uow:
        if not await first_application(uow, "deprecate", idempotency_key, deps.clock.now()):
            return _unchanged(await visible_entry(uow, target, viewer))
        entry = await visible_entry(uow, target, viewer, lock=True)
        principal = caller.principal
        if not principal.role.administers and not _owns(caller, entry):
            raise Forbidden(f"only its owner or an admin may deprecate entry {entry.id}")
        now = deps.clock.now()
        changed = deprecate(entry, reason, now)
        if changed is entry:
            return _unchanged(entry)
        await uow.entries.update(changed)
        await uow.access_log.record(
            [AccessLogRecord("deprecate", caller.agent_id, entry.id, now, {"reason": reason})]
        )
        await uow.commit()
    return LifecycleResult(changed.id, changed.status, True, changed.confidence)


def _owns(caller: Caller, entry: Entry) -> bool:
    """Whether ``entry`` is the caller's own: its owner is the caller's principal. An
    anonymous caller over an edge owns nothing (anonymous publishers are one source, not
    one owner); the embedding program's anonymous clients own the unowned entries of
    their agent."""
    principal = caller.principal
    if principal.id is not None:
        return entry.owner_id == principal.id
    return (
        caller.edge is None and entry.owner_id is None and entry.source.agent_id == caller.agent_id
    )


def _unchanged(entry: Entry) -> LifecycleResult:
    return LifecycleResult(entry.id, entry.status, False, entry.confidence)


async def resolve_dispute(
    deps: Deps, caller: Caller, command: ResolveDispute, idempotency_key: str | None = None
) -> LifecycleResult:
    """accept/keep confirm a disputed entry, reject archives it; credibility learns from both
    sides (docs/architecture.md, "The use cases"). The entries it ``contradicts`` (either
    direction) get the opposite verdict: accepting archives them (``archive_reason:
    lost_dispute``); rejecting returns each whose only remaining contradiction this was to
    its prior status. Validated sources gain α, refuted ones β, each by one. Nothing changes
    on any failure. A redelivery of ``idempotency_key`` reports the entry as it is now,
    ``changed`` False.

    The entry and its counterparts are decided and written under their row locks, taken
    in id order, so resolutions of two sides of one dispute at once wait for each other
    (the second then finds its entry no longer disputed) instead of deadlocking."""
    caller = caller.acting_as(command.agent_id)
    target = parse_id("entry_id", command.entry_id)
    decided = parse_resolution(command.resolution)
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.unit_of_work() as uow:
        if not await first_application(uow, "resolve", idempotency_key, deps.clock.now()):
            return _unchanged(await visible_entry(uow, target, viewer))
        await visible_entry(uow, target, viewer)  # NotFound before any lock is taken
        sides = await _lock_sides(uow, target)
        entry = sides.pop(target, None)
        if entry is None or not is_visible(entry, viewer):
            raise NotFound(f"entry {target} not found")
        now = deps.clock.now()
        changed = resolve(entry, decided, now)
        accepted = decided is not Resolution.REJECT
        others = [sides[k] for k in sorted(sides, key=str) if sides[k].is_active]
        await uow.entries.update(changed)
        await _verdict(uow, [entry], validated=accepted)
        await _verdict(uow, others, validated=not accepted)
        for other in others:
            if accepted:
                await uow.entries.update(lose_dispute(other, now))
            elif not await _contradicted_by_others(uow, other.id, besides=entry.id):
                settled = settle(other, now)
                if settled is not other:
                    await uow.entries.update(settled)
        await uow.access_log.record(
            [
                AccessLogRecord(
                    "resolve",
                    caller.agent_id,
                    entry.id,
                    now,
                    {
                        "resolution": decided.value,
                        "counterparts": [str(other.id) for other in others],
                    },
                )
            ]
        )
        await uow.commit()
    return LifecycleResult(changed.id, changed.status, True, changed.confidence)


async def _contradiction_partners(uow: UnitOfWork, entry_id: UUID) -> list[UUID]:
    """The entries linked to ``entry_id`` by ``contradicts``, either direction."""
    types = [RelationType.CONTRADICTS]
    edges = [
        *await uow.relations.outgoing([entry_id], types),
        *await uow.relations.incoming([entry_id], types),
    ]
    partners = {e.to_id if e.from_id == entry_id else e.from_id for e in edges}
    partners.discard(entry_id)
    return sorted(partners, key=str)


async def _lock_sides(uow: UnitOfWork, entry_id: UUID) -> dict[UUID, Entry]:
    """``entry_id`` and the entries on the other side of its disputes, each under its row
    lock (taken in id order), by id; entries that are gone are absent. A dispute recorded
    while the locks were taken is locked too."""
    locked: dict[UUID, Entry | None] = {}
    wanted = {entry_id, *await _contradiction_partners(uow, entry_id)}
    while missing := wanted - locked.keys():
        found = await uow.entries.lock_many(missing)
        locked.update({other: found.get(other) for other in missing})
        wanted.update(await _contradiction_partners(uow, entry_id))
    return {k: v for k, v in locked.items() if v is not None}


async def _contradicted_by_others(uow: UnitOfWork, entry_id: UUID, *, besides: UUID) -> bool:
    partners = set(await _contradiction_partners(uow, entry_id)) - {besides}
    return any(e.is_active for e in (await uow.entries.get_many(partners)).values())


async def _verdict(uow: UnitOfWork, entries: Sequence[Entry], *, validated: bool) -> None:
    """Validate (α) or refute (β) every source of each entry (its origin and every source
    whose evidence is on it, redacted ones aside), once per entry, as atomic increments."""
    weight = evidence_weight(None)
    evidence = await uow.evidence.for_entries([e.id for e in entries])
    for entry in entries:
        agents = {entry.source.agent_id, *(e.source.agent_id for e in evidence.get(entry.id, ()))}
        agents.discard(REDACTED)
        for agent in sorted(agents):
            if validated:
                await uow.credibility.add(agent, weight, 0.0)
            else:
                await uow.credibility.add(agent, 0.0, weight)
