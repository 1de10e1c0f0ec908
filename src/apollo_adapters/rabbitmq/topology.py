"""Declaring Apollo's topology on RabbitMQ, and mapping aiormq failures to TransportError."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import aiormq

from apollo_adapters.bus_support import describe
from apollo_domain.errors import TransportError
from apollo_domain.ports.topology import Queue, Topology, check_queue_type

if TYPE_CHECKING:
    from aiormq.abc import AbstractChannel


#: A quorum queue dead-letters a message the broker itself has handed out this many times
#: more than once (``x-delivery-limit``, reason ``delivery_limit``): consumers that died or
#: lost their connection holding it, as a message that crashes its consumer does. The bus's
#: own retries do not count here: it acknowledges a failed delivery and publishes a copy
#: carrying the attempt number (``max_redeliveries`` bounds those, and the dead letter's
#: reason names the attempts). One fixed value, as the broker refuses to declare a queue
#: again with another limit.
QUORUM_DELIVERY_LIMIT = 20


def queue_arguments(queue: Queue, queue_type: str) -> dict[str, Any]:
    """The ``x-`` arguments ``queue`` is declared with as a ``queue_type`` queue
    (:data:`apollo_domain.ports.topology.QUEUE_TYPES`)."""
    arguments: dict[str, Any] = {"x-queue-type": check_queue_type(queue_type)}
    if queue.dead_letter_exchange is not None:
        arguments["x-dead-letter-exchange"] = queue.dead_letter_exchange
        if queue_type == "quorum":
            # At-least-once dead-lettering keeps a dead letter until the dead-letter queue
            # confirms it; RabbitMQ requires reject-publish overflow for it.
            arguments["x-dead-letter-strategy"] = "at-least-once"
            arguments["x-overflow"] = "reject-publish"
            arguments["x-delivery-limit"] = QUORUM_DELIVERY_LIMIT
    return arguments


async def declare_topology(
    channel: AbstractChannel, topology: Topology, *, queue_type: str = "quorum"
) -> None:
    """Declare every exchange, queue and binding of ``topology`` on ``channel``, each queue
    durable and of ``queue_type`` (:func:`queue_arguments`).

    Idempotent: declaring again changes nothing and keeps every binding. Raises
    :class:`TransportError` when an entity exists with other settings (for instance a
    classic queue where a quorum queue is asked for: the message names
    ``APOLLO_QUEUE_TYPE`` and ``APOLLO_QUEUE_PREFIX``) or the broker is gone.
    """
    with translate_amqp_errors("declaring the topology"):
        for exchange in topology.exchanges:
            await channel.exchange_declare(exchange.name, exchange_type=exchange.type, durable=True)
        for queue in topology.queues:
            arguments = queue_arguments(queue, queue_type)
            try:
                await channel.queue_declare(queue.name, durable=True, arguments=arguments)
            except aiormq.ChannelPreconditionFailed as e:
                raise TransportError(
                    f"declaring the topology: queue {queue.name!r} exists with other"
                    f" arguments than a {queue_type} queue of Apollo's ({describe(e)});"
                    " set APOLLO_QUEUE_TYPE to the type it was declared with, or choose a"
                    " new APOLLO_QUEUE_PREFIX and drain the old queues"
                ) from None
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


__all__ = [
    "QUORUM_DELIVERY_LIMIT",
    "declare_topology",
    "queue_arguments",
    "translate_amqp_errors",
]
