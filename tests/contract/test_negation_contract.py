"""A restatement that flips negation is a contradiction candidate, never corroboration or
agreement (docs/concepts.md, "The rules in one page"), on every store adapter and every path
that records support: single ingest, bulk ingest and the corroboration checker."""

from __future__ import annotations

from apollo_adapters.embedders import HashingEmbedder
from apollo_app import Outcome, Status
from apollo_domain.model import EvidenceKind
from tests.support import KeyedEmbedder, at_cosine

SAID = "The metrics exporter is enabled on port 9187"
DENIED = "The metrics exporter is not enabled on port 9187"


def _close_pair(cosine: float) -> KeyedEmbedder:
    """An embedder that puts the denial at ``cosine`` of the claim (the hashing embedder
    puts such pairs at 0.87-0.92; a larger model closer still)."""
    embedder = KeyedEmbedder(16)
    embedder.set(SAID, embedder.basis(0))
    embedder.set(DENIED, at_cosine(embedder.basis(0), cosine, 1))
    return embedder


async def _kinds(apollo, entry_id):
    return [(e.source.agent_id, e.kind) for e in await apollo.get_evidence(entry_id)]


async def test_a_denial_of_a_candidate_is_no_agreement_and_both_end_disputed(make_apollo):
    """claude-a says it, openai-b (independent) denies it at 0.96 cosine — close enough for
    agreement: no agreement, a new candidate, and the contradiction scan disputes both."""
    apollo = await make_apollo(embedder=_close_pair(0.96))
    said = await apollo.client("claude-a").store_knowledge(content=SAID, content_type="fact")
    apollo.deps.clock.advance(seconds=1)
    denied = await apollo.client("openai-b").store_knowledge(content=DENIED, content_type="fact")

    assert Outcome.CREATED == denied.outcome
    assert said.entry_id != denied.entry_id
    assert [("claude-a", EvidenceKind.ORIGIN)] == await _kinds(apollo, said.entry_id)
    report = await apollo.check_corroboration()
    assert (0, 0) == (report.promoted, report.bootstrapped)

    await apollo.process_outbox()

    assert Status.DISPUTED == (await apollo.get_entry(said.entry_id)).status
    assert Status.DISPUTED == (await apollo.get_entry(denied.entry_id)).status


async def test_a_denial_of_a_confirmed_entry_is_no_corroboration(make_apollo):
    """At 0.92 cosine to a confirmed entry, an independent denial is not recorded as
    corroboration, boosts nothing, and is disputed against it."""
    apollo = await make_apollo(embedder=_close_pair(0.92))
    said = await apollo.client("claude-a").store_knowledge(content=SAID, content_type="fact")
    await apollo.client("gemini-c").store_knowledge(content=SAID, content_type="fact")
    await apollo.check_corroboration()  # the agreement confirms it
    before = await apollo.get_entry(said.entry_id)
    assert Status.CONFIRMED == before.status

    denied = await apollo.client("openai-b").store_knowledge(content=DENIED, content_type="fact")

    assert Outcome.CREATED == denied.outcome
    after = await apollo.get_entry(said.entry_id)
    assert before.confidence == after.confidence
    assert "openai-b" not in [agent for agent, _ in await _kinds(apollo, said.entry_id)]
    await apollo.process_outbox()
    assert Status.DISPUTED == (await apollo.get_entry(denied.entry_id)).status


async def test_a_bulk_denial_is_no_agreement(make_apollo):
    """The set-based bulk ingest decides as the single ingest does."""
    apollo = await make_apollo(embedder=_close_pair(0.96))
    said = await apollo.client("claude-a").store_knowledge(content=SAID, content_type="fact")
    (denied,) = await apollo.client("openai-b").store_many(
        [{"content": DENIED, "content_type": "fact"}]
    )
    assert Outcome.CREATED == denied.outcome
    assert [("claude-a", EvidenceKind.ORIGIN)] == await _kinds(apollo, said.entry_id)


async def test_the_checker_never_pairs_a_claim_with_its_denial(make_apollo):
    """Two candidates at 0.92 cosine from independent sources bootstrap a confirmation,
    unless one denies the other."""
    apollo = await make_apollo(embedder=_close_pair(0.92))
    said = await apollo.client("claude-a").store_knowledge(content=SAID, content_type="fact")
    apollo.deps.clock.advance(seconds=1)
    denied = await apollo.client("openai-b").store_knowledge(content=DENIED, content_type="fact")

    report = await apollo.check_corroboration()

    assert (0, 0) == (report.promoted, report.bootstrapped)
    assert Status.CANDIDATE == (await apollo.get_entry(said.entry_id)).status
    assert Status.CANDIDATE == (await apollo.get_entry(denied.entry_id)).status


async def test_a_denial_at_near_copy_similarity_is_not_rejected_as_low_novelty(make_apollo):
    """At 0.99 cosine a restatement has no novelty left; a denial is a new claim and is
    stored, for the contradiction scan to judge."""
    apollo = await make_apollo(embedder=_close_pair(0.99))
    await apollo.client("claude-a").store_knowledge(content=SAID, content_type="fact")
    denied = await apollo.client("claude-a").store_knowledge(content=DENIED, content_type="fact")
    assert Outcome.CREATED == denied.outcome


async def test_with_the_hashing_embedder_a_denial_is_disputed_not_paired(make_apollo):
    """The pair embeds at 0.90 with the default embedder: close enough for the checker to
    pair two candidates, which it must not; the scan disputes both instead."""
    apollo = await make_apollo(embedder=HashingEmbedder())
    (said_vector, denied_vector) = await apollo.deps.embedder.embed([SAID, DENIED])
    assert 0.9 <= sum(a * b for a, b in zip(said_vector, denied_vector, strict=True))
    said = await apollo.client("claude-a").store_knowledge(content=SAID, content_type="fact")
    apollo.deps.clock.advance(seconds=1)
    denied = await apollo.client("openai-b").store_knowledge(content=DENIED, content_type="fact")

    report = await apollo.check_corroboration()
    await apollo.process_outbox()

    assert (0, 0) == (report.promoted, report.bootstrapped)
    assert [Status.DISPUTED, Status.DISPUTED] == [
        (await apollo.get_entry(i)).status for i in (said.entry_id, denied.entry_id)
    ]
