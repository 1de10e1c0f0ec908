"""``AiormqBus``: the message bus over RabbitMQ (aiormq).

Publishes go through one channel in confirm mode, ``mandatory`` and persistent; each
consumer gets its own channel so that its ``prefetch`` is a broker-enforced bound.
``publish_many`` pipelines that channel: it sends up to ``publish_window`` messages before
their confirms arrive, in order (aiormq takes the channel's lock first come, first served). A
supervisor task reconnects after a lost connection and re-establishes every consumer.

Retries and dead letters are published by the bus itself: a retry goes back to the queue it
came from through the default exchange (no other queue bound to the same key sees it again)
with an attempt counter; a dead letter goes to the dead-letter exchange with the reason. The
bus stamps those copies with its own login as ``user_id`` and keeps the original identity,
routing key and attempt counter in ``x-apollo-*`` headers, which it honours only on messages
whose broker-verified ``user_id`` is its own login. Agents must therefore never share the
service's login.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import partial
from typing import Any
from uuid import uuid4

import aiormq
from aiormq.abc import AbstractChannel, AbstractConnection, DeliveredMessage
from attrs import evolve, frozen
from pamqp import commands as spec
from yarl import URL

from apollo_adapters.bus_support import describe, exponential_backoff, run_handler
from apollo_domain.errors import RpcTimeout, TransportError, ValidationError
from apollo_domain.ports.messaging import (
    DEAD_LETTER_QUEUE_HEADER,
    DEAD_LETTER_REASON_HEADER,
    MAX_DELAY_SECONDS,
    DeadLetter,
    Message,
    MessageHandler,
)
from apollo_domain.ports.topology import Topology, check_queue_type
from apollo_domain.secrets import redact

from .nodes import address, node_urls
from .topology import declare_topology, translate_amqp_errors

log = logging.getLogger(__name__)

ATTEMPTS_HEADER = "x-apollo-attempts"
ROUTING_KEY_HEADER = "x-apollo-routing-key"
EXCHANGE_HEADER = "x-apollo-exchange"
USER_ID_HEADER = "x-apollo-user-id"
_BUS_HEADERS = frozenset({ATTEMPTS_HEADER, ROUTING_KEY_HEADER, EXCHANGE_HEADER, USER_ID_HEADER})
_BROKER_HEADER_PREFIXES = ("x-death", "x-first-death-", "x-last-death-")

PERSISTENT = 2
TRANSIENT = 1
#: Causes of a redelivery (:attr:`AiormqBus.redeliveries`).
RETURNED = "returned"
RETRIED = "retried"


class _ConnectionLost(Exception):
    """Internal: the operation failed because the connection went away."""


class AiormqBus:
    """:class:`apollo_domain.ports.messaging.MessageBus` over RabbitMQ. Open with :meth:`connect`.

    ``url`` names one RabbitMQ node or several, comma-separated (the nodes of one cluster,
    all with the same login): the bus connects to the first that answers and, when the
    connection is lost, to the next ones in turn. The ``user_id`` of a published message
    must equal that login: RabbitMQ refuses any other (:class:`TransportError`).
    """

    def __init__(
        self,
        url: str,
        *,
        topology: Topology,
        max_redeliveries: int,
        retry_backoff: Callable[[int], float],
        reconnect_timeout: float,
        publish_attempts: int,
        publish_timeout: float,
        close_timeout: float,
        gateway_users: frozenset[str] | None = None,
        publish_window: int = 256,
        declare_topology: bool = True,
        queue_type: str = "quorum",
    ) -> None:
        if publish_window < 1:
            raise ValidationError("publish_window", "must be at least 1")
        self._queue_type = check_queue_type(queue_type)
        self._nodes = node_urls(url)
        self._secrets = tuple(URL(node).password for node in self._nodes)
        self._node = 0
        self._declare = declare_topology
        self._gateway_users = gateway_users
        self.topology = topology
        self.login: str = URL(self._nodes[0]).user or "guest"
        #: Connections re-established after a lost one.
        self.reconnects = 0
        self._redeliveries = {RETURNED: 0, RETRIED: 0}
        self._max_redeliveries = max_redeliveries
        self._retry_backoff = retry_backoff
        self._reconnect_timeout = reconnect_timeout
        self._publish_attempts = publish_attempts
        self._publish_timeout = publish_timeout
        self._publish_window = publish_window
        self._close_timeout = close_timeout

        self._connection: AbstractConnection | None = None
        self._publish_channel: AbstractChannel | None = None
        self._channel_lock = asyncio.Lock()
        self._generation = 0
        self._changed = asyncio.Condition()
        self._reply_queue = ""
        self._pending: dict[str, _Pending] = {}
        self._consumers: list[_Consumer] = []
        self._supervisor: asyncio.Task[None] | None = None
        self._closing = False
        self._closed = False

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        topology: Topology | None = None,
        max_redeliveries: int = 5,
        retry_backoff: Callable[[int], float] = exponential_backoff,
        reconnect_timeout: float = 30.0,
        publish_attempts: int = 3,
        publish_timeout: float = 30.0,
        close_timeout: float = 30.0,
        gateway_users: frozenset[str] | None = None,
        publish_window: int = 256,
        declare_topology: bool = True,
        queue_type: str = "quorum",
    ) -> AiormqBus:
        """Connect, declare ``topology`` (unless ``declare_topology`` is false: a login
        without the ``configure`` permission on Apollo's names, such as an agent's, relies
        on the service having declared it) and return the bus. Its durable queues are
        declared as ``queue_type`` queues (``"quorum"`` or ``"classic"``).

        ``max_redeliveries`` bounds retries (a message is delivered at most
        ``1 + max_redeliveries`` times); ``retry_backoff(n)`` is the delay in seconds after
        the n-th failed delivery. After a lost connection, a publish waits up to
        ``reconnect_timeout`` seconds for the reconnect and is tried ``publish_attempts``
        times in all. ``publish_many`` has at most ``publish_window`` publishes unconfirmed
        at once. ``close`` waits ``close_timeout`` seconds for handlers in flight.
        ``gateway_users`` (``None``: every user) are the logins whose messages may carry
        another identity in the ``x-apollo-user-id`` header: the bus's own retries and dead
        letters carry it, so they keep it only while the bus's login is a gateway.
        Raises :class:`TransportError` when the broker cannot be reached.
        """
        bus = cls(
            url,
            gateway_users=gateway_users,
            topology=topology or Topology(),
            max_redeliveries=max_redeliveries,
            retry_backoff=retry_backoff,
            reconnect_timeout=reconnect_timeout,
            publish_attempts=publish_attempts,
            publish_timeout=publish_timeout,
            close_timeout=close_timeout,
            publish_window=publish_window,
            declare_topology=declare_topology,
            queue_type=queue_type,
        )
        await bus._open()
        bus._supervisor = asyncio.get_running_loop().create_task(bus._supervise())
        return bus

    # ----------------------------------------------------------------- connection lifecycle

    @property
    def connected(self) -> bool:
        """Whether the bus has a broker connection now."""
        connection = self._connection
        return not self._closed and connection is not None and not connection.is_closed

    @property
    def node(self) -> str:
        """The address (no login) of the node the bus is, or was last, connected to."""
        return address(self._nodes[self._node])

    @property
    def redeliveries(self) -> Mapping[str, int]:
        """Deliveries to this bus's consumers that were not a message's first, by cause:
        ``returned`` (the broker's ``redelivered`` flag) and ``retried`` (the bus's own
        retry copies)."""
        return dict(self._redeliveries)

    def _count_delivery(self, raw: DeliveredMessage, attempts: int) -> None:
        if raw.redelivered:
            self._redeliveries[RETURNED] += 1
        elif attempts > 0:
            self._redeliveries[RETRIED] += 1

    async def _connect(self, first: int) -> tuple[AbstractConnection, int]:
        """A connection to the first node from index ``first`` on (in turn) that answers."""
        failures: list[str] = []
        for step in range(len(self._nodes)):
            index = (first + step) % len(self._nodes)
            node = self._nodes[index]
            try:
                with translate_amqp_errors(f"connecting to {address(node)}"):
                    return await aiormq.connect(node), index
            except TransportError as e:
                failures.append(redact(str(e), self._secrets))
        if len(failures) == 1:
            raise TransportError(failures[0])
        raise TransportError(f"no RabbitMQ node answered: {'; '.join(failures)}")

    async def _open(self, first: int = 0) -> None:
        connection, index = await self._connect(first)
        try:
            with translate_amqp_errors("opening channels"):
                channel = await connection.channel()
                if self._declare:
                    await declare_topology(channel, self.topology, queue_type=self._queue_type)
                replies = await connection.channel(publisher_confirms=False)
                declared = await replies.queue_declare("", exclusive=True, auto_delete=True)
                await replies.basic_consume(declared.queue or "", self._on_reply, no_ack=True)
            for consumer in self._consumers:
                await consumer.start(connection)
        except BaseException:
            with contextlib.suppress(Exception):
                await connection.close()
            raise
        async with self._changed:
            self._connection = connection
            self._node = index
            self._publish_channel = channel
            self._reply_queue = declared.queue or ""
            self._generation += 1
            self._changed.notify_all()

    async def _supervise(self) -> None:
        """Reconnect whenever the connection is lost, until the bus closes."""
        while not self._closed:
            connection = self._connection
            if connection is not None:
                await asyncio.wait({connection.closing})
            if self._closed:
                return
            lost = self.node
            for pending in self._pending.values():
                # Their replies were on the lost connection's exclusive reply queue.
                if not pending.future.done():
                    pending.future.set_exception(
                        TransportError(f"connection to RabbitMQ at {lost} lost before the reply")
                    )
            delay = 0.1
            while not self._closed:
                try:
                    await self._open(first=(self._node + 1) % len(self._nodes))
                except TransportError as e:
                    log.warning(
                        "connection to RabbitMQ at %s lost; reconnecting failed (%s);"
                        " retrying in %.1fs",
                        lost,
                        e,
                        delay,
                    )
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
                else:
                    self.reconnects += 1
                    log.warning(
                        "connection to RabbitMQ at %s lost; reconnected to %s", lost, self.node
                    )
                    break

    async def _live_connection(self, after_generation: int = 0) -> tuple[AbstractConnection, int]:
        """The open connection (newer than ``after_generation``), waiting for a reconnect."""
        if self._closed:
            raise TransportError("the bus is closed")

        def usable() -> bool:
            return self._closed or (
                self._generation > after_generation
                and self._connection is not None
                and not self._connection.is_closed
            )

        try:
            async with asyncio.timeout(self._reconnect_timeout), self._changed:
                await self._changed.wait_for(usable)
        except TimeoutError as e:
            raise TransportError(f"RabbitMQ unreachable for {self._reconnect_timeout:g}s") from e
        if self._closed or self._connection is None:
            raise TransportError("the bus is closed")
        return self._connection, self._generation

    async def _channel(self, after_generation: int = 0) -> tuple[AbstractChannel, int]:
        connection, generation = await self._live_connection(after_generation)
        async with self._channel_lock:
            channel = self._publish_channel
            if channel is None or channel.is_closed:
                try:
                    channel = await connection.channel()
                except Exception as e:
                    raise _ConnectionLost(describe(e)) from e
                self._publish_channel = channel
            return channel, generation

    # ---------------------------------------------------------------------------- publish

    async def publish(self, message: Message, *, exchange: str | None = None) -> None:
        message = _stamped(message)
        await self._publish(
            self.topology.exchange if exchange is None else exchange,
            message.routing_key,
            message.body,
            _properties(message, delivery_mode=PERSISTENT),
            mandatory=True,
        )

    async def publish_many(
        self, messages: Sequence[Message], *, exchange: str | None = None
    ) -> None:
        if self._closed:
            raise TransportError("the bus is closed")
        target = self.topology.exchange if exchange is None else exchange
        unconfirmed = [_Outgoing.of(_stamped(message)) for message in messages]
        after = 0
        lost: BaseException | None = None
        for _ in range(self._publish_attempts):
            if not unconfirmed:
                return
            try:
                channel, generation = await self._channel(after)
            except _ConnectionLost as e:
                lost = e
                continue
            unconfirmed, lost = await self._publish_pipelined(channel, target, unconfirmed)
            if lost is not None:
                log.warning(
                    "%d publishes interrupted by a lost connection; publishing them again",
                    len(unconfirmed),
                )
                if _connection_gone(channel):
                    after = generation
        if not unconfirmed:
            return
        raise TransportError(
            f"publish of {len(unconfirmed)} messages to {target!r} failed after"
            f" {self._publish_attempts} attempts: {lost}"
        ) from lost

    async def _publish_pipelined(
        self, channel: AbstractChannel, exchange: str, batch: Sequence[_Outgoing]
    ) -> tuple[list[_Outgoing], _ConnectionLost | None]:
        """Publish ``batch`` in order on ``channel``, at most ``publish_window`` unconfirmed
        at once, and wait for every confirm; send no more once one publish failed.

        Raises the first refusal in order; otherwise returns the messages a lost
        connection left unconfirmed (in order, including those not sent) and that loss.
        """
        room = asyncio.Semaphore(self._publish_window)
        tasks: list[asyncio.Task[None]] = []
        latest: dict[str, asyncio.Task[None]] = {}
        failed = False

        def finished(task: asyncio.Task[None]) -> None:
            nonlocal failed
            room.release()
            if task.cancelled() or task.exception() is not None:
                failed = True

        loop = asyncio.get_running_loop()
        try:
            for item in batch:
                await room.acquire()
                same_id = latest.get(item.message_id)
                if same_id is not None and not same_id.done():
                    # The broker returns an unroutable message by its id only: one
                    # publish per id in flight, or the refusal could blame another.
                    await asyncio.wait({same_id})
                if failed:
                    break
                # Tasks start in creation order and aiormq's channel lock is fair, so
                # the messages reach the broker in this order.
                task = loop.create_task(
                    self._publish_once(
                        channel,
                        exchange,
                        item.routing_key,
                        item.body,
                        item.properties,
                        mandatory=True,
                    )
                )
                task.add_done_callback(finished)
                tasks.append(task)
                latest[item.message_id] = task
            if tasks:
                await asyncio.wait(tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        unconfirmed: list[_Outgoing] = []
        lost: _ConnectionLost | None = None
        for index, item in enumerate(batch):
            task_or_none = tasks[index] if index < len(tasks) else None
            if task_or_none is None:
                unconfirmed.append(item)  # never sent: another publish failed first
                continue
            if task_or_none.cancelled():
                error: BaseException | None = _ConnectionLost("publish cancelled")
            else:
                error = task_or_none.exception()
            if error is None:
                continue
            if not isinstance(error, _ConnectionLost):
                raise error
            lost = lost or error
            unconfirmed.append(item)
        return unconfirmed, lost

    async def _publish(
        self,
        exchange: str,
        routing_key: str,
        body: bytes,
        properties: spec.Basic.Properties,
        *,
        mandatory: bool,
    ) -> None:
        generation = 0
        lost: BaseException | None = None
        for _ in range(self._publish_attempts):
            try:
                channel, generation = await self._channel(generation)
                await self._publish_once(
                    channel, exchange, routing_key, body, properties, mandatory=mandatory
                )
                return
            except _ConnectionLost as e:
                lost = e
                log.warning("publish interrupted by a lost connection; retrying")
        raise TransportError(
            f"publish to {exchange!r} failed after {self._publish_attempts} attempts: {lost}"
        ) from lost

    async def _publish_once(
        self,
        channel: AbstractChannel,
        exchange: str,
        routing_key: str,
        body: bytes,
        properties: spec.Basic.Properties,
        *,
        mandatory: bool,
    ) -> None:
        target = f"exchange {exchange!r} with routing key {routing_key!r}"
        try:
            async with asyncio.timeout(self._publish_timeout):
                confirmation = await channel.basic_publish(
                    body,
                    exchange=exchange,
                    routing_key=routing_key,
                    properties=properties,
                    mandatory=mandatory,
                )
        except aiormq.PublishError as e:
            raise TransportError(f"unroutable: no queue bound to {target}") from e
        except aiormq.DeliveryError as e:
            raise TransportError(f"the broker refused the message for {target}") from e
        except aiormq.AMQPChannelError as e:
            if _connection_gone(channel):
                raise _ConnectionLost(describe(e)) from e
            raise TransportError(f"the broker refused to publish to {target}: {e}") from e
        except TimeoutError as e:
            raise TransportError(f"publish to {target} not confirmed in time") from e
        except asyncio.CancelledError as e:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            raise _ConnectionLost("channel closed during publish") from e
        except (aiormq.AMQPError, aiormq.ChannelInvalidStateError, OSError, RuntimeError) as e:
            raise _ConnectionLost(describe(e)) from e
        except Exception as e:
            # aiormq fails what was pending on a closing channel with a bare Exception
            if channel.is_closed or _connection_gone(channel):
                raise _ConnectionLost(describe(e)) from e
            raise
        if not isinstance(confirmation, spec.Basic.Ack):
            raise TransportError(f"publish to {target} not confirmed: {confirmation!r}")

    # ---------------------------------------------------------------------------- consume

    async def consume(
        self, queue: str, handler: MessageHandler, *, prefetch: int = 10
    ) -> _Consumer:
        if self._closing:
            raise TransportError("the bus is closed")
        if prefetch < 1:
            raise ValidationError("prefetch", "must be at least 1")
        consumer = _Consumer(self, queue, handler, prefetch)
        connection, _ = await self._live_connection()
        await consumer.start(connection)
        self._consumers.append(consumer)
        return consumer

    def _message_of(self, raw: DeliveredMessage) -> tuple[Message, int]:
        """The port's message for a delivery, and its failed attempts so far."""
        properties = raw.header.properties
        headers: dict[str, Any] = dict(properties.headers or {})
        own = properties.user_id is not None and properties.user_id == self.login
        relays = self._gateway_users is None or self.login in self._gateway_users
        user_id = properties.user_id
        routing_key = raw.routing_key or ""
        attempts = 0
        if own:
            if USER_ID_HEADER in headers and relays:
                user_id = _text(headers[USER_ID_HEADER]) or None
            if ROUTING_KEY_HEADER in headers:
                routing_key = _text(headers[ROUTING_KEY_HEADER])
            attempts = int(headers.get(ATTEMPTS_HEADER, 0))
        deaths = headers.get("x-death")
        if DEAD_LETTER_REASON_HEADER not in headers and isinstance(deaths, list) and deaths:
            first = deaths[0]
            headers[DEAD_LETTER_REASON_HEADER] = _text(first.get("reason", "dead-lettered"))
            headers[DEAD_LETTER_QUEUE_HEADER] = _text(first.get("queue", ""))
        visible = {
            name: value
            for name, value in headers.items()
            if name not in _BUS_HEADERS and not name.startswith(_BROKER_HEADER_PREFIXES)
        }
        message = Message(
            routing_key=routing_key,
            body=raw.body,
            message_id=properties.message_id or "",
            headers=visible,
            user_id=user_id,
            reply_to=properties.reply_to,
            correlation_id=properties.correlation_id,
            redelivered=bool(raw.redelivered) or attempts > 0,
            delivery_count=attempts + 1,
        )
        return message, attempts

    async def _requeue(self, queue: str, message: Message, attempts: int) -> None:
        """Put ``message`` back on ``queue`` after ``attempts`` failed deliveries."""
        headers = {
            **message.headers,
            ATTEMPTS_HEADER: attempts,
            ROUTING_KEY_HEADER: message.routing_key,
            USER_ID_HEADER: message.user_id or "",
        }
        copy = evolve(message, headers=headers, user_id=self.login)
        await self._publish("", queue, message.body, _properties(copy, PERSISTENT), mandatory=True)

    async def _dead_letter(self, queue: str, message: Message, reason: str) -> None:
        headers = {
            **message.headers,
            DEAD_LETTER_REASON_HEADER: reason,
            DEAD_LETTER_QUEUE_HEADER: queue,
            ROUTING_KEY_HEADER: message.routing_key,
            USER_ID_HEADER: message.user_id or "",
        }
        copy = evolve(message, headers=headers, user_id=self.login)
        await self._publish(
            self.topology.dead_letter_exchange,
            message.routing_key,
            message.body,
            _properties(copy, PERSISTENT),
            mandatory=True,
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
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = _Pending(future, repliers)
        try:
            async with asyncio.timeout(timeout):
                await self._live_connection()
                outgoing = evolve(
                    message, reply_to=self._reply_queue, correlation_id=correlation_id
                )
                await self.publish(outgoing)
                return await future
        except TimeoutError as e:
            if isinstance(e, TransportError):
                raise
            raise RpcTimeout(f"no reply to {message.routing_key!r} within {timeout:g}s") from e
        finally:
            self._pending.pop(correlation_id, None)

    async def _on_reply(self, raw: DeliveredMessage) -> None:
        """A message on this bus's reply queue: the answer of its request when the broker
        verified it comes from one of the request's repliers (else dropped, logged)."""
        user_id = raw.header.properties.user_id
        pending = self._pending.get(raw.header.properties.correlation_id or "")
        if pending is None or pending.future.done():
            return
        if pending.repliers is not None and user_id not in pending.repliers:
            log.warning("dropped a reply from %r, not a service login", user_id)
            return
        message, _ = self._message_of(raw)
        pending.future.set_result(message)

    async def reply(self, request: Message, body: bytes) -> None:
        if not request.reply_to:
            raise ValidationError("reply_to", "the request has no reply_to")
        response = Message(
            routing_key=request.reply_to,
            body=body,
            message_id=uuid4().hex,
            user_id=self.login,
            correlation_id=request.correlation_id,
        )
        await self._publish(
            "", request.reply_to, body, _properties(response, TRANSIENT), mandatory=False
        )

    # ------------------------------------------------------------------------ dead letters

    async def drain_dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        channel, _ = await self._channel()
        letters: list[DeadLetter] = []
        with translate_amqp_errors("reading dead letters"):
            while len(letters) < limit:
                raw = await channel.basic_get(self.topology.dead_letter_queue)
                if not isinstance(raw.delivery, spec.Basic.GetOk):
                    break
                message, _ = self._message_of(raw)
                letters.append(
                    DeadLetter(
                        message=message,
                        reason=str(message.headers.get(DEAD_LETTER_REASON_HEADER, "")),
                        queue=str(message.headers.get(DEAD_LETTER_QUEUE_HEADER, "")),
                    )
                )
                await channel.basic_ack(raw.delivery_tag or 0)
        return letters

    # ------------------------------------------------------------------------------ close

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        await asyncio.gather(*(consumer.cancel() for consumer in list(self._consumers)))
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(TransportError("the bus is closed"))
        self._closed = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        if self._connection is not None:
            with contextlib.suppress(Exception):
                await self._connection.close()
        async with self._changed:
            self._changed.notify_all()


class _Consumer:
    """One consumer on its own channel; a :class:`Subscription`."""

    def __init__(self, bus: AiormqBus, queue: str, handler: MessageHandler, prefetch: int) -> None:
        self.queue = queue
        self._bus = bus
        self._handler = handler
        self._prefetch = prefetch
        self._channel: AbstractChannel | None = None
        self._tag = ""
        self._in_flight: set[asyncio.Task[None]] = set()
        self._cancelled = False

    async def start(self, connection: AbstractConnection) -> None:
        with translate_amqp_errors(f"consuming from {self.queue!r}"):
            channel = await connection.channel(publisher_confirms=False)
            try:
                await channel.basic_qos(prefetch_count=self._prefetch)
                ok = await channel.basic_consume(self.queue, partial(self._on_message, channel))
            except BaseException:
                with contextlib.suppress(Exception):
                    await channel.close()
                raise
        self._channel, self._tag = channel, ok.consumer_tag or ""

    async def _on_message(self, channel: AbstractChannel, raw: DeliveredMessage) -> None:
        if self._cancelled:
            return  # left unacked: back to the queue when the channel closes
        message, attempts = self._bus._message_of(raw)
        self._bus._count_delivery(raw, attempts)
        delivery = _Delivery(self._bus, self.queue, channel, raw, message)
        # The handler runs in a task of its own, not aiormq's: a lost channel must not
        # cancel a handler halfway through its work.
        task = asyncio.get_running_loop().create_task(self._handle(delivery))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def _handle(self, delivery: _Delivery) -> None:
        await run_handler(self._handler, delivery, self.queue, lambda: delivery.settled)

    async def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        with contextlib.suppress(ValueError):
            self._bus._consumers.remove(self)
        channel = self._channel
        if channel is not None and not channel.is_closed:
            with contextlib.suppress(Exception):
                await channel.basic_cancel(self._tag)
        if self._in_flight:
            _, late = await asyncio.wait(set(self._in_flight), timeout=self._bus._close_timeout)
            for task in late:
                task.cancel()
        if channel is not None:
            with contextlib.suppress(Exception):
                await channel.close()


class _Delivery:
    def __init__(
        self,
        bus: AiormqBus,
        queue: str,
        channel: AbstractChannel,
        raw: DeliveredMessage,
        message: Message,
    ) -> None:
        self.message = message
        self.settled = False
        self._bus = bus
        self._queue = queue
        self._channel = channel
        self._tag = raw.delivery_tag or 0

    async def ack(self) -> None:
        if self._settle():
            await self._ack()

    async def reject(self, reason: str) -> None:
        if self._settle():
            await self._dead_letter(reason)

    async def retry(self, reason: str) -> None:
        if not self._settle():
            return
        failed = self.message.delivery_count
        if failed > self._bus._max_redeliveries:
            await self._dead_letter(f"gave up after {failed} attempts: {reason}")
            return
        await asyncio.sleep(self._bus._retry_backoff(failed))
        await self._bus._requeue(self._queue, self.message, failed)
        await self._ack()

    async def delay(self, seconds: float, reason: str) -> None:
        if not self._settle():
            return
        await asyncio.sleep(min(max(0.0, seconds), MAX_DELAY_SECONDS))
        # published (confirmed) before the ack: a crash between the two delivers it twice,
        # which its message id makes harmless; the attempts so far are kept as they were
        await self._bus._requeue(self._queue, self.message, self.message.delivery_count - 1)
        await self._ack()

    def _settle(self) -> bool:
        first = not self.settled
        self.settled = True
        return first

    async def _ack(self) -> None:
        action = f"acknowledging a message from {self._queue!r}"
        if _connection_gone(self._channel):
            # The broker hands the message out again: acking on a dead connection could
            # wait for a write that never drains.
            raise TransportError(f"{action}: the connection it came on is gone")
        with translate_amqp_errors(action):
            async with asyncio.timeout(self._bus._publish_timeout):
                await self._channel.basic_ack(self._tag)

    async def _dead_letter(self, reason: str) -> None:
        try:
            await self._bus._dead_letter(self._queue, self.message, reason)
        except TransportError:
            # Let the broker dead-letter it (without the reason) rather than keep it.
            with contextlib.suppress(Exception):
                await self._channel.basic_reject(self._tag, requeue=False)
            raise
        await self._ack()


@frozen
class _Pending:
    """A request waiting for its reply, and whose replies it takes (None: anyone's)."""

    future: asyncio.Future[Message]
    repliers: Collection[str] | None


@frozen
class _Outgoing:
    """A message as ``publish_many`` sends it."""

    message_id: str
    routing_key: str
    body: bytes
    properties: spec.Basic.Properties

    @classmethod
    def of(cls, message: Message) -> _Outgoing:
        properties = _properties(message, delivery_mode=PERSISTENT)
        return cls(properties.message_id or "", message.routing_key, message.body, properties)


def _stamped(message: Message) -> Message:
    return message if message.message_id else evolve(message, message_id=uuid4().hex)


def _properties(message: Message, delivery_mode: int) -> spec.Basic.Properties:
    return spec.Basic.Properties(
        delivery_mode=delivery_mode,
        message_id=message.message_id or uuid4().hex,
        headers=dict(message.headers) or None,
        user_id=message.user_id,
        reply_to=message.reply_to,
        correlation_id=message.correlation_id,
    )


def _connection_gone(channel: AbstractChannel) -> bool:
    connection = getattr(channel, "connection", None)
    return connection is None or connection.is_closed


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


__all__ = ["AiormqBus"]
