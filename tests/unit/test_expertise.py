"""Expertise math: proficiency per (agent, domain) and thinly covered domains (DESIGN §4)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apollo_domain.expertise import DomainCoverage, domains_at_risk, proficiency
from tests.strategies import confidences, entry_counts, knowledge_domains, principal_ids


@pytest.mark.parametrize(
    ("average", "count", "expected"),
    [
        (0.5, 0, 0.0),
        (0.9, 0, 0.0),
        (0.5, 1, 0.5),
        (0.3, 3, 0.6),
        (0.5, 3, 1.0),
        (0.9, 7, 1.0),
        (0.0, 50, 0.0),
    ],
)
def test_proficiency_examples(average: float, count: int, expected: float) -> None:
    """min(avg · log2(n + 1), 1.0), and 0 for an agent with no entries."""
    assert expected == pytest.approx(proficiency(average, count))


@given(confidences, entry_counts)
def test_proficiency_is_the_capped_log_formula(average: float, count: int) -> None:
    """proficiency == min(avg · log2(n + 1), 1) within [0, 1]."""
    value = proficiency(average, count)
    assert min(average * math.log2(count + 1), 1.0) == pytest.approx(value)
    assert 0.0 <= value <= 1.0


@given(confidences, entry_counts, entry_counts)
def test_proficiency_never_drops_with_more_entries(average: float, n: int, m: int) -> None:
    """At the same average confidence, more entries never mean less proficiency."""
    fewer, more = sorted((n, m))
    assert proficiency(average, fewer) <= proficiency(average, more)


def test_domains_at_risk_selection_and_order() -> None:
    """Domains with fewer than min_agents distinct agents, thinnest first, then by name;
    an agent counted once per domain, agents listed sorted."""
    pairs = [
        ("alice", "networking"),
        ("bob", "networking"),
        ("carol", "python"),
        ("carol", "python"),
        ("dave", "databases"),
        ("alice", "databases"),
        ("bob", "rust"),
        ("alice", "go"),
        ("bob", "databases"),
    ]
    expected = [
        DomainCoverage("go", 1, ("alice",)),
        DomainCoverage("python", 1, ("carol",)),
        DomainCoverage("rust", 1, ("bob",)),
        DomainCoverage("networking", 2, ("alice", "bob")),
    ]
    assert expected == domains_at_risk(pairs, min_agents=3)


def test_no_domain_is_at_risk_when_min_agents_is_one() -> None:
    """Every known domain has at least one agent."""
    assert [] == domains_at_risk([("alice", "go"), ("bob", "rust")], min_agents=1)


@given(
    st.lists(st.tuples(principal_ids, knowledge_domains), max_size=20),
    st.integers(min_value=0, max_value=5),
)
def test_domains_at_risk_property(pairs: list[tuple[str, str]], min_agents: int) -> None:
    """Exactly the domains with fewer distinct agents than min_agents, sorted thinnest first."""
    agents: dict[str, set[str]] = {}
    for agent, domain in pairs:
        agents.setdefault(domain, set()).add(agent)
    expected = sorted(
        (len(a), d, tuple(sorted(a))) for d, a in agents.items() if len(a) < min_agents
    )
    actual = [
        (c.agent_count, c.knowledge_domain, c.agents) for c in domains_at_risk(pairs, min_agents)
    ]
    assert expected == actual
