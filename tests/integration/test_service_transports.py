"""Client mode → service → store, one suite on every transport.

Each test runs on the in-process bus over the in-memory store (``[inprocess]``) and on a
real RabbitMQ broker over PostgreSQL + pgvector (``[rabbitmq]``). What only one transport
can show stays in its own file: ``test_service_inprocess.py`` (forced interleavings, users
the broker would not let one connection speak for) and ``test_service_rabbitmq.py``
(topology declaration, dropped connections, a killed service process).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest
from attrs import define, evolve, field
from yarl import URL

from apollo_adapters.inprocess import InProcessBus
from apollo_adapters.memory import InMemoryStore
from apollo_adapters.rabbitmq import AiormqBus
from apollo_app import Apollo, Principal, RemoteClient, Settings
from apollo_app.entrypoints.service import ApolloService
from apollo_app.wire.envelope import encode_gas_event
from apollo_app.wire.replies import Receipt, decode_reply
from apollo_domain.causal import MAX_POSITION, CausalToken, parse_token
from apollo_domain.commands import StoreKnowledge
from apollo_domain.errors import NotFound
from apollo_domain.handlers import handle
from apollo_domain.model import Viewer
from apollo_domain.ports.messaging import DeadLetter, Message, MessageBus
from apollo_domain.ports.topology import Topology
from apollo_domain.rates import WriteRate
from apollo_domain.results import EntryView, QueryResult
from apollo_domain.services import Caller
from tests.postgres_support import fresh_store
from tests.rabbitmq_support import delete_topology, start_test_broker
from tests.support import FaultInjectingStore, SettlementRecorder, eventually_within, fast_retry

PATIENCE = 30.0
AGENT = "claude-mesh-1"
INPROCESS_LOGIN = "alice"
TRANSPORTS = [
    "inprocess",
    pytest.param("rabbitmq", marks=[pytest.mark.rabbitmq, pytest.mark.postgres]),
]


async def eventually(check: Callable[[], Awaitable[Any]], what: str) -> Any:
    return await eventually_within(PATIENCE, check, what)


# ---------------------------------------------------------------------------- transports


@define
class Transport:
    """Opens the parts of a mesh on one transport: the store, the service's bus, a bus and
    a client mode client publishing as ``login``, the service's settings."""

    name: str
    topology: Topology
    login: str
    url: str | None = None
    request: pytest.FixtureRequest | None = None
    opened: list[Any] = field(factory=list)
    _shared: InProcessBus | None = None

    async def store(self) -> Any:
        """A fresh, empty store: in memory, or a PostgreSQL database of its own."""
        if self.url is None:
            return InMemoryStore()
        assert self.request is not None
        server = self.request.getfixturevalue("postgres_server")
        return await fresh_store(server, dimension=384)

    def settings(self, **changes: Any) -> Settings:
        """The service's settings, on this transport's topology."""
        if self.url is None:
            return Settings(embedder="hashing", **changes)
        prefix = self.topology.exchange.removesuffix(Topology().exchange)
        return Settings(
            embedder="hashing",
            exchange=prefix + "legion.apollo",
            queue_prefix=prefix + "legion.apollo",
            audit_exchange=prefix + "llm.audit",
            **changes,
        )

    async def service_bus(self) -> MessageBus:
        """The bus the service consumes from (in process: the one bus of the mesh)."""
        bus: MessageBus
        if self.url is None:
            self._shared = InProcessBus(
                self.topology, max_redeliveries=2, retry_backoff=fast_retry, login=self.login
            )
            bus = self._shared
        else:
            bus = await AiormqBus.connect(
                self.url,
                topology=self.topology,
                max_redeliveries=2,
                retry_backoff=fast_retry,
                reconnect_timeout=PATIENCE,
            )
        self.opened.append(bus)
        return bus

    async def client_bus(self) -> MessageBus:
        """A bus publishing as ``login`` (in process: the service's own bus)."""
        if self.url is None:
            assert self._shared is not None, "open the service's bus first"
            return self._shared
        bus = await AiormqBus.connect(self.url, topology=self.topology)
        self.opened.append(bus)
        return bus

    def client(self, agent_id: str) -> AbstractAsyncContextManager[RemoteClient]:
        """A client mode client (over RabbitMQ: ``Apollo.client_mode``, a connection of its
        own)."""
        if self.url is None:
            return self._inprocess_client(agent_id)
        return Apollo.client_mode(
            self.url, agent_id=agent_id, topology=self.topology, rpc_timeout=PATIENCE
        )

    @asynccontextmanager
    async def _inprocess_client(self, agent_id: str) -> AsyncIterator[RemoteClient]:
        yield RemoteClient(await self.client_bus(), agent_id=agent_id, rpc_timeout=PATIENCE)

    async def close(self) -> None:
        for bus in reversed(self.opened):
            await bus.close()
        if self.url is not None:
            await delete_topology(self.url, self.topology)


@pytest.fixture(params=TRANSPORTS)
async def transport(request: pytest.FixtureRequest) -> AsyncIterator[Transport]:
    """A :class:`Transport` per bus adapter, on a topology of its own."""
    if request.param == "inprocess":
        opened = Transport("inprocess", Topology(), login=INPROCESS_LOGIN)
    else:
        url = request.getfixturevalue("rabbitmq_url")  # fails the run if no broker starts
        login = URL(url).user or "guest"
        topology = start_test_broker().topology()
        opened = Transport("rabbitmq", topology, login=login, url=url, request=request)
    try:
        yield opened
    finally:
        await opened.close()


# ---------------------------------------------------------------------------------- mesh


@define
class Mesh:
    """A service, whose bus records settlements, and a client mode client publishing as
    ``login`` for the agent ``AGENT``."""

    apollo: Apollo
    service: ApolloService
    service_bus: SettlementRecorder
    client_bus: MessageBus
    client: RemoteClient
    login: str
    letters: list[DeadLetter] = field(factory=list)

    async def total(self) -> int:
        return (await self.apollo.stats(Principal(self.login))).total

    async def at_least(self, count: int) -> bool:
        return await self.total() >= count

    async def settled(self, count: int) -> bool:
        return len(self.service_bus.settlements) >= count

    async def settled_acks(self, count: int) -> bool:
        return len(self.service_bus.settled("ack")) >= count

    async def dead_letters(self, count: int) -> list[DeadLetter]:
        """The dead letters once ``count`` have arrived (else an empty list: keep polling)."""
        self.letters.extend(await self.service_bus.drain_dead_letters())
        if len(self.letters) < count:
            return []
        letters, self.letters = self.letters, []
        return letters


@pytest.fixture
async def mesh(transport: Transport) -> AsyncIterator[Mesh]:
    async with open_mesh(transport) as opened:
        yield opened


@asynccontextmanager
async def open_mesh(
    transport: Transport, write_rate: WriteRate | None = None
) -> AsyncIterator[Mesh]:
    """The service over a fresh store (each principal's writes bounded by ``write_rate``),
    its bus recording settlements, and a client mode client as ``AGENT``."""
    store = await transport.store()
    apollo = Apollo.with_store(store, closers=[store.close], write_rate=write_rate)
    service_bus = SettlementRecorder(await transport.service_bus())
    service = ApolloService(apollo, service_bus, transport.settings(prefetch=8))
    await service.start()
    try:
        async with transport.client(AGENT) as client:
            yield Mesh(apollo, service, service_bus, client.bus, client, transport.login)
    finally:
        await service.stop()
        await apollo.close()


async def test_rpc_query_round_trip(mesh: Mesh):
    """Published ingests are stored; query_knowledge and retrieve over RPC give a
    QueryResult of EntryViews, equal to what the in-process client sees for the same
    principal."""
    sent = await mesh.client.store_knowledge(
        content="BGP route reflectors reduce full-mesh IBGP complexity",
        content_type="fact",
        tags=["bgp", "routing"],
    )
    await mesh.client.store_knowledge(content="OSPF areas limit LSA flooding", tags=["ospf"])
    await mesh.client.store_knowledge(content="Postgres uses MVCC for concurrency")
    await eventually(lambda: mesh.at_least(3), "the three entries stored")

    found = await mesh.client.query_knowledge(query="bgp route reflector", min_confidence=0.0)
    assert isinstance(found, QueryResult)
    assert all(isinstance(view, EntryView) for view in found.entries)
    best = found.entries[0]
    assert (sent.payload["content"], AGENT) == (best.content, best.source_agent)
    assert ("bgp", "routing") == best.tags

    remote = await mesh.client.retrieve("postgres mvcc concurrency", min_confidence=0)
    local = await mesh.apollo.client("x", Principal(mesh.login)).retrieve(
        "postgres mvcc concurrency", min_confidence=0
    )
    assert isinstance(remote, QueryResult)
    assert all(isinstance(view, EntryView) for view in remote.entries)
    assert [v.id for v in local.entries] == [v.id for v in remote.entries]
    assert "Postgres uses MVCC for concurrency" == remote.entries[0].content


async def test_a_client_reading_its_writes_has_each_committed_before_it_returns(mesh: Mesh):
    """With read-your-writes on, a write returns the service's receipt (its commit's causal
    token), so the next read finds it without waiting or polling; a bulk write returns
    every item's; the client keeps the furthest token and presents it; a write the service
    refuses raises its error instead of a receipt, and a forged token far ahead costs a
    read nothing (no replica here: it runs at once)."""
    client = RemoteClient(
        mesh.client_bus,
        agent_id=AGENT,
        topology=mesh.client.topology,
        rpc_timeout=PATIENCE,
        service_users=mesh.client.service_users,
        read_your_writes=True,
    )
    assert client.causal_token is None
    sent = await client.store_knowledge(content="IS-IS floods link state PDUs per level")
    token = parse_token(sent.causal_token)
    assert token is not None and client.causal_token == token
    found = await client.query_knowledge(query="IS-IS link state PDUs", min_confidence=0)
    assert "IS-IS floods link state PDUs per level" in [e.content for e in found.entries]

    many = await client.store_many(
        [{"content": f"VRRP router {n} takes over the virtual address"} for n in "abc"]
    )
    tokens = [t for t in (parse_token(d.causal_token) for d in many) if t is not None]
    assert len(tokens) == 3 and client.causal_token == max([*tokens, token])
    assert await mesh.total() == 4  # stored when the calls returned: nothing to await

    with pytest.raises(NotFound):
        await client.link_entries(
            from_entry_id=str(uuid4()), to_entry_id=str(uuid4()), relation_type="causes"
        )
    client.causal_token = CausalToken(MAX_POSITION)
    again = await client.query_knowledge(query="VRRP virtual address", min_confidence=0)
    assert len(again.entries) == 3


async def test_a_receipt_is_never_published_to_a_queue_that_is_not_a_reply_queue(mesh: Mesh):
    """A mutation whose ``reply_to`` names a service queue (a writer trying to make the
    service publish, as itself, onto its own ingest queue) is applied and acknowledged,
    and no receipt is published anywhere."""
    replies: list[Message] = []
    answer = mesh.service_bus.reply

    async def recorded(request: Message, body: bytes) -> None:
        replies.append(request)
        await answer(request, body)

    mesh.service_bus.reply = recorded  # type: ignore[method-assign]
    command = StoreKnowledge(content="HSRP elects an active router by priority")
    message = evolve(mesh.client._message(command), reply_to=mesh.client.topology.ingest_queue)
    await mesh.client_bus.publish(message)
    await eventually(lambda: mesh.settled(1), "the message settled")
    assert [(message.message_id, "ack")] == mesh.service_bus.settlements
    assert (1, []) == (await mesh.total(), replies)


async def test_remote_client_store_many_stores_each_item_once(mesh: Mesh):
    """store_many returns one envelope per item, in item order, each with its own message
    id; the service stores every item once."""
    items: list[dict[str, Any]] = [
        {"content": "BGP route reflectors reduce full-mesh iBGP complexity", "tags": ["bgp"]},
        {"content": "PostgreSQL uses MVCC so readers never block writers", "tags": ["db"]},
        {"content": "Kubernetes liveness probes restart containers that hang"},
        {"content": "Anycast routes one address to the nearest of many hosts"},
        {"content": "Terraform state must be locked before concurrent applies"},
    ]

    dispatches = await mesh.client.store_many(items)

    assert [item["content"] for item in items] == [d.payload["content"] for d in dispatches]
    assert len(items) == len({d.message_id for d in dispatches})

    await eventually(lambda: mesh.at_least(len(items)), "every item is stored")
    found = await mesh.client.retrieve("terraform state locked", min_confidence=0)
    assert "Terraform state must be locked before concurrent applies" == found.entries[0].content
    assert len(items) == await mesh.total()


async def test_poison_messages_are_dead_lettered_with_the_reason_and_the_consumer_goes_on(
    mesh: Mesh,
):
    """A body that is not JSON, an unsupported message version and a content that is not a
    string: each dead-lettered from the ingest queue with its reason; the good message
    published after them is stored, and only it."""
    topology = mesh.service.topology
    poison = (
        b"{broken",
        json.dumps({"v": 99, "action": "ingest", "payload": {}}).encode(),
        b'{"v": 1, "action": "ingest", "payload": {"content": 7}}',
    )
    for body in poison:
        await mesh.client_bus.publish(Message(topology.ingest_queue, body, user_id=mesh.login))
    await mesh.client.store_knowledge(content="The consumer survives poison messages")
    await eventually(lambda: mesh.at_least(1), "the good message is stored")

    letters = await eventually(lambda: mesh.dead_letters(3), "three dead letters")
    assert {topology.ingest_queue} == {letter.queue for letter in letters}
    reasons = [letter.reason for letter in letters]
    assert 3 == len(reasons)
    assert any("body" in r and "not valid JSON" in r for r in reasons), reasons
    assert any("unsupported message version 99" in r for r in reasons), reasons
    assert any("content: must be a string" in r for r in reasons), reasons
    assert 1 == await mesh.total()


async def test_gas_events_on_the_audit_exchange_deposit_knowledge(mesh: Mesh):
    """A GAS event published twice on the audit exchange: one entry, owned by the
    publishing user, carrying the event's request id."""
    topology = mesh.service.topology
    event = {
        "request_id": f"req-{uuid4().hex[:8]}",
        "response_content": "Anycast routes one address to the nearest of many hosts.",
        "messages": [{"role": "user", "content": "what is anycast"}],
    }
    published = Message("llm.audit.complete", encode_gas_event(event), user_id=mesh.login)
    await mesh.client_bus.publish(published, exchange=topology.audit_exchange)
    await mesh.client_bus.publish(published, exchange=topology.audit_exchange)
    await eventually(lambda: mesh.settled(2), "both deliveries settled")

    assert 1 == await mesh.total()
    found = await mesh.client.retrieve("anycast nearest hosts", min_confidence=0)
    (view,) = found.entries
    entry = await mesh.apollo.get_entry(view.id)
    assert event["request_id"] == entry.source_context["gas"]["request_id"]
    assert mesh.login == entry.owner_id


# -------------------------------------------------------------------------- group commit


@define
class GroupMesh:
    """A service whose store counts its commits and whose bus records settlements, and a
    bus publishing raw messages as ``login``."""

    apollo: Apollo
    store: FaultInjectingStore
    bus: SettlementRecorder
    client_bus: MessageBus
    service: ApolloService
    login: str

    @property
    def commits(self) -> int:
        return self.store.faults.calls.count("commit")

    def message(self, content: str, *, message_id: str | None = None, **payload: Any) -> Message:
        """A ``store_knowledge`` message on the ingest queue, as ``login`` publishes it."""
        body = {"v": 1, "action": "ingest", "payload": {"content": content, **payload}}
        return Message(
            self.service.topology.ingest_queue,
            json.dumps(body).encode(),
            message_id=message_id or uuid4().hex,
            user_id=self.login,
        )

    async def publish(self, messages: list[Message]) -> None:
        await self.client_bus.publish_many(messages)

    async def settled(self, count: int) -> bool:
        return len(self.bus.settlements) >= count

    async def rows(self) -> tuple[int, int]:
        """(entries, ingest access-log rows)."""
        async with self.apollo.store.unit_of_work() as uow:
            return (await uow.entries.stats(Viewer(None), datetime.now(UTC))).total, (
                await uow.access_log.count("ingest")
            )

    async def authored(self) -> int:
        """How many entries the agent ``login`` is credited with."""
        async with self.apollo.store.unit_of_work() as uow:
            return len(await uow.entries.by_agent(self.login))


@asynccontextmanager
async def open_group_mesh(transport: Transport, *, gateway: bool) -> AsyncIterator[GroupMesh]:
    """The service batching ingests, 16 at most, waiting 100 ms for a batch to fill. The
    publishing user is a gateway (may credit other agents) when ``gateway``, else a
    writer."""
    store = FaultInjectingStore(await transport.store())
    apollo = Apollo.with_store(store, closers=[store.close])
    bus = SettlementRecorder(await transport.service_bus())
    gateways = {"gateway", transport.login} if gateway else {"gateway"}
    settings = transport.settings(
        prefetch=8,
        ingest_batch=16,
        ingest_batch_ms=100,
        outbox_workers=0,
        gateway_users=frozenset(gateways),
    )
    service = ApolloService(apollo, bus, settings)
    await service.start()
    try:
        client_bus = await transport.client_bus()
        yield GroupMesh(apollo, store, bus, client_bus, service, transport.login)
    finally:
        await service.stop()
        await apollo.close()


@pytest.fixture
async def group_mesh(transport: Transport) -> AsyncIterator[GroupMesh]:
    """A batching service; the publishing user is a writer."""
    async with open_group_mesh(transport, gateway=False) as mesh:
        yield mesh


@pytest.fixture
async def gateway_group_mesh(transport: Transport) -> AsyncIterator[GroupMesh]:
    """A batching service; the publishing user is a gateway."""
    async with open_group_mesh(transport, gateway=True) as mesh:
        yield mesh


async def test_messages_published_together_are_committed_in_batches_and_each_acked_once(
    group_mesh: GroupMesh,
):
    """40 ingests published at once: every entry is stored, in far fewer commits than
    messages; each delivery is acknowledged once, none retried or dead-lettered; the
    ingest queue's prefetch covers a batch and the next one filling."""
    mesh = group_mesh
    messages = [mesh.message(f"Host {n} in rack {n % 7} runs kernel 6.{n}") for n in range(40)]
    await mesh.publish(messages)
    await eventually(lambda: mesh.settled(40), "every message settled")

    assert (40, 40) == await mesh.rows()
    assert 40 == await mesh.authored()
    assert sorted(m.message_id for m in messages) == sorted(mesh.bus.settled("ack"))
    assert 40 == len(mesh.bus.settlements)
    assert mesh.commits < 40 // 4, f"{mesh.commits} commits for 40 messages"
    assert 32 == mesh.bus.prefetch[mesh.service.topology.ingest_queue]


async def test_a_poison_message_in_a_batch_is_dead_lettered_alone_and_the_rest_stored(
    group_mesh: GroupMesh,
):
    """Bad JSON, an empty and a blank content and a writer crediting another agent share
    a batch with five good messages: each bad one is dead-lettered with its own reason,
    the five are stored in one commit and acknowledged."""
    mesh = group_mesh
    good = [mesh.message(f"Good note number {n} about routing") for n in range(5)]
    bad_json = evolve(mesh.message("x"), body=b"{broken")
    empty = mesh.message("")
    blank = mesh.message("   ")
    posing = mesh.message("Credited to someone else", agent_id="someone-else")
    await mesh.publish([*good[:2], bad_json, *good[2:4], empty, posing, blank, good[4]])
    await eventually(lambda: mesh.settled(9), "every message settled")

    letters: list[DeadLetter] = []

    async def four_letters() -> bool:
        letters.extend(await mesh.bus.drain_dead_letters())
        return len(letters) >= 4

    await eventually(four_letters, "four dead letters")
    reasons = sorted(letter.reason for letter in letters)
    assert 4 == len(letters)
    assert "Forbidden" in reasons[0] and "someone-else" in reasons[0]
    assert "ValidationError: body" in reasons[1] and "not valid JSON" in reasons[1]
    assert "ValidationError: content" in reasons[2]
    assert "ValidationError: content" in reasons[3]
    assert sorted(m.message_id for m in good) == sorted(mesh.bus.settled("ack"))
    assert sorted(m.message_id for m in (bad_json, empty, blank, posing)) == sorted(
        mesh.bus.settled("reject")
    )
    assert (5, 5) == await mesh.rows()
    assert 5 == await mesh.authored()
    assert 1 == mesh.commits


async def test_a_batch_whose_commit_fails_is_retried_message_by_message(group_mesh: GroupMesh):
    """The batch's commit fails (a transient PersistenceFailed): each message is then
    carried out alone and stored exactly once, each acknowledged once, none dead."""
    mesh = group_mesh
    mesh.store.faults.fail_once("commit")
    messages = [mesh.message(f"Retried note {n} on storage arrays") for n in range(8)]
    await mesh.publish(messages)
    await eventually(lambda: mesh.settled(8), "every message settled")

    assert sorted(m.message_id for m in messages) == sorted(mesh.bus.settled("ack"))
    assert [] == await mesh.bus.drain_dead_letters()
    assert (8, 8) == await mesh.rows()
    assert 8 == await mesh.authored()
    assert 1 + 8 == mesh.commits  # the failed batch, then one per message


async def test_a_batch_redelivered_after_its_commit_writes_nothing_twice(
    gateway_group_mesh: GroupMesh,
):
    """Ten messages committed in a batch (one of them first carried out alone, as a
    service without batching would) come back with the same message ids, as after a
    crash before the acknowledgements: nothing is written twice, a replay commits
    nothing, each delivery is acknowledged; agents credited by the gateway keep their
    attribution."""
    mesh = gateway_group_mesh
    messages = [
        mesh.message(f"Redelivered note {n} about anycast", agent_id=f"agent-{n % 3}")
        for n in range(10)
    ]
    caller = Caller.of(mesh.login, mesh.service.settings.bus_principal(mesh.login))
    alone = StoreKnowledge(content="Redelivered note 0 about anycast", agent_id="agent-0")
    await handle(mesh.apollo.deps, caller, alone, idempotency_key=messages[0].message_id)
    await mesh.publish(messages)
    await eventually(lambda: mesh.settled(10), "the first deliveries settled")
    commits = mesh.commits

    await mesh.publish(messages)
    await eventually(lambda: mesh.settled(20), "the redeliveries settled")
    assert (10, 10) == await mesh.rows()
    assert sorted([m.message_id for m in messages] * 2) == sorted(mesh.bus.settled("ack"))
    assert commits == mesh.commits  # a replay commits nothing
    credited = 0
    async with mesh.apollo.store.unit_of_work() as uow:
        for agent in ("agent-0", "agent-1", "agent-2"):
            entries = await uow.entries.by_agent(agent)
            assert {mesh.login} == {e.owner_id for e in entries}
            assert {agent} == {e.source.agent_id for e in entries}
            credited += len(entries)
    assert 10 == credited


async def test_a_batch_answers_only_the_messages_that_asked_for_a_receipt(
    group_mesh: GroupMesh,
):
    """One commit for a batch mixing a write that asked for a receipt (a reply queue),
    writes that did not (no ``reply_to``) and one whose ``reply_to`` names the service's
    own ingest queue: every message is stored and acknowledged once, and the one that
    asked — only it — is answered with the batch's receipt."""
    mesh = group_mesh
    replies: list[tuple[Message, bytes]] = []

    async def recorded(request: Message, body: bytes) -> None:
        replies.append((request, body))

    mesh.bus.reply = recorded  # type: ignore[method-assign]
    asking = evolve(mesh.message("OSPF areas bound LSA flooding"), reply_to="amq.gen-asking")
    silent = [mesh.message(f"LACP bundles link {n} into one channel") for n in range(3)]
    hostile = evolve(
        mesh.message("MSTP maps VLANs to spanning tree instances"),
        reply_to=mesh.service.topology.ingest_queue,
    )
    batch = [silent[0], asking, silent[1], hostile, silent[2]]
    await mesh.publish(batch)
    await eventually(lambda: mesh.settled(5), "every message settled")

    assert sorted(m.message_id for m in batch) == sorted(mesh.bus.settled("ack"))
    assert (5, 5) == await mesh.rows()
    assert 1 == mesh.commits
    assert [asking.message_id] == [request.message_id for request, _ in replies]
    receipt = decode_reply(replies[0][1], Receipt)
    assert parse_token(receipt.causal_token) is not None


# ------------------------------------------------------------------------- write rate


@pytest.fixture
async def rated_mesh(transport: Transport) -> AsyncIterator[Mesh]:
    """A mesh whose principal may write five entries at once, then twenty a second; its
    bus dead-letters a message after two failed redeliveries."""
    async with open_mesh(transport, WriteRate(20, 5)) as opened:
        yield opened


async def test_writes_over_the_rate_are_delayed_and_all_stored_none_dead_lettered(
    rated_mesh: Mesh,
):
    """Thirty store_knowledge messages from one principal against a bucket of five: the
    five are stored at once, the rest delayed back onto the queue as the rate allows,
    however many times (far more than the two redeliveries after which a failing message
    is dead-lettered), until every one is stored, each once, and none dead-lettered."""
    mesh = rated_mesh
    contents = [f"worker {n} drains partition {n} of the orders topic" for n in range(30)]
    sent = await mesh.client.store_many([{"content": text, "tags": ["kafka"]} for text in contents])
    await eventually(lambda: mesh.at_least(30), "every message stored")
    await eventually(lambda: mesh.settled_acks(30), "every message acknowledged")

    delayed = mesh.service_bus.settled("delay")
    assert len(delayed) >= 25, "the bucket held five, so the rest waited at least once"
    assert max(delayed.count(m) for m in set(delayed)) > 2, "delays are not failed attempts"
    assert [] == mesh.service_bus.settled("reject")
    assert [] == mesh.service_bus.settled("retry")
    assert sorted(d.message_id for d in sent) == sorted(mesh.service_bus.settled("ack"))
    assert 30 == await mesh.total()
    assert [] == await mesh.service_bus.drain_dead_letters()
    budget = mesh.apollo.deps.write_budget
    assert budget is not None
    assert budget.outcomes()["limited"] == len(delayed)
