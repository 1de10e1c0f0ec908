"""Expertise: agents by proficiency in a domain, the domains at risk, an agent's profile, and
the periodic aggregation of proficiency (docs/architecture.md, "The use cases")."""

from __future__ import annotations

from ..bounds import DOMAIN
from ..commands import AggregateExpertise, DomainsAtRisk, GetAgentProfile, GetExpertise
from ..errors import ValidationError
from ..expertise import DomainCoverage, proficiency
from ..expertise import domains_at_risk as select_at_risk
from ..limits import MAX_MIN_AGENTS
from ..normalize import normalize_tag
from ..ports import (
    AgentDomainStats,
    ExpertiseRecord,
)
from ..redaction import REDACTED
from ..results import (
    AgentProfile,
    DomainExpertise,
    MaintenanceResult,
)
from .context import (
    Caller,
    Deps,
    bounded_int,
    first_application,
    resolve_viewer,
    subject_agent,
    unit_float,
)
from .sources import source_report


async def get_expertise(deps: Deps, caller: Caller, command: GetExpertise) -> list[ExpertiseRecord]:
    """Agents by proficiency in ``domain``, most proficient first, computed over the active
    entries the caller may see (nothing invisible counts, nor shows)."""
    domain: object = command.domain
    name = normalize_tag(domain) if isinstance(domain, str) else None
    if not name:
        raise ValidationError("domain", "must be a non-empty string")
    DOMAIN.text(name, "domain")
    floor = unit_float("min_proficiency", command.min_proficiency)
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
    deps: Deps, caller: Caller, command: DomainsAtRisk
) -> list[DomainCoverage]:
    """Domains that fewer than ``min_agents`` agents cover, among the entries the caller
    may see."""
    threshold = bounded_int("min_agents", command.min_agents, 1, MAX_MIN_AGENTS)
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.reading() as uow:
        stats = await uow.entries.agent_domain_stats(viewer)
    return select_at_risk(((s.agent_id, s.knowledge_domain) for s in stats), threshold)


async def agent_profile(deps: Deps, caller: Caller, command: GetAgentProfile) -> AgentProfile:
    """An agent's domains, counts, proficiency, average confidence and last activity, over
    the active entries the caller may see."""
    agent = subject_agent(command.target_agent_id)
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
    return AgentProfile(
        agent, tuple(domains), total, average, last, source_report(standing).credibility
    )


def _proficiency(stats: AgentDomainStats) -> float:
    return proficiency(
        stats.average_confidence,
        stats.entry_count,
        stats.confirmed_count,
        stats.corroboration_count,
    )


async def aggregate_expertise(
    deps: Deps, caller: Caller, command: AggregateExpertise, idempotency_key: str | None = None
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
