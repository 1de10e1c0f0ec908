"""Expertise math: proficiency per (agent, domain) and thinly covered domains
(docs/architecture.md, "The use cases")."""

from __future__ import annotations

import math

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from apollo_domain.expertise import (
    CANDIDATE_ALLOWANCE,
    DomainCoverage,
    domains_at_risk,
    proficiency,
    shown_work,
)
from tests.strategies import confidences, entry_counts, knowledge_domains, principal_ids


@pytest.mark.parametrize(
    ("average", "count", "confirmed", "earned", "expected"),
    [
        (0.5, 0, 0, 0, 0.0),
        (0.9, 0, 0, 3, 0.0),  # no entries of its own in the domain
        (0.8, 1, 1, 0, 0.8),  # one confirmed entry
        (0.5, 1, 0, 0, 0.5 * math.log2(1.25)),  # one candidate
        (0.5, 3, 0, 0, 0.5 * math.log2(1.5)),  # three junk candidates: 0.29, not 1.0
        (1.0, 500, 0, 0, math.log2(1.5)),  # volume alone stays under 0.59
        (0.5, 3, 3, 0, 1.0),
        (0.5, 1, 0, 1, 0.5 * math.log2(2.25)),  # a candidate and a corroboration earned
        (0.0, 50, 50, 0, 0.0),
    ],
)
def test_proficiency_examples(
    average: float, count: int, confirmed: int, earned: int, expected: float
) -> None:
    """min(avg · log2(n + 1), 1.0) with n = confirmed + earned + min(0.25 · others, 0.5),
    and 0 for an agent with no entries."""
    assert expected == pytest.approx(proficiency(average, count, confirmed, earned))


def test_three_junk_candidates_do_not_beat_one_confirmed_entry() -> None:
    junk = proficiency(0.5, 3)
    real = proficiency(0.8, 1, confirmed_count=1)
    assert (junk < real, pytest.approx(0.29, abs=0.01)) == (True, junk)


@given(confidences, entry_counts, entry_counts, entry_counts)
def test_proficiency_is_the_capped_log_formula(
    average: float, count: int, confirmed: int, earned: int
) -> None:
    """proficiency == min(avg · log2(n + 1), 1) within [0, 1], n the work shown; the
    candidates add at most CANDIDATE_ALLOWANCE to n."""
    value = proficiency(average, count, confirmed, earned)
    n = shown_work(count, confirmed, earned)
    event("no entries" if count == 0 else ("capped" if value == 1.0 else "below the cap"))
    expected = min(average * math.log2(n + 1), 1.0) if count else 0.0
    assert expected == pytest.approx(value)
    assert 0.0 <= value <= 1.0
    assert n <= min(confirmed, count) + earned + CANDIDATE_ALLOWANCE


@given(confidences, entry_counts, entry_counts, entry_counts)
def test_proficiency_never_drops_with_more_work(
    average: float, n: int, m: int, confirmed: int
) -> None:
    """At the same average confidence, more entries, more of them confirmed, or more
    corroborations earned never mean less proficiency."""
    fewer, more = sorted((n, m))
    event("the same" if fewer == more else "more entries")
    assert proficiency(average, fewer, confirmed) <= proficiency(average, more, confirmed)
    assert proficiency(average, more, min(fewer, confirmed)) <= proficiency(
        average, more, confirmed
    )
    assert proficiency(average, more, confirmed, fewer) <= proficiency(
        average, more, confirmed, more
    )


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
