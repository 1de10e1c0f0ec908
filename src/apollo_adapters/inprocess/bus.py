"""``InProcessBus``: the message bus inside one process, on asyncio.

It routes like the broker would (the topology's exchanges and bindings, the default exchange
by queue name, topic patterns with ``*`` and ``#``), refuses unroutable messages, keeps
unsettled deliveries per consumer, dead-letters with the reason and retries with a bounded
backoff. Nothing is durable: queued messages live as long as the bus.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Collection, Sequence
from uuid import uuid4

from attrs import define, evolve, field

from apollo_adapters.bus_support import exponential_backoff, run_handler
from apollo_domain.errors import RpcTimeout, TransportError, ValidationError
from apollo_domain.ports.messaging import (
    DEAD_LETTER_QUEUE_HEADER,
    DEAD_LETTER_REASON_HEADER,
    MAX_DELAY_SECONDS,
    DeadLetter,
    Message,
    MessageHandler,
)
from apollo_domain.ports.topology import Topology

log = logging.getLogger(__name__)

#: The reply queues of requests, named like the broker names them (a reply queue).
_REPLY_PREFIX = "amq.gen-inprocess-"


@define
class _Pending:
    """A request waiting for its reply, and whose replies it takes (None: anyone's)."""

    future: asyncio.Future[Message]
    repliers: Collection[str] | None


@define
class _Queue:
    name: str
    dead_letters: bool
    messages: deque[Message] = field(factory=deque)
    consumers: list[_Consumer] = field(factory=list)
    next_consumer: int = 0


class InProcessBus:
    """:class:`apollo_domain.ports.messaging.MessageBus` in one process.

    ``login``, when given, plays the broker's part for ``user_id``: a publish whose
    ``user_id`` differs from it raises :class:`TransportError`.
    """

    def __init__(
        self,
        topology: Topology | None = None,
        *,
        max_redeliveries: int = 5,
        retry_backoff: Callable[[int], float] = exponential_backoff,
        login: str | None = None,
        close_timeout: float = 30.0,
    ) -> None:
        self.topology = topology or Topology()
        self.login = login
        self._max_redeliveries = max_redeliveries
        self._retry_backoff = retry_backoff
        self._close_timeout = close_timeout
        self._exchanges = {exchange.name: exchange.type for exchange in self.topology.exchanges}
        self._queues = {
            queue.name: _Queue(queue.name, queue.dead_letter_exchange is not None)
            for queue in self.topology.queues
        }
        self._bindings = self.topology.bindings
        self._pending: dict[str, _Pending] = {}
        self._closing = False
        self._closed = False

    # ---------------------------------------------------------------------------- publish

    async def publish(self, message: Message, *, exchange: str | None = None) -> None:
        self._check_open()
        if self.login is not None and message.user_id not in (None, self.login):
            raise TransportError(
                f"user_id {message.user_id!r} differs from the publisher's login {self.login!r}"
            )
        if not message.message_id:
            message = evolve(message, message_id=uuid4().hex)
        exchange = self.topology.exchange if exchange is None else exchange
        for queue in self._route(exchange, message.routing_key):
            self._enqueue(queue, _as_published(message))
        if exchange == "":
            self._answer(message)

    async def publish_many(
        self, messages: Sequence[Message], *, exchange: str | None = None
    ) -> None:
        self._check_open()
        for message in messages:
            await self.publish(message, exchange=exchange)

    def _route(self, exchange: str, routing_key: str) -> list[_Queue]:
        target = f"exchange {exchange!r} with routing key {routing_key!r}"
        if exchange == "" and routing_key in self._pending:
            return []  # a reply queue: see publish
        if exchange == "":
            queue = self._queues.get(routing_key)
            if queue is None:
                raise TransportError(f"unroutable: no queue bound to {target}")
            return [queue]
        kind = self._exchanges.get(exchange)
        if kind is None:
            raise TransportError(f"the exchange {exchange!r} does not exist")
        names = [
            binding.queue
            for binding in self._bindings
            if binding.exchange == exchange
            and (
                kind == "fanout"
                or (kind == "direct" and binding.routing_key == routing_key)
                or (kind == "topic" and _topic_matches(binding.routing_key, routing_key))
            )
        ]
        if not names:
            raise TransportError(f"unroutable: no queue bound to {target}")
        return [self._queues[name] for name in dict.fromkeys(names)]

    def _enqueue(self, queue: _Queue, message: Message, *, front: bool = False) -> None:
        if front:
            queue.messages.appendleft(message)
        else:
            queue.messages.append(message)
        self._dispatch(queue)

    def _dispatch(self, queue: _Queue) -> None:
        """Hand queued messages to consumers with room, round robin."""
        while queue.messages:
            ready = [consumer for consumer in queue.consumers if consumer.has_room()]
            if not ready:
                return
            consumer = ready[queue.next_consumer % len(ready)]
            queue.next_consumer += 1
            consumer.deliver(queue.messages.popleft())

    def _check_open(self) -> None:
        if self._closed:
            raise TransportError("the bus is closed")

    # ---------------------------------------------------------------------------- consume

    async def consume(
        self, queue: str, handler: MessageHandler, *, prefetch: int = 10
    ) -> _Consumer:
        if self._closing:
            raise TransportError("the bus is closed")
        if prefetch < 1:
            raise ValidationError("prefetch", "must be at least 1")
        target = self._queues.get(queue)
        if target is None:
            raise TransportError(f"consuming from {queue!r}: no such queue")
        consumer = _Consumer(self, target, handler, prefetch)
        target.consumers.append(consumer)
        self._dispatch(target)
        return consumer

    async def _requeue(self, queue: _Queue, message: Message) -> None:
        self._check_open()
        self._enqueue(queue, message)

    async def _dead_letter(self, queue: _Queue, message: Message, reason: str) -> None:
        self._check_open()
        headers = {
            **message.headers,
            DEAD_LETTER_REASON_HEADER: reason,
            DEAD_LETTER_QUEUE_HEADER: queue.name,
        }
        self._enqueue(
            self._queues[self.topology.dead_letter_queue],
            _as_published(evolve(message, headers=headers)),
        )

    # -------------------------------------------------------------------------------- RPC

    async def request(
        self,
        message: Message,
        *,
        timeout: float,  # noqa: ASYNC109
        repliers: Collection[str] | None = None,
    ) -> Message:
        if self._closing:
            raise TransportError("the bus is closed")
        correlation_id = message.correlation_id or uuid4().hex
        reply_to = _REPLY_PREFIX + correlation_id
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[reply_to] = _Pending(future, repliers)
        try:
            await self.publish(evolve(message, reply_to=reply_to, correlation_id=correlation_id))
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError as e:
            if isinstance(e, TransportError):
                raise
            raise RpcTimeout(f"no reply to {message.routing_key!r} within {timeout:g}s") from e
        finally:
            self._pending.pop(reply_to, None)

    async def reply(self, request: Message, body: bytes) -> None:
        self._check_open()
        if not request.reply_to:
            raise ValidationError("reply_to", "the request has no reply_to")
        self._answer(
            Message(
                routing_key=request.reply_to,
                body=body,
                message_id=uuid4().hex,
                user_id=self.login,
                correlation_id=request.correlation_id,
            )
        )

    def _answer(self, reply: Message) -> None:
        """A message published to a reply queue: the answer of its request, when its
        ``user_id`` is one of the request's repliers (else dropped, logged)."""
        pending = self._pending.get(reply.routing_key)
        if pending is None or pending.future.done():
            return
        if pending.repliers is not None and reply.user_id not in pending.repliers:
            log.warning(
                "dropped a reply to %s from %r, not a service login",
                reply.routing_key,
                reply.user_id,
            )
            return
        pending.future.set_result(evolve(reply, delivery_count=1))

    # ------------------------------------------------------------------------ dead letters

    async def drain_dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        self._check_open()
        queue = self._queues[self.topology.dead_letter_queue]
        letters: list[DeadLetter] = []
        while queue.messages and len(letters) < limit:
            message = evolve(queue.messages.popleft(), delivery_count=1)
            letters.append(
                DeadLetter(
                    message=message,
                    reason=str(message.headers[DEAD_LETTER_REASON_HEADER]),
                    queue=str(message.headers[DEAD_LETTER_QUEUE_HEADER]),
                )
            )
        return letters

    # ------------------------------------------------------------------------------ close

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        consumers = [consumer for queue in self._queues.values() for consumer in queue.consumers]
        await asyncio.gather(*(consumer.cancel() for consumer in consumers))
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(TransportError("the bus is closed"))
        self._closed = True


class _Consumer:
    """A :class:`Subscription`: at most ``prefetch`` unsettled deliveries at once."""

    def __init__(
        self, bus: InProcessBus, queue: _Queue, handler: MessageHandler, prefetch: int
    ) -> None:
        self.queue = queue.name
        self._bus = bus
        self._queue = queue
        self._handler = handler
        self._prefetch = prefetch
        self._unsettled: dict[int, Message] = {}
        self._in_flight: set[asyncio.Task[None]] = set()
        self._cancelled = False

    def has_room(self) -> bool:
        return not self._cancelled and len(self._unsettled) < self._prefetch

    def deliver(self, queued: Message) -> None:
        message = evolve(
            queued,
            delivery_count=queued.delivery_count + 1,
            redelivered=queued.redelivered or queued.delivery_count > 0,
        )
        delivery = _Delivery(self, message)
        self._unsettled[id(delivery)] = queued
        task = asyncio.get_running_loop().create_task(self._handle(delivery))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    def settled(self, delivery: _Delivery) -> None:
        self._unsettled.pop(id(delivery), None)
        self._bus._dispatch(self._queue)

    async def _handle(self, delivery: _Delivery) -> None:
        await run_handler(self._handler, delivery, self.queue, lambda: delivery.is_settled)

    async def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        with contextlib.suppress(ValueError):
            self._queue.consumers.remove(self)
        if self._in_flight:
            _, late = await asyncio.wait(set(self._in_flight), timeout=self._bus._close_timeout)
            for task in late:
                task.cancel()
        # Unsettled deliveries go back to the front of the queue, as the broker does.
        for queued in reversed(list(self._unsettled.values())):
            self._queue.messages.appendleft(evolve(queued, redelivered=True))
        self._unsettled.clear()
        self._bus._dispatch(self._queue)


class _Delivery:
    def __init__(self, consumer: _Consumer, message: Message) -> None:
        self.message = message
        self.is_settled = False
        self._consumer = consumer

    async def ack(self) -> None:
        if self._settle():
            self._consumer.settled(self)

    async def reject(self, reason: str) -> None:
        if self._settle():
            await self._dead_letter(reason)

    async def retry(self, reason: str) -> None:
        if not self._settle():
            return
        bus = self._consumer._bus
        failed = self.message.delivery_count
        if failed > bus._max_redeliveries:
            await self._dead_letter(f"gave up after {failed} attempts: {reason}")
            return
        await asyncio.sleep(bus._retry_backoff(failed))
        try:
            await bus._requeue(self._consumer._queue, self.message)
        finally:
            self._consumer.settled(self)

    async def delay(self, seconds: float, reason: str) -> None:
        if not self._settle():
            return
        await asyncio.sleep(min(max(0.0, seconds), MAX_DELAY_SECONDS))
        try:  # queued with the count it had: the next delivery counts the same
            again = evolve(self.message, delivery_count=self.message.delivery_count - 1)
            await self._consumer._bus._requeue(self._consumer._queue, again)
        finally:
            self._consumer.settled(self)

    def _settle(self) -> bool:
        first = not self.is_settled
        self.is_settled = True
        return first

    async def _dead_letter(self, reason: str) -> None:
        try:
            await self._consumer._bus._dead_letter(self._consumer._queue, self.message, reason)
        finally:
            self._consumer.settled(self)


def _as_published(message: Message) -> Message:
    return evolve(message, redelivered=False, delivery_count=0)


def _topic_matches(pattern: str, routing_key: str) -> bool:
    """AMQP topic matching: ``*`` is exactly one word, ``#`` zero or more words."""
    return _words_match(pattern.split("."), routing_key.split("."))


def _words_match(pattern: list[str], words: list[str]) -> bool:
    if not pattern:
        return not words
    head, rest = pattern[0], pattern[1:]
    if head == "#":
        return any(_words_match(rest, words[skip:]) for skip in range(len(words) + 1))
    return bool(words) and head in ("*", words[0]) and _words_match(rest, words[1:])


__all__ = ["InProcessBus"]
