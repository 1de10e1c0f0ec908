"""The knowledge_retrieval phase of an agent tick and the write-back gate."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apollo_app import Apollo
from apollo_app.tick import (
    KNOWLEDGE_RETRIEVAL_PHASE,
    TICK_PHASES,
    knowledge_retrieval,
    phase_number,
    should_write_back,
)
from apollo_domain.errors import ValidationError
from apollo_domain.policy import ConfidencePolicy, meets_write_gate
from apollo_domain.results import QueryResult


class CountingClient:
    """A knowledge source that records each retrieval."""

    def __init__(self) -> None:
        self.queries: list[tuple[str, int]] = []

    async def retrieve(self, query: str, limit: int = 5) -> QueryResult:
        self.queries.append((query, limit))
        return QueryResult("hybrid", ())


def test_knowledge_retrieval_is_phase_four_between_memory_and_working_memory():
    assert 4 == KNOWLEDGE_RETRIEVAL_PHASE == phase_number("knowledge_retrieval")
    assert phase_number("memory_retrieval") + 1 == KNOWLEDGE_RETRIEVAL_PHASE
    assert phase_number("working_memory_integration") - 1 == KNOWLEDGE_RETRIEVAL_PHASE
    assert len(set(TICK_PHASES)) == len(TICK_PHASES)
    with pytest.raises(ValidationError):
        phase_number("daydreaming")


async def test_a_confident_local_match_skips_apollo():
    """A local match at the threshold (≥) is enough: Apollo is not asked."""
    client = CountingClient()
    result = await knowledge_retrieval(
        client, "bgp route reflectors", [("weak", 0.2), ("strong", 0.6)], threshold=0.6
    )
    assert result.skipped
    assert 0.6 == result.best_local_confidence
    assert "0.60" in result.reason
    assert [] == client.queries


async def test_weak_or_missing_local_matches_ask_apollo():
    client = CountingClient()
    weak = await knowledge_retrieval(client, "  bgp route reflectors ", [("weak", 0.59)], limit=3)
    none = await knowledge_retrieval(client, "ospf areas", [])
    assert (False, False) == (weak.skipped, none.skipped)
    assert [("bgp route reflectors", 3), ("ospf areas", 5)] == client.queries
    assert "below" in weak.reason and "no local match" == none.reason


async def test_an_empty_context_asks_nothing():
    client = CountingClient()
    result = await knowledge_retrieval(client, "   ", [])
    assert result.skipped
    assert [] == client.queries


async def test_the_threshold_must_be_a_probability():
    with pytest.raises(ValidationError):
        await knowledge_retrieval(CountingClient(), "x", [], threshold=1.5)


async def test_the_phase_returns_what_apollo_knows():
    """With the in-process client, the phase brings back stored knowledge."""
    async with Apollo.in_memory() as apollo:
        client = apollo.client("claude-tick")
        stored = await client.store_knowledge(content="BGP route reflectors cut iBGP full mesh")
        result = await knowledge_retrieval(client, "bgp route reflectors ibgp", [("x", 0.1)])
    assert not result.skipped
    assert [stored.entry_id] == [e.id for e in result.entries]


unit = st.floats(0, 1)


@given(unit, unit)
def test_write_back_uses_the_write_gate(confidence: float, novelty: float):
    """should_write_back is exactly meets_write_gate (confidence > 0.6, novelty > 0.3)."""
    assert meets_write_gate(confidence, novelty) == should_write_back(confidence, novelty)
    assert (confidence > 0.6 and novelty > 0.3) == should_write_back(confidence, novelty)


def test_write_back_follows_a_configured_policy():
    strict = ConfidencePolicy(write_gate_confidence=0.9)
    assert should_write_back(0.7, 0.5)
    assert not should_write_back(0.7, 0.5, strict)
    assert not should_write_back(0.6, 0.5)
