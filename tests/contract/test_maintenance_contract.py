"""Corroboration checker, contradiction scan, expertise, GAS and erasure on every adapter."""

from __future__ import annotations

import math

import attrs
import pytest

from apollo_app import NotFound, Outcome, Principal, RelationType, Status
from apollo_domain.ports import CredibilityRecord
from tests.support import KeyedEmbedder, ScriptedLLM, at_cosine


async def _pair(apollo, embedder, cosine=0.92, agents=("claude-a", "openai-b"), **kwargs):
    base = embedder.basis(0)
    embedder.set("pair text one", base)
    embedder.set("pair text two", at_cosine(base, cosine, 1))
    one = await apollo.client(agents[0]).store_knowledge(content="pair text one", **kwargs)
    apollo.deps.clock.advance(seconds=1)
    two = await apollo.client(agents[1]).store_knowledge(content="pair text two", **kwargs)
    return one.entry_id, two.entry_id


async def test_bootstrap_confirms_exactly_one_of_a_pair(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    older, partner = await _pair(apollo, embedder)
    report = await apollo.check_corroboration()
    assert (report.bootstrapped, report.promoted) == (1, 0)
    promoted = await apollo.get_entry(older)
    assert promoted.status == Status.CONFIRMED
    assert promoted.confirmed_at is not None
    assert {"paired_with": str(partner)} == promoted.source_context["bootstrap"]
    assert pytest.approx(0.8) == promoted.confidence  # 0.5 + 0.3 · min(1, 2 · 0.5)
    async with apollo.store.unit_of_work() as uow:
        assert await uow.relations.exists(older, partner, RelationType.SIMILAR_TO)
    again = await apollo.check_corroboration()
    assert (again.bootstrapped, again.promoted) == (0, 0)
    assert (await apollo.get_entry(partner)).status == Status.CANDIDATE


async def test_dependent_pair_never_bootstraps(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    await _pair(apollo, embedder, agents=("claude-a", "claude-b"))
    report = await apollo.check_corroboration()
    assert report.bootstrapped + report.promoted == 0


async def test_pairs_never_cross_scope(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    base = embedder.basis(0)
    embedder.set("scoped one", base)
    embedder.set("scoped two", at_cosine(base, 0.92, 1))
    await apollo.client("claude-a", Principal("alice")).store_knowledge(
        content="scoped one", access_scope="private"
    )
    await apollo.client("openai-b", Principal("alice")).store_knowledge(content="scoped two")
    assert (await apollo.check_corroboration()).bootstrapped == 0


async def test_a_confirmed_entry_promotes_a_candidate(make_apollo):
    """One run: A and B bootstrap (A confirmed), then confirmed A promotes candidate C; the
    bootstrap partner B never confirms from A alone, and another domain never corroborates."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    base = embedder.basis(0)
    embedder.set("third wording", at_cosine(base, 0.91, 2))
    embedder.set("fourth wording", at_cosine(base, 0.91, 3))
    older, partner = await _pair(apollo, embedder)
    third = await apollo.client("gemini-c").store_knowledge(
        content="third wording", knowledge_domain="other"
    )
    fourth = await apollo.client("human-d").store_knowledge(content="fourth wording")
    assert Outcome.CREATED == third.outcome == fourth.outcome
    report = await apollo.check_corroboration()
    assert (report.promoted, report.bootstrapped) == (1, 1)
    entry = await apollo.get_entry(fourth.entry_id)
    assert entry.status == Status.CONFIRMED
    assert "bootstrap" not in entry.source_context
    assert pytest.approx(0.8) == entry.confidence
    async with apollo.store.unit_of_work() as uow:
        assert await uow.relations.exists(fourth.entry_id, older, RelationType.SIMILAR_TO)
    assert (await apollo.get_entry(third.entry_id)).status == Status.CANDIDATE
    assert (await apollo.get_entry(partner)).status == Status.CANDIDATE
    again = await apollo.check_corroboration()
    assert (again.promoted, again.bootstrapped) == (0, 0)


async def test_checker_is_bounded(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    for i in range(5):
        await apollo.client(f"agent-{i}").store_knowledge(content=f"independent note {i}")
    report = await apollo.check_corroboration(limit=2)
    assert report.scanned == 2


async def _conflict(apollo, embedder, new_agent="openai-b"):
    base = embedder.basis(0)
    embedder.set("Feature X is enabled by default in version 5", base)
    embedder.set("Feature X is disabled by default in version 5", at_cosine(base, 0.85, 1))
    old = await apollo.client("claude-a").store_knowledge(
        content="Feature X is enabled by default in version 5"
    )
    apollo.deps.clock.advance(seconds=1)
    new = await apollo.client(new_agent).store_knowledge(
        content="Feature X is disabled by default in version 5"
    )
    return old.entry_id, new.entry_id


async def test_contradiction_disputes_both(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    old, new = await _conflict(apollo, embedder)
    report = await apollo.process_outbox()
    assert report.processed == 2 and report.contradictions == 1
    assert (await apollo.get_entry(old)).status == Status.DISPUTED
    assert (await apollo.get_entry(new)).status == Status.DISPUTED
    async with apollo.store.unit_of_work() as uow:
        edges = await uow.relations.outgoing([new], [RelationType.CONTRADICTS])
        assert await uow.outbox.pending() == 0
    assert [(new, old, 0.8)] == [(e.from_id, e.to_id, e.weight) for e in edges]


async def test_well_established_entry_resists_a_low_credibility_source(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    base = embedder.basis(0)
    text = "Feature X is enabled by default in version 5"
    embedder.set(text, base)
    old = await apollo.client("claude-a").store_knowledge(content=text)
    apollo.deps.clock.advance(seconds=1)
    for agent in ("openai-b", "gemini-c"):
        await apollo.client(agent).store_knowledge(content=text)  # dedup evidence
    async with apollo.store.unit_of_work() as uow:
        entry = await uow.entries.get(old.entry_id)
        from attrs import evolve

        await uow.entries.update(evolve(entry, status=Status.CONFIRMED, confidence=0.9))
        await uow.credibility.save(CredibilityRecord("dubious-z", 3.0, 7.0))
        await uow.commit()
    embedder.set("Feature X is disabled by default in version 5", at_cosine(base, 0.85, 1))
    new = await apollo.client("dubious-z").store_knowledge(
        content="Feature X is disabled by default in version 5"
    )
    await apollo.process_outbox()
    assert (await apollo.get_entry(old.entry_id)).status == Status.CONFIRMED
    assert (await apollo.get_entry(new.entry_id)).status == Status.DISPUTED


async def test_expertise(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    for i in range(3):
        await apollo.client("claude-net").store_knowledge(
            content=f"network fact {i}", tags=["networking"]
        )
    await apollo.client("openai-db").store_knowledge(content="database fact", tags=["databases"])
    await apollo.client("gemini-db").store_knowledge(
        content="another database fact", tags=["databases"]
    )
    await apollo.aggregate_expertise()
    client = apollo.client("asker")
    experts = await client.get_expertise(domain="networking")
    assert [(e.agent_id, e.entry_count) for e in experts] == [("claude-net", 3)]
    # three candidates: n = min(0.25 · 3, 0.5), so volume alone makes no expert
    assert pytest.approx(0.5 * math.log2(1.5)) == experts[0].proficiency
    assert (
        await client.get_expertise(domain="networking", min_proficiency=1.0) == []
        or experts[0].proficiency >= 1.0
    )
    at_risk = await client.domains_at_risk(min_agents=2)
    assert [d.knowledge_domain for d in at_risk] == ["networking"]
    profile = await client.agent_profile(agent_id="claude-net")
    assert profile.total_entries == 3
    assert [d.knowledge_domain for d in profile.domains] == ["networking"]
    assert pytest.approx(0.5) == profile.average_confidence


async def test_gas_without_llm_is_one_observation_and_idempotent(make_apollo):
    apollo = await make_apollo()
    event = {
        "request_id": "req-1",
        "messages": [{"role": "user", "content": "How do route reflectors work?"}],
        "response_content": "Route reflectors let IBGP speakers avoid a full mesh.",
        "routing": {"provider": "openai", "model": "gpt"},
        "caller": {"agent_id": "claude-router"},
        "timestamp": "2026-01-01T00:00:00Z",
    }
    result = await apollo.process_gas_event(event)
    assert result.facts == 1
    assert {k: result.deposited[k] for k in ("deposited", "facts", "synthesis", "failed")} == {
        "deposited": 1,
        "facts": 1,
        "synthesis": 0,
        "failed": 0,
    }
    assert result.deposited["relations"] == 0
    replay = await apollo.process_gas_event(event)
    assert replay.replayed
    async with apollo.store.unit_of_work() as uow:
        entries = await uow.entries.by_agent("claude-router")
    assert len(entries) == 1
    assert entries[0].content_type.value == "observation"
    assert entries[0].source_context["gas"]["request_id"] == "req-1"


async def test_gas_with_llm_relates_and_synthesizes(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    base = embedder.basis(0)
    embedder.set("OSPF is a link-state protocol.", base)
    embedder.set("IS-IS is a link-state protocol too.", at_cosine(base, 0.5, 1))
    existing = await apollo.client("claude-kb").store_knowledge(
        content="OSPF is a link-state protocol."
    )
    llm = ScriptedLLM(
        default_relation={"relation_type": "similar_to", "confidence": 0.9},
        synthesis=[
            {
                "content": "Link-state protocols flood topology.",
                "content_type": "concept",
                "source_indices": [0, 1],
            }
        ],
    )
    apollo.deps = attrs.evolve(apollo.deps, llm=llm)
    event = {
        "request_id": "req-2",
        "messages": [],
        "response_content": "IS-IS is a link-state protocol too. BGP is a path-vector protocol",
        "caller": "openai-helper",
    }
    result = await apollo.process_gas_event(event)
    assert result.facts == 2
    assert result.synthesis == 1
    assert result.anticipations == 1
    assert result.phases_completed == (
        "comprehend",
        "entities",
        "deposit",
        "relate",
        "synthesize",
        "anticipate",
    )
    assert result.deposited["deposited"] == 3
    assert result.deposited["synthesis"] == 1
    assert result.deposited["relations"] >= 1
    async with apollo.store.unit_of_work() as uow:
        mine = await uow.entries.by_agent("openai-helper")
    synthesis = [e for e in mine if e.source_context.get("gas", {}).get("synthesis")]
    assert len(synthesis) == 1
    assert synthesis[0].status == Status.CANDIDATE
    assert synthesis[0].source_context["gas"]["source_indices"] == [0, 1]
    assert len(synthesis[0].source_context["gas"]["source_entry_ids"]) == 2
    assert synthesis[0].confidence <= 0.7
    assert existing.entry_id is not None


async def test_erase_agent(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    older, partner = await _pair(apollo, embedder)
    await apollo.check_corroboration()
    extra = await apollo.client("claude-a").store_knowledge(content="an unconfirmed aside")
    repeat = await apollo.client("claude-a").store_knowledge(content="pair text two")
    assert (Outcome.DEDUPLICATED, partner) == (repeat.outcome, repeat.entry_id)
    result = await apollo.erase_agent("claude-a")
    assert (1, 1) == (result.deleted, result.redacted)
    entry = await apollo.get_entry(older)
    assert "redacted" == entry.source.agent_id
    assert entry.owner_id is None
    origin = [e for e in await apollo.get_evidence(older) if e.kind == "origin"]
    assert ["redacted"] == [e.source.agent_id for e in origin]
    assert "claude-a" not in {e.source.agent_id for e in await apollo.get_evidence(partner)}
    with pytest.raises(NotFound):
        await apollo.get_entry(extra.entry_id)


async def test_proficiency_rises_with_confirmed_and_corroborated_work_not_volume(make_apollo):
    """Three junk candidates give claude-junk 0.5 · log2(1.5) ≈ 0.29; one confirmed entry
    gives openai-real 0.8 (the agreement of gemini-peer confirmed it), and gemini-peer's
    own candidate plus the agreement it earned give it 0.5 · log2(2.25). Every store
    counts the same work, in get_expertise and in the aggregator's records alike."""
    apollo = await make_apollo()
    for i in range(3):
        await apollo.client("claude-junk").store_knowledge(
            content=f"junk claim number {i}", tags=["networking"]
        )
    real = await apollo.client("openai-real").store_knowledge(
        content="OSPF floods link-state advertisements", tags=["networking"]
    )
    agreed = await apollo.client("gemini-peer").store_knowledge(
        content="OSPF floods link-state advertisements", tags=["networking"]
    )
    assert "agreement recorded" == agreed.reason
    await apollo.client("gemini-peer").store_knowledge(
        content="IS-IS runs directly over layer 2", tags=["networking"]
    )
    await apollo.check_corroboration()
    assert Status.CONFIRMED == (await apollo.get_entry(real.entry_id)).status

    experts = await apollo.client("asker").get_expertise(domain="networking")

    assert [
        ("openai-real", pytest.approx(0.8)),
        ("gemini-peer", pytest.approx(0.5 * math.log2(2.25))),
        ("claude-junk", pytest.approx(0.5 * math.log2(1.5))),
    ] == [(e.agent_id, e.proficiency) for e in experts]
    await apollo.aggregate_expertise()
    async with apollo.store.unit_of_work() as uow:
        stored = await uow.expertise.for_domain("networking", 0.0)
    assert [(e.agent_id, e.proficiency) for e in experts] == [
        (r.agent_id, pytest.approx(r.proficiency)) for r in stored
    ]


async def test_corroborations_earned_on_entries_a_viewer_cannot_see_do_not_count(make_apollo):
    """gemini-peer agrees with a team entry of alice's team: its teammates see the earned
    agreement in gemini-peer's proficiency, an outsider sees only its own candidate."""
    apollo = await make_apollo()
    await apollo.directory.add_membership("alice", "lab")
    await apollo.directory.add_membership("bob", "lab")
    alice, bob = Principal("alice"), Principal("bob")
    await apollo.client("claude-a", principal=alice).store_knowledge(
        content="the lab cluster runs etcd 3.5", tags=["ops"], access_scope="team"
    )
    agreed = await apollo.client("gemini-peer", principal=bob).store_knowledge(
        content="the lab cluster runs etcd 3.5", tags=["ops"], access_scope="team"
    )
    assert "agreement recorded" == agreed.reason
    await apollo.client("gemini-peer", principal=bob).store_knowledge(
        content="public note on etcd compaction", tags=["ops"]
    )

    async def peer(principal):
        experts = await apollo.client("asker", principal=principal).get_expertise(domain="ops")
        return next(e.proficiency for e in experts if e.agent_id == "gemini-peer")

    assert pytest.approx(0.5 * math.log2(2.25)) == await peer(Principal("alice"))
    assert pytest.approx(0.5 * math.log2(1.25)) == await peer(Principal("carol"))
