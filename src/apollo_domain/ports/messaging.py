"""The message bus port: durable messaging between client-mode agents and the service.

Two adapters implement it: ``AiormqBus`` (RabbitMQ) and ``InProcessBus`` (asyncio, for the
embedded default and tests); ``tests/contract`` checks both against this contract.

Vocabulary
----------
*Publishing* routes a message through an exchange (by default Apollo's own direct exchange,
``legion.apollo``) to every queue bound with a matching routing key. *Consuming* attaches a
handler to one queue. Each delivery is *settled* exactly once by the handler: ``ack``
(done), ``reject`` (can never succeed: dead-letter it) or ``retry`` (transient failure:
deliver it again later). Every queue dead-letters into one dead-letter queue, where each
message carries the reason it died.

Guarantees
----------
- At-least-once: a message is removed from its queue only by ``ack``, ``reject`` or the last
  ``retry``. A handler that crashes, or a connection lost before the settlement reached the
  broker, means a redelivery. ``message_id`` survives redelivery, so handlers deduplicate by
  it when a repeat would matter.
- Ordering: messages published by one publisher to one queue are delivered in publish
  order. Handlers of one consumer run concurrently (up to ``prefetch``), so processing order
  equals publish order only with ``prefetch=1``. A retried message goes to the back of its
  queue.
- Errors: adapters raise only :mod:`apollo_domain.errors` types; a broker that cannot be
  reached, a publish the broker did not confirm or could not route, and any use of a closed
  bus raise :class:`TransportError`; an RPC without a reply in time raises
  :class:`RpcTimeout` (a :class:`TransportError`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from attrs import frozen

#: Header that carries the reason of a dead-lettered message.
DEAD_LETTER_REASON_HEADER = "x-apollo-error"
#: Header that names the queue a dead-lettered message died on.
DEAD_LETTER_QUEUE_HEADER = "x-apollo-queue"


#: What a ``reply_to`` must start with: a broker-named queue of the requester
#: (``amq.gen-…``) or RabbitMQ's direct reply-to. A service queue is never a reply queue.
REPLY_QUEUE_PREFIXES = ("amq.gen-", "amq.rabbitmq.reply-to")


def reply_queue_refusal(reply_to: str | None) -> str | None:
    """Why an RPC request's ``reply_to`` is not answered (None: it is a reply queue). A
    reply to any other queue would make the service publish, as itself, where the
    requester chose: into its own ingest queue, say."""
    if not reply_to:
        return "an RPC request needs reply_to"
    if not reply_to.startswith(REPLY_QUEUE_PREFIXES):
        allowed = " or ".join(f"{prefix!r}…" for prefix in REPLY_QUEUE_PREFIXES)
        return f"reply_to {reply_to[:200]!r} is not a reply queue ({allowed})"
    return None


@frozen
class Message:
    """A message on the bus.

    ``message_id`` identifies the message across redeliveries and retries (the bus fills it
    in when empty). ``headers`` values are ``str``, ``int``, ``float``, ``bool`` or
    ``bytes``; names starting with ``x-apollo-`` are reserved for the bus.

    ``user_id`` is the publisher's identity. Over RabbitMQ the broker checks it against the
    login of the publishing connection and refuses a publish whose ``user_id`` differs, so a
    consumer may trust it; a publish without ``user_id`` carries no identity.

    ``delivery_count`` is 0 on a message as published, 1 on its first delivery and one more
    on each retry; ``redelivered`` is true on any delivery but the first (a retry, or a
    delivery repeated after a lost connection).
    """

    routing_key: str
    body: bytes
    message_id: str = ""
    headers: Mapping[str, Any] = {}
    user_id: str | None = None
    reply_to: str | None = None
    correlation_id: str | None = None
    redelivered: bool = False
    delivery_count: int = 0


#: The longest a delivery waits in :meth:`Delivery.delay` before it is queued again.
MAX_DELAY_SECONDS = 5.0


@frozen
class DeadLetter:
    """A message that can never succeed, taken off the dead-letter queue.

    ``queue`` is the queue it died on and ``reason`` why (the ``reject`` reason, ``gave up
    after N attempts: <last retry reason>``, or the broker's own reason such as ``expired``).
    ``message`` keeps the original routing key, body, ``message_id``, headers and user id.
    """

    message: Message
    reason: str
    queue: str


class Delivery(Protocol):
    """One delivery of ``message`` to a handler, settled exactly once.

    The first settlement counts; settling again does nothing. A handler that raises is
    treated as ``retry`` with the exception as reason, and one that returns without settling
    as ``retry("not settled by the handler")``. A settlement that cannot reach the broker
    raises :class:`TransportError`; the broker then delivers the message again.
    """

    message: Message

    async def ack(self) -> None:
        """Done: remove the message from its queue."""

    async def reject(self, reason: str) -> None:
        """Never retry: move the message to the dead-letter queue with ``reason``.

        Returns once the dead letter is safely stored.
        """

    async def retry(self, reason: str) -> None:
        """Transient failure: deliver the message again after a backoff.

        The next delivery has ``delivery_count`` one higher and ``redelivered`` set. A
        message already delivered ``1 + max_redeliveries`` times is dead-lettered instead,
        with the reason ``gave up after N attempts: <reason>``. Returns once the message
        is queued again (or dead-lettered); the delivery counts against ``prefetch``
        until then, backoff included.
        """

    async def delay(self, seconds: float, reason: str) -> None:
        """Not yet: deliver the message again after ``seconds`` (at most
        :data:`MAX_DELAY_SECONDS` held here; a longer wait is taken again on the next
        delivery), at the back of its queue. Not a failed attempt: ``delivery_count``
        stays as it is and no number of delays dead-letters the message. Returns once
        the message is queued again; the delivery counts against ``prefetch`` until then.
        """


class MessageHandler(Protocol):
    async def __call__(self, delivery: Delivery) -> None: ...


class Subscription(Protocol):
    """A consumer attached by :meth:`MessageBus.consume`."""

    queue: str

    async def cancel(self) -> None:
        """Stop receiving; wait for the handlers in flight to finish; return every delivery
        that is still unsettled to its queue. Cancelling again does nothing."""


class MessageBus(Protocol):
    """Durable messaging with publisher confirms, manual acks, dead letters and RPC.

    ``close`` drains: it stops every consumer, waits for the handlers in flight (and their
    settlements), fails pending RPC requests with :class:`TransportError`, then releases
    the connection. Any call after ``close`` raises :class:`TransportError`.
    """

    async def publish(self, message: Message, *, exchange: str | None = None) -> None:
        """Route ``message`` through ``exchange`` (default: the bus's own exchange).

        Returns only once the broker has taken responsibility for the message (publisher
        confirm; persistent on durable queues). Raises :class:`TransportError` when the
        message is unroutable (no queue bound for its routing key), the exchange does not
        exist, the broker refuses it (e.g. a ``user_id`` other than the login), or the
        broker cannot be reached. A publish interrupted by a lost connection is repeated
        after reconnecting (bounded), so it may arrive twice, with the same ``message_id``.
        """

    async def publish_many(
        self, messages: Sequence[Message], *, exchange: str | None = None
    ) -> None:
        """Route every one of ``messages``, in order, through ``exchange`` like :meth:`publish`,
        without waiting for each confirm before sending the next (a bounded number are
        unconfirmed at once).

        Returns only once the broker has confirmed every message; otherwise raises.
        Messages are published in the order given, so one queue receives them in that
        order. After a lost connection the unconfirmed ones are published again, in order
        and with the same ``message_id`` (bounded like :meth:`publish`): a message may
        therefore arrive twice, which handlers deduplicating by ``message_id`` absorb. A
        refused message (unroutable, no such exchange, a foreign ``user_id``) raises
        :class:`TransportError` like :meth:`publish`, for the first refused one in order:
        the messages before it are confirmed; those after it may or may not have been
        published (the ones sent before the refusal was known). An empty ``messages``
        does nothing.
        """

    async def consume(
        self, queue: str, handler: MessageHandler, *, prefetch: int = 10
    ) -> Subscription:
        """Attach ``handler`` to ``queue``; at most ``prefetch`` unsettled deliveries at once.

        Returns once the consumer is active. Consumers survive a reconnect. Raises
        :class:`TransportError` when the queue does not exist.
        """

    async def request(
        self,
        message: Message,
        *,
        timeout: float,  # noqa: ASYNC109
        repliers: Collection[str] | None = None,
    ) -> Message:
        """RPC: publish ``message`` with ``reply_to`` (a queue of this bus, named with one of
        :data:`REPLY_QUEUE_PREFIXES`) and a ``correlation_id`` (both set by the bus) and
        return the reply. With ``repliers``, only a reply whose broker-verified ``user_id``
        is one of them is taken: any other (a forgery by whoever could read the request) is
        dropped and logged, and the wait goes on. Raises :class:`RpcTimeout` when no
        reply is taken within ``timeout`` seconds, and :class:`TransportError` like
        :meth:`publish`."""

    async def reply(self, request: Message, body: bytes) -> None:
        """Answer an RPC ``request`` (same ``correlation_id``), with this bus's login as the
        reply's ``user_id`` so the requester can tell it is the service's. A requester
        that is gone is not an error: the reply is dropped. Raises
        :class:`ValidationError` when ``request`` has no ``reply_to``."""

    async def drain_dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """Remove and return up to ``limit`` messages from the dead-letter queue, oldest
        first. (The dead-letter queue can also be consumed like any other queue; its
        messages carry :data:`DEAD_LETTER_REASON_HEADER` and :data:`DEAD_LETTER_QUEUE_HEADER`.)
        """

    async def close(self) -> None:
        """Drain and release (see the class docstring). Closing again does nothing."""


@runtime_checkable
class BrokerLink(Protocol):
    """A bus's connection to a broker, which it re-establishes when lost (the RabbitMQ
    bus; the in-process bus has none). The service reports it in ``/health`` and
    ``/metrics``."""

    @property
    def connected(self) -> bool:
        """Whether the bus has a broker connection now."""

    @property
    def node(self) -> str:
        """The address of the broker node in use (or last used), without credentials."""

    @property
    def reconnects(self) -> int:
        """Connections re-established after a lost one, since the bus opened."""

    @property
    def redeliveries(self) -> Mapping[str, int]:
        """Deliveries to this bus's consumers that were not a message's first, since the bus
        opened, by cause: ``returned`` (the broker handed the message out before, to a
        consumer that was lost without settling it: a dropped connection, a killed
        process) and ``retried`` (a copy the bus put back after a failed handler)."""


__all__ = [
    "DEAD_LETTER_QUEUE_HEADER",
    "DEAD_LETTER_REASON_HEADER",
    "MAX_DELAY_SECONDS",
    "REPLY_QUEUE_PREFIXES",
    "BrokerLink",
    "DeadLetter",
    "Delivery",
    "Message",
    "MessageBus",
    "MessageHandler",
    "Subscription",
    "reply_queue_refusal",
]
