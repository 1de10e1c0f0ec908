"""Apollo's topology and the bus's reconnects, against a real RabbitMQ broker."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any
from uuid import uuid4

import aiormq
import pytest
from yarl import URL

from apollo_adapters.rabbitmq import AiormqBus, declare_topology
from apollo_adapters.rabbitmq import topology as rabbitmq_topology
from apollo_domain.errors import TransportError
from apollo_domain.ports.messaging import Delivery, Message
from apollo_domain.ports.topology import Topology
from tests.environ import without_apollo_settings
from tests.postgres_support import PostgresTestServer
from tests.rabbitmq_support import (
    close_connection_named,
    delete_topology,
    list_bindings,
    list_queue_types,
    start_test_broker,
)

pytestmark = pytest.mark.rabbitmq

PATIENCE = 20.0


async def snapshot(channel: aiormq.abc.AbstractChannel, topology: Topology) -> dict[str, int]:
    """Passive declares: every exchange must exist; each queue's message count."""
    for exchange in topology.exchanges:
        await channel.exchange_declare(exchange.name, exchange_type=exchange.type, passive=True)
    counts = {}
    for queue in topology.queues:
        declared = await channel.queue_declare(queue.name, passive=True)
        counts[queue.name] = declared.message_count or 0
    return counts


def bindings_of(vhost: str, topology: Topology) -> set[tuple[str, str, str]] | None:
    listed = list_bindings(vhost)
    if listed is None:
        return None
    names = {queue.name for queue in topology.queues}
    return {binding for binding in listed if binding[1] in names}


async def test_declaring_twice_changes_nothing_and_keeps_every_binding(
    rabbitmq_url: str, topology: Topology
) -> None:
    expected = {(b.exchange, b.queue, b.routing_key) for b in topology.bindings}
    vhost = start_test_broker().vhost
    async with aiormq.connect(rabbitmq_url) as connection:
        channel = await connection.channel()
        await declare_topology(channel, topology)
        await channel.basic_publish(
            b"kept",
            exchange=topology.exchange,
            routing_key=topology.ingest_queue,
            properties=aiormq.spec.Basic.Properties(delivery_mode=2),
        )
        before = await snapshot(channel, topology)
        bound_before = bindings_of(vhost, topology) if vhost else None

        await declare_topology(channel, topology)

        after = await snapshot(channel, topology)
        bound_after = bindings_of(vhost, topology) if vhost else None
        routed = await channel.basic_publish(
            b"audit",
            exchange=topology.audit_exchange,
            routing_key=topology.audit_routing_key,
            mandatory=True,
        )

    assert before == after
    assert after[topology.ingest_queue] == 1
    assert isinstance(routed, aiormq.spec.Basic.Ack)
    if vhost is not None:
        assert bound_before == bound_after == expected


async def test_production_bindings_are_the_documented_ones() -> None:
    """The default names, exchanges and routing keys of the RabbitMQ topology."""
    topology = Topology()

    assert {(b.exchange, b.queue, b.routing_key) for b in topology.bindings} == {
        ("legion.apollo", "legion.apollo.ingest", "legion.apollo.ingest"),
        ("legion.apollo", "legion.apollo.query", "legion.apollo.query"),
        ("legion.apollo", "legion.apollo.writeback.store", "legion.apollo.writeback.store"),
        (
            "legion.apollo",
            "legion.apollo.writeback.vectorize",
            "legion.apollo.writeback.vectorize",
        ),
        ("llm.audit", "legion.apollo.gas", "llm.audit.complete"),
        ("legion.apollo.dlx", "legion.apollo.dead", ""),
    }
    assert {(e.name, e.type) for e in topology.exchanges} == {
        ("legion.apollo", "direct"),
        ("llm.audit", "topic"),
        ("legion.apollo.dlx", "fanout"),
    }
    assert {q.name for q in topology.queues if q.dead_letter_exchange} == {
        "legion.apollo.ingest",
        "legion.apollo.query",
        "legion.apollo.writeback.store",
        "legion.apollo.writeback.vectorize",
        "legion.apollo.gas",
    }


async def test_a_conflicting_existing_queue_is_a_transport_error(
    rabbitmq_url: str, topology: Topology
) -> None:
    """A queue declared earlier without the dead-letter exchange cannot be taken over."""
    async with aiormq.connect(rabbitmq_url) as connection:
        channel = await connection.channel()
        await channel.queue_declare(topology.ingest_queue, durable=True)
        with pytest.raises(TransportError, match="PRECONDITION_FAILED"):
            await declare_topology(await connection.channel(), topology)


@pytest.mark.parametrize("queue_type", ["quorum", "classic"])
async def test_every_durable_queue_is_declared_with_the_queue_type(
    rabbitmq_url: str, topology: Topology, queue_type: str
) -> None:
    """Each of Apollo's queues is of the type asked for (quorum unless told otherwise);
    the bus's reply queue stays an exclusive classic one."""
    vhost = start_test_broker().vhost
    assert vhost is not None, "the test broker has no vhost of its own to list"
    bus = await AiormqBus.connect(
        rabbitmq_url,
        topology=topology,
        **({} if queue_type == "quorum" else {"queue_type": queue_type}),
    )
    try:
        listed = list_queue_types(vhost)
    finally:
        await bus.close()

    assert listed is not None
    assert {queue.name: queue_type for queue in topology.queues} == {
        queue.name: listed.get(queue.name) for queue in topology.queues
    }
    assert {"classic"} == {kind for name, kind in listed.items() if name.startswith("amq.gen-")}


@pytest.mark.parametrize(("existing", "asked"), [("classic", "quorum"), ("quorum", "classic")])
async def test_a_queue_of_the_other_type_is_refused_in_one_line_naming_the_settings(
    rabbitmq_url: str, topology: Topology, existing: str, asked: str
) -> None:
    """A topology declared with one queue type cannot be taken over with the other: a
    TransportError of one line saying which settings to change, not a broker stack."""
    first = await AiormqBus.connect(rabbitmq_url, topology=topology, queue_type=existing)
    await first.close()

    with pytest.raises(TransportError) as refused:
        await AiormqBus.connect(rabbitmq_url, topology=topology, queue_type=asked)

    text = str(refused.value)
    assert "\n" not in text
    assert "APOLLO_QUEUE_TYPE" in text
    assert "APOLLO_QUEUE_PREFIX" in text
    assert repr(topology.ingest_queue) in text
    assert refused.value.__cause__ is None


async def test_a_quorum_queue_dead_letters_a_message_its_consumers_keep_losing(
    rabbitmq_url: str, topology: Topology, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker's delivery limit: a message handed out and returned by lost consumers
    once more than the limit is dead-lettered (at least once) with reason delivery_limit,
    and the bus reads it from the dead-letter queue like its own dead letters."""
    monkeypatch.setattr(rabbitmq_topology, "QUORUM_DELIVERY_LIMIT", 1)
    bus = await AiormqBus.connect(rabbitmq_url, topology=topology)
    try:
        await bus.publish(Message(topology.ingest_queue, b"poison", message_id="poison"))
        handed_out = 0
        async with aiormq.connect(rabbitmq_url) as connection, asyncio.timeout(PATIENCE):
            while handed_out < 2:  # a returned message may take a moment to be back
                channel = await connection.channel()
                got = await channel.basic_get(topology.ingest_queue, no_ack=False)
                if isinstance(got.delivery, aiormq.spec.Basic.GetOk):
                    handed_out += 1
                await channel.close()  # the consumer is lost: the message goes back
        async with asyncio.timeout(PATIENCE):
            letters = await bus.drain_dead_letters()
            while not letters:
                letters = await bus.drain_dead_letters()
    finally:
        await bus.close()

    assert 2 == handed_out
    assert [("poison", "delivery_limit", topology.ingest_queue)] == [
        (letter.message.message_id, letter.reason, letter.queue) for letter in letters
    ]


async def test_an_unreachable_broker_is_a_transport_error() -> None:
    with pytest.raises(TransportError):
        await AiormqBus.connect("amqp://guest:guest@127.0.0.1:1/")


async def test_wrong_credentials_are_a_transport_error(rabbitmq_url: str) -> None:
    url = str(URL(rabbitmq_url).with_user("apollo-nobody").with_password("wrong"))
    with pytest.raises(TransportError):
        await AiormqBus.connect(url)


async def test_publish_and_consume_continue_after_the_connection_is_dropped(
    rabbitmq_url: str, topology: Topology
) -> None:
    name = f"apollo-test-{uuid4().hex[:8]}"
    bus = await AiormqBus.connect(
        str(URL(rabbitmq_url).update_query(name=name)),
        topology=topology,
        reconnect_timeout=PATIENCE,
    )
    received: asyncio.Queue[bytes] = asyncio.Queue()

    async def collect(delivery: Delivery) -> None:
        # acknowledged before it is reported: the connection may be dropped as soon as the
        # test sees the message, and an unacknowledged one would come back
        await delivery.ack()
        await received.put(delivery.message.body)

    async def answer(delivery: Delivery) -> None:
        await bus.reply(delivery.message, b"pong")
        await delivery.ack()

    try:
        await bus.consume(topology.ingest_queue, collect)
        await bus.consume(topology.query_queue, answer)
        await bus.publish(Message(topology.ingest_queue, b"before"))
        async with asyncio.timeout(PATIENCE):
            assert await received.get() == b"before"

        if not close_connection_named(name):
            # Without rabbitmqctl: cut the connection from the client side.
            await bus._connection.close(ConnectionResetError("connection dropped"))  # type: ignore[union-attr]

        await bus.publish(Message(topology.ingest_queue, b"after"))
        async with asyncio.timeout(PATIENCE):
            assert await received.get() == b"after"
        reply = await bus.request(Message(topology.query_queue, b"ping"), timeout=PATIENCE)
        assert reply.body == b"pong"
    finally:
        await bus.close()


async def test_publish_many_publishes_the_unconfirmed_again_after_a_lost_connection(
    rabbitmq_url: str, topology: Topology
) -> None:
    """The connection drops when the 40th of 100 publishes starts (16 in flight at once):
    publish_many reconnects and publishes every unconfirmed message again, in order and with
    its id, so each arrives at least once and first arrivals keep the order given."""
    bus = await AiormqBus.connect(
        rabbitmq_url, topology=topology, reconnect_timeout=PATIENCE, publish_window=16
    )
    reader = await AiormqBus.connect(rabbitmq_url, topology=topology)
    sent = [
        Message(topology.ingest_queue, f"m{n}".encode(), message_id=f"id-{n}") for n in range(100)
    ]
    arrived: list[str] = []
    everything = asyncio.Event()

    async def collect(delivery: Delivery) -> None:
        await delivery.ack()
        arrived.append(delivery.message.message_id)
        if {m.message_id for m in sent} <= set(arrived):
            everything.set()

    publish_once = bus._publish_once
    started = 0

    async def drop_at_the_40th(*args: Any, **kwargs: Any) -> None:
        nonlocal started
        started += 1
        if started == 40:
            await bus._connection.close(ConnectionResetError("connection dropped"))  # type: ignore[union-attr]
        await publish_once(*args, **kwargs)

    bus._publish_once = drop_at_the_40th  # type: ignore[method-assign]
    try:
        await reader.consume(topology.ingest_queue, collect, prefetch=1)
        await bus.publish_many(sent)
        async with asyncio.timeout(PATIENCE):
            await everything.wait()
    finally:
        await bus.close()
        await reader.close()

    assert started > len(sent), "the drop interrupted nothing"
    assert [m.message_id for m in sent] == list(dict.fromkeys(arrived))


@pytest.mark.postgres
async def test_apollo_serve_stops_in_one_line_on_queues_of_the_other_type(
    rabbitmq_url: str, postgres_server: PostgresTestServer
) -> None:
    """``apollo serve`` (quorum by default) on a topology declared with classic queues:
    exit code 1 and one line on stderr naming both settings, no traceback."""
    prefix = f"apollo-test-{uuid4().hex[:8]}."
    topology = Topology().with_prefix(prefix)
    first = await AiormqBus.connect(rabbitmq_url, topology=topology, queue_type="classic")
    await first.close()
    database = await postgres_server.create_database(dimension=384)
    environ = without_apollo_settings()
    environ.update(
        APOLLO_AMQP_URL=rabbitmq_url,
        APOLLO_DATABASE_URL=postgres_server.conninfo(database),
        APOLLO_EXCHANGE=topology.exchange,
        APOLLO_QUEUE_PREFIX=prefix + "legion.apollo",
        APOLLO_AUDIT_EXCHANGE=topology.audit_exchange,
        APOLLO_HTTP_ENABLED="false",
    )
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
        await delete_topology(rabbitmq_url, topology)
        await postgres_server.drop_database(database)

    lines = done.stderr.strip().splitlines()
    assert 1 == done.returncode, done.stderr
    assert "Traceback" not in done.stderr
    assert 1 == len([line for line in lines if "APOLLO_QUEUE_TYPE" in line]), done.stderr
    assert "APOLLO_QUEUE_PREFIX" in lines[-1]
    assert "guest" not in done.stderr
