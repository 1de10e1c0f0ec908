"""One login, one source, on every store (docs/security.md, "Security model").

A caller cannot pose as several sources or act on others' work by what it writes in a
payload: a key is its own principal's, a GAS event's ``caller`` counts only from a gateway,
Apollo's own agent ids are no one's, submission metadata is the edge's, and only the
owner of an entry (or an admin) makes it a party to a dispute whose resolution archives it.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from apollo_app import Apollo, Principal
from apollo_domain import commands as c
from apollo_domain.errors import Forbidden, ValidationError
from apollo_domain.handlers import handle
from apollo_domain.lifecycle import dispute
from apollo_domain.model import Outcome, RelationType, Role, Status
from apollo_domain.rules import RESERVED_AGENT_IDS
from apollo_domain.services import Caller
from tests.support import ScriptedLLM

ALICE = Principal("alice", role=Role.WRITER)
BOB = Principal("bob", role=Role.WRITER)
RELAY = Principal("relay", role=Role.GATEWAY)
ADMIN = Principal("ops", role=Role.ADMIN)


def over_the_bus(principal: Principal) -> Caller:
    """The caller a bus consumer makes of a message from ``principal``'s login."""
    return Caller.of(principal.agent or principal.id, principal, edge="amqp")


async def run(
    apollo: Apollo, principal: Principal, command: c.Command[Any], key: str | None = None
) -> Any:
    return await handle(apollo.deps, over_the_bus(principal), command, idempotency_key=key)


async def store(apollo: Apollo, principal: Principal, content: str) -> UUID:
    result = await run(apollo, principal, c.StoreKnowledge(content=content))
    assert result.entry_id is not None
    return UUID(str(result.entry_id))


async def by_agent(apollo: Apollo, agent: str) -> list[str]:
    async with apollo.store.unit_of_work() as uow:
        return sorted(e.content for e in await uow.entries.by_agent(agent))


async def status_of(apollo: Apollo, entry_id: UUID) -> Status:
    return (await apollo.get_entry(entry_id)).status


async def make_disputed(apollo: Apollo, entry_id: UUID) -> None:
    async with apollo.store.unit_of_work() as uow:
        entry = await uow.entries.get(entry_id)
        assert entry is not None
        await uow.entries.update(dispute(entry, entry.updated_at))
        await uow.commit()


# -- keys belong to their sender ---------------------------------------------------------


async def test_one_principals_message_id_never_suppresses_anothers_command(make_apollo):
    """alice's message id taken first does not make bob's message of that id "already
    applied": both are stored; each one's redelivery is still recognized."""
    apollo = await make_apollo()
    first = await run(apollo, ALICE, c.StoreKnowledge(content="alice took the id"), "m-1")
    second = await run(apollo, BOB, c.StoreKnowledge(content="bob uses it later"), "m-1")
    assert (Outcome.CREATED, Outcome.CREATED) == (first.outcome, second.outcome)
    assert ["bob uses it later"] == await by_agent(apollo, "bob")
    again = await run(apollo, BOB, c.StoreKnowledge(content="bob uses it later"), "m-1")
    assert (Outcome.DEDUPLICATED, "already processed") == (again.outcome, again.reason)


async def test_one_principals_message_id_never_suppresses_anothers_mutation(make_apollo):
    """The same holds for every kind of command, a link here."""
    apollo = await make_apollo()
    a, b = await store(apollo, ALICE, "alice one"), await store(apollo, ALICE, "alice two")
    x, y = await store(apollo, BOB, "bob one"), await store(apollo, BOB, "bob two")
    link = c.LinkEntries(from_entry_id=str(a), to_entry_id=str(b), relation_type="depends_on")
    assert (await run(apollo, ALICE, link, "m-2")).created
    other = c.LinkEntries(from_entry_id=str(x), to_entry_id=str(y), relation_type="depends_on")
    assert (await run(apollo, BOB, other, "m-2")).created


async def test_one_principals_gas_request_id_never_suppresses_anothers_event(make_apollo):
    """A GAS request id is its sender's: bob's event r-1 is processed after alice's r-1."""
    apollo = await make_apollo()
    event = {"request_id": "r-1", "response_content": "Alice saw the cache warm up."}
    assert not (await run(apollo, ALICE, c.ProcessGasEvent(event=event))).replayed
    bobs = {"request_id": "r-1", "response_content": "Bob saw the queue drain."}
    result = await run(apollo, BOB, c.ProcessGasEvent(event=bobs))
    assert (False, 1) == (result.replayed, result.deposited["deposited"])
    assert ["Bob saw the queue drain."] == await by_agent(apollo, "bob")
    assert (await run(apollo, BOB, c.ProcessGasEvent(event=bobs))).replayed


# -- a GAS caller counts only from a gateway ---------------------------------------------


async def test_a_writers_gas_caller_is_ignored_the_deposit_is_its_own(make_apollo):
    """A writer's event naming another agent as ``caller`` deposits as the writer."""
    apollo = await make_apollo()
    event = {
        "request_id": "r-2",
        "response_content": "Posing as the victim through GAS.",
        "caller": {"agent_id": "victim"},
    }
    await run(apollo, ALICE, c.ProcessGasEvent(event=event))
    assert [] == await by_agent(apollo, "victim")
    assert ["Posing as the victim through GAS."] == await by_agent(apollo, "alice")


async def test_a_gateways_gas_caller_is_credited(make_apollo):
    apollo = await make_apollo()
    event = {
        "request_id": "r-3",
        "response_content": "Relayed for an agent of the mesh.",
        "caller": {"agent_id": "claude-7"},
    }
    await run(apollo, RELAY, c.ProcessGasEvent(event=event))
    assert ["Relayed for an agent of the mesh."] == await by_agent(apollo, "claude-7")


# -- reserved agent ids and submission metadata ------------------------------------------


@pytest.mark.parametrize("reserved", sorted(RESERVED_AGENT_IDS))
async def test_a_reserved_agent_id_is_never_a_source(make_apollo, reserved):
    """Not even a gateway or an admin credits work to an id Apollo uses itself (the
    erasure placeholder, the default agents); nothing is stored."""
    apollo = await make_apollo()
    for principal in (RELAY, ADMIN):
        command = c.StoreKnowledge(content="credited to Apollo itself", agent_id=reserved.upper())
        with pytest.raises(ValidationError) as err:
            await run(apollo, principal, command)
        assert "agent_id" == err.value.field
    event = {"request_id": "r-4", "response_content": "Credited to Apollo.", "caller": reserved}
    with pytest.raises(ValidationError) as err:
        await run(apollo, RELAY, c.ProcessGasEvent(event=event))
    assert "caller.agent_id" == err.value.field
    assert 0 == (await apollo.stats()).total


async def test_submission_metadata_over_an_edge_is_the_edges(make_apollo):
    """``submitted_by``/``submitted_from`` in a payload are ignored: an edge records the
    principal and itself."""
    apollo = await make_apollo()
    command = c.StoreKnowledge(
        content="who sent this?", submitted_by="the-ceo", submitted_from="board-room"
    )
    result = await run(apollo, ALICE, command)
    source = (await apollo.get_entry(result.entry_id)).source
    assert ("alice", "amqp") == (source.submitted_by, source.submitted_from)


async def test_anonymous_publishers_cannot_deprecate_each_others_entries(make_apollo):
    """An anonymous caller over an edge owns nothing, not even what another anonymous
    caller wrote."""
    apollo = await make_apollo()
    anonymous = Principal(None)
    entry_id = await store(apollo, anonymous, "written by someone without a login")
    with pytest.raises(Forbidden):
        await run(apollo, anonymous, c.DeprecateEntry(entry_id=str(entry_id), reason="mine now"))
    assert Status.CANDIDATE == await status_of(apollo, entry_id)


# -- disputes only between an owner's entries --------------------------------------------


@pytest.mark.parametrize("kind", ["contradicts", "supersedes"])
async def test_a_writer_cannot_make_anothers_entry_the_source_of_a_dispute(make_apollo, kind):
    apollo = await make_apollo()
    victim = await store(apollo, BOB, "bob's unrelated entry")
    own = await store(apollo, ALICE, "alice's entry")
    link = c.LinkEntries(from_entry_id=str(victim), to_entry_id=str(own), relation_type=kind)
    with pytest.raises(Forbidden):
        await run(apollo, ALICE, link)


async def test_a_writer_cannot_drag_anothers_entry_into_a_contradiction(make_apollo):
    apollo = await make_apollo()
    victim = await store(apollo, BOB, "bob's unrelated entry")
    own = await store(apollo, ALICE, "alice's entry")
    link = c.LinkEntries(
        from_entry_id=str(own), to_entry_id=str(victim), relation_type="contradicts"
    )
    with pytest.raises(Forbidden):
        await run(apollo, ALICE, link)
    # supersedes is no dispute of the older entry: alice's newer note may point at it
    link = c.LinkEntries(
        from_entry_id=str(own), to_entry_id=str(victim), relation_type="supersedes"
    )
    assert (await run(apollo, ALICE, link)).created


async def test_a_forged_dispute_cannot_archive_an_unrelated_entry(make_apollo):
    """The attack: alice links bob's entry as contradicting her disputed one, an admin
    accepts hers. The link is refused, so bob's entry stays, and his standing too."""
    apollo = await make_apollo()
    victim = await store(apollo, BOB, "bob's unrelated entry")
    disputed = await store(apollo, ALICE, "alice's contested claim")
    await make_disputed(apollo, disputed)
    link = c.LinkEntries(
        from_entry_id=str(victim), to_entry_id=str(disputed), relation_type="contradicts"
    )
    with pytest.raises(Forbidden):
        await run(apollo, ALICE, link)
    await run(apollo, ADMIN, c.ResolveDispute(entry_id=str(disputed), resolution="accept"))
    assert Status.CANDIDATE == await status_of(apollo, victim)
    async with apollo.store.unit_of_work() as uow:
        assert 0 == (await uow.credibility.get("bob")).beta - 1


async def test_an_owners_and_an_admins_disputes_are_resolved(make_apollo):
    """A writer's contradiction between its own entries, and an admin's between anyone's,
    are disputes: accepting one side archives the other."""
    apollo = await make_apollo()
    mine, also_mine = (
        await store(apollo, ALICE, "alice says yes"),
        await store(apollo, ALICE, "alice says no"),
    )
    bobs = await store(apollo, BOB, "bob says maybe")
    own = c.LinkEntries(
        from_entry_id=str(mine), to_entry_id=str(also_mine), relation_type="contradicts"
    )
    assert (await run(apollo, ALICE, own)).created
    admins = c.LinkEntries(
        from_entry_id=str(bobs), to_entry_id=str(mine), relation_type="contradicts"
    )
    assert (await run(apollo, ADMIN, admins)).created
    await make_disputed(apollo, mine)
    await run(apollo, ADMIN, c.ResolveDispute(entry_id=str(mine), resolution="accept"))
    assert (Status.ARCHIVED, Status.ARCHIVED) == (
        await status_of(apollo, also_mine),
        await status_of(apollo, bobs),
    )


async def test_gas_relations_never_put_anothers_entry_into_a_dispute(make_apollo):
    """A model that calls every neighbour a contradiction relates a writer's deposit to
    its own entries only; to another's entry the relation is skipped."""
    llm = ScriptedLLM(default_relation={"relation_type": "contradicts", "confidence": 0.99})
    apollo = await make_apollo(llm=llm)
    victim = await store(apollo, BOB, "The cache is warm after a restart.")
    own = await store(apollo, ALICE, "The cache is cold after a restart.")
    event = {"request_id": "r-5", "response_content": "The cache is never warm after a restart."}
    await run(apollo, ALICE, c.ProcessGasEvent(event=event))
    async with apollo.store.unit_of_work() as uow:
        to_victim = await uow.relations.incoming([victim], [RelationType.CONTRADICTS])
        to_own = await uow.relations.incoming([own], [RelationType.CONTRADICTS])
    assert [] == to_victim
    assert 1 == len(to_own)


# -- anonymous callers see no agent names ------------------------------------------------


async def test_an_anonymous_caller_over_an_edge_sees_no_agent_names(make_apollo):
    """Source, owner, agreeing sources and evidence are hidden (evidence by pseudonyms that
    keep independence visible); views about agents are refused. The embedding program's
    own anonymous client still sees them."""
    apollo = await make_apollo()
    entry_id = await store(apollo, ALICE, "Both agents say the same thing")
    await store(apollo, BOB, "Both agents say the same thing")
    await apollo.check_corroboration()
    anonymous = Principal(None)

    entry = await run(apollo, anonymous, c.GetEntry(entry_id=str(entry_id)))
    evidence = await run(apollo, anonymous, c.GetEvidence(entry_id=str(entry_id)))
    found = await run(apollo, anonymous, c.QueryKnowledge(query="agents say", min_confidence=0))
    assert ("hidden", None) == (entry.source.agent_id, entry.owner_id)
    assert ["hidden", "hidden"] == entry.source_context["bootstrap"]["agreement"]
    assert ["hidden-1", "hidden-2"] == [e.source.agent_id for e in evidence]
    assert {"hidden"} == {view.source_agent for view in found.entries}
    for command in (
        c.GetAgentProfile(target_agent_id="alice"),
        c.GetExpertise(domain="general"),
        c.GetSource(target_agent_id="alice"),
    ):
        with pytest.raises(Forbidden):
            await run(apollo, anonymous, command)

    program = apollo.client("reader")
    found = await program.query_knowledge(query="agents say", min_confidence=0)
    assert {"alice"} == {view.source_agent for view in found.entries}


async def test_an_anonymous_caller_does_not_read_the_source_in_the_context(make_apollo):
    """A caller context naming the writing agent shows it hidden too."""
    apollo = await make_apollo()
    command = c.StoreKnowledge(
        content="noted with my name", context={"caller": {"agent_id": "alice"}}
    )
    result = await run(apollo, ALICE, command)
    entry = await run(apollo, Principal(None), c.GetEntry(entry_id=str(result.entry_id)))
    assert {"caller": {"agent_id": "hidden"}} == dict(entry.source_context)
