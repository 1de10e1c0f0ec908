"""Who a message speaks for, over a real RabbitMQ broker.

The broker verifies ``user_id`` against the connection's login. The identity header the
bus puts on its own retries is honoured only while the bus's login is a gateway
(``APOLLO_GATEWAY_USERS``); payload agent ids are accepted only from gateways.
"""

from __future__ import annotations

import asyncio

import pytest

from apollo_adapters.rabbitmq import AiormqBus
from apollo_app import Apollo, Settings
from apollo_app.entrypoints.service import ApolloService
from apollo_app.wire.envelope import encode_command
from apollo_domain.commands import StoreKnowledge
from apollo_domain.ports.messaging import DeadLetter, Delivery, Message
from apollo_domain.ports.topology import Topology

pytestmark = pytest.mark.rabbitmq
PATIENCE = 20.0


async def _identity_seen(url: str, topology: Topology, gateways: frozenset[str] | None) -> str:
    """Publish, as this login, a message claiming to be alice; the identity the consumer
    sees."""
    bus = await AiormqBus.connect(url, topology=topology, gateway_users=gateways)
    seen: asyncio.Queue[str | None] = asyncio.Queue()

    async def record(delivery: Delivery) -> None:
        await delivery.ack()
        await seen.put(delivery.message.user_id)

    try:
        await bus.consume(topology.ingest_queue, record)
        await bus.publish(
            Message(
                topology.ingest_queue,
                b"{}",
                user_id=bus.login,
                headers={"x-apollo-user-id": "alice"},
            )
        )
        async with asyncio.timeout(PATIENCE):
            identity = await seen.get()
    finally:
        await bus.close()
    assert identity is not None
    return identity


async def test_the_identity_header_is_ignored_unless_the_login_is_a_gateway(
    rabbitmq_url: str, topology: Topology
):
    """With gateways listed and this login not among them, a message claiming another
    principal in the header speaks for its broker-verified login only."""
    probe = await AiormqBus.connect(rabbitmq_url, topology=topology)
    name = probe.login
    await probe.close()
    assert name == await _identity_seen(rabbitmq_url, topology, frozenset({"apollo-service"}))


async def test_every_login_is_a_gateway_by_default(rabbitmq_url: str, topology: Topology):
    """The seed's shared-transport default (every user a gateway) honours the header."""
    assert "alice" == await _identity_seen(rabbitmq_url, topology, None)


async def test_a_non_gateway_cannot_credit_another_agent(rabbitmq_url: str, topology: Topology):
    """A payload agent id from a user that is not a gateway is dead-lettered as forbidden
    on its first delivery, and nothing is stored."""
    settings = Settings(embedder="hashing", gateway_users=frozenset({"apollo-service"}))
    bus = await AiormqBus.connect(rabbitmq_url, topology=topology, max_redeliveries=2)
    async with Apollo.in_memory() as apollo:
        service = ApolloService(apollo, bus, settings, topology=topology)
        try:
            await service.start()
            forged = StoreKnowledge(content="posing as another agent", agent_id="claude-9")
            await bus.publish(
                Message(topology.ingest_queue, encode_command(forged), user_id=bus.login)
            )
            letters: list[DeadLetter] = []
            async with asyncio.timeout(PATIENCE):
                while not letters:
                    letters = await bus.drain_dead_letters()
                    await asyncio.sleep(0.05)  # polling the dead-letter queue, not a race
        finally:
            await service.stop()
            await bus.close()
        (letter,) = letters
        assert "Forbidden" in letter.reason
        assert 1 == letter.message.delivery_count
        assert 0 == (await apollo.stats()).total
