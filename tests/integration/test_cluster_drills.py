"""Drills on a three-node RabbitMQ cluster (``tests/rabbitmq_cluster.py``) with quorum
queues: run with ``pytest -m rabbitmq_cluster --rabbitmq-cluster``.

The service runs in this process on a fresh PostgreSQL database, connected through a node
list; a client-mode publisher is connected through another node. Midway through the
ingests, the node leading the ingest queue is stopped: every message the broker confirmed
is stored exactly once (one entry and one ingest access-log row each), and both sides
carry on through the other nodes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from uuid import uuid4

import psycopg
import pytest

from apollo_adapters.rabbitmq import AiormqBus
from apollo_app import Apollo, RemoteClient, Settings
from apollo_app.entrypoints.service import ApolloService
from apollo_domain.errors import TransportError
from apollo_domain.topology import Topology
from tests.postgres_support import PostgresTestServer, fresh_store, scalar
from tests.rabbitmq_cluster import Cluster, running_cluster
from tests.rabbitmq_support import ready_messages
from tests.support import eventually_within, fast_retry

pytestmark = [pytest.mark.rabbitmq_cluster, pytest.mark.rabbitmq, pytest.mark.postgres]

TOTAL = 1_000
BATCH = 100
STOP_AFTER = 300  # confirmed messages before the leader is stopped
PATIENCE = 120.0  # a loaded machine: generous, only a hang fails it


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with running_cluster(3) as started:
        yield started


async def test_stopping_the_ingest_queues_leader_loses_no_confirmed_message(
    cluster: Cluster, postgres_server: PostgresTestServer
) -> None:
    topology = Topology().with_prefix(f"drill{uuid4().hex[:6]}.")
    first, second, third = cluster.nodes
    store = await fresh_store(postgres_server, dimension=384)
    apollo = Apollo.with_store(store, closers=[store.close])
    service_bus = await AiormqBus.connect(
        ",".join(node.url for node in (first, second, third)),
        topology=topology,
        retry_backoff=fast_retry,
        reconnect_timeout=PATIENCE,
        publish_timeout=10.0,  # also bounds an acknowledgement
    )
    prefix = topology.exchange.removesuffix(Topology().exchange)
    settings = Settings(
        exchange=prefix + "legion.apollo",
        queue_prefix=prefix + "legion.apollo",
        audit_exchange=prefix + "llm.audit",
        prefetch=32,
        outbox_workers=0,
    )
    service = ApolloService(apollo, service_bus, settings, topology=topology)
    client_bus = await AiormqBus.connect(
        ",".join(node.url for node in (second, third, first)),
        topology=topology,
        reconnect_timeout=PATIENCE,
        publish_timeout=PATIENCE,
    )
    client = RemoteClient(client_bus, agent_id="claude-drill-1")
    leader = await asyncio.to_thread(cluster.leader_of, topology.ingest_queue)
    confirmed: list[str] = []
    failed = 0
    try:
        await service.start()
        for start in range(0, TOTAL, BATCH):
            if len(confirmed) >= STOP_AFTER and leader.running:
                # Between two batches, while the service works through the queue.
                await asyncio.to_thread(cluster.stop, leader)
            items = [
                {"content": f"Drill observation {n}: host {uuid4().hex}", "tags": ["drill"]}
                for n in range(start, start + BATCH)
            ]
            try:
                await client.store_many(items)
            except TransportError:
                failed += len(items)  # not confirmed: may or may not be stored
            else:
                confirmed.extend(item["content"] for item in items)
        survivor = next(node for node in cluster.nodes if node.running)

        async def drained() -> bool:
            stored = await scalar(store.conninfo, "SELECT count(*) FROM entries")
            waiting = await ready_messages(survivor.url, topology.ingest_queue)
            return stored >= len(confirmed) and waiting == 0

        await eventually_within(PATIENCE, drained, "every confirmed ingest stored")
        await service.stop()
        async with await psycopg.AsyncConnection.connect(store.conninfo) as conn:
            cursor = await conn.execute("SELECT content FROM entries")
            contents = [row[0] for row in await cursor.fetchall()]
        ingests = await scalar(
            store.conninfo, "SELECT count(*) FROM access_log WHERE action = 'ingest'"
        )
        dead = await client_bus.drain_dead_letters()
        reconnects = (service_bus.reconnects, client_bus.reconnects)
    finally:
        await service.stop()
        await service_bus.close()
        await client_bus.close()
        await apollo.close()

    assert not leader.running, "the leader was never stopped"
    assert len(confirmed) > STOP_AFTER + BATCH, "nothing was confirmed after the stop"
    assert set(confirmed) <= set(contents), "a confirmed message was lost"
    assert len(contents) == len(set(contents)), "a message was stored twice"
    assert len(contents) == ingests
    assert [] == dead
    assert sum(reconnects) >= 1, reconnects
    print(  # the drill's counts, for the record (pytest -s)
        f"sent {TOTAL}, confirmed {len(confirmed)}, unconfirmed {failed}, stored"
        f" {len(contents)}, duplicates {len(contents) - len(set(contents))},"
        f" reconnects (service, client) {reconnects}"
    )


def test_the_drill_cluster_is_three_nodes_apart_from_the_machines_broker(
    cluster: Cluster,
) -> None:
    """Three nodes of one cluster, none of them the machine's own rabbit@ node (asked of a
    running one: a drill may have stopped another)."""
    running = next(node for node in cluster.nodes if node.running)
    status = cluster.ctl(running, "cluster_status", "--formatter", "json")
    names = {node.name for node in cluster.nodes}
    assert all(name in status for name in names)
    assert not any(name.startswith("rabbit@") for name in names)
    assert 5672 not in {node.amqp_port for node in cluster.nodes}
