"""Expertise math: who knows which domain, and which domains are thinly covered."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

from attrs import frozen

CANDIDATE_WEIGHT: Final = 0.25
"""What one unconfirmed entry (candidate or disputed) adds to the work an agent has shown."""
CANDIDATE_ALLOWANCE: Final = 0.5
"""The most that all of an agent's unconfirmed entries in a domain add together: volume
alone never makes an expert (at most ``log2(1.5)`` ≈ 0.58 of proficiency)."""


def shown_work(entry_count: int, confirmed_count: int = 0, corroboration_count: int = 0) -> float:
    """The ``n`` of the proficiency formula: the agent's confirmed entries, plus the
    corroborations and agreements it earned (its evidence on others' active entries), plus
    ``CANDIDATE_WEIGHT`` per other entry, at most ``CANDIDATE_ALLOWANCE`` in all."""
    confirmed = min(max(confirmed_count, 0), max(entry_count, 0))
    unconfirmed = max(entry_count, 0) - confirmed
    allowance = min(CANDIDATE_WEIGHT * unconfirmed, CANDIDATE_ALLOWANCE)
    return confirmed + max(corroboration_count, 0) + allowance


def proficiency(
    average_confidence: float,
    entry_count: int,
    confirmed_count: int = 0,
    corroboration_count: int = 0,
) -> float:
    """min(avg confidence of the agent's active entries in the domain · log2(n + 1), 1.0),
    with ``n`` the work the agent has shown (:func:`shown_work`), so that proficiency rises
    with confirmed or corroborated work, not with the number of candidates: three
    candidates at 0.5 give 0.29, one confirmed entry at 0.8 gives 0.8. 0 for an agent with
    no active entries in the domain."""
    if entry_count <= 0:
        return 0.0
    n = shown_work(entry_count, confirmed_count, corroboration_count)
    return min(max(average_confidence, 0.0) * math.log2(n + 1), 1.0)


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


__all__ = [
    "CANDIDATE_ALLOWANCE",
    "CANDIDATE_WEIGHT",
    "DomainCoverage",
    "domains_at_risk",
    "proficiency",
    "shown_work",
]
