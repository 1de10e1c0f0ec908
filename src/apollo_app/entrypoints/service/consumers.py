"""Service mode: the actors that consume Apollo's queues, the periodic work, ``apollo serve``.

Consumers (one per queue, ``settings.consumer_prefetch`` deliveries in flight each: the
prefetch, at most the store's pool size):

- ingest queue: ``store_knowledge`` and the other mutations. The principal is the broker-verified
  ``user_id`` of the message (none when absent); the body's ``agent_id`` is attribution
  only. A mutation is acknowledged only after it committed, and every one is idempotent
  by ``message_id``: the use case records the id in the transaction of its effects, so a
  redelivery, even one overlapping the first delivery, applies nothing twice. A mutation
  published with a ``reply_to`` reply queue (a client reading its own writes) is answered
  before it is acknowledged: a receipt with the causal token of its commit, or the error
  it is dead-lettered for.
- query queue (RPC): every request gets a reply, a result or the error, then is
  acknowledged; a caller never waits for an answer that will not come. The reply carries
  the service's login as ``user_id`` (clients take replies only from service logins), and
  goes only to a reply queue: a request whose ``reply_to`` names any other queue (a service
  queue, say) is dead-lettered with the reason. A request with an ``x-apollo-causal-token``
  header waits only for the commit it names (garbage or "": for none) before it may read
  on a replica; one without the header waits for every commit of this process.
- writeback-store: a response that carries its embedding. The embedding's dimension must
  match the store's (else the message is dead-lettered with the reason); the content is
  then ingested normally, so the store's own embedder produces the stored vector (cached,
  so cheap) and one store keeps one embedding model. writeback-vectorize: embed, ingest.
- GAS queue: ``llm.audit.complete`` events, processed once per request id; a run whose
  deposits failed for a transient reason is left unmarked and retried.

Group commit: ``store_knowledge`` messages on the ingest queue are ingested together, up
to ``settings.ingest_batch`` of them (those that arrived within ``settings.ingest_batch_ms``
of the first), in ONE transaction (:func:`apollo_domain.services.ingest_each`): each keeps
its own caller and its ``message_id`` key, recorded in that transaction, and is
acknowledged only after it committed. At most ``COMMITS_IN_FLIGHT`` batches commit at
once; a batch whose window is over while they run keeps filling until one ends, so under
load the batches grow instead of queueing up. A message that fails its checks (decoding,
authorization, validation) is settled alone before it joins a batch; other mutations go
one at a time. When a batch fails, each of its messages is carried out alone, as if it had
never been batched (its key says whether the batch committed), so one poison message
cannot sink the others.

Settlement: bad input and failures that cannot succeed on a retry (:class:`ValidationError`,
:class:`NotFound`, :class:`InvalidTransition`) dead-letter the message with the reason;
a write over its principal's rate (:class:`RateLimited`, charged before a
``store_knowledge`` joins a batch and by the use case of any other write) is delayed for
as long as the rate says and queued again, however many times, never dead-lettered for
that; any other failure (the store or the broker unavailable, anything unexpected) is
retried with backoff, a bounded number of times, then dead-lettered. Nothing is dropped
silently.

Nothing here is process-local: several service processes may consume the same queues.
Periodic work (decay, expertise, corroboration, the access log's retention) runs once per
period of its interval across them (:meth:`ApolloService.run_periodic`), and the outbox
drainers of several processes claim different items (leases).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from datetime import datetime
from typing import TYPE_CHECKING, Any

from attrs import define, field

from apollo_domain import commands as c
from apollo_domain.actions import Bus, action_of
from apollo_domain.causal import CausalScope, causal_scope
from apollo_domain.errors import ApolloError, TransportError
from apollo_domain.handlers import handle, store_item
from apollo_domain.model import Principal, Role
from apollo_domain.ports.messaging import (
    Delivery,
    MessageBus,
    MessageHandler,
    Subscription,
    reply_queue_refusal,
)
from apollo_domain.ports.topology import Topology
from apollo_domain.results import ContradictionReport
from apollo_domain.rules import check_agent_id
from apollo_domain.secrets import redact
from apollo_domain.services import Caller, IngestItem, ingest_each
from apollo_domain.services.write_rate import charge_write

from ...bootstrap import topology_of
from ...budget import within_budget
from ...error_policy import Settlement, retry_after_of, rule_for
from ...facade import Apollo
from ...settings import Settings
from ...wire.envelope import (
    CAUSAL_HEADER,
    DEADLINE_HEADER,
    MUTATIONS,
    REQUESTS,
    decode_command,
    decode_gas_event,
    names_on,
)
from ...wire.replies import Receipt, encode_error_reply, encode_reply
from .drainer import OutboxDrainer
from .periodic import Periodic

if TYPE_CHECKING:
    from ...metrics import Metrics

log = logging.getLogger("apollo.service")
#: Who the service's own periodic work runs as.
_SERVICE = Caller("apollo", Principal(None, role=Role.ADMIN), trusted=True)

OUTBOX_BATCH = 50
_ABSENT = object()
#: The edge bus messages come over: what an ingest records as ``submitted_from``.
EDGE = "amqp"
#: Group commits one service process runs at once: one batch can embed and read while
#: another commits; later batches fill meanwhile (up to the batch size).
COMMITS_IN_FLIGHT = 2


class ApolloService:
    """The service actors over one :class:`Apollo` and one bus.

    ``await service.start()`` attaches the consumers and starts the periodic actors;
    ``await service.stop()`` stops consuming, lets the handlers in flight finish (their
    deliveries settled), then stops the periodic actors. Also an async context manager.
    """

    def __init__(
        self,
        apollo: Apollo,
        bus: MessageBus,
        settings: Settings,
        metrics: Metrics | None = None,
        *,
        topology: Topology | None = None,
    ) -> None:
        self.apollo = apollo
        self.bus = bus
        self.settings = settings
        self.metrics = metrics
        self.topology = topology or getattr(bus, "topology", None) or topology_of(settings)
        self._subscriptions: list[Subscription] = []
        self._periodic = Periodic()
        self._drainer = OutboxDrainer(
            self.drain_outbox,
            settings.outbox_interval,
            settings.outbox_workers,
        )
        self._started = False
        self._stopped = False
        self._batch = _Batch()
        self._ready: deque[list[_Pending]] = deque()
        self._flushes: set[asyncio.Task[None]] = set()
        self._single = self._consumer(MUTATIONS)

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        topology = self.topology
        prefetch = self.settings.consumer_prefetch
        ingest = self._single
        ingest_prefetch = prefetch
        if self.settings.ingest_batch > 1:
            ingest = self._on_mutation
            # a batch can fill while the one before it commits
            ingest_prefetch = max(prefetch, 2 * self.settings.ingest_batch)
        consumers: list[tuple[str, MessageHandler]] = [
            (topology.ingest_queue, ingest),
            (topology.query_queue, self._on_request),
            (topology.writeback_store_queue, self._consumer(names_on(Bus.WRITEBACK_STORE))),
            (
                topology.writeback_vectorize_queue,
                self._consumer(names_on(Bus.WRITEBACK_VECTORIZE)),
            ),
            (topology.gas_queue, self._on_gas_event),
        ]
        try:
            for queue, handler in consumers:
                subscription = await self.bus.consume(
                    queue,
                    handler,
                    prefetch=ingest_prefetch if queue == topology.ingest_queue else prefetch,
                )
                self._subscriptions.append(subscription)
        except BaseException:
            await self.stop()
            raise
        for name, (interval, _) in self.periodic_jobs().items():
            self._periodic.every(name, interval, self._period_of(name))
        self._drainer.start()
        log.info("consuming %s", ", ".join(queue for queue, _ in consumers))

    async def stop(self) -> None:
        """Graceful: stop consuming and drain the handlers in flight, then the periodic
        actors (a run in progress gets a grace period before it is cancelled)."""
        if self._stopped:
            return
        self._stopped = True
        subscriptions, self._subscriptions = self._subscriptions, []
        await asyncio.gather(*(s.cancel() for s in subscriptions), return_exceptions=True)
        while self._flushes or self._ready or self._batch.pending:
            self._batch.due = True
            self._start()
            await asyncio.gather(*self._flushes, return_exceptions=True)
        await asyncio.gather(self._periodic.stop(), self._drainer.stop())
        log.info("stopped")

    async def __aenter__(self) -> ApolloService:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- carrying out commands -------------------------------------------------------------

    async def _run(
        self,
        caller: Caller,
        command: c.Command[Any],
        key: str | None = None,
        *,
        budget: float | None = None,
    ) -> Any:
        """Carry out ``command``, within ``budget`` seconds when given (a message's)."""
        started = time.perf_counter()
        work = handle(self.apollo.deps, caller, command, idempotency_key=key)
        result = await within_budget(budget, work)
        if self.metrics is not None:
            self.metrics.observe_command(command, result, time.perf_counter() - started)
        return result

    @property
    def _budget(self) -> float:
        """The time budget of one message (a batch of them shares one)."""
        return self.settings.request_timeout

    # -- periodic work -----------------------------------------------------------------------

    def periodic_jobs(self) -> dict[str, tuple[float, c.Command[Any]]]:
        """The periodic jobs this service's actors run: name → (interval in seconds, the
        command). The outbox drainer is not among them: it runs as work is queued."""
        settings = self.settings
        jobs: dict[str, tuple[float, c.Command[Any]]] = {
            "decay": (settings.decay_interval, c.RunDecayCycle()),
            "expertise": (settings.expertise_interval, c.AggregateExpertise()),
            "corroboration": (
                settings.corroboration_interval,
                c.CheckCorroboration(limit=settings.corroboration_batch),
            ),
        }
        if settings.access_log_retention_days > 0:
            retention = c.TrimAccessLog(days=settings.access_log_retention_days)
            jobs["access-log retention"] = (settings.decay_interval, retention)
        return jobs

    async def run_periodic(self, name: str) -> Any:
        """One run of the periodic job ``name``, as its actor runs it every interval, for
        the period of that interval the clock is in now (period ``floor(now / interval)``
        since the epoch). The period is the run's idempotency key, recorded in the
        transaction of its effects: of the processes of a fleet whose actors tick in one
        period, the first does the work and the others wait for its commit and change
        nothing, so no job's effect multiplies with the number of processes. A run that
        fails (or a process killed mid-run) records nothing, and the next process to tick
        does the work. A lone process's runs are an interval apart, so each has a period of
        its own. The processes of a fleet must share the intervals."""
        interval, command = self.periodic_jobs()[name]
        return await self._run(
            _SERVICE, command, period_key(name, interval, self.apollo.deps.clock.now())
        )

    def _period_of(self, name: str) -> Callable[[], Awaitable[Any]]:
        return lambda: self.run_periodic(name)

    async def drain_outbox(self) -> ContradictionReport:
        """One run of an outbox drainer's worker: up to :data:`OUTBOX_BATCH` due items,
        each claimed under a lease, so the drainers of several processes never run one
        item at once."""
        result: ContradictionReport = await self._run(_SERVICE, c.ProcessOutbox(limit=OUTBOX_BATCH))
        return result

    def _caller(self, delivery: Delivery) -> Caller:
        """The broker-verified user is the principal (its role from the settings,
        :meth:`Settings.bus_principal`: a message without one may be refused); a writer
        acts as its own agent, the user id, which may not be one Apollo reserves."""
        principal = self.settings.bus_principal(delivery.message.user_id)
        if principal.id is not None:
            check_agent_id("user_id", principal.id)
        return Caller.of(principal.agent or principal.id, principal, edge=EDGE)

    # -- consumers -------------------------------------------------------------------------

    def _consumer(self, accept: Collection[str]) -> MessageHandler:
        """A consumer of command messages of the ``accept`` actions: each is carried out
        once per message id, then acknowledged."""

        async def consume(delivery: Delivery) -> None:
            async def work() -> None:
                command = decode_command(delivery.message.body, accept=accept)
                message_id = delivery.message.message_id
                with _receipt_scope([delivery]) as scope:
                    result = await self._run(
                        self._caller(delivery), command, message_id or None, budget=self._budget
                    )
                self._drainer.wake()
                log.debug("%s %s: %s", type(command).__name__, message_id, result)
                if scope is not None:  # before the ack: a redelivery answers again
                    await self.bus.reply(delivery.message, _receipt(scope))

            await self._settle(delivery, work)

        return consume

    async def _on_mutation(self, delivery: Delivery) -> None:
        """The ingest queue with group commit: a ``store_knowledge`` that passes its checks
        waits for its batch to be committed and settled; anything else is carried out
        alone (and settled by the error policy when it fails its checks)."""
        item = self._store_item(delivery)
        if item is None:
            await self._single(delivery)
            return
        try:
            await charge_write(self.apollo.deps, item[1].caller, 1)
        except Exception as exc:  # over its rate (delayed), or the store away (retried)
            await self._settle(delivery, _raising(exc))
            return
        settled = asyncio.get_running_loop().create_future()
        batch = self._batch
        batch.pending.append(_Pending(delivery, *item, settled))
        if len(batch.pending) >= self.settings.ingest_batch:
            self._ready.append(self._take())
            self._start()
        elif len(batch.pending) == 1:
            batch.timer = asyncio.get_running_loop().call_later(
                self.settings.ingest_batch_ms / 1000, self._due, batch
            )
        await asyncio.shield(settled)

    def _store_item(self, delivery: Delivery) -> tuple[c.StoreKnowledge, IngestItem] | None:
        """The delivery's ``store_knowledge`` checked for a batch; None for any other
        command, or one that fails its checks."""
        try:
            command = decode_command(delivery.message.body, accept=MUTATIONS)
            if not isinstance(command, c.StoreKnowledge):
                return None
            caller = self._caller(delivery)
            key = delivery.message.message_id or None
            item = store_item(caller, command, key)
        except Exception:
            return None
        return command, item

    def _take(self) -> list[_Pending]:
        """The filling batch's deliveries; a new batch begins."""
        batch, self._batch = self._batch, _Batch()
        if batch.timer is not None:
            batch.timer.cancel()
        return batch.pending

    def _due(self, batch: _Batch) -> None:
        """``batch``'s window is over: it is committed as soon as a commit may start (and
        keeps filling until then)."""
        batch.due = True
        if batch is self._batch:
            self._start()

    def _start(self) -> None:
        """Start committing full batches, else the filling one once its window is over,
        while fewer than ``COMMITS_IN_FLIGHT`` commits run."""
        while len(self._flushes) < COMMITS_IN_FLIGHT:
            if not self._ready and self._batch.due and self._batch.pending:
                self._ready.append(self._take())
            if not self._ready:
                return
            task = asyncio.get_running_loop().create_task(self._commit(self._ready.popleft()))
            self._flushes.add(task)
            task.add_done_callback(self._committed)

    def _committed(self, task: asyncio.Task[None]) -> None:
        self._flushes.discard(task)
        self._start()

    async def _commit(self, pending: Sequence[_Pending]) -> None:
        """One transaction for the batch, then each delivery acknowledged; on failure (the
        batch over the time budget included), each carried out alone, within its own. Every
        waiting handler is released, whatever happens."""
        try:
            started = time.perf_counter()
            try:
                with _receipt_scope([p.delivery for p in pending]) as scope:
                    work = ingest_each(self.apollo.deps, [p.item for p in pending])
                    results = await within_budget(self._budget, work)
            except Exception as exc:
                log.warning(
                    "a batch of %d messages failed (%s); each is carried out alone",
                    len(pending),
                    redact(f"{type(exc).__name__}: {exc}"),
                )
                await asyncio.gather(*(self._single(p.delivery) for p in pending))
                return
            seconds = time.perf_counter() - started
            self._drainer.wake()  # the batch queued its contradiction scans
            for p, result in zip(pending, results, strict=True):
                if self.metrics is not None:
                    self.metrics.observe_command(p.command, result, seconds)
                log.debug("StoreKnowledge %s: %s", p.delivery.message.message_id, result)
            if scope is not None:  # only those that asked, never another queue
                answered = [p.delivery for p in pending if _wants_receipt(p.delivery)]
                await asyncio.gather(*(self._answer(d, _receipt(scope)) for d in answered))
            await asyncio.gather(*(_ack(p.delivery) for p in pending))
        finally:
            for p in pending:
                if not p.settled.done():
                    p.settled.set_result(None)

    async def _on_gas_event(self, delivery: Delivery) -> None:
        async def work() -> None:
            command = decode_gas_event(delivery.message.body)
            result = await self._run(self._caller(delivery), command, budget=self._budget)
            self._drainer.wake()
            log.debug("gas %s: %s", result.request_id, dict(result.deposited))

        await self._settle(delivery, work)

    async def _on_request(self, delivery: Delivery) -> None:
        message = delivery.message
        refusal = reply_queue_refusal(message.reply_to)
        if refusal is not None:  # never publish, as the service, where a requester chose
            await _reject(delivery, refusal)
            return
        deadline = message.headers.get(DEADLINE_HEADER)
        if isinstance(deadline, int | float) and time.time() > deadline:
            # the caller gave up: answering would boost confidences for nobody
            log.info("request %s expired before it was served; dropped", message.message_id)
            await delivery.ack()
            return
        # A read that presents a causal token waits only for what it names (garbage: for
        # nothing); one without the header, for every commit of this process.
        presented = message.headers.get(CAUSAL_HEADER, _ABSENT)
        try:
            command = decode_command(message.body, accept=REQUESTS)
            if action_of(command).mutates:
                raise TypeError(f"{type(command).__name__} is not a read")
            with nullcontext() if presented is _ABSENT else causal_scope(presented):
                result = await self._run(self._caller(delivery), command, budget=self._budget)
            reply = encode_reply(result)
        except ApolloError as exc:
            log.info("request %s failed: %s", message.message_id, exc)
            reply = encode_error_reply(exc)
        except Exception as exc:
            log.exception("request %s failed", message.message_id)
            reply = encode_error_reply(exc)
        await self.bus.reply(message, reply)
        await delivery.ack()

    async def _answer(self, delivery: Delivery, body: bytes) -> None:
        """A mutation's receipt to its writer; one that cannot be sent is logged (the
        mutation stands: the writer's wait for it ends in a timeout)."""
        try:
            await self.bus.reply(delivery.message, body)
        except TransportError as exc:
            log.warning("could not answer %s (%s)", delivery.message.message_id, exc)

    # -- settlement ------------------------------------------------------------------------

    async def _settle(self, delivery: Delivery, work: Callable[[], Awaitable[None]]) -> None:
        """Acknowledge after ``work`` succeeded; on failure, dead-letter or retry as the
        error policy says (a failure that is not Apollo's own is logged in full)."""
        message = delivery.message
        try:
            await work()
        except Exception as exc:
            reason = redact(f"{type(exc).__name__}: {exc}")
            settlement = rule_for(exc).settlement
            if settlement is Settlement.DEAD_LETTER:
                if _wants_receipt(delivery):  # its writer hears why, as a read would
                    await self._answer(delivery, encode_error_reply(exc))
                await _reject(delivery, reason)
                return
            if settlement is Settlement.DELAY:
                await _delay(delivery, retry_after_of(exc) or 0.0, reason)
                return
            if isinstance(exc, ApolloError):
                log.warning(
                    "message %s (delivery %d) failed, will retry: %s",
                    message.message_id,
                    message.delivery_count,
                    exc,
                )
            else:
                log.exception("message %s failed unexpectedly; will retry", message.message_id)
            await _retry(delivery, reason)
            return
        await _ack(delivery)


@define
class _Pending:
    """A ``store_knowledge`` delivery waiting in a batch, and its handler's signal that it
    was settled."""

    delivery: Delivery
    command: c.StoreKnowledge
    item: IngestItem
    settled: asyncio.Future[None]


@define
class _Batch:
    """The deliveries gathered for the next group commit; ``timer`` ends its window
    (``due``)."""

    pending: list[_Pending] = field(factory=list)
    timer: asyncio.TimerHandle | None = None
    due: bool = False


def _wants_receipt(delivery: Delivery) -> bool:
    """Whether a mutation's writer asked for a receipt: a ``reply_to`` that is a reply
    queue (any other queue is never published to)."""
    return reply_queue_refusal(delivery.message.reply_to) is None


@contextmanager
def _receipt_scope(deliveries: Sequence[Delivery]) -> Iterator[CausalScope | None]:
    """A causal scope for mutations of which one at least asked for a receipt (the
    position their commit reached), else none."""
    if not any(_wants_receipt(d) for d in deliveries):
        yield None
        return
    with causal_scope() as scope:
        yield scope


def _receipt(scope: CausalScope) -> bytes:
    return encode_reply(Receipt(scope.token))


def _raising(exc: Exception) -> Callable[[], Awaitable[None]]:
    async def work() -> None:
        raise exc

    return work


def period_key(name: str, interval: float, now: datetime) -> str:
    """The idempotency key of periodic job ``name``'s run in the period of ``interval``
    seconds that ``now`` falls in (periods counted from the Unix epoch)."""
    return f"periodic:{name}:{interval:g}:{math.floor(now.timestamp() / interval)}"


async def _ack(delivery: Delivery) -> None:
    try:
        await delivery.ack()
    except TransportError as exc:
        log.warning(
            "could not acknowledge %s (%s); its redelivery is idempotent",
            delivery.message.message_id,
            exc,
        )


async def _reject(delivery: Delivery, reason: str) -> None:
    log.warning("dead-lettering message %s: %s", delivery.message.message_id, reason)
    try:
        await delivery.reject(reason)
    except TransportError as exc:
        log.warning("could not dead-letter %s (%s)", delivery.message.message_id, exc)


async def _delay(delivery: Delivery, seconds: float, reason: str) -> None:
    log.info("message %s delayed %.2f s: %s", delivery.message.message_id, seconds, reason)
    try:
        await delivery.delay(seconds, reason)
    except TransportError as exc:
        log.warning("could not requeue %s (%s); it returns later", delivery.message.message_id, exc)


async def _retry(delivery: Delivery, reason: str) -> None:
    try:
        await delivery.retry(reason)
    except TransportError as exc:
        log.warning("could not requeue %s (%s); it returns later", delivery.message.message_id, exc)


__all__ = ["OUTBOX_BATCH", "ApolloService", "period_key"]
