"""``/health`` and ``/metrics`` follow the service's RabbitMQ connection: degraded (503,
so a load balancer stops sending work) while it is lost, ok again once re-established."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import uuid4

import httpx
import pytest
from yarl import URL

from apollo_adapters.rabbitmq import AiormqBus
from apollo_app import Apollo
from apollo_app.entrypoints.http import create_app
from apollo_app.metrics import Metrics
from apollo_domain.ports.messaging import BrokerLink, Delivery, Message
from apollo_domain.ports.topology import Topology
from tests.rabbitmq_support import close_connection_named

pytestmark = pytest.mark.rabbitmq

PATIENCE = 20.0
HEALTH = "/api/apollo/health"


def broker_lines(metrics: Metrics) -> list[str]:
    return [
        line
        for line in metrics.render()[0].decode().splitlines()
        if line.startswith("apollo_broker_")
    ]


async def test_health_is_degraded_while_the_broker_connection_is_lost(
    rabbitmq_url: str, topology: Topology
) -> None:
    name = f"apollo-test-{uuid4().hex[:8]}"
    node = str(URL(rabbitmq_url).update_query(name=name))
    bus = await AiormqBus.connect(node, topology=topology, reconnect_timeout=PATIENCE)
    assert isinstance(bus, BrokerLink)
    # Hold the reconnect until the test has seen the degraded state.
    may_reconnect = asyncio.Event()
    reconnecting = asyncio.Event()
    connect = bus._connect

    async def held(first: int) -> Any:
        reconnecting.set()
        await may_reconnect.wait()
        return await connect(first)

    metrics = Metrics()
    try:
        async with Apollo.in_memory() as apollo:
            app = create_app(apollo, metrics=metrics, broker=bus)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
                before = await http.get(HEALTH)
                await http.get("/metrics")
                connected_lines = broker_lines(metrics)

                bus._connect = held  # type: ignore[method-assign]
                assert close_connection_named(name), "rabbitmqctl is needed"
                async with asyncio.timeout(PATIENCE):
                    await reconnecting.wait()
                lost = await http.get(HEALTH)
                await http.get("/metrics")
                lost_lines = broker_lines(metrics)

                may_reconnect.set()
                async with asyncio.timeout(PATIENCE):
                    await bus._live_connection(after_generation=1)
                after = await http.get(HEALTH)
                await http.get("/metrics")
                after_lines = broker_lines(metrics)
    finally:
        await bus.close()

    address = str(URL(node).with_user(None))
    ok = {"status": "ok", "data_available": True, "bus": "ok"}
    degraded = {"status": "degraded", "data_available": True, "bus": "degraded"}
    assert (200, ok) == (before.status_code, before.json())
    assert (503, degraded) == (lost.status_code, lost.json())
    assert (200, ok) == (after.status_code, after.json())
    assert f'apollo_broker_connected{{node="{address}"}} 1.0' in connected_lines
    assert "apollo_broker_reconnects 0.0" in connected_lines
    assert f'apollo_broker_connected{{node="{address}"}} 0.0' in lost_lines
    assert f'apollo_broker_connected{{node="{address}"}} 1.0' in after_lines
    assert "apollo_broker_reconnects 1.0" in after_lines
    for lines in (connected_lines, lost_lines, after_lines):
        assert 'apollo_broker_redeliveries_total{cause="returned"} 0.0' in lines
        assert 'apollo_broker_redeliveries_total{cause="retried"} 0.0' in lines
    assert not any("guest" in line for line in connected_lines + lost_lines + after_lines)


async def test_health_without_a_broker_says_nothing_of_a_bus() -> None:
    """The in-process bus has no connection to lose: the body is the store's alone."""
    async with Apollo.in_memory() as apollo:
        transport = httpx.ASGITransport(app=create_app(apollo))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            response = await http.get(HEALTH)
    assert {"status": "ok", "data_available": True} == response.json()


async def test_metrics_count_redeliveries_by_cause(rabbitmq_url: str, topology: Topology) -> None:
    """A message whose consumer's connection is lost before it settled comes back with the
    broker's redelivered flag (``returned``); one whose handler failed comes back as the
    bus's retry copy (``retried``). First deliveries count nothing."""
    name = f"apollo-test-{uuid4().hex[:8]}"
    bus = await AiormqBus.connect(
        str(URL(rabbitmq_url).update_query(name=name)),
        topology=topology,
        reconnect_timeout=PATIENCE,
        retry_backoff=lambda attempt: 0.0,
    )
    metrics = Metrics()
    metrics.watch_broker(bus)
    held, release, done = asyncio.Event(), asyncio.Event(), asyncio.Event()
    acked: set[bytes] = set()

    async def handler(delivery: Delivery) -> None:
        message = delivery.message
        if message.body == b"held" and not message.redelivered:
            held.set()
            await release.wait()  # its connection is gone by then: the ack cannot go
        elif message.body == b"fails" and not message.redelivered:
            raise RuntimeError("a handler that fails once")
        await delivery.ack()
        acked.add(message.body)
        if {b"fine", b"held", b"fails"} <= acked:
            done.set()

    try:
        await bus.consume(topology.ingest_queue, handler)
        await bus.publish(Message(topology.ingest_queue, b"fine"))
        await bus.publish(Message(topology.ingest_queue, b"held"))
        async with asyncio.timeout(PATIENCE):
            await held.wait()
        assert close_connection_named(name), "rabbitmqctl is needed"
        await bus.publish(Message(topology.ingest_queue, b"fails"))
        async with asyncio.timeout(PATIENCE):
            await done.wait()
        lines = broker_lines(metrics)
        counted = bus.redeliveries
    finally:
        release.set()
        await bus.close()

    assert {"returned": 1, "retried": 1} == counted
    assert 'apollo_broker_redeliveries_total{cause="returned"} 1.0' in lines
    assert 'apollo_broker_redeliveries_total{cause="retried"} 1.0' in lines
