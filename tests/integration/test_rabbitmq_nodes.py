"""Node lists against a real RabbitMQ: the first node that answers, the next one after a
lost connection, requests in flight failed, and no password in any error."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from uuid import uuid4

import pytest
from yarl import URL

from apollo_adapters.rabbitmq import AiormqBus
from apollo_domain.errors import RpcTimeout, TransportError
from apollo_domain.ports.messaging import Delivery, Message
from apollo_domain.ports.topology import Topology
from tests.environ import without_apollo_settings
from tests.postgres_support import PostgresTestServer
from tests.rabbitmq_support import close_connection_named
from tests.service_processes import SOURCES, service_environment

pytestmark = pytest.mark.rabbitmq

PATIENCE = 20.0


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def named(url: str, name: str) -> str:
    """``url`` whose connection the broker lists under ``name``."""
    return str(URL(url).update_query(name=name))


def down(url: str, password: str) -> str:
    """A node of ``url``'s login, with ``password``, on a port nothing answers."""
    return str(URL(url).with_port(closed_port()).with_password(password))


async def test_a_list_connects_to_the_first_node_that_answers(
    rabbitmq_url: str, topology: Topology
) -> None:
    """The first node is a closed port: the bus connects to the second and works."""
    first = down(rabbitmq_url, "first-secret")
    bus = await AiormqBus.connect(f"{first},{rabbitmq_url}", topology=topology)
    received: asyncio.Queue[bytes] = asyncio.Queue()

    async def collect(delivery: Delivery) -> None:
        await delivery.ack()
        await received.put(delivery.message.body)

    try:
        await bus.consume(topology.ingest_queue, collect)
        await bus.publish(Message(topology.ingest_queue, b"through the second node"))
        async with asyncio.timeout(PATIENCE):
            body = await received.get()
        node, connected = bus.node, bus.connected
    finally:
        await bus.close()

    assert b"through the second node" == body
    assert str(URL(rabbitmq_url).with_user(None)) == node
    assert connected
    assert not bus.connected


async def test_no_node_answering_is_one_error_naming_each_without_its_password() -> None:
    nodes = [down("amqp://apollo@127.0.0.1/", f"secret-{n}") for n in range(3)]

    with pytest.raises(TransportError) as refused:
        await AiormqBus.connect(",".join(nodes))

    text = str(refused.value)
    assert "no RabbitMQ node answered" in text
    for node in nodes:
        assert str(URL(node).with_user(None)) in text
    assert "secret" not in text


async def test_a_lost_connection_moves_to_the_next_node_and_consuming_resumes(
    rabbitmq_url: str, topology: Topology
) -> None:
    """Two nodes (one broker, two connection names): when the broker closes the first
    connection, the bus reconnects through the second, counts the reconnect, and its
    consumer gets what is published next."""
    first, second = (named(rabbitmq_url, f"apollo-test-{uuid4().hex[:8]}") for _ in "ab")
    bus = await AiormqBus.connect(
        f"{first},{second}", topology=topology, reconnect_timeout=PATIENCE
    )
    received: asyncio.Queue[bytes] = asyncio.Queue()

    async def collect(delivery: Delivery) -> None:
        await delivery.ack()
        await received.put(delivery.message.body)

    try:
        await bus.consume(topology.ingest_queue, collect)
        assert str(URL(first).with_user(None)) == bus.node
        assert close_connection_named(URL(first).query["name"]), "rabbitmqctl is needed"

        await bus.publish(Message(topology.ingest_queue, b"after"))
        async with asyncio.timeout(PATIENCE):
            body = await received.get()
        node, reconnects = bus.node, bus.reconnects
    finally:
        await bus.close()

    assert b"after" == body
    assert str(URL(second).with_user(None)) == node
    assert 1 == reconnects


async def test_a_request_in_flight_fails_with_a_transport_error_when_the_connection_drops(
    rabbitmq_url: str, topology: Topology
) -> None:
    """Its reply queue went with the connection: the request fails at once with a
    TransportError (not an RPC timeout); the caller decides whether to ask again."""
    name = f"apollo-test-{uuid4().hex[:8]}"
    bus = await AiormqBus.connect(
        named(rabbitmq_url, name), topology=topology, reconnect_timeout=PATIENCE
    )
    arrived = asyncio.Event()

    async def hold(delivery: Delivery) -> None:  # never answers
        arrived.set()
        await delivery.ack()

    try:
        await bus.consume(topology.query_queue, hold)
        asking = asyncio.ensure_future(
            bus.request(Message(topology.query_queue, b"ping"), timeout=PATIENCE * 10)
        )
        async with asyncio.timeout(PATIENCE):
            await arrived.wait()
        assert close_connection_named(name), "rabbitmqctl is needed"
        async with asyncio.timeout(PATIENCE):
            with pytest.raises(TransportError) as failed:
                await asking
    finally:
        await bus.close()

    assert not isinstance(failed.value, RpcTimeout)
    assert "lost before the reply" in str(failed.value)


@pytest.mark.postgres
async def test_apollo_serve_names_every_node_it_could_not_reach_without_a_password(
    postgres_server: PostgresTestServer,
) -> None:
    """``apollo serve`` with a list of three nodes that all refuse: exit code 1 and one
    error line naming each node by address; no password of any node in its output."""
    nodes = [down("amqp://apollo@127.0.0.1/", f"node-secret-{n}") for n in range(3)]
    database = await postgres_server.create_database(dimension=384)
    environ = service_environment(
        amqp_url=",".join(nodes),
        database_url=postgres_server.conninfo(database),
        http_enabled="false",
    )
    environ = without_apollo_settings() | environ
    environ["PYTHONPATH"] = os.pathsep.join([SOURCES, *filter(None, [environ.get("PYTHONPATH")])])
    try:
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "apollo_app.cli", "serve"],
            capture_output=True,
            text=True,
            env=environ,
            timeout=120,
            check=False,
        )
    finally:
        await postgres_server.drop_database(database)

    errors = [line for line in done.stderr.splitlines() if "no RabbitMQ node answered" in line]
    assert 1 == done.returncode, done.stderr
    assert 1 == len(errors), done.stderr
    for node in nodes:
        assert str(URL(node).with_user(None)) in errors[0]
    assert "node-secret" not in done.stderr + done.stdout
