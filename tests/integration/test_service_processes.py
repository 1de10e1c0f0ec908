"""``tests/service_processes.py`` on real ``apollo serve`` processes: two of them share one
PostgreSQL database and one RabbitMQ topology, both consume, and each stops by its pid,
one by SIGTERM (exit 0) and one by SIGKILL, while the other goes on serving."""

from __future__ import annotations

import asyncio
from pathlib import Path
from uuid import uuid4

import pytest

from apollo_adapters.rabbitmq import AiormqBus
from apollo_app import RemoteClient
from apollo_domain.topology import Topology
from tests.postgres_support import PostgresTestServer, scalar
from tests.rabbitmq_support import delete_topology, queue_consumers
from tests.service_processes import ServiceProcesses, service_environment
from tests.support import eventually_within

pytestmark = [pytest.mark.rabbitmq, pytest.mark.postgres]

NEVER = "604800"  # seconds: no periodic job runs during the test
PATIENCE = 120.0


def apollo_environment(amqp_url: str, database_url: str, prefix: str) -> dict[str, str]:
    """A service of ``prefix``'s topology on ``database_url``, hashing embedder, no
    periodic work."""
    return service_environment(
        APOLLO_AMQP_URL=amqp_url,
        APOLLO_DATABASE_URL=database_url,
        APOLLO_EXCHANGE=f"{prefix}legion.apollo",
        APOLLO_QUEUE_PREFIX=f"{prefix}legion.apollo",
        APOLLO_AUDIT_EXCHANGE=f"{prefix}llm.audit",
        APOLLO_EMBEDDER="hashing",
        APOLLO_EMBEDDING_DIMENSION="384",
        APOLLO_DECAY_INTERVAL=NEVER,
        APOLLO_EXPERTISE_INTERVAL=NEVER,
        APOLLO_CORROBORATION_INTERVAL=NEVER,
    )


async def test_two_service_processes_share_the_work_and_stop_by_pid(
    rabbitmq_url: str, postgres_server: PostgresTestServer, server_folder: Path
) -> None:
    prefix = f"procs{uuid4().hex[:6]}."
    topology = Topology().with_prefix(prefix)
    name = await postgres_server.create_database(dimension=384)
    database = postgres_server.conninfo(name)
    env = apollo_environment(rabbitmq_url, database, prefix)
    with ServiceProcesses(2, env, server_folder / "logs") as fleet:
        await asyncio.to_thread(fleet.wait_healthy)
        consumers = await queue_consumers(rabbitmq_url, topology.ingest_queue)
        bus = await AiormqBus.connect(rabbitmq_url, topology=topology)
        try:
            client = RemoteClient(bus, agent_id="claude-procs-1")
            await client.store_many([{"content": f"Shared work item {n}"} for n in range(20)])

            async def stored() -> bool:
                return await scalar(database, "SELECT count(*) FROM entries") >= 20

            await eventually_within(PATIENCE, stored, "both processes' work committed")
        finally:
            await bus.close()
        first, second = fleet
        first.kill9()
        killed = first.returncode
        health = await asyncio.to_thread(second.health)
        stopped = await asyncio.to_thread(second.stop)
        output = second.output()
    stored_in_all = await scalar(database, "SELECT count(*) FROM entries")
    await postgres_server.drop_database(name)
    await delete_topology(rabbitmq_url, topology)

    assert 2 == consumers
    assert -9 == killed
    assert 200 == health
    assert 0 == stopped, output
    assert 20 == stored_in_all
