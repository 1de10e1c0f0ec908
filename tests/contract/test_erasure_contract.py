"""Erasure (docs/architecture.md, "The use cases") on every store: what an agent leaves behind,
and what is left of it afterwards — read back through the store's ports."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any
from uuid import UUID

import pytest

from apollo_app import Apollo, Outcome, Principal, Status
from apollo_domain.errors import PersistenceFailed, ValidationError
from apollo_domain.model import SourceRef
from apollo_domain.ports import CredibilityRecord
from apollo_domain.results import ErasureResult
from tests.support import KeyedEmbedder, at_cosine

AGENT = "claude-erased"
REDACTED = "redacted"


def names(value: Any, agent: str) -> bool:
    """Whether a JSON-like value holds the string ``agent`` (as a value or a key)."""
    if isinstance(value, str):
        return value == agent
    if isinstance(value, Mapping):
        return any(names(k, agent) or names(v, agent) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(names(item, agent) for item in value)
    return False


async def traces_of(apollo: Apollo, agent: str, entry_ids: Collection[UUID]) -> set[str]:
    """Every kind of place, among ``entry_ids`` and the agent's own records, that still
    names ``agent``."""
    found: set[str] = set()
    async with apollo.store.unit_of_work() as uow:
        if await uow.entries.by_agent(agent):
            found.add("entries of the agent")
        for entry in (await uow.entries.get_many(entry_ids)).values():
            source = entry.source
            if agent in (source.agent_id, source.submitted_by, source.submitted_from):
                found.add("entry source")
            if names(entry.source_context, agent):
                found.add("entry source_context")
        for rows in (await uow.evidence.for_entries(entry_ids)).values():
            if any(agent in (e.source.agent_id, e.source.submitted_by) for e in rows):
                found.add("evidence")
        for relation in await uow.relations.outgoing(entry_ids):
            if names(relation.source_context, agent):
                found.add("relation source_context")
        if await uow.access_log.for_agent(agent):
            found.add("access log")
        if await uow.expertise.for_agent(agent):
            found.add("expertise")
        if CredibilityRecord(agent) != await uow.credibility.get(agent):
            found.add("credibility")
    return found


async def snapshot(apollo: Apollo, entry_ids: Collection[UUID]) -> tuple[Any, ...]:
    async with apollo.store.unit_of_work() as uow:
        return (
            await uow.entries.get_many(entry_ids),
            await uow.evidence.for_entries(entry_ids),
            await uow.relations.outgoing(entry_ids),
            await uow.access_log.for_agent(REDACTED),
            await uow.access_log.count(),
            await uow.expertise.all(),
        )


async def _confirmed_pair(
    apollo: Apollo,
    embedder: KeyedEmbedder,
    agent: str,
    text: str,
    principal: Principal,
    *,
    axis: int,
    context: Mapping[str, Any] | None = None,
    partner_context: Mapping[str, Any] | None = None,
    scope: str = "global",
) -> tuple[UUID, UUID]:
    """``agent`` writes ``text``; an independent source restates it a second later; the
    corroboration checker confirms ``agent``'s (the older) entry. Returns both ids."""
    restated = f"{text}, restated"
    embedder.set(text, embedder.basis(axis))
    embedder.set(restated, at_cosine(embedder.basis(axis), 0.92, axis + 1))
    mine = await apollo.client(agent, principal).store_knowledge(
        content=text, context=context, access_scope=scope
    )
    apollo.deps.clock.advance(seconds=1)
    theirs = await apollo.client("openai-b", principal).store_knowledge(
        content=restated, context=partner_context, access_scope=scope
    )
    await apollo.check_corroboration()
    assert mine.entry_id is not None and theirs.entry_id is not None
    assert Status.CONFIRMED == (await apollo.get_entry(mine.entry_id)).status
    return mine.entry_id, theirs.entry_id


async def test_erasure_leaves_no_trace_and_redacts_what_was_confirmed(make_apollo):
    """Before: the agent has entries, evidence, a relation it linked, its id in caller
    context and in another agent's context, access-log rows, expertise and a credibility
    record. After: none of these name it; its confirmed entry stays, redacted, with its
    owner; its unconfirmed one is gone."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    alice = Principal("alice")
    kept, partner = await _confirmed_pair(
        apollo,
        embedder,
        AGENT,
        "kept text",
        alice,
        axis=0,
        context={"caller": {"agent_id": AGENT}, "run": "r-1"},
        partner_context={"reviewed_by": [AGENT, "human-x"]},
    )
    me = apollo.client(AGENT, alice)
    aside = await me.store_knowledge(content="an unconfirmed aside")
    repeat = await me.store_knowledge(content="kept text, restated")
    assert (Outcome.DEDUPLICATED, partner) == (repeat.outcome, repeat.entry_id)
    await me.link_entries(partner, kept, "supports_by")
    assert (await me.query_knowledge("kept text")).entries
    await apollo.aggregate_expertise()
    async with apollo.store.unit_of_work() as uow:
        await uow.credibility.save(CredibilityRecord(AGENT, 4.0, 1.0, "moderator"))
        await uow.commit()
    assert aside.entry_id is not None
    ids = [kept, partner, aside.entry_id]
    assert {
        "entries of the agent",
        "entry source",
        "entry source_context",
        "evidence",
        "relation source_context",
        "access log",
        "expertise",
        "credibility",
    } == await traces_of(apollo, AGENT, ids)
    async with apollo.store.unit_of_work() as uow:
        evidence = sum(
            e.source.agent_id == AGENT
            for rows in (await uow.evidence.for_entries([kept, partner])).values()
            for e in rows
        )
        expertise = len(await uow.expertise.for_agent(AGENT))
        logged = len(await uow.access_log.for_agent(AGENT))
        total_logged = await uow.access_log.count()

    result = await apollo.erase_agent(AGENT)

    assert (
        ErasureResult(
            AGENT,
            deleted=1,
            redacted=1,
            evidence=evidence,
            credibility=1,
            expertise=expertise,
            access_log=logged,
            contexts=3,  # the caller context, the partner's context, the link
        )
        == result
    )
    assert set() == await traces_of(apollo, AGENT, ids)
    entry = await apollo.get_entry(kept, principal=alice)
    assert (SourceRef(REDACTED), "alice", Status.CONFIRMED) == (
        entry.source,
        entry.owner_id,
        entry.status,
    )
    assert {"agent_id": REDACTED} == entry.source_context["caller"]
    assert "r-1" == entry.source_context["run"]
    assert [REDACTED, "human-x"] == (await apollo.get_entry(partner)).source_context["reviewed_by"]
    async with apollo.store.unit_of_work() as uow:
        assert await uow.entries.get(aside.entry_id) is None
        origin = [e for e in await uow.evidence.for_entry(kept) if e.kind == "origin"]
        assert [SourceRef(REDACTED)] == [e.source for e in origin]
        links = await uow.relations.outgoing([partner])
        assert [{"linked_by": REDACTED}] == [
            dict(r.source_context) for r in links if r.to_id == kept
        ]
        assert logged == len(await uow.access_log.for_agent(REDACTED))
        assert total_logged == await uow.access_log.count()
    await apollo.aggregate_expertise()
    async with apollo.store.unit_of_work() as uow:
        experts = {r.agent_id for r in await uow.expertise.all()}
    assert AGENT not in experts
    assert REDACTED not in experts  # a redacted source is nobody's expertise


async def test_erasing_again_changes_nothing_and_counts_nothing(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    alice = Principal("alice")
    kept, partner = await _confirmed_pair(
        apollo, embedder, AGENT, "kept text", alice, axis=0, context={"caller": AGENT}
    )
    aside = await apollo.client(AGENT, alice).store_knowledge(content="an aside")
    assert aside.entry_id is not None
    ids = [kept, partner, aside.entry_id]
    first = await apollo.erase_agent(AGENT)
    assert (1, 1) == (first.deleted, first.redacted)
    before = await snapshot(apollo, ids)
    apollo.deps.clock.advance(hours=1)

    again = await apollo.erase_agent(AGENT)

    assert ErasureResult(AGENT, 0, 0) == again
    assert before == await snapshot(apollo, ids)


async def test_private_entries_of_two_owners_with_the_same_text_are_both_redacted(make_apollo):
    """A gateway agent wrote the same text privately for alice and for bob, and both were
    confirmed. Redaction keeps each owner, so the two never meet in one deduplication
    partition (clearing the owners made them collide and erasure fail for good)."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    alice, bob = Principal("alice"), Principal("bob")
    gateway = "gateway-7"
    mine_a, _ = await _confirmed_pair(
        apollo, embedder, gateway, "shared secret", alice, axis=0, scope="private"
    )
    mine_b, _ = await _confirmed_pair(
        apollo, embedder, gateway, "shared secret", bob, axis=0, scope="private"
    )

    result = await apollo.erase_agent(gateway)

    assert (0, 2) == (result.deleted, result.redacted)
    for entry_id, owner in ((mine_a, alice), (mine_b, bob)):
        entry = await apollo.get_entry(entry_id, principal=owner)
        assert (SourceRef(REDACTED), owner.id, Status.CONFIRMED) == (
            entry.source,
            entry.owner_id,
            entry.status,
        )
    found = await apollo.client("reader", alice).query_knowledge("shared secret")
    assert mine_a in [v.id for v in found.entries]
    assert mine_b not in [v.id for v in found.entries]  # still bob's alone
    assert ErasureResult(gateway, 0, 0) == await apollo.erase_agent(gateway)


async def test_an_erasure_that_fails_half_way_changes_nothing(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder, faulty=True)
    alice = Principal("alice")
    kept, partner = await _confirmed_pair(apollo, embedder, AGENT, "kept text", alice, axis=0)
    aside = await apollo.client(AGENT, alice).store_knowledge(content="an aside")
    assert aside.entry_id is not None
    ids = [kept, partner, aside.entry_id]
    before = await snapshot(apollo, ids)
    traces = await traces_of(apollo, AGENT, ids)
    apollo.store.faults.failing.add("access_log.redact_agent")

    with pytest.raises(PersistenceFailed):
        await apollo.erase_agent(AGENT)

    apollo.store.faults.failing.clear()
    assert before == await snapshot(apollo, ids)
    assert traces == await traces_of(apollo, AGENT, ids)


@pytest.mark.parametrize("agent_id", ["", "   ", REDACTED])
async def test_erasure_needs_the_id_of_an_agent(make_apollo, agent_id: str):
    """``redacted`` is what erased agents become, not an agent that can be erased."""
    apollo = await make_apollo()
    with pytest.raises(ValidationError):
        await apollo.erase_agent(agent_id)
