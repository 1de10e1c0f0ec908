"""Fixtures of the contract suites: each runs one suite against every adapter of a port."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

# ======================================================================================
# Message bus fixtures (MessageBus: InProcessBus and AiormqBus)
# ======================================================================================
from attrs import define, field
from yarl import URL

from apollo_adapters.inprocess import InProcessBus
from apollo_adapters.rabbitmq import AiormqBus
from apollo_domain.ports.messaging import MessageBus
from apollo_domain.ports.topology import Topology
from tests.rabbitmq_support import (
    amqp_test_url,
    delete_topology,
    release_test_broker,
    start_test_broker,
)


@pytest.fixture(scope="session")
def bus_amqp_url() -> Iterator[str]:
    """The URL of this run's RabbitMQ vhost; a broker that cannot be started fails the run."""
    url = amqp_test_url()
    yield url
    release_test_broker()


def _no_backoff(attempt: int) -> float:
    return 0.01


@define
class BusFactory:
    """Opens buses of one adapter on one topology; ``durable`` says whether messages
    outlive a bus (true for RabbitMQ: a later bus sees what an earlier one left)."""

    name: str
    topology: Topology
    login: str
    durable: bool
    url: str | None = None
    opened: list[MessageBus] = field(factory=list)

    async def __call__(self, *, max_redeliveries: int = 2) -> MessageBus:
        bus: MessageBus
        if self.url is None:
            bus = InProcessBus(
                self.topology,
                max_redeliveries=max_redeliveries,
                retry_backoff=_no_backoff,
                login=self.login,
                close_timeout=10.0,
            )
        else:
            bus = await AiormqBus.connect(
                self.url,
                topology=self.topology,
                max_redeliveries=max_redeliveries,
                retry_backoff=_no_backoff,
                reconnect_timeout=10.0,
                publish_timeout=10.0,
                close_timeout=10.0,
            )
        self.opened.append(bus)
        return bus


@pytest.fixture(params=["inprocess", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
async def bus_factory(request: pytest.FixtureRequest) -> AsyncIterator[BusFactory]:
    """A :class:`BusFactory` per adapter, on a topology of its own."""
    if request.param == "inprocess":
        factory = BusFactory("inprocess", Topology(), login="guest", durable=False)
    else:
        url = request.getfixturevalue("bus_amqp_url")
        topology = start_test_broker().topology()
        login = URL(url).user or "guest"
        factory = BusFactory("rabbitmq", topology, login=login, durable=True, url=url)
    yield factory
    for bus in factory.opened:
        await bus.close()
    if factory.url is not None:
        await delete_topology(factory.url, factory.topology)


# ======================================================================================
# End of the message bus fixtures
# ======================================================================================


# ======================================================================================
# Store fixtures (every store adapter: in-memory and PostgreSQL)
# ======================================================================================

from tests.contract.stores import make_apollo, store, store_kind  # noqa: E402, F401
