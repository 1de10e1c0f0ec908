"""Agreement, dispute resolution on both sides, source credibility and content identity
(docs/concepts.md, "The rules in one page"), on every store adapter."""

from __future__ import annotations

import asyncio

import pytest
from attrs import evolve

from apollo_adapters.embedders import HashingEmbedder
from apollo_app import Outcome, Principal, RelationType, Status, ValidationError
from apollo_domain import commands as c
from apollo_domain import services
from apollo_domain.lifecycle import dispute
from apollo_domain.model import EvidenceKind, Relation
from apollo_domain.ports import CredibilityRecord
from tests.support import KeyedEmbedder, at_cosine

FACT = "Redis keeps the whole dataset in memory"

#: Dispute resolution and labels are admin work.
MODERATOR = Principal("moderator", role="admin")


async def test_three_independent_agents_confirm_a_fact_in_one_checker_run(make_apollo):
    """The same fact from claude-1, gemini-1 (identical text) and openai-1 (a trailing
    period): one entry, two agreements recorded, confirmed by one checker run."""
    apollo = await make_apollo(embedder=HashingEmbedder())
    first = await apollo.client("claude-1").store_knowledge(content=FACT, content_type="fact")
    apollo.deps.clock.advance(seconds=1)
    second = await apollo.client("gemini-1").store_knowledge(content=FACT, content_type="fact")
    apollo.deps.clock.advance(seconds=1)
    third = await apollo.client("openai-1").store_knowledge(content=FACT + ".", content_type="fact")
    assert [
        (Outcome.CREATED, first.entry_id, None),
        (Outcome.DEDUPLICATED, first.entry_id, "agreement recorded"),
        (Outcome.DEDUPLICATED, first.entry_id, "agreement recorded"),
    ] == [(r.outcome, r.entry_id, r.reason) for r in (first, second, third)]
    assert Status.CANDIDATE == (await apollo.get_entry(first.entry_id)).status

    report = await apollo.check_corroboration()

    assert (1, 0) == (report.bootstrapped, report.promoted)
    entry = await apollo.get_entry(first.entry_id)
    assert Status.CONFIRMED == entry.status
    assert entry.confirmed_at is not None
    assert pytest.approx(0.8) == entry.confidence  # 0.5 + 0.3 · min(1, 2 · 0.5)
    assert {"agreement": ["claude-1", "gemini-1", "openai-1"]} == entry.source_context["bootstrap"]
    evidence = await apollo.get_evidence(first.entry_id)
    assert [
        ("claude-1", EvidenceKind.ORIGIN),
        ("gemini-1", EvidenceKind.AGREEMENT),
        ("openai-1", EvidenceKind.AGREEMENT),
    ] == [(e.source.agent_id, e.kind) for e in evidence]
    assert [0.5, 0.5, 0.5] == [e.credibility for e in evidence]
    again = await apollo.check_corroboration()
    assert (0, 0) == (again.bootstrapped, again.promoted)


async def test_the_agreeing_sources_credibility_weights_the_boost(make_apollo):
    """w = min(1, 2 · credibility) of the agreeing source: 0.2 gives 0.5 + 0.3 · 0.4."""
    apollo = await make_apollo()
    async with apollo.store.unit_of_work() as uow:
        await uow.credibility.save(CredibilityRecord("gemini-1", 1.0, 4.0))
        await uow.commit()
    first = await apollo.client("claude-1").store_knowledge(content=FACT)
    second = await apollo.client("gemini-1").store_knowledge(content=FACT)
    assert "agreement recorded" == second.reason
    await apollo.check_corroboration()
    entry = await apollo.get_entry(first.entry_id)
    assert (Status.CONFIRMED, pytest.approx(0.62)) == (entry.status, entry.confidence)


async def test_sources_not_independent_keep_todays_outcomes(make_apollo):
    """Same provider as the origin: the exact text is a duplicate, a restatement a near
    duplicate, and nothing confirms."""
    embedder = KeyedEmbedder(16)
    embedder.set(FACT, embedder.basis(0))
    embedder.set(FACT + ", restated", at_cosine(embedder.basis(0), 0.97, 1))
    apollo = await make_apollo(embedder=embedder)
    first = await apollo.client("claude-1").store_knowledge(content=FACT)
    exact = await apollo.client("claude-2").store_knowledge(content=FACT)
    near = await apollo.client("claude-3").store_knowledge(content=FACT + ", restated")
    same = await apollo.client("claude-1").store_knowledge(content=FACT)
    assert (Outcome.DEDUPLICATED, "exact duplicate") == (exact.outcome, exact.reason)
    assert Outcome.REJECTED == near.outcome and near.reason.startswith("near_duplicate")
    assert (Outcome.DEDUPLICATED, "exact duplicate") == (same.outcome, same.reason)
    assert [
        ("claude-1", EvidenceKind.ORIGIN),
        ("claude-2", EvidenceKind.DUPLICATE),
    ] == [(e.source.agent_id, e.kind) for e in await apollo.get_evidence(first.entry_id)]
    report = await apollo.check_corroboration()
    assert (0, 0) == (report.bootstrapped, report.promoted)
    assert Status.CANDIDATE == (await apollo.get_entry(first.entry_id)).status


async def test_a_source_not_independent_of_an_agreeing_one_does_not_agree(make_apollo):
    """Independence is checked against every recorded source, agreements included."""
    apollo = await make_apollo()
    first = await apollo.client("claude-1").store_knowledge(content=FACT)
    await apollo.client("openai-1").store_knowledge(content=FACT)
    late = await apollo.client("openai-2").store_knowledge(content=FACT)
    assert "exact duplicate" == late.reason
    kinds = [e.kind for e in await apollo.get_evidence(first.entry_id)]
    assert [EvidenceKind.ORIGIN, EvidenceKind.AGREEMENT, EvidenceKind.DUPLICATE] == kinds


async def test_agreement_needs_the_same_domain_and_content_type(make_apollo):
    """An exact repeat in another content type is a duplicate; a restatement in another
    domain is low novelty; neither confirms."""
    embedder = KeyedEmbedder(16)
    embedder.set(FACT, embedder.basis(0))
    embedder.set(FACT + "!", at_cosine(embedder.basis(0), 0.99, 1))
    apollo = await make_apollo(embedder=embedder)
    first = await apollo.client("claude-1").store_knowledge(content=FACT, content_type="fact")
    typed = await apollo.client("gemini-1").store_knowledge(content=FACT, content_type="procedure")
    domain = await apollo.client("openai-1").store_knowledge(
        content=FACT + "!", content_type="fact", knowledge_domain="elsewhere"
    )
    assert "exact duplicate" == typed.reason
    assert Outcome.REJECTED == domain.outcome and domain.reason.startswith("low_novelty")
    await apollo.check_corroboration()
    assert Status.CANDIDATE == (await apollo.get_entry(first.entry_id)).status


async def test_agreement_with_a_confirmed_entry_stays_a_corroboration(make_apollo):
    """Once confirmed, an independent repeat boosts the entry as before."""
    apollo = await make_apollo(embedder=HashingEmbedder())
    first = await apollo.client("claude-1").store_knowledge(content=FACT)
    await apollo.client("gemini-1").store_knowledge(content=FACT)
    await apollo.check_corroboration()
    exact = await apollo.client("openai-1").store_knowledge(content=FACT)
    near = await apollo.client("human-1").store_knowledge(content=FACT + ".")
    assert (Outcome.DEDUPLICATED, "corroborated by an independent source") == (
        exact.outcome,
        exact.reason,
    )
    assert (Outcome.CORROBORATED, first.entry_id) == (near.outcome, near.entry_id)
    assert pytest.approx(1.0) == (await apollo.get_entry(first.entry_id)).confidence


async def test_team_members_writing_the_same_sentence_agree_on_one_team_entry(make_apollo):
    """alice and bob share a group: bob's copy of alice's team sentence is recorded as his
    agent's agreement on her entry (not rejected), and the checker confirms it."""
    apollo = await make_apollo(embedder=HashingEmbedder())
    await apollo.directory.add_membership("alice", "ops")
    await apollo.directory.add_membership("bob", "ops")
    alice = apollo.client("claude-alice", Principal("alice"))
    bob = apollo.client("openai-bob", Principal("bob"))
    text = "The ops VPN rotates its keys every Monday"
    first = await alice.store_knowledge(content=text, access_scope="team")
    second = await bob.store_knowledge(content=text, access_scope="team")
    assert (Outcome.DEDUPLICATED, first.entry_id, "agreement recorded") == (
        second.outcome,
        second.entry_id,
        second.reason,
    )
    await apollo.check_corroboration()
    entry = await apollo.get_entry(first.entry_id, principal=Principal("bob"))
    assert (Status.CONFIRMED, "alice") == (entry.status, entry.owner_id)
    outsider = apollo.client("gemini-carol", Principal("carol"))
    private = await outsider.store_knowledge(content=text, access_scope="team")
    assert Outcome.CREATED == private.outcome  # carol shares no group: her own entry


@pytest.mark.parametrize(
    "variant",
    [
        "Cafe\u0301 cre\u0300me costs \u20ac3",  # NFD
        "Caf\u00e9 cr\u00e8me\u200b costs \u20ac3\ufeff",  # zero-width space, BOM
        "Caf\u00e9\u2060 cr\u00e8me costs\u200d \u20ac3",  # word joiner, ZWJ
        "\uff23af\u00e9 cr\u00e8me costs \u20ac\uff13",  # fullwidth (NFKC)
        "CAF\u00c9  CR\u00c8ME COSTS \u20ac3",  # case and whitespace
    ],
)
async def test_unicode_variants_of_a_text_are_one_entry(make_apollo, variant):
    apollo = await make_apollo()
    first = await apollo.client("claude-1").store_knowledge(
        content="Caf\u00e9 cr\u00e8me costs \u20ac3"
    )
    again = await apollo.client("claude-2").store_knowledge(content=variant)
    assert (Outcome.DEDUPLICATED, first.entry_id) == (again.outcome, again.entry_id)
    assert "Caf\u00e9 cr\u00e8me costs \u20ac3" == (await apollo.get_entry(first.entry_id)).content


# -- disputes ------------------------------------------------------------------------------


async def _contradiction(apollo, *pairs):
    """Record ``a contradicts b`` for each pair and dispute both sides."""
    async with apollo.store.unit_of_work() as uow:
        for a, b in pairs:
            await uow.relations.add(Relation(a, b, RelationType.CONTRADICTS, 0.8))
            for side in (a, b):
                entry = await uow.entries.get(side)
                await uow.entries.update(dispute(entry, entry.updated_at))
        await uow.commit()


async def _claims(apollo, *agents):
    ids = []
    for i, agent in enumerate(agents):
        text = f"port {179 + i} is the one to use"
        ids.append((await apollo.client(agent).store_knowledge(content=text)).entry_id)
    return ids


async def _standing(apollo, agent):
    reader = apollo.client("reader").caller
    source = await services.get_source(apollo.deps, reader, c.GetSource(target_agent_id=agent))
    return (source.alpha, source.beta, source.validated, source.refuted)


async def test_accepting_one_side_archives_the_other_and_moves_both_credibilities(make_apollo):
    apollo = await make_apollo()
    old, new = await _claims(apollo, "claude-a", "openai-b")
    agreeing = await apollo.client("gemini-c").store_knowledge(content="port 180 is the one to use")
    assert "agreement recorded" == agreeing.reason
    await _contradiction(apollo, (new, old))

    result = await apollo.client("moderator", MODERATOR).resolve_dispute(
        entry_id=old, resolution="accept"
    )

    assert Status.CONFIRMED == result.status
    loser = await apollo.get_entry(new)
    assert (Status.ARCHIVED, "lost_dispute") == (
        loser.status,
        loser.source_context["archive_reason"],
    )
    assert 0.5 == loser.confidence
    assert (2.0, 1.0, 1, 0) == await _standing(apollo, "claude-a")
    assert (1.0, 2.0, 0, 1) == await _standing(apollo, "openai-b")
    assert (1.0, 2.0, 0, 1) == await _standing(apollo, "gemini-c")  # it agreed with the loser


async def test_rejecting_one_side_returns_its_only_counterpart_to_its_prior_status(make_apollo):
    apollo = await make_apollo()
    old, new, other = await _claims(apollo, "claude-a", "openai-b", "gemini-c")
    async with apollo.store.unit_of_work() as uow:  # ``other`` was confirmed before
        entry = await uow.entries.get(other)
        await uow.entries.update(
            evolve(entry, status=Status.CONFIRMED, confirmed_at=entry.created_at)
        )
        await uow.commit()
    await _contradiction(apollo, (new, old), (other, new))

    result = await apollo.client("moderator", MODERATOR).resolve_dispute(
        entry_id=new, resolution="reject"
    )

    assert Status.ARCHIVED == result.status
    assert Status.CANDIDATE == (await apollo.get_entry(old)).status
    assert Status.CONFIRMED == (await apollo.get_entry(other)).status
    assert (1.0, 2.0, 0, 1) == await _standing(apollo, "openai-b")
    assert (2.0, 1.0, 1, 0) == await _standing(apollo, "claude-a")
    assert (2.0, 1.0, 1, 0) == await _standing(apollo, "gemini-c")


async def test_a_counterpart_still_contradicted_elsewhere_stays_disputed(make_apollo):
    apollo = await make_apollo()
    target, first, second = await _claims(apollo, "claude-a", "openai-b", "gemini-c")
    await _contradiction(apollo, (first, target), (target, second))
    moderator = apollo.client("moderator", MODERATOR)
    await moderator.resolve_dispute(entry_id=first, resolution="reject")
    assert Status.DISPUTED == (await apollo.get_entry(target)).status
    await moderator.resolve_dispute(entry_id=second, resolution="reject")
    assert Status.CANDIDATE == (await apollo.get_entry(target)).status
    assert (3.0, 1.0, 2, 0) == await _standing(apollo, "claude-a")


async def test_a_failed_resolution_moves_no_credibility(make_apollo):
    apollo = await make_apollo(faulty=True)
    old, new = await _claims(apollo, "claude-a", "openai-b")
    await _contradiction(apollo, (new, old))
    apollo.store.faults.failing.add("access_log.record")
    with pytest.raises(Exception, match="injected"):
        await apollo.client("moderator", MODERATOR).resolve_dispute(
            entry_id=old, resolution="accept"
        )
    apollo.store.faults.failing.clear()
    assert Status.DISPUTED == (await apollo.get_entry(old)).status
    assert Status.DISPUTED == (await apollo.get_entry(new)).status
    assert (1.0, 1.0, 0, 0) == await _standing(apollo, "claude-a")
    assert (1.0, 1.0, 0, 0) == await _standing(apollo, "openai-b")


# -- sources -------------------------------------------------------------------------------


async def test_concurrent_credibility_increments_are_never_lost(make_apollo):
    apollo = await make_apollo()

    async def add(alpha: float, beta: float) -> None:
        async with apollo.store.unit_of_work() as uow:
            await uow.credibility.add("claude-a", alpha, beta)
            await uow.commit()

    await asyncio.gather(*(add(1.0, 0.0) for _ in range(12)), *(add(0.0, 0.5) for _ in range(8)))
    assert (13.0, 5.0, 12, 8) == await _standing(apollo, "claude-a")


async def test_labels_override_credibility_and_come_off_again(make_apollo):
    apollo = await make_apollo()
    caller = apollo.client("moderator", MODERATOR).caller
    async with apollo.store.unit_of_work() as uow:
        await uow.credibility.add("openai-b", 2.0, 0.0)
        await uow.commit()
    flagged = await services.label_source(
        apollo.deps, caller, c.LabelSource(target_agent_id="openai-b", label=" Troll ")
    )
    assert ("troll", 0.05, 3.0, 1, 0) == (
        flagged.label,
        flagged.credibility,
        flagged.alpha,
        flagged.validated,
        flagged.refuted,
    )
    with pytest.raises(ValidationError) as err:
        await services.label_source(
            apollo.deps, caller, c.LabelSource(target_agent_id="openai-b", label="villain")
        )
    assert "label" == err.value.field
    cleared = await services.unlabel_source(
        apollo.deps, caller, c.UnlabelSource(target_agent_id="openai-b")
    )
    assert (None, 0.75) == (cleared.label, cleared.credibility)
    fresh = await services.get_source(
        apollo.deps, caller, c.GetSource(target_agent_id="never-seen")
    )
    assert (1.0, 1.0, 0.5, None, 0, 0) == (
        fresh.alpha,
        fresh.beta,
        fresh.credibility,
        fresh.label,
        fresh.validated,
        fresh.refuted,
    )


async def test_evidence_keeps_the_credibility_its_source_had_then(make_apollo):
    """Credibility over time: each evidence row keeps its source's credibility at the
    moment it was recorded, and the agent profile shows the credibility now."""
    apollo = await make_apollo()
    first = await apollo.client("claude-a").store_knowledge(content=FACT)
    async with apollo.store.unit_of_work() as uow:
        await uow.credibility.add("openai-b", 3.0, 0.0)
        await uow.commit()
    await apollo.client("openai-b").store_knowledge(content=FACT)
    async with apollo.store.unit_of_work() as uow:
        await uow.credibility.add("openai-b", 0.0, 4.0)
        await uow.commit()
    evidence = await apollo.get_evidence(first.entry_id)
    assert [("claude-a", 0.5), ("openai-b", 0.8)] == [
        (e.source.agent_id, pytest.approx(e.credibility)) for e in evidence
    ]
    await apollo.aggregate_expertise()
    profile = await apollo.client("reader").agent_profile(agent_id="openai-b")
    assert pytest.approx(4 / 9) == profile.credibility
