"""A real RabbitMQ broker for the tests, isolated per test run.

``APOLLO_TEST_AMQP_URL`` (default ``amqp://guest:guest@127.0.0.1:5672/``) names the broker.
When it does not answer, ``rabbitmq-server -detached`` is started and given a minute; a broker
that still does not answer is an error (the run fails, nothing is skipped). Each run gets a
vhost of its own (``apollo-test-<random>``, removed again by :func:`release_test_broker`)
when ``rabbitmqctl`` can manage the broker, and otherwise a unique name prefix.

The fixtures :func:`rabbitmq_url` and :func:`topology` are shared by the integration tests
through ``tests/integration/conftest.py``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from urllib.parse import quote
from uuid import uuid4

import aiormq
import pytest
from attrs import frozen
from yarl import URL

from apollo_domain.ports.topology import Topology

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"
START_TIMEOUT = 60.0


@frozen
class TestBroker:
    __test__ = False  # not a test class

    url: str
    vhost: str | None
    prefix: str

    def topology(self) -> Topology:
        """A topology with names no other test uses."""
        return Topology().with_prefix(f"{self.prefix}{uuid4().hex[:8]}.")


_broker: TestBroker | None = None


def configured_url() -> str:
    return os.environ.get("APOLLO_TEST_AMQP_URL", DEFAULT_URL)


def broker_answers(url: str, timeout: float = 2.0) -> bool:
    """True when an AMQP 0-9-1 server answers the protocol header at ``url``."""
    parsed = URL(url)
    try:
        with socket.create_connection(
            (parsed.host or "127.0.0.1", parsed.port or 5672), timeout=timeout
        ) as connection:
            connection.sendall(b"AMQP\x00\x00\x09\x01")
            return connection.recv(1) == b"\x01"  # a method frame: Connection.Start
    except OSError:
        return False


def ensure_broker(url: str) -> None:
    """Make sure a broker answers at ``url``, starting a local one if needed."""
    if broker_answers(url):
        return
    server = shutil.which("rabbitmq-server")
    if server is None:
        raise RuntimeError(
            f"No RabbitMQ answers at {URL(url).with_password(None)} and rabbitmq-server is not "
            "installed. Start a broker or set APOLLO_TEST_AMQP_URL."
        )
    subprocess.run([server, "-detached"], check=False, capture_output=True, timeout=60)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if broker_answers(url):
            return
        time.sleep(1.0)
    raise RuntimeError(
        f"RabbitMQ did not answer at {URL(url).with_password(None)} within "
        f"{START_TIMEOUT:g}s of `rabbitmq-server -detached`."
    )


def rabbitmqctl(*args: str) -> str | None:
    """Run ``rabbitmqctl`` against the local broker; None when it is unavailable or fails."""
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


def _is_local(url: str) -> bool:
    return URL(url).host in ("127.0.0.1", "localhost", "::1")


def start_test_broker() -> TestBroker:
    """The broker of this test run (created once per process)."""
    global _broker
    if _broker is not None:
        return _broker
    base = configured_url()
    ensure_broker(base)
    run = uuid4().hex[:10]
    user = URL(base).user or "guest"
    vhost = f"apollo-test-{run}"
    isolated = (
        _is_local(base)
        and rabbitmqctl("add_vhost", vhost) is not None
        and rabbitmqctl("set_permissions", "-p", vhost, user, ".*", ".*", ".*") is not None
    )
    if isolated:
        url = str(URL(base).with_path("/" + quote(vhost, safe=""), encoded=True))
        _broker = TestBroker(url=url, vhost=vhost, prefix="")
    else:
        _broker = TestBroker(url=base, vhost=None, prefix=f"apollo-test-{run}.")
    return _broker


def amqp_test_url() -> str:
    """The AMQP URL the tests of this run connect to."""
    return start_test_broker().url


def release_test_broker() -> None:
    """Delete this run's vhost (idempotent)."""
    global _broker
    if _broker is not None and _broker.vhost is not None:
        rabbitmqctl("delete_vhost", _broker.vhost)
    _broker = None


def list_bindings(vhost: str) -> set[tuple[str, str, str]] | None:
    """(exchange, queue, routing key) of every queue binding in ``vhost``, via rabbitmqctl."""
    output = rabbitmqctl(
        "list_bindings",
        "-p",
        vhost,
        "--no-table-headers",
        "source_name",
        "destination_name",
        "destination_kind",
        "routing_key",
    )
    if output is None:
        return None
    bindings = set()
    for line in output.splitlines():
        fields = line.split("\t")
        if len(fields) == 4 and fields[2] == "queue" and fields[0]:
            bindings.add((fields[0], fields[1], fields[3]))
    return bindings


def list_queue_types(vhost: str) -> dict[str, str] | None:
    """The type (``classic``, ``quorum``, ...) of every queue in ``vhost``, via rabbitmqctl."""
    output = rabbitmqctl("list_queues", "-p", vhost, "--no-table-headers", "name", "type")
    if output is None:
        return None
    types = {}
    for line in output.splitlines():
        fields = line.split("\t")
        if len(fields) == 2:
            types[fields[0]] = fields[1]
    return types


def close_connection_named(name: str) -> bool:
    """Have the broker close the client connection named ``name``; False when impossible."""
    output = rabbitmqctl("list_connections", "--no-table-headers", "pid", "client_properties")
    if output is None:
        return False
    pids = [line.split("\t")[0] for line in output.splitlines() if f'"{name}"' in line]
    return bool(pids) and all(
        rabbitmqctl("close_connection", pid, "closed by the test") is not None for pid in pids
    )


async def delete_topology(url: str, topology: Topology) -> None:
    """Remove the exchanges and queues of ``topology`` (best effort)."""
    with contextlib.suppress(aiormq.AMQPError, OSError):
        async with aiormq.connect(url) as connection:
            channel = await connection.channel()
            for queue in topology.queues:
                await channel.queue_delete(queue.name)
            for exchange in topology.exchanges:
                await channel.exchange_delete(exchange.name)


@pytest.fixture(scope="session")
def rabbitmq_url() -> Iterator[str]:
    """The URL of this run's broker (its own vhost when possible), released at the end."""
    url = amqp_test_url()
    yield url
    release_test_broker()


@pytest.fixture
async def topology(rabbitmq_url: str) -> AsyncIterator[Topology]:
    """The production names inside this run's own vhost, else uniquely prefixed names;
    its exchanges and queues are deleted after the test."""
    broker = start_test_broker()
    chosen = Topology() if broker.vhost is not None else broker.topology()
    yield chosen
    await delete_topology(rabbitmq_url, chosen)


async def ready_messages(url: str, queue: str) -> int:
    """How many messages ``queue`` holds ready for delivery (a passive declare)."""
    async with aiormq.connect(url) as connection:
        channel = await connection.channel()
        declared = await channel.queue_declare(queue, passive=True)
    return declared.message_count or 0


async def queue_consumers(url: str, queue: str) -> int:
    """How many consumers ``queue`` has (a passive declare)."""
    async with aiormq.connect(url) as connection:
        channel = await connection.channel()
        declared = await channel.queue_declare(queue, passive=True)
    return declared.consumer_count or 0
