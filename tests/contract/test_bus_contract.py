"""The MessageBus contract, run against InProcessBus and AiormqBus (a real RabbitMQ)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import pytest
from attrs import evolve

from apollo_domain.errors import RpcTimeout, TransportError, ValidationError
from apollo_domain.ports.messaging import (
    DEAD_LETTER_QUEUE_HEADER,
    DEAD_LETTER_REASON_HEADER,
    Delivery,
    Message,
    MessageBus,
    reply_queue_refusal,
)

if TYPE_CHECKING:
    from tests.contract.conftest import BusFactory

# Guards against a hang only; nothing asserts on how long anything took.
PATIENCE = 15.0


class Inbox:
    """A handler that records each delivery (in arrival order) and settles it with
    ``settle`` (default: ack); ``wait_for(n)`` returns once n deliveries are settled."""

    def __init__(self, settle: Callable[[Delivery], Awaitable[None]] | None = None) -> None:
        self.messages: list[Message] = []
        self._settle = settle
        self._settled = 0
        self._changed = asyncio.Condition()

    async def __call__(self, delivery: Delivery) -> None:
        self.messages.append(delivery.message)
        if self._settle is None:
            await delivery.ack()
        else:
            await self._settle(delivery)
        async with self._changed:
            self._settled += 1
            self._changed.notify_all()

    async def wait_for(self, count: int) -> list[Message]:
        async with asyncio.timeout(PATIENCE), self._changed:
            await self._changed.wait_for(lambda: self._settled >= count)
        return self.messages


async def wait(event: asyncio.Event) -> None:
    async with asyncio.timeout(PATIENCE):
        await event.wait()


async def next_message_on(bus: MessageBus, queue: str) -> Message:
    """Publish a sentinel to ``queue`` and return the first message a new consumer gets from
    it: the sentinel itself when nothing else was left on the queue. ``queue`` must have no
    other consumer."""
    inbox = Inbox()
    subscription = await bus.consume(queue, inbox)
    await bus.publish(Message(queue, b"sentinel", message_id="sentinel"))
    first = (await inbox.wait_for(1))[0]
    await subscription.cancel()
    return first


# ----------------------------------------------------------------------- publish / consume


async def test_published_messages_arrive_in_order_and_acked_ones_are_gone(
    bus_factory: BusFactory,
) -> None:
    """Messages reach the consumer in publish order, once each; acked ones never return."""
    bus = await bus_factory()
    queue = bus_factory.topology.ingest_queue
    inbox = Inbox()
    subscription = await bus.consume(queue, inbox, prefetch=1)

    for number in range(5):
        await bus.publish(Message(queue, f"m{number}".encode(), message_id=f"id-{number}"))
    received = await inbox.wait_for(5)
    await subscription.cancel()

    assert [f"m{n}".encode() for n in range(5)] == [m.body for m in received]
    assert [f"id-{n}" for n in range(5)] == [m.message_id for m in received]
    assert all(m.delivery_count == 1 and not m.redelivered for m in received)
    assert (await next_message_on(bus, queue)).body == b"sentinel"


async def test_a_message_keeps_its_fields_through_the_bus(bus_factory: BusFactory) -> None:
    """Routing key, body, id, headers and the verified user id reach the consumer intact."""
    bus = await bus_factory()
    queue = bus_factory.topology.writeback_store_queue
    inbox = Inbox()
    await bus.consume(queue, inbox)
    sent = Message(
        queue,
        b"\x00binary\xff",
        message_id="m-1",
        headers={"kind": "writeback", "count": 3, "flag": True},
        user_id=bus_factory.login,
    )

    await bus.publish(sent)
    (got,) = await inbox.wait_for(1)

    assert (sent.routing_key, sent.body, sent.message_id, sent.user_id) == (
        got.routing_key,
        got.body,
        got.message_id,
        got.user_id,
    )
    assert dict(sent.headers) == dict(got.headers)


async def test_the_bus_assigns_a_message_id_when_none_is_given(bus_factory: BusFactory) -> None:
    bus = await bus_factory()
    queue = bus_factory.topology.query_queue
    inbox = Inbox()
    await bus.consume(queue, inbox)

    await bus.publish(Message(queue, b"a"))
    await bus.publish(Message(queue, b"b"))
    first, second = await inbox.wait_for(2)

    assert first.message_id and second.message_id and first.message_id != second.message_id


async def test_every_apollo_queue_is_bound_by_its_own_name(bus_factory: BusFactory) -> None:
    bus = await bus_factory()
    topology = bus_factory.topology
    inboxes = {queue: Inbox() for queue in topology.apollo_queues}
    for queue, inbox in inboxes.items():
        await bus.consume(queue, inbox)

    for queue in topology.apollo_queues:
        await bus.publish(Message(queue, queue.encode()))

    for queue, inbox in inboxes.items():
        assert [queue.encode()] == [m.body for m in await inbox.wait_for(1)]


async def test_llm_audit_events_reach_the_gas_queue(bus_factory: BusFactory) -> None:
    """The gas queue listens on the audit exchange (topic) for ``llm.audit.complete``."""
    bus = await bus_factory()
    topology = bus_factory.topology
    inbox = Inbox()
    await bus.consume(topology.gas_queue, inbox)

    await bus.publish(
        Message(topology.audit_routing_key, b"audit"), exchange=topology.audit_exchange
    )
    (got,) = await inbox.wait_for(1)

    assert (topology.audit_routing_key, b"audit") == (got.routing_key, got.body)
    with pytest.raises(TransportError):
        await bus.publish(Message("llm.audit.started", b"x"), exchange=topology.audit_exchange)


# ------------------------------------------------------------------------------ publish_many


async def test_publish_many_delivers_every_message_once_in_order(bus_factory: BusFactory) -> None:
    """More messages than the publishes in flight at once: each arrives once, in the order
    given, with its id; nothing else is left on the queue."""
    bus = await bus_factory()
    queue = bus_factory.topology.ingest_queue
    inbox = Inbox()
    subscription = await bus.consume(queue, inbox, prefetch=1)
    count = 600
    sent = [
        Message(queue, f"m{n}".encode(), message_id=f"id-{n}", user_id=bus_factory.login)
        for n in range(count)
    ]

    await bus.publish_many(sent)
    received = await inbox.wait_for(count)
    await subscription.cancel()

    assert [m.body for m in sent] == [m.body for m in received]
    assert [m.message_id for m in sent] == [m.message_id for m in received]
    assert all(m.delivery_count == 1 and not m.redelivered for m in received)
    assert (await next_message_on(bus, queue)).body == b"sentinel"


async def test_publish_many_routes_through_the_given_exchange_and_fills_in_ids(
    bus_factory: BusFactory,
) -> None:
    bus = await bus_factory()
    topology = bus_factory.topology
    inbox = Inbox()
    await bus.consume(topology.gas_queue, inbox)

    await bus.publish_many(
        [Message(topology.audit_routing_key, f"a{n}".encode()) for n in range(3)],
        exchange=topology.audit_exchange,
    )
    received = await inbox.wait_for(3)

    assert [b"a0", b"a1", b"a2"] == [m.body for m in received]
    assert all(m.message_id for m in received)
    assert 3 == len({m.message_id for m in received})


async def test_publish_many_of_nothing_does_nothing(bus_factory: BusFactory) -> None:
    bus = await bus_factory()
    queue = bus_factory.topology.ingest_queue

    await bus.publish_many([])

    assert (await next_message_on(bus, queue)).body == b"sentinel"


async def test_publish_many_raises_for_an_unroutable_message_after_the_ones_before_it(
    bus_factory: BusFactory,
) -> None:
    """Like publish: an unroutable message or a missing exchange raises; the messages
    before the refused one are delivered; the bus keeps working."""
    bus = await bus_factory()
    queue = bus_factory.topology.ingest_queue
    inbox = Inbox()
    subscription = await bus.consume(queue, inbox, prefetch=1)

    with pytest.raises(TransportError, match=r"unroutable.*legion\.apollo\.nowhere"):
        await bus.publish_many(
            [
                Message(queue, b"first"),
                Message(queue, b"second"),
                Message("legion.apollo.nowhere", b"x"),
            ]
        )
    with pytest.raises(TransportError):
        await bus.publish_many([Message(queue, b"lost")], exchange="apollo.no-such-exchange")
    await bus.publish_many([Message(queue, b"after")])
    received = await inbox.wait_for(3)
    await subscription.cancel()

    assert [b"first", b"second", b"after"] == [m.body for m in received]
    assert (await next_message_on(bus, queue)).body == b"sentinel"


async def test_publish_many_blames_the_refused_message_among_messages_sharing_its_id(
    bus_factory: BusFactory,
) -> None:
    """An id is not unique by contract: the refusal names the unroutable message even
    when a routable one with the same id follows it."""
    bus = await bus_factory()
    queue = bus_factory.topology.ingest_queue

    with pytest.raises(TransportError, match=r"legion\.apollo\.nowhere"):
        await bus.publish_many(
            [
                Message("legion.apollo.nowhere", b"x", message_id="same"),
                Message(queue, b"y", message_id="same"),
            ]
        )


async def test_publish_many_raises_when_the_broker_refuses_a_message(
    bus_factory: BusFactory,
) -> None:
    """A ``user_id`` other than the login is refused mid-batch: raises, the message before
    it is delivered, and the bus goes on publishing."""
    bus = await bus_factory()
    queue = bus_factory.topology.ingest_queue
    inbox = Inbox()
    subscription = await bus.consume(queue, inbox, prefetch=1)

    with pytest.raises(TransportError):
        await bus.publish_many(
            [
                Message(queue, b"honest", user_id=bus_factory.login),
                Message(queue, b"forged", user_id="someone-else"),
            ]
        )
    await bus.publish_many([Message(queue, b"after", user_id=bus_factory.login)])
    received = await inbox.wait_for(2)
    await subscription.cancel()

    assert [b"honest", b"after"] == [m.body for m in received]
    assert (await next_message_on(bus, queue)).body == b"sentinel"


# ------------------------------------------------------------------------ refused publishes


async def test_an_unroutable_publish_raises_and_the_bus_keeps_working(
    bus_factory: BusFactory,
) -> None:
    bus = await bus_factory()
    queue = bus_factory.topology.ingest_queue

    with pytest.raises(TransportError, match="unroutable"):
        await bus.publish(Message("legion.apollo.nowhere", b"lost"))
    with pytest.raises(TransportError):
        await bus.publish(Message(queue, b"lost"), exchange="apollo.no-such-exchange")

    assert (await next_message_on(bus, queue)).body == b"sentinel"


async def test_a_user_id_other_than_the_login_is_refused(bus_factory: BusFactory) -> None:
    """The broker vouches for ``user_id``: nobody can publish as someone else."""
    bus = await bus_factory()
    queue = bus_factory.topology.ingest_queue

    with pytest.raises(TransportError):
        await bus.publish(Message(queue, b"forged", user_id="someone-else"))

    assert (await next_message_on(bus, queue)).body == b"sentinel"


async def test_a_closed_bus_refuses_every_call(bus_factory: BusFactory) -> None:
    bus = await bus_factory()
    queue = bus_factory.topology.ingest_queue
    await bus.close()
    await bus.close()  # closing again does nothing

    with pytest.raises(TransportError):
        await bus.publish(Message(queue, b"late"))
    with pytest.raises(TransportError):
        await bus.publish_many([Message(queue, b"late")])
    with pytest.raises(TransportError):
        await bus.consume(queue, Inbox())
    with pytest.raises(TransportError):
        await bus.request(Message(queue, b"late"), timeout=1.0)


# ------------------------------------------------------------------------------ dead letters


async def test_a_rejected_message_is_dead_lettered_with_its_reason(
    bus_factory: BusFactory,
) -> None:
    bus = await bus_factory()
    queue = bus_factory.topology.ingest_queue
    done = asyncio.Event()

    async def reject(delivery: Delivery) -> None:
        await delivery.reject("content: must not be empty")
        done.set()

    await bus.consume(queue, reject)
    await bus.publish(
        Message(
            queue, b"{}", message_id="bad-1", headers={"kind": "ingest"}, user_id=bus_factory.login
        )
    )
    await wait(done)
    letters = await bus.drain_dead_letters()

    assert len(letters) == 1
    (letter,) = letters
    assert ("content: must not be empty", queue) == (letter.reason, letter.queue)
    assert (queue, b"{}", "bad-1", bus_factory.login) == (
        letter.message.routing_key,
        letter.message.body,
        letter.message.message_id,
        letter.message.user_id,
    )
    assert letter.message.headers["kind"] == "ingest"
    assert await bus.drain_dead_letters() == []


async def test_the_dead_letter_queue_can_be_consumed_and_shows_the_reason(
    bus_factory: BusFactory,
) -> None:
    bus = await bus_factory()
    topology = bus_factory.topology

    async def reject(delivery: Delivery) -> None:
        await delivery.reject("unknown relation type")

    dead = Inbox()
    await bus.consume(topology.dead_letter_queue, dead)
    await bus.consume(topology.query_queue, reject)
    await bus.publish(Message(topology.query_queue, b"q"))
    (letter,) = await dead.wait_for(1)

    assert letter.headers[DEAD_LETTER_REASON_HEADER] == "unknown relation type"
    assert topology.query_queue == letter.headers[DEAD_LETTER_QUEUE_HEADER]
    assert (topology.query_queue, b"q") == (letter.routing_key, letter.body)


async def test_drain_dead_letters_honours_its_limit(bus_factory: BusFactory) -> None:
    bus = await bus_factory()
    queue = bus_factory.topology.ingest_queue

    async def reject(delivery: Delivery) -> None:
        await delivery.reject(delivery.message.body.decode())

    inbox = Inbox(reject)
    await bus.consume(queue, inbox, prefetch=1)
    for number in range(3):
        await bus.publish(Message(queue, f"r{number}".encode()))
    await inbox.wait_for(3)

    first = await bus.drain_dead_letters(limit=2)
    rest = await bus.drain_dead_letters(limit=2)

    assert ([d.reason for d in first], [d.reason for d in rest]) == (["r0", "r1"], ["r2"])


# ---------------------------------------------------------------------------------- retries


async def test_retry_redelivers_with_a_growing_count_then_dead_letters(
    bus_factory: BusFactory,
) -> None:
    """max_redeliveries=2: three deliveries in all, then the dead-letter queue."""
    bus = await bus_factory(max_redeliveries=2)
    queue = bus_factory.topology.ingest_queue

    async def retry(delivery: Delivery) -> None:
        await delivery.retry("database unavailable")

    inbox = Inbox(retry)
    await bus.consume(queue, inbox)
    await bus.publish(Message(queue, b"flaky", message_id="f-1", user_id=bus_factory.login))
    deliveries = await inbox.wait_for(3)
    letters = await bus.drain_dead_letters()

    assert [m.delivery_count for m in deliveries] == [1, 2, 3]
    assert [m.redelivered for m in deliveries] == [False, True, True]
    assert {"f-1"} == {m.message_id for m in deliveries}
    assert {bus_factory.login} == {m.user_id for m in deliveries}
    assert {queue} == {m.routing_key for m in deliveries}
    assert [("gave up after 3 attempts: database unavailable", queue, "f-1")] == [
        (d.reason, d.queue, d.message.message_id) for d in letters
    ]


async def test_a_retried_message_that_then_succeeds_is_gone(bus_factory: BusFactory) -> None:
    bus = await bus_factory()
    queue = bus_factory.topology.writeback_vectorize_queue

    async def fail_once(delivery: Delivery) -> None:
        if delivery.message.delivery_count == 1:
            await delivery.retry("embedder busy")
        else:
            await delivery.ack()

    inbox = Inbox(fail_once)
    subscription = await bus.consume(queue, inbox)
    await bus.publish(Message(queue, b"text"))
    await inbox.wait_for(2)
    await subscription.cancel()

    assert [m.delivery_count for m in inbox.messages] == [1, 2]
    assert (await next_message_on(bus, queue)).body == b"sentinel"
    assert await bus.drain_dead_letters() == []


async def test_a_failing_handler_is_retried_with_the_error_as_reason(
    bus_factory: BusFactory,
) -> None:
    bus = await bus_factory(max_redeliveries=1)
    topology = bus_factory.topology
    counts: list[int] = []

    async def explode(delivery: Delivery) -> None:
        counts.append(delivery.message.delivery_count)
        raise RuntimeError("store exploded")

    dead = Inbox()
    await bus.consume(topology.dead_letter_queue, dead)
    await bus.consume(topology.ingest_queue, explode)
    await bus.publish(Message(topology.ingest_queue, b"x"))
    (letter,) = await dead.wait_for(1)

    assert counts == [1, 2]
    assert (
        letter.headers[DEAD_LETTER_REASON_HEADER]
        == "gave up after 2 attempts: RuntimeError: store exploded"
    )


async def test_a_handler_that_does_not_settle_is_retried(bus_factory: BusFactory) -> None:
    bus = await bus_factory(max_redeliveries=0)
    topology = bus_factory.topology

    async def forget(delivery: Delivery) -> None:
        pass

    dead = Inbox()
    await bus.consume(topology.dead_letter_queue, dead)
    await bus.consume(topology.ingest_queue, forget)
    await bus.publish(Message(topology.ingest_queue, b"x"))
    (letter,) = await dead.wait_for(1)

    assert (
        letter.headers[DEAD_LETTER_REASON_HEADER]
        == "gave up after 1 attempts: not settled by the handler"
    )


async def test_only_the_first_settlement_counts(bus_factory: BusFactory) -> None:
    bus = await bus_factory()
    queue = bus_factory.topology.ingest_queue

    async def ack_then_reject(delivery: Delivery) -> None:
        await delivery.ack()
        await delivery.reject("too late")
        await delivery.retry("too late")

    inbox = Inbox(ack_then_reject)
    subscription = await bus.consume(queue, inbox)
    await bus.publish(Message(queue, b"once"))
    await inbox.wait_for(1)
    await subscription.cancel()

    assert await bus.drain_dead_letters() == []
    assert (await next_message_on(bus, queue)).body == b"sentinel"


# -------------------------------------------------------------------------------------- RPC


async def test_request_gets_the_reply_to_its_own_correlation_id(bus_factory: BusFactory) -> None:
    bus = await bus_factory()
    queue = bus_factory.topology.query_queue

    async def answer(delivery: Delivery) -> None:
        await bus.reply(delivery.message, delivery.message.body.upper())
        await delivery.ack()

    await bus.consume(queue, answer, prefetch=5)
    replies = await asyncio.gather(
        *(bus.request(Message(queue, f"query {n}".encode()), timeout=PATIENCE) for n in range(5))
    )

    assert [f"QUERY {n}".encode() for n in range(5)] == [r.body for r in replies]
    assert all(r.correlation_id for r in replies)
    assert len({r.correlation_id for r in replies}) == 5


async def test_a_reply_carries_the_repliers_login_and_comes_from_a_reply_queue(
    bus_factory: BusFactory,
) -> None:
    """The requester's ``reply_to`` is a reply queue (never a service queue), and the reply
    carries the replying bus's login as its broker-verified ``user_id``."""
    bus = await bus_factory()
    queue = bus_factory.topology.query_queue
    seen: list[str | None] = []

    async def answer(delivery: Delivery) -> None:
        seen.append(delivery.message.reply_to)
        await bus.reply(delivery.message, b"answer")
        await delivery.ack()

    await bus.consume(queue, answer)
    reply = await bus.request(Message(queue, b"q"), timeout=PATIENCE, repliers={bus_factory.login})

    assert (b"answer", bus_factory.login) == (reply.body, reply.user_id)
    assert [None] == [reply_queue_refusal(reply_to) for reply_to in seen]


async def test_a_forged_reply_is_dropped_and_the_real_one_awaited(bus_factory: BusFactory) -> None:
    """Whoever reads a request may publish to its reply queue with its correlation id; a
    requester that names its repliers takes only a reply whose ``user_id`` is one of them,
    and keeps waiting for it."""
    bus = await bus_factory()
    queue = bus_factory.topology.query_queue

    async def forge_then_answer(delivery: Delivery) -> None:
        request = delivery.message
        assert request.reply_to is not None
        forged = Message(
            request.reply_to, b"forged", correlation_id=request.correlation_id, user_id=None
        )
        await bus.publish(forged, exchange="")
        await bus.reply(request, b"real")
        await delivery.ack()

    await bus.consume(queue, forge_then_answer)
    reply = await bus.request(Message(queue, b"q"), timeout=PATIENCE, repliers={bus_factory.login})

    assert b"real" == reply.body


async def test_request_without_a_reply_times_out(bus_factory: BusFactory) -> None:
    bus = await bus_factory()

    with pytest.raises(RpcTimeout):
        await bus.request(Message(bus_factory.topology.query_queue, b"anyone?"), timeout=0.3)


async def test_an_unroutable_request_fails_at_once(bus_factory: BusFactory) -> None:
    bus = await bus_factory()

    with pytest.raises(TransportError) as raised:
        await bus.request(Message("legion.apollo.nowhere", b"q"), timeout=PATIENCE)

    assert not isinstance(raised.value, RpcTimeout)


async def test_a_reply_needs_a_request_with_reply_to(bus_factory: BusFactory) -> None:
    bus = await bus_factory()

    with pytest.raises(ValidationError):
        await bus.reply(Message(bus_factory.topology.query_queue, b"q"), b"answer")


async def test_a_reply_nobody_waits_for_is_dropped(bus_factory: BusFactory) -> None:
    """A requester that timed out, or whose reply queue is gone, is not the replier's error."""
    bus = await bus_factory()
    queue = bus_factory.topology.query_queue
    inbox = Inbox()
    subscription = await bus.consume(queue, inbox)

    with pytest.raises(RpcTimeout):
        await bus.request(Message(queue, b"slow"), timeout=0.3)
    (request,) = await inbox.wait_for(1)
    await subscription.cancel()

    await bus.reply(request, b"too late")
    await bus.reply(evolve(request, reply_to="apollo.requester-gone"), b"too late")
    assert (await next_message_on(bus, queue)).body == b"sentinel"


# ------------------------------------------------------------------------- prefetch, close


async def test_a_consumer_never_has_more_unsettled_deliveries_than_its_prefetch(
    bus_factory: BusFactory,
) -> None:
    bus = await bus_factory()
    queue = bus_factory.topology.ingest_queue
    in_flight = 0
    most = 0

    async def slow(delivery: Delivery) -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.03)
        in_flight -= 1
        await delivery.ack()

    inbox = Inbox(slow)
    await bus.consume(queue, inbox, prefetch=2)
    for number in range(8):
        await bus.publish(Message(queue, str(number).encode()))
    await inbox.wait_for(8)

    assert most == 2


async def test_close_drains_the_handler_in_flight(bus_factory: BusFactory) -> None:
    """``close`` waits for the running handler and its ack; the message is not redelivered."""
    bus = await bus_factory()
    queue = bus_factory.topology.ingest_queue
    started = asyncio.Event()
    finished: list[str] = []

    async def slow(delivery: Delivery) -> None:
        started.set()
        await asyncio.sleep(0.2)
        await delivery.ack()
        finished.append(delivery.message.message_id)

    await bus.consume(queue, slow)
    await bus.publish(Message(queue, b"slow", message_id="slow-1"))
    await wait(started)
    await bus.close()

    assert finished == ["slow-1"]
    if bus_factory.durable:
        later = await bus_factory()
        assert (await next_message_on(later, queue)).body == b"sentinel"


async def test_close_fails_pending_requests(bus_factory: BusFactory) -> None:
    bus = await bus_factory()
    arrived = asyncio.Event()

    async def hold(delivery: Delivery) -> None:
        arrived.set()
        await delivery.ack()

    await bus.consume(bus_factory.topology.query_queue, hold)
    request = asyncio.ensure_future(
        bus.request(Message(bus_factory.topology.query_queue, b"q"), timeout=PATIENCE)
    )
    await wait(arrived)
    await bus.close()

    with pytest.raises(TransportError):
        await request
