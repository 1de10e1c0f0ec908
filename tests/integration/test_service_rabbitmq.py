"""The service over a real RabbitMQ broker and a real PostgreSQL + pgvector store: what only a
broker shows (its topology, dropped connections, a killed service process). What every
transport must do is in ``test_service_transports.py``, which runs it on this broker too.

The end-to-end run starts ``python -m apollo_app.entrypoints.service`` as a subprocess,
kills it with SIGKILL halfway through 1,000 ingests, starts it again, and checks that exactly 1,000
entries (and 1,000 ingest access-log rows) were written: redeliveries are idempotent.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from uuid import uuid4

import psycopg
import pytest
from attrs import define
from yarl import URL

from apollo_adapters.rabbitmq import AiormqBus
from apollo_app import Apollo, Principal, RemoteClient, Settings
from apollo_app.bootstrap import open_bus, topology_of
from apollo_app.entrypoints.service import ApolloService
from apollo_domain.ports.topology import Topology
from tests.postgres_support import PostgresTestServer, fresh_store, scalar
from tests.rabbitmq_support import (
    amqp_test_url,
    close_connection_named,
    delete_topology,
    list_bindings,
    ready_messages,
    release_test_broker,
    start_test_broker,
)
from tests.support import eventually_within, fast_retry

pytestmark = [pytest.mark.rabbitmq, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
PATIENCE = 30.0
TOTAL = 1_000
KILL_AT = 500
STALL = 180.0  # the service subprocess: this long without progress is a hang
T = TypeVar("T")


@pytest.fixture(scope="session")
def service_amqp_url() -> Iterator[str]:
    """This run's vhost; a broker that cannot be started fails the run (never a skip)."""
    url = amqp_test_url()
    yield url
    release_test_broker()


@pytest.fixture
async def topology(service_amqp_url: str) -> AsyncIterator[Topology]:
    chosen = start_test_broker().topology()
    yield chosen
    await delete_topology(service_amqp_url, chosen)


def named(url: str, name: str) -> str:
    """``url`` with a connection name the broker shows (and can close by)."""
    return str(URL(url).update_query(name=name))


def prefix_of(topology: Topology) -> str:
    return topology.exchange.removesuffix(Topology().exchange)


def settings_for(topology: Topology, **changes: Any) -> Settings:
    prefix = prefix_of(topology)
    return Settings(
        embedder="hashing",
        exchange=prefix + "legion.apollo",
        queue_prefix=prefix + "legion.apollo",
        audit_exchange=prefix + "llm.audit",
        **changes,
    )


async def eventually(check: Callable[[], Awaitable[Any]], what: str) -> Any:
    return await eventually_within(PATIENCE, check, what)


async def while_progressing(
    measure: Callable[[], Awaitable[T]], done: Callable[[T], bool], what: str
) -> T:
    """Poll ``measure`` until ``done`` holds for its value. However slow a loaded machine
    is, a run that moves on passes; the wait fails only once the value has not changed
    for ``STALL`` seconds (a hang), naming where it stuck."""
    loop = asyncio.get_running_loop()
    value = await measure()
    changed = loop.time()
    while not done(value):
        await asyncio.sleep(0.05)
        latest = await measure()
        if latest != value:
            value, changed = latest, loop.time()
        elif loop.time() - changed > STALL:
            pytest.fail(f"no progress for {STALL:g}s, stuck at {value!r}: {what}")
    return value


# ---------------------------------------------------------------------------- topology


async def test_declaring_the_topology_twice_keeps_the_same_bindings(
    service_amqp_url: str, topology: Topology
):
    """The service's startup declares its settings' topology; a second startup changes
    nothing: the same bindings, each queue bound by its own name, GAS to the audit key."""
    vhost = start_test_broker().vhost
    assert vhost is not None, "the test broker must give this run its own vhost"
    settings = settings_for(topology, amqp_url=service_amqp_url)
    assert topology == topology_of(settings)
    names = {queue.name for queue in topology.queues}

    def ours() -> set[tuple[str, str, str]]:
        listed = list_bindings(vhost)
        assert listed is not None, "rabbitmqctl could not list the bindings"
        return {binding for binding in listed if binding[1] in names}

    first = await open_bus(settings, topology)
    await first.close()
    after_first = await asyncio.to_thread(ours)
    second = await open_bus(settings, topology)
    await second.close()
    after_second = await asyncio.to_thread(ours)

    expected = {
        *((topology.exchange, queue, queue) for queue in topology.apollo_queues),
        (topology.audit_exchange, topology.gas_queue, "llm.audit.complete"),
        (topology.dead_letter_exchange, topology.dead_letter_queue, ""),
    }
    assert expected == after_first == after_second


# ----------------------------------------------------------------- service in this process


@define
class Mesh:
    apollo: Apollo
    service: ApolloService
    service_bus: AiormqBus
    client_bus: AiormqBus
    client: RemoteClient
    service_name: str
    client_name: str

    async def total(self) -> int:
        return (await self.apollo.stats(Principal(self.client_bus.login))).total


@pytest.fixture
async def mesh(
    service_amqp_url: str, topology: Topology, postgres_server: PostgresTestServer
) -> AsyncIterator[Mesh]:
    store = await fresh_store(postgres_server, dimension=384)
    apollo = Apollo.with_store(store, closers=[store.close])
    service_name = f"apollo-service-{uuid4().hex[:8]}"
    client_name = f"apollo-client-{uuid4().hex[:8]}"
    service_bus = await AiormqBus.connect(
        named(service_amqp_url, service_name),
        topology=topology,
        max_redeliveries=2,
        retry_backoff=fast_retry,
        reconnect_timeout=PATIENCE,
    )
    service = ApolloService(apollo, service_bus, settings_for(topology, prefetch=8))
    await service.start()
    async with Apollo.client_mode(
        named(service_amqp_url, client_name),
        agent_id="claude-mesh-1",
        topology=topology,
        rpc_timeout=PATIENCE,
    ) as client:
        assert isinstance(client.bus, AiormqBus)
        yield Mesh(apollo, service, service_bus, client.bus, client, service_name, client_name)
        await service.stop()
    await service_bus.close()
    await apollo.close()


async def at_least(mesh: Mesh, count: int) -> bool:
    return await mesh.total() >= count


async def test_client_and_service_reconnect_after_the_broker_drops_them(mesh: Mesh):
    await mesh.client.store_knowledge(content="Written before the connections dropped")
    await eventually(lambda: at_least(mesh, 1), "the first entry is stored")
    for name in (mesh.service_name, mesh.client_name):
        assert await asyncio.to_thread(close_connection_named, name), f"could not close {name}"

    await mesh.client.store_knowledge(content="Written after both sides reconnected")
    await eventually(lambda: at_least(mesh, 2), "the second entry is stored")
    found = await mesh.client.retrieve("written after both sides reconnected", min_confidence=0)
    assert "Written after both sides reconnected" == found.entries[0].content


# ------------------------------------------------------------------- service subprocess


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServiceProcess:
    """``python -m apollo_app.entrypoints.service`` with the given environment; output in a
    log file."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = env
        self.log = log
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "apollo_app.entrypoints.service",
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=out,
            )

    async def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()

    async def terminate(self) -> int:
        """SIGTERM: the graceful stop; the exit code (a stop that hangs fails the test)."""
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(STALL):
                return await self.process.wait()
        except TimeoutError:
            pytest.fail(f"the service did not stop within {STALL:g}s:\n{self.output()}")

    def check_alive(self) -> None:
        assert self.process is not None
        if self.process.returncode is not None:
            pytest.fail(f"the service exited ({self.process.returncode}):\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


async def test_a_killed_service_restarts_and_stores_every_ingest_exactly_once(
    service_amqp_url: str,
    topology: Topology,
    postgres_server: PostgresTestServer,
    tmp_path: Path,
):
    """1,000 distinct ingests; the service is SIGKILLed after ~500 and started again:
    exactly 1,000 entries and 1,000 ingest access-log rows, no dead letters."""
    database = await postgres_server.create_database(dimension=384)
    conninfo = postgres_server.conninfo(database)
    prefix = prefix_of(topology)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
        "APOLLO_AMQP_URL": named(service_amqp_url, f"apollo-serve-{uuid4().hex[:8]}"),
        "APOLLO_DATABASE_URL": conninfo,
        "APOLLO_EXCHANGE": prefix + "legion.apollo",
        "APOLLO_QUEUE_PREFIX": prefix + "legion.apollo",
        "APOLLO_AUDIT_EXCHANGE": prefix + "llm.audit",
        "APOLLO_EMBEDDER": "hashing",
        "APOLLO_EMBEDDING_DIMENSION": "384",
        "APOLLO_HTTP_ENABLED": "false",
        "APOLLO_HTTP_PORT": str(free_port()),
        "APOLLO_PREFETCH": "32",
        "APOLLO_OUTBOX_INTERVAL": "3600",
        "APOLLO_OUTBOX_WORKERS": "0",
    }
    log = tmp_path / "service.log"
    client_bus = await AiormqBus.connect(service_amqp_url, topology=topology)
    service = ServiceProcess(env, log)
    watcher: psycopg.AsyncConnection[Any] | None = None
    try:
        client = RemoteClient(client_bus, agent_id="claude-bulk-1")
        for start in range(0, TOTAL, 100):
            await asyncio.gather(
                *(
                    client.store_knowledge(
                        content=f"Observation {n}: host {uuid4().hex} in rack {uuid4().hex[:6]}",
                        tags=["fleet"],
                    )
                    for n in range(start, start + 100)
                )
            )
        entries = "SELECT count(*) FROM entries"
        watcher = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        polled = watcher

        async def stored() -> int:
            service.check_alive()
            return await scalar(polled, entries)

        await service.start()
        # The count stays 0 while the service starts: its start must fit in STALL too.
        await while_progressing(
            stored, lambda n: n >= KILL_AT, f"{KILL_AT} entries stored by the first service"
        )
        await service.kill()
        stored_at_kill = await scalar(polled, entries)
        assert stored_at_kill < TOTAL, "the first service finished before it could be killed"

        await service.start()

        async def progress() -> tuple[int, int]:
            return await stored(), await ready_messages(service_amqp_url, topology.ingest_queue)

        await while_progressing(
            progress,
            lambda counts: counts[0] >= TOTAL and counts[1] == 0,
            f"{TOTAL} entries stored after the restart (entries, messages waiting)",
        )
        assert 0 == await service.terminate(), service.output()

        assert TOTAL == await scalar(conninfo, entries)
        assert TOTAL == await scalar(
            conninfo, "SELECT count(*) FROM access_log WHERE action = 'ingest'"
        )
        assert [] == await client_bus.drain_dead_letters()
    finally:
        if service.process is not None and service.process.returncode is None:
            await service.kill()
        if watcher is not None:
            await watcher.close()
        await client_bus.close()
        await postgres_server.drop_database(database)


async def test_a_conversation_through_rabbitmq_is_one_episode_on_postgresql(mesh: Mesh):
    turns = [
        {"speaker": "ann", "text": "The search cluster runs OpenSearch 2.15."},
        {"speaker": "ben", "text": "OpenSearch snapshots go to the cold bucket nightly."},
    ]
    dispatch = await mesh.client.store_text(turns)
    assert "store_text" == dispatch.action
    await eventually(lambda: at_least(mesh, 2), "the statements are stored")
    found = await mesh.client.query_knowledge(
        query="opensearch snapshots cold bucket",
        mode="lexical",
        min_confidence=0,
        context_window=1,
    )
    hit = next(e for e in found.entries if e.position == 1)
    assert [0] == [n.position for n in hit.neighbours]
    episode = await mesh.client.get_episode(hit.episode_id)
    assert [t["text"] for t in turns] == [t["text"] for t in episode.text]
