"""Ingest (docs/architecture.md, "The use cases"): the eight steps, on every store adapter."""

from __future__ import annotations

import pytest

from apollo_app import Outcome, Principal, Status, StoreUnavailable, ValidationError
from apollo_domain.commands import StoreKnowledge
from apollo_domain.errors import PersistenceFailed
from apollo_domain.ports import CredibilityRecord
from tests.support import KeyedEmbedder, at_cosine


async def counts(apollo, entry_id=None) -> dict[str, int]:
    """How many rows of each kind the store holds (entry-scoped where asked)."""
    async with apollo.store.unit_of_work() as uow:
        return {
            "access_log": await uow.access_log.count(),
            "outbox": await uow.outbox.pending(),
            "expertise": len(await uow.expertise.all()),
            "evidence": len(await uow.evidence.for_entry(entry_id)) if entry_id else 0,
        }


async def test_created_entry_is_a_normalized_candidate(make_apollo):
    """A new text becomes a candidate at the initial confidence with every field normalized."""
    apollo = await make_apollo()
    client = apollo.client(agent_id="claude-net-1", principal=Principal("alice"))
    result = await client.store_knowledge(
        content="  BGP route reflectors reduce full-mesh IBGP complexity\x00  ",
        content_type=":Reasoning",
        tags=[" BGP ", "C++", "bgp", "Node.js", "!!!"],
        context={"source": "wiki"},
    )
    assert result.outcome == Outcome.CREATED
    assert result.status == Status.CANDIDATE
    assert result.confidence == 0.5
    entry = await apollo.get_entry(result.entry_id)
    assert entry.content == "BGP route reflectors reduce full-mesh IBGP complexity"
    assert entry.content_type.value == "concept"
    assert entry.tags == ("bgp", "cplusplus", "nodejs")
    assert entry.knowledge_domain == "bgp"
    assert entry.source.provider == "claude"
    assert entry.owner_id == "alice"
    assert dict(entry.source_context) == {"source": "wiki"}
    assert await counts(apollo, result.entry_id) == {
        "access_log": 1,
        "outbox": 1,
        "expertise": 1,
        "evidence": 1,
    }


async def test_bad_input_is_rejected_naming_the_field(make_apollo):
    apollo = await make_apollo()
    client = apollo.client(agent_id="agent-1")
    with pytest.raises(ValidationError) as empty:
        await client.store_knowledge(content="   \x00 ")
    assert empty.value.field == "content"
    with pytest.raises(ValidationError) as long:
        await client.store_knowledge(content="x" * 100_001)
    assert long.value.field == "content"
    with pytest.raises(ValidationError) as scope:
        await client.store_knowledge(content="a private thought", access_scope="private")
    assert scope.value.field == "access_scope"  # no resolved principal to own it
    with pytest.raises(ValidationError) as bad_scope:
        await client.store_knowledge(content="some text", access_scope="everyone")
    assert bad_scope.value.field == "access_scope"
    assert await counts(apollo) == {"access_log": 0, "outbox": 0, "expertise": 0, "evidence": 0}


async def test_exact_duplicate_is_recorded_against_the_existing_entry(make_apollo):
    apollo = await make_apollo()
    first = await apollo.client("claude-a").store_knowledge(content="Redis keeps data in memory")
    again = await apollo.client("openai-b").store_knowledge(content="redis   KEEPS data in memory")
    assert again.outcome == Outcome.DEDUPLICATED
    assert first.entry_id == again.entry_id
    assert again.confidence == 0.5  # a candidate is not boosted
    evidence = await apollo.get_evidence(first.entry_id)
    assert [e.source.agent_id for e in evidence] == ["claude-a", "openai-b"]


async def test_dedup_is_per_scope_partition(make_apollo):
    """The same private text from two principals is two entries; global is one partition."""
    apollo = await make_apollo()
    a = apollo.client("agent-a", Principal("alice"))
    b = apollo.client("agent-b", Principal("bob"))
    pa = await a.store_knowledge(content="my token rotates daily", access_scope="private")
    pb = await b.store_knowledge(content="my token rotates daily", access_scope="private")
    assert Outcome.CREATED == pa.outcome == pb.outcome
    assert pa.entry_id != pb.entry_id
    ga = await a.store_knowledge(content="the cluster has three nodes")
    gb = await b.store_knowledge(content="the cluster has three nodes")
    assert gb.outcome == Outcome.DEDUPLICATED
    assert ga.entry_id == gb.entry_id


async def test_duplicate_of_a_confirmed_entry_corroborates_once_per_source(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    entry = await _confirmed_entry(apollo, embedder)
    before = (await apollo.get_entry(entry)).confidence
    text = (await apollo.get_entry(entry)).content
    r1 = await apollo.client("gemini-c").store_knowledge(content=text)
    r2 = await apollo.client("gemini-c").store_knowledge(content=text)  # redelivered
    assert Outcome.DEDUPLICATED == r1.outcome == r2.outcome
    assert pytest.approx(min(before + 0.3, 1.0)) == r1.confidence
    assert pytest.approx(r1.confidence) == (await apollo.get_entry(entry)).confidence


async def _confirmed_entry(apollo, embedder: KeyedEmbedder):
    """Bootstrap a confirmed entry from two independent candidates at cosine 0.92."""
    base = embedder.basis(0)
    embedder.set("alpha fact one", base)
    embedder.set("alpha fact two", at_cosine(base, 0.92, 1))
    first = await apollo.client("claude-a").store_knowledge(
        content="alpha fact one", content_type="fact"
    )
    apollo.deps.clock.advance(seconds=1)
    second = await apollo.client("openai-b").store_knowledge(
        content="alpha fact two", content_type="fact"
    )
    assert second.outcome == Outcome.CREATED
    report = await apollo.check_corroboration()
    assert report.bootstrapped == 1
    entry = await apollo.get_entry(first.entry_id)
    assert entry.status == Status.CONFIRMED
    return first.entry_id


async def test_independent_near_neighbour_corroborates_a_confirmed_entry(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    target = await _confirmed_entry(apollo, embedder)
    before = (await apollo.get_entry(target)).confidence
    embedder.set("alpha fact three", at_cosine(embedder.basis(0), 0.93, 2))
    result = await apollo.client("gemini-c").store_knowledge(
        content="alpha fact three", content_type="fact"
    )
    assert result.outcome == Outcome.CORROBORATED
    assert target == result.entry_id
    assert pytest.approx(min(before + 0.3, 1.0)) == (await apollo.get_entry(target)).confidence


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"content_type": "procedure"}, Outcome.CREATED),  # another content type
        ({"knowledge_domain": "elsewhere"}, Outcome.CREATED),  # another domain
    ],
)
async def test_corroboration_never_crosses_domain_or_type(make_apollo, change, expected):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    target = await _confirmed_entry(apollo, embedder)
    embedder.set("alpha fact three", at_cosine(embedder.basis(0), 0.93, 2))
    args = {"content": "alpha fact three", "content_type": "fact", **change}
    result = await apollo.client("gemini-c").store_knowledge(**args)
    assert expected == result.outcome
    assert target != result.entry_id


async def test_corroboration_needs_an_independent_source(make_apollo):
    """Same provider as the origin: not independent, so no corroboration."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    target = await _confirmed_entry(apollo, embedder)
    before = (await apollo.get_entry(target)).confidence
    embedder.set("alpha fact three", at_cosine(embedder.basis(0), 0.93, 2))
    result = await apollo.client("claude-z").store_knowledge(
        content="alpha fact three", content_type="fact"
    )
    assert result.outcome != Outcome.CORROBORATED
    assert before == (await apollo.get_entry(target)).confidence


async def test_a_source_repeating_itself_is_a_near_duplicate(make_apollo):
    embedder = KeyedEmbedder(16)
    base = embedder.basis(0)
    embedder.set("original wording", base)
    embedder.set("original wording, again", at_cosine(base, 0.97, 1))
    apollo = await make_apollo(embedder=embedder)
    client = apollo.client("claude-a")
    await client.store_knowledge(content="original wording")
    result = await client.store_knowledge(content="original wording, again")
    assert result.outcome == Outcome.REJECTED
    assert result.reason.startswith("near_duplicate")


async def test_low_novelty_is_rejected(make_apollo):
    """An independent source restating a candidate in another content type may not agree
    with it (corroboration needs the same type), so the admission rule rejects it."""
    embedder = KeyedEmbedder(16)
    base = embedder.basis(0)
    embedder.set("original wording", base)
    embedder.set("original wording!", at_cosine(base, 0.995, 1))
    apollo = await make_apollo(embedder=embedder)
    await apollo.client("claude-a").store_knowledge(content="original wording")
    result = await apollo.client("openai-b").store_knowledge(
        content="original wording!", content_type="procedure"
    )
    assert result.outcome == Outcome.REJECTED
    assert result.reason.startswith("low_novelty")


async def test_an_independent_restatement_of_a_candidate_is_agreement(make_apollo):
    """The same restatement in the same content type: the source's agreement is recorded
    on the candidate instead (docs/concepts.md, "The rules in one page")."""
    embedder = KeyedEmbedder(16)
    base = embedder.basis(0)
    embedder.set("original wording", base)
    embedder.set("original wording!", at_cosine(base, 0.995, 1))
    apollo = await make_apollo(embedder=embedder)
    first = await apollo.client("claude-a").store_knowledge(content="original wording")
    result = await apollo.client("openai-b").store_knowledge(content="original wording!")
    assert (Outcome.DEDUPLICATED, first.entry_id, "agreement recorded") == (
        result.outcome,
        result.entry_id,
        result.reason,
    )
    evidence = await apollo.get_evidence(first.entry_id)
    assert [("claude-a", 1.0), ("openai-b", pytest.approx(0.995))] == [
        (e.source.agent_id, e.similarity) for e in evidence
    ]


async def test_a_flagged_source_is_rejected_at_the_credibility_floor(make_apollo):
    apollo = await make_apollo()
    async with apollo.store.unit_of_work() as uow:
        await uow.credibility.save(CredibilityRecord("troll-1", 1.0, 1.0, "troll"))
        await uow.commit()
    result = await apollo.client("troll-1").store_knowledge(content="the moon is cheese")
    assert result.outcome == Outcome.REJECTED
    assert result.reason.startswith("low_credibility")
    assert await counts(apollo) == {"access_log": 0, "outbox": 0, "expertise": 0, "evidence": 0}


@pytest.mark.parametrize(
    "failing",
    [
        "entries.add",
        "evidence.add_origin",
        "expertise.record_activity",
        "access_log.record",
        "outbox.enqueue",
        "commit",
    ],
)
async def test_a_failure_at_any_write_step_leaves_nothing(make_apollo, failing):
    apollo = await make_apollo(faulty=True)
    apollo.store.faults.failing.add(failing)
    with pytest.raises(PersistenceFailed):
        await apollo.client("agent-1").store_knowledge(content="a fact that must not half-land")
    apollo.store.faults.failing.clear()
    async with apollo.store.unit_of_work() as uow:
        assert await uow.entries.by_agent("agent-1") == []
        assert await uow.access_log.count() == 0
        assert await uow.outbox.pending() == 0
        assert await uow.expertise.all() == []


@pytest.mark.parametrize("part", ["entries", "evidence", "expertise", "access_log"])
async def test_an_unavailable_store_part_rejects_before_writing(make_apollo, part):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder, faulty=True)
    apollo.store.faults.unavailable.add(part)
    with pytest.raises(StoreUnavailable):
        await apollo.client("agent-1").store_knowledge(content="never written")
    assert embedder.calls == 0
    assert apollo.store.faults.calls == []


async def test_concurrent_identical_ingests_make_one_entry(make_apollo):
    import asyncio

    apollo = await make_apollo()
    agents = ["claude-1", "openai-2", "gemini-3", "human-4", "system-5", "x-6", "y-7", "z-8"]
    results = await asyncio.gather(
        *(apollo.client(a).store_knowledge(content="the same observation") for a in agents)
    )
    ids = {r.entry_id for r in results}
    assert len(ids) == 1
    assert sum(r.outcome is Outcome.CREATED for r in results) == 1
    evidence = await apollo.get_evidence(ids.pop())
    assert sorted(agents) == sorted(e.source.agent_id for e in evidence)


async def test_a_redelivered_message_writes_nothing_twice(make_apollo):
    """The same idempotency key (a message id) ingests once; the replay reports that entry."""
    from apollo_domain import services

    apollo = await make_apollo()
    caller = apollo.client("claude-q").caller
    request = services.prepare(caller, StoreKnowledge(content="delivered at least once"))
    first = await services.ingest(apollo.deps, caller, request, idempotency_key="m-1")
    again = await services.ingest(apollo.deps, caller, request, idempotency_key="m-1")
    assert Outcome.CREATED == first.outcome
    assert (Outcome.DEDUPLICATED, first.entry_id) == (again.outcome, again.entry_id)
    assert {"access_log": 1, "outbox": 1, "expertise": 1, "evidence": 1} == await counts(
        apollo, first.entry_id
    )


async def test_bulk_ingest_matches_one_by_one(make_apollo):
    """store_many gives the same outcomes, entries and evidence as storing in order."""
    embedder = KeyedEmbedder(16)
    base = embedder.basis(0)
    embedder.set("seed fact", base)
    embedder.set("seed fact, near", at_cosine(base, 0.93, 1))
    embedder.set("seed fact, nearer", at_cosine(base, 0.995, 2))
    items = [
        {"content": "seed fact"},
        {"content": "an unrelated note"},
        {"content": "SEED   fact"},  # exact duplicate of the first
        {"content": "seed fact, near"},  # an independent-enough neighbour? same agent
        {"content": "seed fact, nearer"},  # near duplicate of the agent's own entry
        {"content": "a private aside", "access_scope": "private"},
        {"content": "another unrelated note", "tags": ["misc"]},
    ]

    async def outcomes(apollo, bulk):
        client = apollo.client("claude-bulk", Principal("alice"))
        if bulk:
            results = await client.store_many(items)
        else:
            results = [await client.store_knowledge(**item) for item in items]
        ids = {r.entry_id for r in results if r.entry_id}
        entries = [await apollo.get_entry(i) for i in ids]
        return (
            [(r.outcome, r.reason and r.reason.split(":")[0]) for r in results],
            sorted((e.content, e.status, e.confidence) for e in entries),
            [results.index(r) for r in results if r.entry_id]
            and [[results.index(q) for q in results if q.entry_id == r.entry_id] for r in results],
        )

    one_by_one = await outcomes(await make_apollo(embedder=embedder), bulk=False)
    bulk = await outcomes(await make_apollo(embedder=embedder), bulk=True)
    assert one_by_one == bulk
    assert Outcome.REJECTED == one_by_one[0][4][0]


async def test_bulk_ingest_validates_every_item_first(make_apollo):
    apollo = await make_apollo()
    client = apollo.client("claude-bulk")
    with pytest.raises(ValidationError) as err:
        await client.store_many([{"content": "fine"}, {"content": ""}])
    assert "items[1].content" == err.value.field
    with pytest.raises(ValidationError):
        await client.store_many([{"content": "fine", "owner_id": "mallory"}])
    async with apollo.store.unit_of_work() as uow:
        assert [] == await uow.entries.by_agent("claude-bulk")
