"""Lifecycle operations, expertise and source credibility (DESIGN §4 "Lifecycle",
"Expertise"; §2 "Sources and independence")."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from ..bounds import AGENT_ID, DOMAIN, REASON
from ..credibility import SourceCredibility, evidence_weight, parse_label
from ..errors import Forbidden, NotFound, ValidationError
from ..expertise import DomainCoverage, proficiency
from ..expertise import domains_at_risk as select_at_risk
from ..lifecycle import (
    Resolution,
    deprecate,
    lose_dispute,
    parse_resolution,
    settle,
    stale_cutoff,
    validate_decay_factor,
    validate_stale_days,
)
from ..lifecycle import (
    resolve_dispute as resolve,
)
from ..model import Entry, RelationType
from ..normalize import normalize_tag
from ..ports import (
    AccessLogRecord,
    AgentDomainStats,
    CredibilityRecord,
    ExpertiseRecord,
    UnitOfWork,
)
from ..redaction import REDACTED
from ..results import (
    AgentProfile,
    DomainExpertise,
    LifecycleResult,
    MaintenanceResult,
    SourceReport,
)
from ..rules import is_visible
from .context import Caller, Deps, bounded_int, first_application, resolve_viewer, unit_float
from .graph import parse_id, visible_entry


async def deprecate_entry(
    deps: Deps,
    caller: Caller,
    entry_id: object,
    reason: object,
    *,
    idempotency_key: str | None = None,
) -> LifecycleResult:
    """Archive the entry with ``deprecation_reason``; an identical repeat is a no-op.

    ``idempotency_key`` (a message id) is recorded with the change: a redelivery reports
    the entry as it is now, ``changed`` False."""
    target = parse_id("entry_id", entry_id)
    if not isinstance(reason, str) or not reason.strip():
        raise ValidationError("reason", "must be a non-empty string")
    REASON.check(len(reason))
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
    deps: Deps,
    caller: Caller,
    entry_id: object,
    resolution: object,
    *,
    idempotency_key: str | None = None,
) -> LifecycleResult:
    """accept/keep confirm a disputed entry, reject archives it; credibility learns from
    both sides (DESIGN §4 "Lifecycle"). The entries it ``contradicts`` (either direction)
    get the opposite verdict: accepting archives them (``archive_reason: lost_dispute``);
    rejecting returns each whose only remaining contradiction this was to its prior status.
    Validated sources gain α, refuted ones β, each by one. Nothing changes on any failure.
    A redelivery of ``idempotency_key`` reports the entry as it is now, ``changed`` False.

    The entry and its counterparts are decided and written under their row locks, taken
    in id order, so resolutions of two sides of one dispute at once wait for each other
    (the second then finds its entry no longer disputed) instead of deadlocking."""
    target = parse_id("entry_id", entry_id)
    decided = parse_resolution(resolution)
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


async def force_decay(
    deps: Deps, factor: object, *, idempotency_key: str | None = None
) -> MaintenanceResult:
    """Multiply the confidence of every non-archived entry; never archives. A redelivery
    of ``idempotency_key`` changes nothing and reports 0 affected."""
    value = validate_decay_factor(factor)
    async with deps.store.unit_of_work() as uow:
        if not await first_application(uow, "force_decay", idempotency_key, deps.clock.now()):
            return MaintenanceResult("force_decay", 0)
        count = await uow.entries.scale_confidence(value, deps.clock.now())
        await uow.commit()
    return MaintenanceResult("force_decay", count)


async def archive_stale(
    deps: Deps, days: object, *, idempotency_key: str | None = None
) -> MaintenanceResult:
    """Archive non-archived entries untouched (COALESCE(updated_at, created_at)) for ``days``.
    A redelivery of ``idempotency_key`` changes nothing and reports 0 archived."""
    value = validate_stale_days(days)
    async with deps.store.unit_of_work() as uow:
        now = deps.clock.now()
        if not await first_application(uow, "archive_stale", idempotency_key, now):
            return MaintenanceResult("archive_stale", 0)
        count = await uow.entries.archive_stale(stale_cutoff(now, value), now)
        await uow.commit()
    return MaintenanceResult("archive_stale", count, archived=count)


async def run_decay_cycle(deps: Deps, *, idempotency_key: str | None = None) -> MaintenanceResult:
    """c · 0.998^hours since each entry's last decay, then archive active entries below 0.1;
    the records of retrieval boosts whose window has passed are forgotten. A redelivery of
    ``idempotency_key`` changes nothing and reports 0."""
    async with deps.store.unit_of_work() as uow:
        now = deps.clock.now()
        if not await first_application(uow, "decay", idempotency_key, now):
            return MaintenanceResult("decay", 0)
        outcome = await uow.entries.decay(
            now, deps.policy.decay_factor_per_hour, deps.policy.archive_below
        )
        await uow.entries.forget_boosts_before(now - deps.boost_window)
        await uow.commit()
    return MaintenanceResult("decay", outcome.decayed, archived=outcome.archived)


async def get_expertise(
    deps: Deps, caller: Caller, domain: object, min_proficiency: object = 0.0
) -> list[ExpertiseRecord]:
    """Agents by proficiency in ``domain``, most proficient first, computed over the active
    entries the caller may see (nothing invisible counts, nor shows)."""
    name = normalize_tag(domain) if isinstance(domain, str) else None
    if not name:
        raise ValidationError("domain", "must be a non-empty string")
    DOMAIN.text(name, "domain")
    floor = unit_float("min_proficiency", min_proficiency)
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.reading() as uow:
        stats = await uow.entries.agent_domain_stats(viewer, domain=name)
    records = [
        ExpertiseRecord(
            s.agent_id,
            s.knowledge_domain,
            s.entry_count,
            _proficiency(s),
            s.last_active_at,
        )
        for s in stats
    ]
    return sorted(
        (r for r in records if r.proficiency >= floor),
        key=lambda r: (-r.proficiency, r.agent_id),
    )


async def domains_at_risk(
    deps: Deps, caller: Caller, min_agents: object = 2
) -> list[DomainCoverage]:
    """Domains that fewer than ``min_agents`` agents cover, among the entries the caller
    may see."""
    threshold = bounded_int("min_agents", min_agents, 1, 1_000_000)
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.reading() as uow:
        stats = await uow.entries.agent_domain_stats(viewer)
    return select_at_risk(((s.agent_id, s.knowledge_domain) for s in stats), threshold)


async def agent_profile(deps: Deps, caller: Caller, agent_id: object) -> AgentProfile:
    """An agent's domains, counts, proficiency, average confidence and last activity, over
    the active entries the caller may see."""
    agent = _agent_id(agent_id)
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.reading() as uow:
        standing = await uow.credibility.get(agent)
        stats = await uow.entries.agent_domain_stats(viewer, agent_id=agent)
    domains = [
        DomainExpertise(
            s.knowledge_domain,
            s.entry_count,
            _proficiency(s),
            s.average_confidence,
            s.last_active_at,
        )
        for s in stats
    ]
    domains.sort(key=lambda d: (-d.proficiency, d.knowledge_domain))
    total = sum(d.entry_count for d in domains)
    average = sum(d.average_confidence * d.entry_count for d in domains) / total if total else 0.0
    last = max((d.last_active_at for d in domains if d.last_active_at), default=None)
    return AgentProfile(agent, tuple(domains), total, average, last, _report(standing).credibility)


def _proficiency(stats: AgentDomainStats) -> float:
    return proficiency(
        stats.average_confidence,
        stats.entry_count,
        stats.confirmed_count,
        stats.corroboration_count,
    )


def _agent_id(agent_id: object) -> str:
    """An agent named as the subject of a command: a non-empty string within the
    ``AGENT_ID`` bound (stripped), else :class:`ValidationError` naming ``agent_id``."""
    if not isinstance(agent_id, str) or not agent_id.strip():
        raise ValidationError("agent_id", "must be a non-empty string")
    return AGENT_ID.text(agent_id.strip())


def _report(record: CredibilityRecord) -> SourceReport:
    belief = SourceCredibility(record.agent_id, record.alpha, record.beta, record.label)
    return SourceReport(
        record.agent_id,
        record.alpha,
        record.beta,
        belief.credibility,
        record.label,
        record.validated,
        record.refuted,
    )


async def get_source(deps: Deps, agent_id: object) -> SourceReport:
    """A source's standing: α, β, credibility, label, validated and refuted counts."""
    agent = _agent_id(agent_id)
    async with deps.store.reading() as uow:
        return _report(await uow.credibility.get(agent))


async def label_source(
    deps: Deps,
    caller: Caller,
    agent_id: object,
    label: object,
    *,
    idempotency_key: str | None = None,
) -> SourceReport:
    """Label a source (``moderator``/``admin`` → credibility 1.0, ``troll``/``flagged`` →
    0.05); α, β and the counts are kept, so removing the label restores them. A redelivery
    of ``idempotency_key`` changes nothing and reports the source as it is now."""
    return await _set_label(
        deps, caller, _agent_id(agent_id), parse_label(label), "label_source", idempotency_key
    )


async def unlabel_source(
    deps: Deps, caller: Caller, agent_id: object, *, idempotency_key: str | None = None
) -> SourceReport:
    """Remove a source's label: its credibility is α / (α + β) again. A redelivery of
    ``idempotency_key`` changes nothing and reports the source as it is now."""
    return await _set_label(
        deps, caller, _agent_id(agent_id), None, "unlabel_source", idempotency_key
    )


async def _set_label(
    deps: Deps, caller: Caller, agent: str, label: str | None, kind: str, key: str | None
) -> SourceReport:
    async with deps.store.unit_of_work() as uow:
        if not await first_application(uow, kind, key, deps.clock.now()):
            return _report(await uow.credibility.get(agent))
        record = await uow.credibility.set_label(agent, label)
        await uow.access_log.record(
            [
                AccessLogRecord(
                    "label_source",
                    caller.agent_id,
                    None,
                    deps.clock.now(),
                    {"source": agent, "label": label},
                )
            ]
        )
        await uow.commit()
    return _report(record)


async def aggregate_expertise(
    deps: Deps, *, idempotency_key: str | None = None
) -> MaintenanceResult:
    """Recompute proficiency per (agent, domain) from the agents' active entries (the
    redacted entries of erased agents are nobody's expertise). A redelivery of
    ``idempotency_key`` changes nothing and reports 0."""
    async with deps.store.unit_of_work() as uow:
        if not await first_application(
            uow, "aggregate_expertise", idempotency_key, deps.clock.now()
        ):
            return MaintenanceResult("aggregate_expertise", 0)
        stats = [s for s in await uow.entries.agent_domain_stats() if s.agent_id != REDACTED]
        await uow.expertise.replace_all(
            [
                ExpertiseRecord(
                    s.agent_id,
                    s.knowledge_domain,
                    s.entry_count,
                    _proficiency(s),
                    s.last_active_at,
                )
                for s in stats
            ]
        )
        await uow.commit()
    return MaintenanceResult("aggregate_expertise", len(stats))
