"""The confidence policy governs every store: a policy with other numbers than the
defaults is followed, on every store adapter, by every path that sets a confidence (a new
entry, a query's boost, corroboration at ingest and by the checker, agreement, decay and
the archive threshold). Each expectation is the policy's own formula, never a copy. (That
a store computes those formulas from the numbers it is given, PgBouncer included, is the
store contract suite's: apollo_app.testing.StoreContract.)"""

from __future__ import annotations

import pytest

from apollo_app import ConfidencePolicy, Outcome, Status
from apollo_domain.ports import CredibilityRecord
from tests.support import KeyedEmbedder, at_cosine

#: Every number of the confidence arithmetic moved away from its default.
POLICY = ConfidencePolicy(
    initial_confidence=0.41,
    retrieval_boost=0.07,
    corroboration_boost=0.17,
    decay_factor_per_hour=0.95,
    archive_below=0.3,
)


async def open_apollo(make_apollo):
    embedder = KeyedEmbedder(16)
    return await make_apollo(embedder=embedder, policy=POLICY), embedder


async def confirmed_pair(apollo, embedder):
    """Two independent sources store close texts; the checker confirms the older one by
    the bootstrap rule. Returns (the confirmed entry, its partner)."""
    base = embedder.basis(0)
    embedder.set("pair text one", base)
    embedder.set("pair text two", at_cosine(base, 0.92, 1))
    one = await apollo.client("claude-a").store_knowledge(content="pair text one")
    apollo.deps.clock.advance(seconds=1)
    two = await apollo.client("openai-b").store_knowledge(content="pair text two")
    report = await apollo.check_corroboration()
    assert 1 == report.bootstrapped
    return await apollo.get_entry(one.entry_id), await apollo.get_entry(two.entry_id)


async def set_credibility(apollo, agent_id: str, alpha: float, beta: float) -> None:
    async with apollo.store.unit_of_work() as uow:
        await uow.credibility.save(CredibilityRecord(agent_id, alpha, beta))
        await uow.commit()


async def test_a_new_entry_starts_at_the_initial_confidence(make_apollo):
    """One at a time and in bulk."""
    apollo, _ = await open_apollo(make_apollo)
    client = apollo.client("claude-a")
    one = await client.store_knowledge(content="a single note")
    many = await client.store_many([{"content": "a bulk note"}, {"content": "another one"}])
    stored = [await apollo.get_entry(r.entry_id) for r in [one, *many]]
    assert [POLICY.initial_confidence] * 3 == [e.confidence for e in stored]
    assert [POLICY.initial_confidence] * 3 == [r.confidence for r in [one, *many]]


async def test_a_query_boosts_by_the_retrieval_rule(make_apollo):
    apollo, _ = await open_apollo(make_apollo)
    stored = await apollo.client("claude-a").store_knowledge(content="routers forward packets")
    (hit,) = (await apollo.client("openai-b").query_knowledge("routers forward packets")).entries
    expected = POLICY.after_retrieval(POLICY.initial_confidence)
    assert pytest.approx(expected) == hit.confidence
    assert pytest.approx(expected) == (await apollo.get_entry(stored.entry_id)).confidence


async def test_the_checker_confirms_by_the_corroboration_rule(make_apollo):
    """The bootstrap boost, weighted by the partner's credibility (0.3 here: 0.6 of the
    boost)."""
    apollo, embedder = await open_apollo(make_apollo)
    await set_credibility(apollo, "openai-b", 3.0, 7.0)
    confirmed, _ = await confirmed_pair(apollo, embedder)
    expected = POLICY.after_corroboration(POLICY.initial_confidence, 0.3)
    assert Status.CONFIRMED is confirmed.status
    assert pytest.approx(expected) == confirmed.confidence


async def test_the_checker_confirms_an_agreement_by_the_corroboration_rule(make_apollo):
    """Two independent sources state one text: the second's agreement confirms it."""
    apollo, _ = await open_apollo(make_apollo)
    first = await apollo.client("claude-a").store_knowledge(content="one claim, twice")
    await apollo.client("openai-b").store_knowledge(content="one claim, twice")
    await apollo.check_corroboration()
    entry = await apollo.get_entry(first.entry_id)
    assert Status.CONFIRMED is entry.status
    expected = POLICY.after_corroboration(POLICY.initial_confidence, 0.5)
    assert pytest.approx(expected) == entry.confidence


async def test_ingest_corroborates_by_the_corroboration_rule(make_apollo):
    """A close text of an independent source, its exact repeat by another, and the same in
    bulk: each boosts the confirmed entry as the policy says."""
    apollo, embedder = await open_apollo(make_apollo)
    confirmed, _ = await confirmed_pair(apollo, embedder)
    embedder.set("pair text three", at_cosine(embedder.basis(0), 0.93, 2))
    embedder.set("pair text four", at_cosine(embedder.basis(0), 0.93, 3))
    await set_credibility(apollo, "human-d", 3.0, 7.0)

    close = await apollo.client("gemini-c").store_knowledge(content="pair text three")
    assert Outcome.CORROBORATED is close.outcome
    expected = POLICY.after_corroboration(confirmed.confidence, 0.5)
    assert pytest.approx(expected) == close.confidence

    repeat = await apollo.client("human-d").store_knowledge(content="pair text one")
    assert Outcome.DEDUPLICATED is repeat.outcome
    expected = POLICY.after_corroboration(expected, 0.3)
    assert pytest.approx(expected) == repeat.confidence

    (bulk,) = await apollo.client("mistral-e").store_many([{"content": "pair text four"}])
    assert Outcome.CORROBORATED is bulk.outcome
    expected = POLICY.after_corroboration(expected, 0.5)
    assert pytest.approx(expected) == bulk.confidence
    assert pytest.approx(expected) == (await apollo.get_entry(confirmed.id)).confidence


async def test_decay_and_the_archive_threshold_follow_the_policy(make_apollo):
    """Decay over 5 hours, then over 20 more: an entry is archived exactly when the
    policy's decayed confidence falls below its threshold."""
    apollo, _ = await open_apollo(make_apollo)
    stored = await apollo.client("claude-a").store_knowledge(content="a note that fades")
    confidence = POLICY.initial_confidence
    for hours in (5, 20):
        apollo.deps.clock.advance(hours=hours)
        await apollo.run_decay_cycle()
        confidence = POLICY.decayed(confidence, hours)
        entry = await apollo.get_entry(stored.entry_id)
        assert pytest.approx(confidence) == entry.confidence
        expected = Status.ARCHIVED if POLICY.should_archive(confidence) else Status.CANDIDATE
        assert expected is entry.status
    assert Status.ARCHIVED is entry.status  # the second interval crossed the threshold
