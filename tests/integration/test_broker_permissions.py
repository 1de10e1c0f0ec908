"""The broker permissions of docs/security.md, "Broker permissions", on a real RabbitMQ vhost.

The fixture creates a vhost and two users with exactly the security page's ``rabbitmqctl
set_permissions`` lines (the service; an agent, as gateways and admins are too) and removes
them afterwards. With them, an agent in client mode works, and cannot do what the
identity rules rely on it not doing: read the service's queues (and so answer queries),
publish straight into a queue or a reply queue, or reconfigure the topology.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from urllib.parse import quote
from uuid import uuid4

import pytest
from attrs import frozen
from yarl import URL

from apollo_adapters.rabbitmq import AiormqBus
from apollo_app import Apollo, Settings
from apollo_app.entrypoints.service import ApolloService
from apollo_domain.errors import TransportError
from apollo_domain.ports.messaging import Delivery, Message
from apollo_domain.ports.topology import Topology
from apollo_domain.results import QueryResult
from tests.docs_pages import page_path
from tests.rabbitmq_support import configured_url, ensure_broker, rabbitmqctl
from tests.support import eventually_within

pytestmark = pytest.mark.rabbitmq
PATIENCE = 30.0
SECURITY = page_path("security")


def readme_permissions() -> dict[str, tuple[str, str, str]]:
    """Who → (configure, write, read), from the security page's ``set_permissions`` lines."""
    text = SECURITY.read_text(encoding="utf-8")
    found = re.findall(
        r"rabbitmqctl set_permissions -p apollo (\S+) '([^']*)' '([^']*)' '([^']*)'", text
    )
    return {who: (configure, write, read) for who, configure, write, read in found}


@frozen
class Vhost:
    name: str
    service_url: str
    agent_url: str
    service_login: str
    agent_login: str


@pytest.fixture(scope="module")
def vhost() -> Iterator[Vhost]:
    """A vhost of its own, a service user and an agent user with the security page's permissions."""
    base = configured_url()
    ensure_broker(base)
    assert rabbitmqctl("list_users") is not None, "rabbitmqctl cannot manage the broker"
    run = uuid4().hex[:8]
    name = f"apollo-perm-{run}"
    logins = {"service": f"apollo-service-{run}", "agent": f"claude-agent-{run}"}
    secret = uuid4().hex
    permissions = readme_permissions()
    assert {"apollo-service", "claude-agent"} <= permissions.keys(), permissions
    created: list[str] = []
    try:
        assert rabbitmqctl("add_vhost", name) is not None
        for role, login in logins.items():
            assert rabbitmqctl("add_user", login, secret) is not None
            created.append(login)
            readme_user = "apollo-service" if role == "service" else "claude-agent"
            granted = rabbitmqctl("set_permissions", "-p", name, login, *permissions[readme_user])
            assert granted is not None

        def url(login: str) -> str:
            base_url = URL(base).with_user(login).with_password(secret)
            return str(base_url.with_path("/" + quote(name, safe=""), encoded=True))

        yield Vhost(name, url(logins["service"]), url(logins["agent"]), *logins.values())
    finally:
        rabbitmqctl("delete_vhost", name)
        for login in created:
            rabbitmqctl("delete_user", login)


@pytest.fixture
async def service(vhost: Vhost) -> AsyncIterator[ApolloService]:
    """The service on the vhost, as its own login (the only gateway); it declares the
    topology."""
    settings = Settings(embedder="hashing", gateway_users=frozenset({vhost.service_login}))
    bus = await AiormqBus.connect(vhost.service_url, topology=Topology(), max_redeliveries=1)
    apollo = Apollo.in_memory()
    running = ApolloService(apollo, bus, settings)
    await running.start()
    try:
        yield running
    finally:
        await running.stop()
        await bus.close()
        await apollo.close()


async def test_an_agent_stores_and_queries_through_the_service(
    vhost: Vhost, service: ApolloService
):
    """Client mode works with an agent's permissions: no topology declared, replies taken
    only from the service's login."""
    async with Apollo.client_mode(
        vhost.agent_url,
        agent_id=vhost.agent_login,
        declare_topology=False,
        service_users={vhost.service_login},
        rpc_timeout=PATIENCE,
    ) as client:
        await client.store_knowledge(content="Broker permissions keep agents in their lane")

        async def stored() -> bool:
            return (await service.apollo.stats()).total == 1

        await eventually_within(PATIENCE, stored, "the entry stored")
        found = await client.query_knowledge("broker permissions agents", min_confidence=0)
    assert isinstance(found, QueryResult)
    assert [vhost.agent_login] == [view.source_agent for view in found.entries]


async def test_an_agent_cannot_read_the_query_queue(vhost: Vhost, service: ApolloService):
    """Reading requests is what answering others' queries takes; the broker refuses it."""
    bus = await AiormqBus.connect(vhost.agent_url, declare_topology=False)
    try:

        async def answer(delivery: Delivery) -> None:  # pragma: no cover - never delivered
            await delivery.ack()

        with pytest.raises(TransportError):
            await bus.consume(service.topology.query_queue, answer)
    finally:
        await bus.close()


@pytest.mark.parametrize("queue", ["query_queue", "ingest_queue"])
async def test_an_agent_cannot_publish_straight_into_a_queue(
    vhost: Vhost, service: ApolloService, queue: str
):
    """The default exchange (straight into a queue, a reply queue included) is the
    service's: an agent publishes only through Apollo's exchanges."""
    bus = await AiormqBus.connect(vhost.agent_url, declare_topology=False)
    try:
        target = getattr(service.topology, queue)
        with pytest.raises(TransportError):
            await bus.publish(Message(target, b"{}", user_id=vhost.agent_login), exchange="")
    finally:
        await bus.close()


async def test_an_agent_cannot_reconfigure_the_topology(vhost: Vhost, service: ApolloService):
    """Declaring (and so deleting or rebinding) Apollo's queues and exchanges is the
    service's."""
    with pytest.raises(TransportError):
        await AiormqBus.connect(vhost.agent_url, topology=Topology())
