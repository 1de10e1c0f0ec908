"""Drills on a three-node RabbitMQ cluster (``tests/rabbitmq_cluster.py``) with quorum
queues: run with ``pytest -m rabbitmq_cluster --rabbitmq-cluster`` (``scripts/test`` does).

One cluster serves the module; each drill starts with its three nodes running, on a fresh
PostgreSQL database and a topology of its own, declared through the first node (so the
first node leads its queues). Everything connects with a login of the cluster's own whose
password must appear in no log, error or metric. Each drill prints its counts (``-s``):
sent, confirmed by the broker, stored, duplicates and dead letters.

- Stopping the ingest queue's leader while 2,000 client-mode ingests go to three
  ``apollo serve`` processes: every confirmed message is stored exactly once.
- kill -9 of a service process while its group commit is in flight (committed on the
  primary but not yet acknowledged to the broker): the batch is redelivered to the other
  process and stored exactly once.
- A node stopped while publishing goes on, then started again: it rejoins (the queues
  need it once another node stops), and nothing is lost or duplicated.
- Poison messages are dead-lettered once each, with their reasons.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import psycopg
import pytest
from attrs import define, evolve, field, frozen
from benchmarks import bus_bench

from apollo_adapters.postgres.embedded import temporary_folder
from apollo_adapters.rabbitmq import AiormqBus
from apollo_app import Apollo, RemoteClient, Settings
from apollo_app.entrypoints.service import ApolloService
from apollo_domain.errors import PersistenceFailed, TransportError
from apollo_domain.ports.messaging import DeadLetter, Message
from apollo_domain.ports.topology import Topology
from tests.postgres_support import (
    DisposablePostgresStore,
    PostgresTestServer,
    fresh_store,
    scalar,
)
from tests.rabbitmq_cluster import Cluster, Node, running_cluster
from tests.rabbitmq_support import ready_messages
from tests.service_processes import ServiceProcess, ServiceProcesses, service_environment
from tests.support import eventually_within, fast_retry

pytestmark = [pytest.mark.rabbitmq_cluster, pytest.mark.rabbitmq, pytest.mark.postgres]

PATIENCE = 180.0  # a loaded machine: generous, only a hang fails it
BATCH = 100  # items per store_many
NEVER = "604800"  # seconds: no periodic job runs during a drill
LOGIN = "apollo-drill"
PASSWORD = f"drill-{secrets.token_hex(8)}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with running_cluster(3) as started:
        started.add_user(LOGIN, PASSWORD)
        yield started


@pytest.fixture
def nodes(cluster: Cluster) -> Cluster:
    """The module's cluster with its three nodes running (an earlier drill may have
    stopped one)."""
    cluster.restart_stopped()
    return cluster


@pytest.fixture
def folder() -> Iterator[Path]:
    made = temporary_folder("apollo-drill-")
    yield made
    shutil.rmtree(made, ignore_errors=True)


def node_list(*nodes: Node) -> str:
    """``APOLLO_AMQP_URL`` naming ``nodes`` in that order, with the drill's login."""
    return ",".join(node.url_as(LOGIN, PASSWORD) for node in nodes)


@frozen
class Counts:
    sent: int
    confirmed: int
    stored: int
    duplicates: int
    dead_letters: int

    def __str__(self) -> str:
        return (
            f"sent {self.sent}, confirmed {self.confirmed}, stored {self.stored},"
            f" duplicates {self.duplicates}, dead letters {self.dead_letters}"
        )


@define
class Drill:
    """One drill's database and topology, and what its publisher sent."""

    server: PostgresTestServer
    database: str
    topology: Topology
    owned: bool = True  # the drill drops its database (else the store closing does)
    confirmed: list[str] = field(factory=list)
    unconfirmed: list[str] = field(factory=list)

    @classmethod
    async def open(cls, server: PostgresTestServer) -> Drill:
        database = await server.create_database(dimension=384)
        return cls(server, database, _topology())

    @classmethod
    def on(cls, store: DisposablePostgresStore) -> Drill:
        """A drill on ``store``'s database (dropped when the store closes)."""
        return cls(store.server, store.database, _topology(), owned=False)

    @property
    def conninfo(self) -> str:
        return self.server.conninfo(self.database)

    @property
    def prefix(self) -> str:
        return self.topology.exchange.removesuffix(Topology().exchange)

    @property
    def sent(self) -> int:
        return len(self.confirmed) + len(self.unconfirmed)

    def settings(self) -> Settings:
        """The in-process service's settings for this topology."""
        return Settings(
            embedder="hashing",
            exchange=f"{self.prefix}legion.apollo",
            queue_prefix=f"{self.prefix}legion.apollo",
            audit_exchange=f"{self.prefix}llm.audit",
            outbox_workers=0,
        )

    def environment(self, amqp_url: str, *, application_name: str | None = None) -> dict[str, str]:
        """An ``apollo serve`` process's settings for this topology and database."""
        database_url = self.conninfo
        if application_name is not None:
            database_url += f" application_name={application_name}"
        return service_environment(
            database_url=database_url,
            amqp_url=amqp_url,
            exchange=f"{self.prefix}legion.apollo",
            queue_prefix=f"{self.prefix}legion.apollo",
            audit_exchange=f"{self.prefix}llm.audit",
            queue_type="quorum",
            embedding_dimension=384,
            outbox_workers=0,
            decay_interval=NEVER,
            expertise_interval=NEVER,
            corroboration_interval=NEVER,
        )

    async def publish(self, client: RemoteClient, count: int, *, start: int = 0) -> None:
        """``count`` distinct ingests, ``BATCH`` per ``store_many``; a batch the broker
        did not confirm is counted as unconfirmed (it may or may not be stored)."""
        for first in range(start, start + count, BATCH):
            items = [
                {"content": f"Drill observation {n}: host {uuid4().hex}", "tags": ["drill"]}
                for n in range(first, min(first + BATCH, start + count))
            ]
            contents = [str(item["content"]) for item in items]
            try:
                await client.store_many(items)
            except TransportError:
                self.unconfirmed.extend(contents)
            else:
                self.confirmed.extend(contents)

    async def contents(self) -> list[str]:
        async with await psycopg.AsyncConnection.connect(self.conninfo) as conn:
            cursor = await conn.execute("SELECT content FROM entries")
            return [row[0] for row in await cursor.fetchall()]

    async def stored(self) -> int:
        return await scalar(self.conninfo, "SELECT count(*) FROM entries")

    async def drained(self, node: Node, at_least: int) -> bool:
        """At least ``at_least`` entries stored and nothing ready on the ingest queue."""
        if await self.stored() < at_least:
            return False
        return await ready_messages(node.url, self.topology.ingest_queue) == 0

    async def counts(self, dead: Sequence[DeadLetter]) -> Counts:
        contents = await self.contents()
        return Counts(
            sent=self.sent,
            confirmed=len(self.confirmed),
            stored=len(contents),
            duplicates=len(contents) - len(set(contents)),
            dead_letters=len(dead),
        )

    async def check_stored_once(self) -> list[str]:
        """Every confirmed message stored, none twice, each with one ingest log row."""
        contents = await self.contents()
        assert set(self.confirmed) <= set(contents), "a confirmed message was lost"
        assert set(contents) <= set(self.confirmed) | set(self.unconfirmed)
        assert len(contents) == len(set(contents)), "a message was stored twice"
        logged = await scalar(
            self.conninfo, "SELECT count(*) FROM access_log WHERE action = 'ingest'"
        )
        assert len(contents) == logged
        return contents

    async def close(self) -> None:
        if self.owned:
            await self.server.drop_database(self.database)


def _topology() -> Topology:
    return Topology().with_prefix(f"drill{uuid4().hex[:6]}.")


async def declare_on(node: Node, topology: Topology) -> None:
    """Declare ``topology`` through ``node``: its quorum queues are led from there."""
    bus = await AiormqBus.connect(node_list(node), topology=topology, queue_type="quorum")
    await bus.close()


async def client_bus(topology: Topology, *nodes: Node) -> AiormqBus:
    return await AiormqBus.connect(
        node_list(*nodes),
        topology=topology,
        reconnect_timeout=PATIENCE,
        publish_timeout=PATIENCE,
    )


async def all_dead_letters(bus: AiormqBus) -> list[DeadLetter]:
    letters: list[DeadLetter] = []
    while batch := await bus.drain_dead_letters():
        letters.extend(batch)
    return letters


async def scrape(service: ServiceProcess) -> dict[str, float]:
    """The ``apollo_broker_*`` series of a service process's ``/metrics``, by name and
    labels (``apollo_broker_redeliveries_total{cause="returned"}``)."""
    text = await metrics_text(service)
    series = {}
    for line in text.splitlines():
        if line.startswith("apollo_broker_"):
            name, _, value = line.rpartition(" ")
            series[name] = float(value)
    return series


async def metrics_text(service: ServiceProcess) -> str:
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.get(f"{service.base}/metrics")
    response.raise_for_status()
    return response.text


def returned(series: dict[str, float]) -> float:
    return series.get('apollo_broker_redeliveries_total{cause="returned"}', 0.0)


# ------------------------------------------------------------------------------- drills

LEADER_DRILL_TOTAL = 2_000
LEADER_DRILL_STOP_AFTER = 600  # confirmed messages before the leader is stopped


async def test_stopping_the_ingest_queues_leader_under_three_service_processes_loses_nothing(
    nodes: Cluster, postgres_server: PostgresTestServer, folder: Path
) -> None:
    """Three ``apollo serve`` processes on three different first nodes, a client-mode
    publisher on the second node; after 600 of 2,000 ingests were confirmed, the node
    leading the ingest queue (and the first process's connection) is stopped while
    publishing goes on. Every confirmed message is stored exactly once, nothing is
    dead-lettered, the process that lost its node reconnected (one log line per
    reconnect, the count in ``/metrics``), and the password is in no log or metric."""
    first, second, third = nodes.nodes
    drill = await Drill.open(postgres_server)
    await declare_on(first, drill.topology)
    leader = await asyncio.to_thread(nodes.leader_of, drill.topology.ingest_queue)
    orders = [(first, second, third), (third, first, second), (second, third, first)]
    fleet = ServiceProcesses(3, lambda i: drill.environment(node_list(*orders[i])), folder)
    publisher = await client_bus(drill.topology, second, third, first)
    stopping: asyncio.Future[None] | None = None
    try:
        await asyncio.to_thread(fleet.start)
        client = RemoteClient(publisher, agent_id="claude-drill-1")
        for start in range(0, LEADER_DRILL_TOTAL, BATCH):
            if stopping is None and len(drill.confirmed) >= LEADER_DRILL_STOP_AFTER:
                # in a thread: publishing goes on while the node stops
                stopping = asyncio.ensure_future(asyncio.to_thread(nodes.stop, leader))
            await drill.publish(client, BATCH, start=start)
        assert stopping is not None
        await stopping
        await eventually_within(
            PATIENCE,
            lambda: drill.drained(second, len(drill.confirmed)),
            "every confirmed ingest stored",
        )
        series = [await scrape(service) for service in fleet]
        texts = [await metrics_text(service) for service in fleet]
        await asyncio.to_thread(fleet.stop)
        logs = [service.log.read_text(errors="replace") for service in fleet]
        contents = await drill.check_stored_once()
        dead = await all_dead_letters(publisher)
        counts = await drill.counts(dead)
    finally:
        await asyncio.to_thread(fleet.stop)
        await publisher.close()
        await drill.close()

    reconnects = [s["apollo_broker_reconnects"] for s in series]
    print(  # the drill's counts, for the record (pytest -s)
        f"\nleader stop, 3 service processes: {counts}; reconnects per process {reconnects},"
        f" returned deliveries {[returned(s) for s in series]}, unconfirmed"
        f" {len(drill.unconfirmed)}, stored of them {len(set(drill.unconfirmed) & set(contents))}"
    )
    assert leader is first and not leader.running
    assert len(drill.confirmed) > LEADER_DRILL_STOP_AFTER + BATCH, "nothing confirmed after"
    assert [] == dead
    assert reconnects[0] >= 1, "the process on the stopped node never reconnected"
    for log, count in zip(logs, reconnects, strict=True):
        assert count == log.count("reconnected to"), "one log line per reconnect"
    for s in series:
        connected = [
            name for name, value in s.items() if name.startswith("apollo_broker_connected")
        ]
        assert 1 == len(connected) and 1.0 == s[connected[0]]
        assert first.url_as(LOGIN, PASSWORD).split("@")[1] not in connected[0]
    for text in [*logs, *texts]:
        assert PASSWORD not in text


@contextlib.asynccontextmanager
async def commits_held_for_a_standby(admin: str, database_conninfo: str) -> AsyncIterator[None]:
    """While inside: every commit on the server is written (durable, and committed once
    released) but waits for a synchronous standby that does not exist, so a group commit
    can be caught between its commit and its acknowledgement. On the way out the standby
    is no longer asked for and the waiting commits complete."""
    async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
        cursor = await conn.execute("SHOW synchronous_commit")
        row = await cursor.fetchone()
        before = str(row[0]) if row else "on"
        await conn.execute("ALTER SYSTEM SET synchronous_standby_names = 'apollo_drill_nobody'")
        await conn.execute("ALTER SYSTEM SET synchronous_commit = 'on'")
        await conn.execute("SELECT pg_reload_conf()")
        try:
            await _probe_commit_waits(admin, database_conninfo)
            yield
        finally:
            await conn.execute("ALTER SYSTEM RESET synchronous_standby_names")
            await conn.execute(f"ALTER SYSTEM SET synchronous_commit = '{before}'")
            await conn.execute("SELECT pg_reload_conf()")


async def _probe_commit_waits(admin: str, database_conninfo: str) -> None:
    """A commit of this test's own, seen waiting for the standby, then let go: from then
    on the server holds every commit (the reload has reached it)."""
    name = f"apollo-drill-probe-{uuid4().hex[:6]}"
    probe = await psycopg.AsyncConnection.connect(
        database_conninfo + f" application_name={name}", autocommit=True
    )
    try:
        committing = asyncio.ensure_future(
            probe.execute("CREATE TABLE IF NOT EXISTS drill_probe (n int)")
        )
        (pid,) = await eventually_within(
            PATIENCE, lambda: waiting_for_standby(admin, {name}), "the probe's commit waits"
        )
        await scalar(admin, f"SELECT count(*) FROM pg_cancel_backend({int(pid[1])})")
        await committing
    finally:
        await probe.close()


async def waiting_for_standby(admin: str, names: Collection[str]) -> list[tuple[str, int]]:
    """(application name, backend pid) of each backend of ``names`` waiting for a standby."""
    async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT application_name, pid FROM pg_stat_activity"
            " WHERE wait_event = 'SyncRep' AND application_name = ANY(%s)",
            (list(names),),
        )
        return [(str(name), int(pid)) for name, pid in await cursor.fetchall()]


#: Fewer than one process's ingest prefetch (32): whatever the split, the survivor has
#: room for the killed process's deliveries while its own commits wait.
KILL_DRILL_TOTAL = 24


async def test_a_service_killed_in_the_middle_of_a_group_commit_has_its_batch_stored_once(
    nodes: Cluster, postgres_server: PostgresTestServer, folder: Path
) -> None:
    """Two ``apollo serve`` processes; 24 ingests published while every commit on the
    server waits for a standby (see :func:`commits_held_for_a_standby`). One process is
    killed with SIGKILL while its group commit waits: its batch is committed on the
    primary but never acknowledged. The broker hands its deliveries to the other
    process (counted as returned in its ``/metrics``) while that commit is still in
    doubt; once commits complete, all 24 are stored exactly once, none dead-lettered.
    (``ALTER SYSTEM`` on the test server: the embedded one's role is a superuser.)"""
    first, second, third = nodes.nodes
    drill = await Drill.open(postgres_server)
    await declare_on(first, drill.topology)
    names = [f"{drill.database}-{i}" for i in range(2)]
    orders = [(first, second, third), (second, third, first)]
    fleet = ServiceProcesses(
        2,
        lambda i: drill.environment(node_list(*orders[i]), application_name=names[i]),
        folder,
    )
    publisher = await client_bus(drill.topology, third, first, second)
    admin = postgres_server.admin_conninfo
    try:
        await asyncio.to_thread(fleet.start)
        client = RemoteClient(publisher, agent_id="claude-drill-2")
        async with commits_held_for_a_standby(admin, drill.conninfo):
            await drill.publish(client, KILL_DRILL_TOTAL)
            waiting = await eventually_within(
                PATIENCE, lambda: waiting_for_standby(admin, names), "a group commit waits"
            )
            victim = names.index(waiting[0][0])
            survivor = fleet[1 - victim]
            fleet.kill9(victim)

            async def redelivered() -> bool:
                return returned(await scrape(survivor)) >= 1

            await eventually_within(PATIENCE, redelivered, "the batch reaches the survivor")
            in_doubt = [pid for name, pid in waiting if name == names[victim]]
            still = await waiting_for_standby(admin, [names[victim]])
        await eventually_within(
            PATIENCE, lambda: drill.drained(second, KILL_DRILL_TOTAL), "every ingest stored"
        )
        series = await scrape(survivor)
        await asyncio.to_thread(fleet.stop)
        contents = await drill.check_stored_once()
        dead = await all_dead_letters(publisher)
        counts = await drill.counts(dead)
    finally:
        await asyncio.to_thread(fleet.stop)
        await publisher.close()
        await drill.close()

    print(
        f"\nkill -9 during a group commit: {counts}; commits in doubt when killed"
        f" {len(in_doubt)}, deliveries returned to the survivor {returned(series)}"
    )
    assert KILL_DRILL_TOTAL == len(drill.confirmed) == len(contents)
    assert [] == dead
    assert in_doubt and {pid for _, pid in still} >= set(in_doubt), "killed mid-commit"
    assert returned(series) >= 1


REJOIN_DRILL_PHASE = 500


async def test_a_stopped_node_rejoins_and_nothing_is_lost_or_duplicated(
    nodes: Cluster, postgres_server: PostgresTestServer
) -> None:
    """A service in this process connected through the first node, a publisher through
    the second. 500 ingests; the third node stops; 500 more; it starts again and rejoins;
    then the first node stops, so the queues live on the second and the rejoined third
    only (a quorum needs both), and 500 more are published and confirmed. All 1,500
    are stored exactly once, nothing dead-lettered."""
    first, second, third = nodes.nodes
    store = await fresh_store(postgres_server, dimension=384)
    apollo = Apollo.with_store(store, closers=[store.close])
    drill = Drill.on(store)
    await declare_on(first, drill.topology)
    service_bus = await AiormqBus.connect(
        node_list(first, second, third),
        topology=drill.topology,
        retry_backoff=fast_retry,
        reconnect_timeout=PATIENCE,
        publish_timeout=10.0,  # also bounds an acknowledgement
    )
    service = ApolloService(apollo, service_bus, drill.settings(), topology=drill.topology)
    publisher = await client_bus(drill.topology, second, third, first)
    try:
        await service.start()
        client = RemoteClient(publisher, agent_id="claude-drill-3")
        await drill.publish(client, REJOIN_DRILL_PHASE)
        await asyncio.to_thread(nodes.stop, third)
        await drill.publish(client, REJOIN_DRILL_PHASE, start=REJOIN_DRILL_PHASE)
        await asyncio.to_thread(nodes.restart, third)
        status = await asyncio.to_thread(nodes.ctl, second, "cluster_status", "--formatter", "json")
        await asyncio.to_thread(nodes.stop, first)
        await drill.publish(client, REJOIN_DRILL_PHASE, start=2 * REJOIN_DRILL_PHASE)
        await eventually_within(
            PATIENCE,
            lambda: drill.drained(second, 3 * REJOIN_DRILL_PHASE),
            "every ingest stored",
        )
        await service.stop()
        await drill.check_stored_once()
        dead = await all_dead_letters(publisher)
        counts = await drill.counts(dead)
        reconnects = service_bus.reconnects
    finally:
        await service.stop()
        await service_bus.close()
        await publisher.close()
        await apollo.close()
        await drill.close()

    print(f"\nnode stopped and rejoined: {counts}; service reconnects {reconnects}")
    assert third.name in status.split('"running_nodes"')[1].split("]")[0]
    assert 3 * REJOIN_DRILL_PHASE == len(drill.confirmed) == counts.stored
    assert [] == dead
    assert reconnects >= 1


PILL = "POISON-PILL"


class PillStore:
    """A store that cannot write an entry whose content holds :data:`PILL`: the write
    fails with :class:`PersistenceFailed`, a failure the service retries, every time."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def unit_of_work(self) -> _PillUnitOfWork:
        return _PillUnitOfWork(self.inner.unit_of_work())


class _PillUnitOfWork:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __aenter__(self) -> _PillUnitOfWork:
        await self._inner.__aenter__()
        self.entries = _PillEntries(self._inner.entries)
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)


class _PillEntries:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def add(self, entry: Any) -> Any:
        _refuse_pills([entry])
        return await self._inner.add(entry)

    async def add_many(self, entries: Sequence[Any]) -> Any:
        _refuse_pills(entries)
        return await self._inner.add_many(entries)


def _refuse_pills(entries: Sequence[Any]) -> None:
    if any(PILL in entry.content for entry in entries):
        raise PersistenceFailed("the store cannot take this entry")


POISON_DRILL_GOOD = 200


async def test_poison_messages_are_dead_lettered_once_each_with_their_reasons(
    nodes: Cluster, postgres_server: PostgresTestServer
) -> None:
    """A service in this process connected through the second node (the queues are led
    from the first), a publisher through the third. Among 200 good ingests: a body that
    is not JSON, an unsupported message version, a content that is not a string (each
    dead-lettered at once), and a message the store fails on every time (retried twice,
    then dead-lettered). Four dead letters, one per poison message, each with its reason;
    the 200 stored once; redeliveries counted: two retries, nothing returned."""
    first, second, third = nodes.nodes
    store = await fresh_store(postgres_server, dimension=384)
    apollo = Apollo.with_store(PillStore(store), closers=[store.close])
    drill = Drill.on(store)
    await declare_on(first, drill.topology)
    service_bus = await AiormqBus.connect(
        node_list(second, third, first),
        topology=drill.topology,
        max_redeliveries=2,
        retry_backoff=fast_retry,
        reconnect_timeout=PATIENCE,
    )
    service = ApolloService(apollo, service_bus, drill.settings(), topology=drill.topology)
    publisher = await client_bus(drill.topology, third, first, second)
    queue = drill.topology.ingest_queue
    letters: list[DeadLetter] = []
    try:
        await service.start()
        client = RemoteClient(publisher, agent_id="claude-drill-4")
        await drill.publish(client, POISON_DRILL_GOOD // 2)
        for body in (
            b"{broken",
            b'{"v": 99, "action": "ingest", "payload": {}}',
            b'{"v": 1, "action": "ingest", "payload": {"content": 7}}',
        ):
            await publisher.publish(Message(queue, body, user_id=LOGIN))
        await client.store_knowledge(content=f"A note the store refuses: {PILL}")
        await drill.publish(client, POISON_DRILL_GOOD // 2, start=POISON_DRILL_GOOD // 2)

        async def four_letters() -> bool:
            letters.extend(await publisher.drain_dead_letters())
            return len(letters) >= 4 and await drill.drained(third, POISON_DRILL_GOOD)

        await eventually_within(PATIENCE, four_letters, "four dead letters, the rest stored")
        await service.stop()
        letters.extend(await all_dead_letters(publisher))
        left = await ready_messages(third.url, queue)
        await drill.check_stored_once()
        counts = await drill.counts(letters)
        poison = 4  # published and confirmed one by one, beside the drill's batches
        counts = evolve(counts, sent=counts.sent + poison, confirmed=counts.confirmed + poison)
        redeliveries = service_bus.redeliveries
    finally:
        await service.stop()
        await service_bus.close()
        await publisher.close()
        await apollo.close()
        await drill.close()

    reasons = sorted(letter.reason for letter in letters)
    print(f"\npoison messages: {counts}; reasons {reasons}; redeliveries {redeliveries}")
    assert 4 == len(letters)
    assert {queue} == {letter.queue for letter in letters}
    assert any("not valid JSON" in r for r in reasons), reasons
    assert any("unsupported message version 99" in r for r in reasons), reasons
    assert any("content: must be a string" in r for r in reasons), reasons
    assert any(
        r.startswith("gave up after 3 attempts") and "PersistenceFailed" in r for r in reasons
    ), reasons
    assert POISON_DRILL_GOOD == counts.stored == len(drill.confirmed)
    assert 0 == left
    assert {"returned": 0, "retried": 2} == redeliveries


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


async def test_the_queue_type_benchmark_runs_a_set_up_on_the_cluster(
    nodes: Cluster, postgres_server: PostgresTestServer, folder: Path
) -> None:
    """``bus_bench.py --queue-types`` measures each set-up with :func:`queue_type_setup`:
    here the three-node one at a smoke size, on this module's cluster. Every ingest is
    stored once, nothing dead-lettered, every figure positive, and the report renders.
    No timing is asserted."""
    args = bus_bench.parse(["--queue-types", "--quick", "--messages", "60"])
    args.latency_seconds = 1.0
    items = bus_bench.ingest_items(args.messages, args.seed)
    bodies = await bus_bench.client_bodies(items)
    databases = bus_bench.Databases(postgres_server.admin_conninfo)
    try:
        setup = await bus_bench.queue_type_setup(
            "quorum queues, 3-node cluster",
            "quorum",
            nodes,
            databases,
            items,
            bodies,
            args,
            folder,
            None,
            20.0,
        )
    finally:
        await databases.drop_all()
    result = {
        "machine": {"cpus": 2, "load_average_before": (0, 0, 0), "load_average": (0, 0, 0)},
        "broker": {"rabbitmq": "3"},
        "server": {"mode": "m", "server_version": "v", "fsync": "on", "synchronous_commit": "on"},
        "config": {"messages": args.messages, "ingest_batch": 16},
        "setups": [setup, setup],
        "wall_seconds": 1.0,
    }
    report = bus_bench.report_queue_types(result)

    ingest = setup["ingest"]
    assert (60, 60, 0, 0) == (
        ingest["stored"],
        ingest["ingest_log_rows"],
        ingest["dead_letters"],
        ingest["left_in_queue"],
    )
    assert [0] == ingest["exit_codes"]
    assert 3 == setup["nodes"] and "quorum" == setup["raw_aiormq"]["queue_type"]
    for value in (
        setup["raw_aiormq"]["messages_per_s"],
        setup["bus_in_groups"]["messages_per_s"],
        ingest["messages_per_s"],
        setup["lone_latency"]["p50_ms"],
        setup["lone_latency"]["p95_ms"],
    ):
        assert value > 0
    assert "quorum queues, 3-node cluster: Apollo ingest msg/s" in report
