"""Lifecycle operations and expertise (DESIGN §4 "Lifecycle", "Expertise")."""

from __future__ import annotations

from ..credibility import SourceCredibility
from ..errors import ValidationError
from ..expertise import DomainCoverage, proficiency
from ..expertise import domains_at_risk as select_at_risk
from ..lifecycle import (
    Resolution,
    deprecate,
    parse_resolution,
    stale_cutoff,
    validate_decay_factor,
    validate_stale_days,
)
from ..lifecycle import (
    resolve_dispute as resolve,
)
from ..normalize import normalize_tag
from ..ports import AccessLogRecord, CredibilityRecord, ExpertiseRecord
from ..redaction import REDACTED
from ..results import AgentProfile, DomainExpertise, LifecycleResult, MaintenanceResult
from .context import Caller, Deps, bounded_int, resolve_viewer, unit_float
from .graph import parse_id, visible_entry


async def deprecate_entry(
    deps: Deps, caller: Caller, entry_id: object, reason: object
) -> LifecycleResult:
    """Archive the entry with ``deprecation_reason``; an identical repeat is a no-op."""
    target = parse_id("entry_id", entry_id)
    if not isinstance(reason, str) or not reason.strip():
        raise ValidationError("reason", "must be a non-empty string")
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.unit_of_work() as uow:
        entry = await visible_entry(uow, target, viewer)
        now = deps.clock.now()
        changed = deprecate(entry, reason, now)
        if changed is entry:
            return LifecycleResult(entry.id, entry.status, False, entry.confidence)
        await uow.entries.update(changed)
        await uow.access_log.record(
            [AccessLogRecord("deprecate", caller.agent_id, entry.id, now, {"reason": reason})]
        )
        await uow.commit()
    return LifecycleResult(changed.id, changed.status, True, changed.confidence)


async def resolve_dispute(
    deps: Deps, caller: Caller, entry_id: object, resolution: object
) -> LifecycleResult:
    """accept/keep confirm a disputed entry, reject archives it; the entry's source is
    validated (accepted) or refuted (rejected). Nothing changes on any failure."""
    target = parse_id("entry_id", entry_id)
    decided = parse_resolution(resolution)
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.unit_of_work() as uow:
        entry = await visible_entry(uow, target, viewer)
        now = deps.clock.now()
        changed = resolve(entry, decided, now)
        await uow.entries.update(changed)
        record = await uow.credibility.get(entry.source.agent_id)
        belief = SourceCredibility(record.agent_id, record.alpha, record.beta, record.label)
        belief = belief.refuted() if decided is Resolution.REJECT else belief.validated()
        await uow.credibility.save(
            CredibilityRecord(belief.agent_id, belief.alpha, belief.beta, belief.label)
        )
        await uow.access_log.record(
            [
                AccessLogRecord(
                    "resolve", caller.agent_id, entry.id, now, {"resolution": decided.value}
                )
            ]
        )
        await uow.commit()
    return LifecycleResult(changed.id, changed.status, True, changed.confidence)


async def force_decay(deps: Deps, factor: object) -> MaintenanceResult:
    """Multiply the confidence of every non-archived entry; never archives."""
    value = validate_decay_factor(factor)
    async with deps.store.unit_of_work() as uow:
        count = await uow.entries.scale_confidence(value, deps.clock.now())
        await uow.commit()
    return MaintenanceResult("force_decay", count)


async def archive_stale(deps: Deps, days: object) -> MaintenanceResult:
    """Archive non-archived entries untouched (COALESCE(updated_at, created_at)) for ``days``."""
    value = validate_stale_days(days)
    async with deps.store.unit_of_work() as uow:
        now = deps.clock.now()
        count = await uow.entries.archive_stale(stale_cutoff(now, value), now)
        await uow.commit()
    return MaintenanceResult("archive_stale", count, archived=count)


async def run_decay_cycle(deps: Deps) -> MaintenanceResult:
    """c · 0.998^hours since each entry's last decay, then archive active entries below 0.1."""
    async with deps.store.unit_of_work() as uow:
        outcome = await uow.entries.decay(
            deps.clock.now(), deps.policy.decay_factor_per_hour, deps.policy.archive_below
        )
        await uow.commit()
    return MaintenanceResult("decay", outcome.decayed, archived=outcome.archived)


async def get_expertise(
    deps: Deps, domain: object, min_proficiency: object = 0.0
) -> list[ExpertiseRecord]:
    name = normalize_tag(domain) if isinstance(domain, str) else None
    if not name:
        raise ValidationError("domain", "must be a non-empty string")
    floor = unit_float("min_proficiency", min_proficiency)
    async with deps.store.unit_of_work() as uow:
        return await uow.expertise.for_domain(name, floor)


async def domains_at_risk(deps: Deps, min_agents: object = 2) -> list[DomainCoverage]:
    threshold = bounded_int("min_agents", min_agents, 1, 1_000_000)
    async with deps.store.unit_of_work() as uow:
        records = await uow.expertise.all()
    return select_at_risk(
        ((r.agent_id, r.knowledge_domain) for r in records if r.entry_count > 0), threshold
    )


async def agent_profile(deps: Deps, agent_id: object) -> AgentProfile:
    if not isinstance(agent_id, str) or not agent_id.strip():
        raise ValidationError("agent_id", "must be a non-empty string")
    agent = agent_id.strip()
    async with deps.store.unit_of_work() as uow:
        records = await uow.expertise.for_agent(agent)
        stats = {
            s.knowledge_domain: s
            for s in await uow.entries.agent_domain_stats()
            if s.agent_id == agent
        }
    domains = []
    for r in records:
        s = stats.get(r.knowledge_domain)
        domains.append(
            DomainExpertise(
                r.knowledge_domain,
                s.entry_count if s else 0,
                r.proficiency,
                s.average_confidence if s else 0.0,
                r.last_active_at,
            )
        )
    domains.sort(key=lambda d: (-d.proficiency, d.knowledge_domain))
    total = sum(d.entry_count for d in domains)
    average = sum(d.average_confidence * d.entry_count for d in domains) / total if total else 0.0
    last = max((d.last_active_at for d in domains if d.last_active_at), default=None)
    return AgentProfile(agent, tuple(domains), total, average, last)


async def aggregate_expertise(deps: Deps) -> MaintenanceResult:
    """Recompute proficiency per (agent, domain) from the agents' active entries (the
    redacted entries of erased agents are nobody's expertise)."""
    async with deps.store.unit_of_work() as uow:
        stats = [s for s in await uow.entries.agent_domain_stats() if s.agent_id != REDACTED]
        await uow.expertise.replace_all(
            [
                ExpertiseRecord(
                    s.agent_id,
                    s.knowledge_domain,
                    s.entry_count,
                    proficiency(s.average_confidence, s.entry_count),
                    s.last_active_at,
                )
                for s in stats
            ]
        )
        await uow.commit()
    return MaintenanceResult("aggregate_expertise", len(stats))
