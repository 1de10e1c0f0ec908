"""The agent-mesh simulation: what it promises about its facts, its runs and its counts."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apollo_adapters.embedders import HashingEmbedder
from apollo_app.simulation import (
    DISTINCT_FACT_CEILING,
    MAX_DOMAINS,
    STYLES,
    SimulationResult,
    domain_names,
    format_result,
    generate_facts,
    simulate,
)
from apollo_domain.contradiction import heuristic_contradicts
from apollo_domain.errors import ValidationError
from apollo_domain.policy import ConfidencePolicy

POLICY = ConfidencePolicy()
EMBEDDER = HashingEmbedder()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32), domains=st.integers(1, MAX_DOMAINS))
def test_generated_facts_land_where_the_rules_need_them(seed: int, domains: int) -> None:
    """Every domain gets facts; two agents' phrasings of one fact corroborate each other
    and pass admission as new candidates (0.9 ≤ cosine < 0.96), distinct facts stay far
    apart, and a wrong number always reads as a contradiction to the heuristic judge."""
    facts = generate_facts(domain_names(domains), random.Random(seed))
    assert list(domain_names(domains)) == list(facts)
    assert all(facts.values())
    rng = random.Random(seed)
    vectors = []
    for fact in (f for group in facts.values() for f in group):
        styled = EMBEDDER.embed_sync([fact.text(style) for style in STYLES])
        paraphrases = (styled @ styled.T)[np.triu_indices(len(STYLES), k=1)]
        assert paraphrases.min() >= POLICY.corroboration_similarity
        assert paraphrases.max() < 0.96
        wrong = fact.text(STYLES[1], fact.wrong_value(rng))
        assert heuristic_contradicts(fact.text(STYLES[0]), wrong)
        vectors.append(styled)
    for i, a in enumerate(vectors):
        for b in vectors[i + 1 :]:
            assert float(np.max(a @ b.T)) < DISTINCT_FACT_CEILING


async def _run(noise: float, seed: int = 0) -> SimulationResult:
    return await simulate(6, 30, 3, seed=seed, noise=noise)


@pytest.mark.parametrize("seed", [0, 1, 2])
async def test_a_noise_free_mesh_confirms_and_never_disputes(seed: int) -> None:
    """Without wrong facts, independent agents confirm knowledge and nothing contradicts."""
    result = await _run(0.0, seed)
    assert 0 == result.wrong_published
    assert 0 == result.contradictions
    assert 0 == result.by_status["disputed"]
    assert result.confirmations > 0
    assert result.by_status["confirmed"] > 0
    assert result.outcomes["corroborated"] > 0


@pytest.mark.parametrize("seed", [0, 1, 2])
async def test_a_noisy_mesh_finds_contradictions_and_disputes(seed: int) -> None:
    result = await _run(0.2, seed)
    assert result.wrong_published > 0
    assert result.contradictions > 0
    assert result.by_status["disputed"] > 0
    assert result.confirmations > 0


async def test_with_the_defaults_disputes_are_a_minority() -> None:
    """The default mesh (noise 0.05, a moderator reviewing disputes) ends with most entries
    confirmed and few disputed; the moderator rejected only wrong entries (accepting the
    true side of a dispute already archives the wrong one, so few are left to reject)."""
    result = await simulate(6, 30, 3)
    total = sum(result.by_status.values())
    assert result.by_status["disputed"] < result.by_status["confirmed"]
    assert result.by_status["disputed"] * 4 < total
    assert result.rejected <= result.wrong_entries
    assert result.accepted > 0


@pytest.mark.parametrize("seed", [0, 1, 2])
async def test_without_review_disputes_accumulate(seed: int) -> None:
    """Nobody resolves disputes: more stay disputed than with the moderator, and nothing is
    accepted or rejected."""
    reviewed = await simulate(6, 30, 3, seed=seed, noise=0.1)
    unreviewed = await simulate(6, 30, 3, seed=seed, noise=0.1, review=False)
    assert (0, 0) == (unreviewed.accepted, unreviewed.rejected)
    assert unreviewed.by_status["disputed"] > reviewed.by_status["disputed"]
    assert "nobody resolved disputes" in format_result(unreviewed)


async def test_the_summary_says_what_the_numbers_mean() -> None:
    result = await simulate(6, 30, 3)
    text = format_result(result)
    assert "what it means:" in text
    assert f"{result.contradictions} contradictions" in text
    assert f"the moderator accepted {result.accepted} disputed entries" in text


async def test_the_counts_add_up() -> None:
    """One publication and one query per agent per tick; every publication has exactly one
    outcome; every created entry is in exactly one status."""
    result = await _run(0.1)
    assert 6 * 30 == result.published == result.queries
    assert result.published == sum(result.outcomes.values())
    statuses = ("candidate", "confirmed", "disputed", "archived")
    assert result.outcomes["created"] == sum(result.by_status[s] for s in statuses)
    assert set(result.domains) == set(result.expertise)
    for top in result.expertise.values():
        assert all(0.0 <= proficiency <= 1.0 for _, proficiency in top)
        assert [p for _, p in top] == sorted((p for _, p in top), reverse=True)


async def test_a_seed_determines_the_run() -> None:
    first = await _run(0.2, seed=7)
    again = await _run(0.2, seed=7)
    other = await _run(0.2, seed=8)
    assert first == again
    assert first != other


async def test_domains_covered_by_one_agent_are_at_risk() -> None:
    """A single agent covers its domains alone: every domain it publishes in is at risk."""
    result = await simulate(1, 5, 2, seed=3, noise=0.0)
    assert {c.knowledge_domain for c in result.at_risk} == {
        d for d, top in result.expertise.items() if top
    }
    assert all(1 == c.agent_count for c in result.at_risk)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"agents": 0}, "agents"),
        ({"ticks": 0}, "ticks"),
        ({"domains": MAX_DOMAINS + 1}, "domains"),
        ({"noise": 1.5}, "noise"),
    ],
)
async def test_bad_parameters_name_the_field(change: dict[str, Any], field: str) -> None:
    params: dict[str, Any] = {"agents": 2, "ticks": 2, "domains": 1, **change}
    with pytest.raises(ValidationError) as caught:
        await simulate(**params)
    assert field == caught.value.field
