"""``apollo mcp`` in client mode (``APOLLO_AMQP_URL``, no database): its tools are the
commands that travel on the bus, carried out by a real ``apollo serve`` over RabbitMQ."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from apollo_adapters.postgres.embedded import temporary_folder
from apollo_app.entrypoints.mcp.tools import bus_actions
from apollo_domain.ports.topology import Topology
from tests.mcp_support import ok, refused, stdio_client, tool_names
from tests.postgres_support import PostgresTestServer
from tests.rabbitmq_support import amqp_test_url, delete_topology, release_test_broker
from tests.service_processes import ServiceProcesses, service_environment

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq]
APPLIED_SECONDS = 60.0


@pytest.fixture(scope="session")
def broker_url() -> Iterator[str]:
    """This run's vhost, released at the end of the session: the other files' session
    fixtures hand out the same one, so a module must not delete it under them."""
    yield amqp_test_url()
    release_test_broker()


@pytest.fixture(scope="module")
async def mesh(
    broker_url: str, postgres_server: PostgresTestServer
) -> AsyncIterator[dict[str, str]]:
    """An ``apollo serve`` on RabbitMQ and PostgreSQL; yields the client's settings."""
    prefix = f"mcp{int(time.time() * 1000) % 10**8}."
    names = {
        "APOLLO_EXCHANGE": prefix + "legion.apollo",
        "APOLLO_QUEUE_PREFIX": prefix + "legion.apollo",
        "APOLLO_AUDIT_EXCHANGE": prefix + "llm.audit",
    }
    database = await postgres_server.create_database(dimension=384)
    folder = temporary_folder("apollo-mcp-bus-")
    settings = service_environment(
        database_url=postgres_server.conninfo(database), amqp_url=broker_url
    )
    fleet = ServiceProcesses(1, {**settings, **names}, folder)
    await asyncio.to_thread(fleet.start)
    try:
        yield {"APOLLO_AMQP_URL": broker_url, **names}
    finally:
        await asyncio.to_thread(fleet.stop)
        shutil.rmtree(folder, ignore_errors=True)
        await delete_topology(broker_url, Topology().with_prefix(prefix))


async def test_a_store_is_published_and_the_service_answers_the_read(
    mesh: dict[str, str],
) -> None:
    """``store_knowledge`` returns the dispatch of its message; the service applies it, and
    ``query_knowledge`` (an RPC) then finds it. Only the bus's tools are listed."""
    fact = "Client mode publishes to the ingest queue"
    async with stdio_client(["--agent", "bus-agent"], mesh) as client:
        listed = await tool_names(client)
        assert listed < {a.name for a in bus_actions()}  # a writer's (--role's default)
        assert {"store_knowledge", "store_many", "query_knowledge"} <= listed
        assert {"get_entry", "stats", "resolve_dispute"}.isdisjoint(listed)
        sent = await ok(client, "store_knowledge", {"content": fact})
        assert {"action", "payload", "message_id"} <= set(sent)
        assert fact == sent["payload"]["content"]
        error = await refused(client, "store_knowledge", {"content": ""})
        assert ("validation_error", "content") == (error["type"], error["field"])
        deadline = time.monotonic() + APPLIED_SECONDS
        while True:
            found = await ok(client, "query_knowledge", {"query": fact, "min_confidence": 0})
            contents = [e["content"] for e in found["entries"]]
            if fact in contents or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)  # the service applies the message when it consumes it
        assert fact in contents


async def test_the_broker_login_is_the_principal(mesh: dict[str, str]) -> None:
    """``--principal`` is refused in client mode (exit 2): the bus says who is calling."""
    from tests.mcp_support import stdio_parameters

    params = stdio_parameters(["--principal", "someone"], mesh)
    process = await asyncio.create_subprocess_exec(
        params.command,
        *params.args,
        env=params.env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await process.communicate()
    assert 2 == process.returncode
    assert b"broker login is the principal" in stderr
