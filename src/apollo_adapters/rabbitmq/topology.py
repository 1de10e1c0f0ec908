"""Declaring Apollo's topology on RabbitMQ, and mapping aiormq failures to TransportError."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import aiormq

from apollo_adapters.bus_support import describe
from apollo_domain.errors import TransportError
from apollo_domain.topology import Topology

if TYPE_CHECKING:
    from aiormq.abc import AbstractChannel


async def declare_topology(channel: AbstractChannel, topology: Topology) -> None:
    """Declare every exchange, queue and binding of ``topology`` on ``channel``.

    Idempotent: declaring again changes nothing and keeps every binding. Raises
    :class:`TransportError` when an entity exists with other settings (for instance a
    queue declared earlier without the dead-letter exchange) or the broker is gone.
    """
    with translate_amqp_errors("declaring the topology"):
        for exchange in topology.exchanges:
            await channel.exchange_declare(exchange.name, exchange_type=exchange.type, durable=True)
        for queue in topology.queues:
            arguments: dict[str, Any] = {}
            if queue.dead_letter_exchange is not None:
                arguments["x-dead-letter-exchange"] = queue.dead_letter_exchange
            await channel.queue_declare(queue.name, durable=True, arguments=arguments)
        for binding in topology.bindings:
            await channel.queue_bind(
                binding.queue, binding.exchange, routing_key=binding.routing_key
            )


@contextmanager
def translate_amqp_errors(action: str) -> Iterator[None]:
    """Turn aiormq and socket failures into :class:`TransportError` naming ``action``."""
    try:
        yield
    except TransportError:
        raise
    except TimeoutError as e:
        raise TransportError(f"{action}: timed out") from e
    except (aiormq.AMQPError, aiormq.ChannelInvalidStateError, OSError, RuntimeError) as e:
        raise TransportError(f"{action}: {describe(e)}") from e


__all__ = ["declare_topology", "translate_amqp_errors"]
