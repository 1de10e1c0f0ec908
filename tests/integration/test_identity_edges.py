"""One login, one source over the bus, on every transport (in process and RabbitMQ).

The service's gateways are restricted to a login no test publishes as, so the test's
login is a plain writer: what it writes in a payload (a GAS ``caller``, a ``reply_to``) or
leaves out (``user_id``) must not let it pose as anyone else.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from apollo_app import Apollo, RemoteClient
from apollo_app.entrypoints.service import ApolloService
from apollo_app.wire.envelope import encode_command, encode_gas_event
from apollo_app.wire.replies import encode_error_reply
from apollo_domain import commands as c
from apollo_domain.errors import NotFound
from apollo_domain.model import EvidenceKind
from apollo_domain.ports.messaging import Delivery, Message
from apollo_domain.results import QueryResult
from tests.integration import test_service_transports as transports
from tests.integration.test_service_transports import Mesh, Transport, eventually
from tests.support import SettlementRecorder

transport = transports.transport  # the fixture: each test runs on every transport

SERVICE_LOGIN = "apollo-service"
AGENT = "claude-mesh-1"


@asynccontextmanager
async def restricted_mesh(transport: Transport, **settings: Any) -> AsyncIterator[Mesh]:
    """A service whose only gateway is ``SERVICE_LOGIN`` (unless ``settings`` say
    otherwise), and a client of the transport's login (a plain writer)."""
    store = await transport.store()
    apollo = Apollo.with_store(store, closers=[store.close])
    service_bus = SettlementRecorder(await transport.service_bus())
    settings = {"gateway_users": frozenset({SERVICE_LOGIN}), **settings}
    service = ApolloService(apollo, service_bus, transport.settings(prefetch=8, **settings))
    await service.start()
    try:
        async with transport.client(AGENT) as client:
            yield Mesh(apollo, service, service_bus, client.bus, client, transport.login)
    finally:
        await service.stop()
        await apollo.close()


async def by_agent(mesh: Mesh, agent: str) -> list[str]:
    async with mesh.apollo.store.unit_of_work() as uow:
        return sorted(e.content for e in await uow.entries.by_agent(agent))


async def test_a_writers_gas_caller_credits_the_writer(transport: Transport):
    """A non-gateway login publishing a GAS event that names ``victim`` as its caller
    deposits as itself."""
    async with restricted_mesh(transport) as mesh:
        event = {
            "request_id": "r1",
            "response_content": "Posing as the victim through the audit exchange.",
            "caller": {"agent_id": "victim"},
        }
        topology = mesh.service.topology
        published = Message(topology.audit_routing_key, encode_gas_event(event), user_id=mesh.login)
        await mesh.client_bus.publish(published, exchange=topology.audit_exchange)
        await eventually(lambda: mesh.settled(1), "the event settled")

        assert [] == await by_agent(mesh, "victim")
        assert [event["response_content"]] == await by_agent(mesh, mesh.login)


async def test_a_message_without_user_id_is_refused_when_gateways_are_restricted(
    transport: Transport,
):
    """No broker-verified identity, no anonymous publishers allowed: dead-lettered as
    unauthenticated, nothing stored."""
    async with restricted_mesh(transport) as mesh:
        command = c.StoreKnowledge(content="who am I? nobody can tell")
        await mesh.client_bus.publish(
            Message(mesh.service.topology.ingest_queue, encode_command(command))
        )
        (letter,) = await eventually(lambda: mesh.dead_letters(1), "the message dead-lettered")

        assert "unauthenticated" in letter.reason
        assert 0 == (await mesh.apollo.stats()).total


async def test_allowed_anonymous_publishers_are_one_source(transport: Transport):
    """With anonymous publishers allowed, two anonymous messages of one text are one
    source: the second is a duplicate, never agreement, and confirms nothing; another
    principal's message id never makes an anonymous one "already applied"."""
    async with restricted_mesh(transport, allow_anonymous_publishers=True) as mesh:
        queue = mesh.service.topology.ingest_queue
        text = "Anonymous notes are one voice, however many times they are sent"
        body = encode_command(c.StoreKnowledge(content=text))
        await mesh.client_bus.publish(Message(queue, body, message_id="m-1", user_id=mesh.login))
        await mesh.client_bus.publish(Message(queue, body, message_id="m-1"))
        await mesh.client_bus.publish(Message(queue, body, message_id="m-2"))
        await eventually(lambda: mesh.settled(3), "the three messages settled")
        await mesh.apollo.check_corroboration()

        evidence = await mesh.apollo.get_evidence(await _entry_of(mesh, mesh.login))
        anonymous = [e for e in evidence if e.source.agent_id == "unknown"]
        assert 1 == len(anonymous), evidence  # the first anonymous message only
        assert EvidenceKind.AGREEMENT == anonymous[0].kind


async def _entry_of(mesh: Mesh, agent: str) -> Any:
    async with mesh.apollo.store.unit_of_work() as uow:
        (entry,) = await uow.entries.by_agent(agent)
    return entry.id


async def test_a_request_replying_into_a_service_queue_is_dead_lettered(transport: Transport):
    """A ``reply_to`` naming the ingest queue would make the service publish into its own
    queue as itself: the request is dead-lettered with the reason, nothing is published."""
    async with restricted_mesh(transport) as mesh:
        topology = mesh.service.topology
        request = Message(
            topology.query_queue,
            encode_command(c.QueryKnowledge(query="anything")),
            user_id=mesh.login,
            reply_to=topology.ingest_queue,
            correlation_id="c-1",
        )
        await mesh.client_bus.publish(request)
        (letter,) = await eventually(lambda: mesh.dead_letters(1), "the request dead-lettered")

        assert "not a reply queue" in letter.reason
        assert topology.query_queue == letter.queue


async def test_the_client_drops_a_forged_reply_and_takes_the_services(transport: Transport):
    """Whoever may read the query queue learns a request's reply queue and correlation id;
    its reply (no service login) is dropped, and the client takes the service's answer."""
    store = await transport.store()
    apollo = Apollo.with_store(store, closers=[store.close])
    service_bus = await transport.service_bus()
    topology = transport.topology
    read: asyncio.Queue[Message] = asyncio.Queue()

    async def eavesdrop(delivery: Delivery) -> None:
        await delivery.ack()
        await read.put(delivery.message)

    forger = await service_bus.consume(topology.query_queue, eavesdrop)
    service = ApolloService(apollo, service_bus, transport.settings())
    try:
        async with transport.client(AGENT) as client:
            asking = asyncio.ensure_future(client.query_knowledge("anything", min_confidence=0))
            request = await asyncio.wait_for(read.get(), 30)
            await forger.cancel()
            assert request.reply_to is not None
            forged = Message(
                request.reply_to,
                encode_error_reply(NotFound("forged: the store is gone")),
                correlation_id=request.correlation_id,
            )
            await client.bus.publish(forged, exchange="")
            await service.start()
            await service_bus.publish(
                Message(
                    topology.query_queue,
                    request.body,
                    user_id=request.user_id,
                    reply_to=request.reply_to,
                    correlation_id=request.correlation_id,
                )
            )
            result = await asyncio.wait_for(asking, 30)
        assert isinstance(result, QueryResult)
    finally:
        await service.stop()
        await apollo.close()


async def test_a_gateway_cannot_credit_a_reserved_agent_and_metadata_is_the_services(
    transport: Transport,
):
    """Under the default (every login a gateway), a message crediting ``redacted`` is
    dead-lettered naming agent_id; a message's submitted_by/submitted_from are replaced by
    the login and ``amqp``."""
    async with restricted_mesh(transport, gateway_users=None) as mesh:
        queue = mesh.service.topology.ingest_queue
        forged = c.StoreKnowledge(content="credited to the erased", agent_id="redacted")
        await mesh.client_bus.publish(Message(queue, encode_command(forged), user_id=mesh.login))
        (letter,) = await eventually(lambda: mesh.dead_letters(1), "the message dead-lettered")
        assert "agent_id" in letter.reason

        claimed = c.StoreKnowledge(
            content="sent by the board", submitted_by="the-ceo", submitted_from="board-room"
        )
        await mesh.client_bus.publish(Message(queue, encode_command(claimed), user_id=mesh.login))
        await eventually(lambda: mesh.at_least(1), "the message stored")
        source = (await mesh.apollo.get_entry(await _entry_of(mesh, mesh.login))).source
        assert (mesh.login, "amqp") == (source.submitted_by, source.submitted_from)


async def test_a_client_naming_no_agent_is_credited_as_its_login(transport: Transport):
    """Client mode without an agent id sends none (``unknown`` is Apollo's own, refused
    as a source): the service credits the login."""
    async with restricted_mesh(transport, gateway_users=None) as mesh:
        client = RemoteClient(mesh.client_bus, rpc_timeout=30)
        await client.store_knowledge(content="Sent without naming an agent")
        await eventually(lambda: mesh.at_least(1), "the message stored")
        assert ["Sent without naming an agent"] == await by_agent(mesh, mesh.login)
