"""Client mode → service → store, on the in-process bus and the in-memory store.

What every transport must do (RPC queries, store_many, poison messages, GAS deposits, group
commit) is in ``test_service_transports.py``, which runs it here and over RabbitMQ.
"""

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
from apollo_app.writeback import publish_writeback
from apollo_domain.commands import QueryKnowledge
from apollo_domain.errors import NotFound, RpcTimeout, StoreUnavailable, ValidationError
from apollo_domain.model import ContentType, RelationType, Status
from apollo_domain.ports.messaging import Message
from apollo_domain.ports.topology import Topology
from apollo_domain.results import Dispatch
from tests.support import (
    FaultInjectingStore,
    Interleaving,
    SettlementRecorder,
    eventually_within,
)

PATIENCE = 10.0
LOGIN = "alice"


async def eventually(check: Callable[[], Awaitable[Any]], what: str) -> Any:
    return await eventually_within(PATIENCE, check, what)


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
    service = ApolloService(apollo, bus, settings or Settings(embedder="hashing", prefetch=4))
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
    assert "store_knowledge" == dispatch.action
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
    assert ("link_entries", "depends_on") == (link.action, link.payload["relation_type"])

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
        Apollo.in_memory(), Settings(embedder="hashing", prefetch=4, admin_users=frozenset({LOGIN}))
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
    mesh = await open_mesh(
        apollo, Settings(embedder="hashing", prefetch=4, admin_users=frozenset({LOGIN}))
    )
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


# ----------------------------------------------------------------------- group commit
# The group commit suite runs on every transport (test_service_transports.py); here, what
# needs several broker users publishing through one bus, which a real broker forbids.

BATCHED = Settings(
    embedder="hashing", prefetch=4, ingest_batch=16, ingest_batch_ms=50, outbox_workers=0
)


@define
class GroupMesh:
    """A service over a store that counts its commits and a bus that records settlements."""

    apollo: Apollo
    store: FaultInjectingStore
    bus: SettlementRecorder
    service: ApolloService

    @property
    def commits(self) -> int:
        return self.store.faults.calls.count("commit")

    async def publish(self, messages: list[Message]) -> None:
        await self.bus.publish_many(messages)

    async def settled(self, count: int) -> bool:
        return len(self.bus.settlements) >= count

    async def close(self) -> None:
        await self.service.stop()
        await self.bus.close()
        await self.apollo.close()


@pytest.fixture
async def group_mesh() -> AsyncIterator[GroupMesh]:
    store = FaultInjectingStore(InMemoryStore())
    apollo = Apollo.with_store(store, closers=[store.close])
    bus = SettlementRecorder(
        InProcessBus(Topology(), max_redeliveries=3, retry_backoff=lambda n: 0.01)
    )
    settings = BATCHED.replace(gateway_users=frozenset({"gateway"}))
    service = ApolloService(apollo, bus, settings)
    await service.start()
    mesh = GroupMesh(apollo, store, bus, service)
    yield mesh
    await mesh.close()


def ingest_message(
    content: str, *, user: str = LOGIN, message_id: str | None = None, **payload: Any
) -> Message:
    """A ``store_knowledge`` message on the ingest queue, as ``user`` publishes it."""
    body = {"v": 1, "action": "ingest", "payload": {"content": content, **payload}}
    return Message(
        Topology().ingest_queue,
        json.dumps(body).encode(),
        message_id=message_id or uuid4().hex,
        user_id=user,
    )


async def test_mixed_principals_in_one_batch_keep_their_visibility_and_attribution(
    group_mesh: GroupMesh,
):
    """alice and bob, two writers, send the same private text and the same global text
    in one batch (and a gateway credits an agent): each private text is its owner's own
    entry; the global text is one entry, bob's copy recorded as his evidence on it."""
    mesh = group_mesh
    secret, shared = "Our VPN pre-shared key rotates monthly", "NTP stratum 1 servers use GPS"
    await mesh.publish(
        [
            ingest_message(secret, user="alice", access_scope="private"),
            ingest_message(secret, user="bob", access_scope="private"),
            ingest_message(shared, user="alice"),
            ingest_message(shared, user="bob"),
            ingest_message("Gateway credited note", user="gateway", agent_id="claude-7"),
        ]
    )
    await eventually(lambda: mesh.settled(5), "every message settled")
    assert 5 == len(mesh.bus.settled("ack"))
    assert 1 == mesh.commits

    for user in ("alice", "bob"):
        found = await mesh.apollo.client(user, Principal(user)).retrieve(secret, min_confidence=0)
        mine = [view for view in found.entries if view.content == secret]
        assert 1 == len(mine), f"{user} sees exactly one copy of the private text"
        entry = await mesh.apollo.get_entry(mine[0].id)
        assert (user, user) == (entry.owner_id, entry.source.agent_id)
    anyone = mesh.apollo.client("x", Principal("carol"))
    assert [shared] == [
        v.content
        for v in (await anyone.retrieve(shared, min_confidence=0)).entries
        if v.content in (shared, secret)
    ]
    (view,) = [
        v for v in (await anyone.retrieve(shared, min_confidence=0)).entries if v.content == shared
    ]
    async with mesh.apollo.store.unit_of_work() as uow:
        sources = {e.source.agent_id for e in await uow.evidence.for_entry(view.id)}
        credited = await uow.entries.by_agent("claude-7")
    assert {"alice", "bob"} == sources
    assert ["gateway"] == [entry.owner_id for entry in credited]


async def test_a_conversation_over_the_bus_is_one_episode_read_back_over_rpc(mesh: Mesh):
    """store_text is checked before it is published (a bad turn publishes nothing), carried
    on the ingest queue and stored by the service once; the episode and the neighbours
    come back over RPC."""
    with pytest.raises(ValidationError) as refused:
        await mesh.client.store_text([{"speaker": "ann", "text": 7}])
    assert "text[0].text" == refused.value.field
    turns = [
        {"speaker": "ann", "text": "The edge proxies run Envoy 1.31.", "at": "2026-04-01T08:00Z"},
        {"speaker": "ben", "text": "Envoy reloads its listeners without dropping connections."},
    ]
    dispatch = await mesh.client.store_text(turns, tags=["edge"])
    assert "store_text" == dispatch.action
    assert "2026-04-01T08:00:00+00:00" == dispatch.payload["text"][0]["at"]
    await eventually(lambda: _at_least(mesh, 2), "the statements are stored")
    await mesh.client.store_text(turns, tags=["edge"])  # the same again: nothing new
    found = await mesh.client.query_knowledge(
        query="envoy listeners reload", mode="lexical", min_confidence=0, context_window=1
    )
    hit = next(e for e in found.entries if e.position == 1)
    assert [0] == [n.position for n in hit.neighbours]
    episode = await mesh.client.get_episode(hit.episode_id)
    assert ["ann", "ben"] == [t["speaker"] for t in episode.text]
    assert 2 == len(episode.statements)
    await mesh.service.stop()  # every message handled
    assert 2 == await mesh.total()
