"""Expertise math: who knows which domain, and which domains are thinly covered."""

from __future__ import annotations

import math
from collections.abc import Iterable

from attrs import frozen


def proficiency(average_confidence: float, entry_count: int) -> float:
    """min(avg confidence of the agent's active entries in the domain · log2(n + 1), 1.0)."""
    if entry_count <= 0:
        return 0.0
    value = max(average_confidence, 0.0) * math.log2(entry_count + 1)
    return min(value, 1.0)


@frozen
class DomainCoverage:
    knowledge_domain: str
    agent_count: int
    agents: tuple[str, ...]


def domains_at_risk(
    agent_domains: Iterable[tuple[str, str]], min_agents: int
) -> list[DomainCoverage]:
    """Domains covered by fewer than ``min_agents`` distinct agents, thinnest first."""
    by_domain: dict[str, set[str]] = {}
    for agent, domain in agent_domains:
        by_domain.setdefault(domain, set()).add(agent)
    risky = [
        DomainCoverage(domain, len(agents), tuple(sorted(agents)))
        for domain, agents in by_domain.items()
        if len(agents) < min_agents
    ]
    return sorted(risky, key=lambda c: (c.agent_count, c.knowledge_domain))


__all__ = ["DomainCoverage", "domains_at_risk", "proficiency"]
