"""Client mode → service → store, on the in-process bus and the in-memory store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest
from attrs import define, field

from apollo_adapters.inprocess import InProcessBus
from apollo_adapters.memory import InMemoryStore
from apollo_app import Apollo, Principal, RemoteClient, Settings
from apollo_app.entrypoints.service import ApolloService
from apollo_app.wire.envelope import encode_gas_event
from apollo_app.writeback import publish_writeback
from apollo_domain.commands import QueryKnowledge
from apollo_domain.errors import NotFound, RpcTimeout, StoreUnavailable, ValidationError
from apollo_domain.messaging import Message
from apollo_domain.model import ContentType, RelationType, Status
from apollo_domain.results import Dispatch, EntryView, QueryResult
from apollo_domain.topology import Topology
from tests.support import FaultInjectingStore, Interleaving

PATIENCE = 10.0
LOGIN = "alice"


async def eventually(check: Callable[[], Awaitable[Any]], what: str) -> Any:
    """Poll ``check`` until it returns something truthy; fail after PATIENCE seconds."""
    deadline = asyncio.get_running_loop().time() + PATIENCE
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"never happened: {what}")
        await asyncio.sleep(0.01)


class FlakyStore(FaultInjectingStore):
    """The first ``failures`` ingest preflights find the store unavailable."""

    def __init__(self, inner: Any, failures: int) -> None:
        super().__init__(inner)
        self.remaining = failures
        self.refused = 0

    async def preflight(self, parts: Collection[str]) -> None:
        if "entries" in parts and "outbox" in parts and self.remaining > 0:
            self.remaining -= 1
            self.refused += 1
            raise StoreUnavailable("entries: connection refused")
        await super().preflight(parts)


@define
class Mesh:
    apollo: Apollo
    bus: InProcessBus
    service: ApolloService
    client: RemoteClient
    letters: list[Any] = field(factory=list)

    async def total(self) -> int:
        return (await self.apollo.stats(Principal(LOGIN))).total


async def open_mesh(apollo: Apollo, settings: Settings | None = None) -> Mesh:
    bus = InProcessBus(Topology(), max_redeliveries=3, retry_backoff=lambda n: 0.01, login=LOGIN)
    service = ApolloService(apollo, bus, settings or Settings(prefetch=4))
    await service.start()
    client = RemoteClient(bus, agent_id="claude-net-1", rpc_timeout=PATIENCE)
    return Mesh(apollo, bus, service, client)


async def close_mesh(mesh: Mesh) -> None:
    await mesh.service.stop()
    await mesh.bus.close()
    await mesh.apollo.close()


@pytest.fixture
async def mesh() -> AsyncIterator[Mesh]:
    opened = await open_mesh(Apollo.in_memory())
    yield opened
    await close_mesh(opened)


async def test_store_knowledge_returns_a_dispatch_envelope_and_the_service_stores_it(mesh: Mesh):
    """The envelope names the action, the normalized payload and the message id; it claims
    nothing. The service stores the entry, owned by the bus login, attributed to the agent."""
    dispatch = await mesh.client.store_knowledge(
        content="  BGP route reflectors reduce full-mesh iBGP complexity ",
        content_type=":fact",
        tags=["BGP", "Routing"],
        context={"source": "network_team_wiki"},
        access_scope="private",
    )
    assert isinstance(dispatch, Dispatch)
    assert "ingest" == dispatch.action
    assert 32 == len(dispatch.message_id)
    assert "BGP route reflectors reduce full-mesh iBGP complexity" == dispatch.payload["content"]
    assert ("fact", ["bgp", "routing"]) == (
        dispatch.payload["content_type"],
        list(dispatch.payload["tags"]),
    )
    assert "claude-net-1" == dispatch.payload["agent_id"]
    assert not {"principal", "owner_id", "user_id"} & set(dispatch.payload)

    await eventually(lambda: mesh.total(), "the entry is stored")
    found = await mesh.client.query_knowledge(query="bgp route reflectors ibgp", min_confidence=0)
    (view,) = found.entries
    entry = await mesh.apollo.get_entry(view.id)
    assert (LOGIN, "claude-net-1", ContentType.FACT) == (
        entry.owner_id,
        entry.source.agent_id,
        entry.content_type,
    )
    assert {"source": "network_team_wiki"} == dict(entry.source_context)


async def test_rpc_query_returns_entry_views_like_the_in_process_client(mesh: Mesh):
    """query_knowledge and retrieve over RPC give QueryResult of EntryView, equal to what the
    in-process client sees for the same principal."""
    for text in ("Postgres uses MVCC for concurrency", "OSPF areas limit LSA flooding"):
        await mesh.client.store_knowledge(content=text, content_type="fact")
    await eventually(lambda: _at_least(mesh, 2), "both entries stored")

    remote = await mesh.client.retrieve("postgres mvcc concurrency", min_confidence=0)
    local = await mesh.apollo.client("x", Principal(LOGIN)).retrieve(
        "postgres mvcc concurrency", min_confidence=0
    )
    assert isinstance(remote, QueryResult)
    assert all(isinstance(view, EntryView) for view in remote.entries)
    assert [v.id for v in local.entries] == [v.id for v in remote.entries]
    assert "Postgres uses MVCC for concurrency" == remote.entries[0].content


async def _at_least(mesh: Mesh, count: int) -> bool:
    return await mesh.total() >= count


async def test_traversal_expertise_and_profile_over_rpc(mesh: Mesh):
    await mesh.client.store_knowledge(content="A route reflector is a BGP speaker", tags=["bgp"])
    await mesh.client.store_knowledge(
        content="Cluster lists prevent reflection loops", tags=["bgp"]
    )
    await eventually(lambda: _at_least(mesh, 2), "both entries stored")
    views = (await mesh.client.query_knowledge(query="ab", min_confidence=0)).entries
    first, second = sorted(views, key=lambda v: v.content)

    link = await mesh.client.link_entries(first.id, second.id, "depends_on", 0.9)
    assert ("link", "depends_on") == (link.action, link.payload["relation_type"])

    async def linked() -> list[Any]:
        return await mesh.client.related_entries(first.id, depth=1)

    (related,) = await eventually(linked, "the link is traversable")
    assert (second.id, RelationType.DEPENDS_ON, 1) == (
        related.id,
        related.relation_type,
        related.depth,
    )
    await mesh.apollo.aggregate_expertise()
    experts = await mesh.client.get_expertise("bgp")
    assert ["claude-net-1"] == [record.agent_id for record in experts]
    profile = await mesh.client.agent_profile("claude-net-1")
    assert 2 == profile.total_entries
    at_risk = await mesh.client.domains_at_risk(min_agents=2)
    assert "bgp" in [coverage.knowledge_domain for coverage in at_risk]


async def test_entity_graph_reads_over_rpc_equal_the_in_process_ones(mesh: Mesh):
    """entities, entity, entity_history and related_entities travel as RPC requests and
    return what the in-process client returns for the same principal."""
    await mesh.client.store_knowledge(content="Today Lena Park works at Umbrella Labs.")
    await mesh.client.store_knowledge(content="Today Umbrella Labs is based in Oslo.")
    await eventually(lambda: _at_least(mesh, 2), "both entries stored")
    local = mesh.apollo.client("x", Principal(LOGIN))

    listed = await mesh.client.entities(prefix="umb")
    assert [("umbrella labs", 2)] == [(e.key, e.mentions) for e in listed]
    assert await local.entities(query="Lena Park in Oslo") == await mesh.client.entities(
        query="Lena Park in Oslo"
    )
    assert await local.entity("Lena Park") == await mesh.client.entity("Lena Park")
    history = await mesh.client.entity_history("lena park", as_of=datetime.now(UTC))
    assert ["works_at"] == [e.relation for e in history.edges]
    assert await local.entity_history("Lena Park") == await mesh.client.entity_history("Lena Park")
    related = await mesh.client.related_entities("Lena Park", depth=2)
    assert [("umbrella labs", 1), ("oslo", 2)] == [(r.key, r.depth) for r in related]
    with pytest.raises(NotFound):
        await mesh.client.entity("Nobody Known")
    for call, field_name in (
        (mesh.client.related_entities("Lena Park", depth=4), "depth"),
        (mesh.client.entity_history("Lena Park", as_of="soon"), "as_of"),
        (mesh.client.entity("  "), "name"),
        (mesh.client.entities(limit=0), "limit"),
    ):
        with pytest.raises(ValidationError) as caught:
            await call
        assert field_name == caught.value.field


async def test_errors_reported_by_the_service_are_raised_by_the_client(mesh: Mesh):
    with pytest.raises(NotFound):
        await mesh.client.related_entries(uuid4())
    with pytest.raises(ValidationError) as caught:
        await mesh.client.agent_profile("   ")
    assert "agent_id" == caught.value.field


async def test_validation_that_needs_no_store_happens_before_publishing(mesh: Mesh):
    """Empty content, a bad scope, a bad decay factor: refused by the client, nothing sent."""
    with pytest.raises(ValidationError) as empty:
        await mesh.client.store_knowledge(content="   ")
    with pytest.raises(ValidationError) as scope:
        await mesh.client.store_knowledge(content="fine", access_scope="galactic")
    with pytest.raises(ValidationError) as factor:
        await mesh.client.force_decay(1.5)
    assert ["content", "access_scope", "factor"] == [e.value.field for e in (empty, scope, factor)]
    await mesh.service.stop()  # settle everything in flight
    assert [] == await mesh.bus.drain_dead_letters()
    assert 0 == await mesh.total()


async def test_an_anonymous_client_cannot_write_private_entries():
    """Without a login there is no principal, so private scope is refused client-side."""
    bus = InProcessBus(Topology())
    client = RemoteClient(bus, agent_id="claude-anon")
    with pytest.raises(ValidationError) as caught:
        await client.store_knowledge(content="secret", access_scope="private")
    assert "access_scope" == caught.value.field
    await bus.close()


async def test_remote_client_store_many_stores_each_item_once(mesh: Mesh):
    """store_many over the in-process bus returns one envelope per item, in item order,
    each with its own message id; the service stores every item once."""
    items = [
        {"content": "BGP route reflectors reduce full-mesh iBGP complexity", "tags": ["bgp"]},
        {"content": "PostgreSQL uses MVCC so readers never block writers", "tags": ["db"]},
        {"content": "Kubernetes liveness probes restart containers that hang"},
        {"content": "Anycast routes one address to the nearest of many hosts"},
        {"content": "Terraform state must be locked before concurrent applies"},
    ]

    dispatches = await mesh.client.store_many(items)

    assert [item["content"] for item in items] == [d.payload["content"] for d in dispatches]
    assert len(items) == len({d.message_id for d in dispatches})

    async def all_stored() -> bool:
        return await mesh.total() >= len(items)

    await eventually(all_stored, "every item is stored")
    found = await mesh.client.retrieve("terraform state locked", min_confidence=0)
    assert "Terraform state must be locked before concurrent applies" == found.entries[0].content
    assert len(items) == await mesh.total()


async def test_poison_messages_are_dead_lettered_with_the_reason_and_the_consumer_goes_on(
    mesh: Mesh,
):
    topology = mesh.service.topology
    for body in (b"not json", json.dumps({"v": 99, "action": "ingest", "payload": {}}).encode()):
        await mesh.bus.publish(Message(topology.ingest_queue, body, user_id=LOGIN))
    await mesh.client.store_knowledge(content="Still consuming after poison messages")
    await eventually(lambda: mesh.total(), "the good message is stored")

    letters = await eventually(lambda: _dead_letters(mesh, 2), "two dead letters")
    reasons = sorted(letter.reason for letter in letters)
    assert {topology.ingest_queue} == {letter.queue for letter in letters}
    assert "body" in reasons[0] and "not valid JSON" in reasons[0]
    assert "unsupported message version 99" in reasons[1]


async def _dead_letters(mesh: Mesh, count: int) -> list[Any]:
    """The dead letters once ``count`` have arrived (else an empty list: keep polling)."""
    mesh.letters.extend(await mesh.bus.drain_dead_letters())
    if len(mesh.letters) < count:
        return []
    letters, mesh.letters = mesh.letters, []
    return letters


async def test_a_store_that_is_unavailable_is_retried_until_it_succeeds():
    """StoreUnavailable → retry with backoff; the third delivery commits; no dead letter."""
    store = FlakyStore(InMemoryStore(), failures=2)
    mesh = await open_mesh(Apollo.with_store(store, closers=[store.close]))
    try:
        dispatch = await mesh.client.store_knowledge(content="Retried until the store is back")
        await eventually(lambda: mesh.total(), "the entry is stored")
        assert 2 == store.refused
        assert [] == await mesh.bus.drain_dead_letters()
        entry = (await mesh.client.retrieve("retried store back", min_confidence=0)).entries[0]
        assert dispatch.payload["content"] == entry.content
    finally:
        await close_mesh(mesh)


async def test_a_store_that_stays_unavailable_ends_in_the_dead_letter_queue():
    store = FlakyStore(InMemoryStore(), failures=100)
    mesh = await open_mesh(Apollo.with_store(store, closers=[store.close]))
    try:
        await mesh.client.store_knowledge(content="Never stored")
        (letter,) = await eventually(lambda: _dead_letters(mesh, 1), "the message gives up")
        assert "gave up after 4 attempts" in letter.reason
        assert "StoreUnavailable" in letter.reason
    finally:
        await close_mesh(mesh)


async def test_a_redelivered_ingest_writes_nothing_twice(mesh: Mesh):
    """The same message id delivered twice: one entry, one ingest access-log row."""
    message_id = uuid4().hex
    dispatch = await mesh.client.store_knowledge(content="Delivered twice, stored once")
    await eventually(lambda: mesh.total(), "stored")
    twice = Message(
        mesh.service.topology.ingest_queue,
        json.dumps({"v": 1, "action": "ingest", "payload": dict(dispatch.payload)}).encode(),
        message_id=message_id,
        user_id=LOGIN,
    )
    await mesh.bus.publish(twice)
    await mesh.bus.publish(twice)
    await mesh.service.stop()
    assert 1 == await mesh.total()
    assert 2 == await ingest_rows(mesh.apollo)  # the first message, then this one once


async def ingest_rows(apollo: Apollo) -> int:
    async with apollo.store.unit_of_work() as uow:
        return await uow.access_log.count("ingest")


@pytest.fixture
async def admin_mesh() -> AsyncIterator[Mesh]:
    """A mesh whose bus login is one of the service's admin users."""
    opened = await open_mesh(
        Apollo.in_memory(), Settings(prefetch=4, admin_users=frozenset({LOGIN}))
    )
    yield opened
    await close_mesh(opened)


async def test_admin_commands_need_an_admin_user(mesh: Mesh):
    """force_decay from a broker user that is not an admin is dead-lettered as forbidden
    on its first delivery, and changes nothing."""
    await mesh.client.store_knowledge(content="Not decayed by a writer")
    await eventually(lambda: mesh.total(), "stored")
    await mesh.client.force_decay(0.0)
    letters = await eventually(lambda: _dead_letters(mesh, 1), "a dead letter")
    assert "Forbidden" in letters[0].reason
    (view,) = (await mesh.apollo.run(QueryKnowledge(query="ab", min_confidence=0))).entries
    assert 0.5 <= view.confidence


async def test_lifecycle_mutations_are_applied_once_per_message(admin_mesh: Mesh):
    mesh = admin_mesh
    await mesh.client.store_knowledge(content="Decayed exactly once per message")
    await eventually(lambda: mesh.total(), "stored")
    (view,) = (await mesh.client.retrieve("decayed once message", min_confidence=0)).entries
    decay = Message(
        mesh.service.topology.ingest_queue,
        json.dumps({"v": 1, "action": "force_decay", "payload": {"factor": 0.5}}).encode(),
        message_id=uuid4().hex,
        user_id=LOGIN,
    )
    await mesh.bus.publish(decay)
    await mesh.bus.publish(decay)
    deprecated = await mesh.client.deprecate_entry(view.id, "superseded by RFC 7938")
    assert {"entry_id": str(view.id), "reason": "superseded by RFC 7938"}.items() <= (
        deprecated.payload.items()
    )

    async def archived() -> bool:
        return (await mesh.apollo.get_entry(view.id)).status is Status.ARCHIVED

    await eventually(archived, "the entry is deprecated")
    await mesh.service.stop()
    entry = await mesh.apollo.get_entry(view.id)
    assert pytest.approx(view.confidence * 0.5) == entry.confidence
    assert "superseded by RFC 7938" == entry.source_context["deprecation_reason"]


async def test_a_force_decay_redelivered_while_the_first_delivery_runs_is_applied_once():
    """Two deliveries of one force_decay message overlap: the first is held before its
    commit while the second is consumed. The message id is recorded with the change, so
    the second waits for the first, then applies nothing: 0.5 → 0.25, not 0.125."""
    points = Interleaving(InMemoryStore())
    apollo = Apollo.with_store(points, closers=[points.close])
    mesh = await open_mesh(apollo, Settings(prefetch=4, admin_users=frozenset({LOGIN})))
    try:
        stored = await apollo.client("claude-a").store_knowledge(content="Decayed only once")
        decay = Message(
            mesh.service.topology.ingest_queue,
            json.dumps({"v": 1, "action": "force_decay", "payload": {"factor": 0.5}}).encode(),
            message_id=uuid4().hex,
            user_id=LOGIN,
        )
        gate = points.hold("first", "commit")
        await points.run("first", mesh.bus.publish(decay))  # the delivery acts as "first"
        await points.reached("first", "commit")
        await points.run("second", mesh.bus.publish(decay))
        await points.reached("second", "enter")
        never = asyncio.ensure_future(asyncio.Event().wait())
        blocked = await points.blocked_or_done(never)
        never.cancel()
        gate.set()
        await mesh.service.stop()  # drains both deliveries
        assert blocked, "the second delivery did not wait for the first"
        assert [] == await mesh.bus.drain_dead_letters()
        entry = await apollo.get_entry(stored.entry_id)
        assert pytest.approx(stored.confidence * 0.5) == entry.confidence
    finally:
        await close_mesh(mesh)


async def test_an_rpc_without_a_service_times_out_naming_the_queue():
    topology = Topology()
    bus = InProcessBus(topology)
    client = RemoteClient(bus, agent_id="claude-alone", rpc_timeout=0.2)
    with pytest.raises(RpcTimeout) as caught:
        await client.query_knowledge(query="anyone there")
    assert topology.query_queue in str(caught.value) and "0.2s" in str(caught.value)
    await bus.close()


async def test_gas_events_on_the_audit_exchange_deposit_knowledge(mesh: Mesh):
    topology = mesh.service.topology
    event = {
        "request_id": "req-1",
        "response_content": "Anycast routes one address to the nearest of many hosts.",
        "messages": [{"role": "user", "content": "what is anycast"}],
    }
    published = Message(topology.audit_routing_key, encode_gas_event(event), user_id=LOGIN)
    await mesh.bus.publish(published, exchange=topology.audit_exchange)
    await mesh.bus.publish(published, exchange=topology.audit_exchange)
    await eventually(lambda: mesh.total(), "the GAS deposit is stored")
    await mesh.service.stop()
    assert 1 == await mesh.total()
    (view,) = (await mesh.apollo.client("x", LOGIN).retrieve("anycast nearest host")).entries
    entry = await mesh.apollo.get_entry(view.id)
    assert "req-1" == entry.source_context["gas"]["request_id"]


@define
class Response:
    content: str
    tools: list[dict[str, Any]]
    embedding: list[float] | None = None
    tags: list[str] | None = None


async def test_writeback_routes_to_store_or_vectorize_and_the_service_ingests(mesh: Mesh):
    topology = mesh.service.topology
    research = [{"name": "web_search"}]
    short = Response("too short", research)
    assert None is await publish_writeback(mesh.bus, short, agent_id="a", topology=topology)
    chat_only = Response("x" * 80, [{"name": "send_message"}])
    assert None is await publish_writeback(mesh.bus, chat_only, agent_id="a", topology=topology)

    vectorize = Response(
        "Route flap damping suppresses unstable prefixes for a while.", research, tags=["bgp"]
    )
    sent = await publish_writeback(mesh.bus, vectorize, agent_id="claude-wb", topology=topology)
    assert sent is not None and "writeback_vectorize" == sent.action
    dimension = mesh.apollo.deps.embedder.dimension
    embedded = Response(
        "MPLS label switching forwards on labels rather than addresses.",
        research,
        embedding=[0.1] * dimension,
    )
    stored = await publish_writeback(mesh.bus, embedded, agent_id="claude-wb", topology=topology)
    assert stored is not None and "writeback_store" == stored.action
    wrong = Response("A vector of the wrong size cannot join this store at all.", research, [0.1])
    await publish_writeback(mesh.bus, wrong, agent_id="claude-wb", topology=topology)

    await eventually(lambda: _at_least(mesh, 2), "both writebacks stored")
    (letter,) = await eventually(lambda: _dead_letters(mesh, 1), "the wrong vector dies")
    assert topology.writeback_store_queue == letter.queue
    assert f"has 1 dimensions; this store uses {dimension}" in letter.reason
    found = await mesh.client.retrieve("route flap damping", limit=1, min_confidence=0)
    entry = await mesh.apollo.get_entry(found.entries[0].id)
    assert ("claude-wb", ("bgp",)) == (entry.source.agent_id, entry.tags)
    assert ["web_search"] == entry.source_context["research_tools"]
