"""Service mode: the actors that consume Apollo's queues, the periodic work, ``apollo serve``.

Consumers (one per queue, ``settings.prefetch`` deliveries in flight each):

- ingest queue: ``ingest`` and the other mutations. The principal is the broker-verified
  ``user_id`` of the message (none when absent); the body's ``agent_id`` is attribution
  only. An ingest is acknowledged only after it committed, and it is idempotent by
  ``message_id``, so a redelivery writes nothing twice. Other mutations are skipped when
  their ``message_id`` was already processed (the key is recorded right after the change
  commits).
- query queue (RPC): every request gets a reply, a result or the error, then is
  acknowledged; a caller never waits for an answer that will not come.
- writeback-store: a response that carries its embedding. The embedding's dimension must
  match the store's (else the message is dead-lettered with the reason); the content is
  then ingested normally, so the store's own embedder produces the stored vector (cached,
  so cheap) and one store keeps one embedding model. writeback-vectorize: embed, ingest.
- GAS queue: ``llm.audit.complete`` events, processed once per request id.

Settlement: bad input and failures that cannot succeed on a retry (:class:`ValidationError`,
:class:`NotFound`, :class:`InvalidTransition`) dead-letter the message with the reason;
any other failure (the store or the broker unavailable, anything unexpected) is retried
with backoff, a bounded number of times, then dead-lettered. Nothing is dropped silently.

Nothing here is process-local: several service processes may consume the same queues.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from apollo_adapters.inprocess import InProcessBus
from apollo_adapters.rabbitmq import AiormqBus
from apollo_domain import services
from apollo_domain.errors import (
    ApolloError,
    ConfigurationError,
    InvalidTransition,
    NotFound,
    StoreUnavailable,
    TransportError,
    ValidationError,
)
from apollo_domain.messaging import Delivery, MessageBus, MessageHandler, Subscription
from apollo_domain.model import Principal
from apollo_domain.services import Caller
from apollo_domain.topology import Topology

from .facade import Apollo
from .messages import (
    DEADLINE_HEADER,
    MUTATIONS,
    REQUESTS,
    Action,
    ArchiveStaleBody,
    AtRiskBody,
    Body,
    DeprecateBody,
    ExpertiseBody,
    ForceDecayBody,
    IngestBody,
    LinkBody,
    ProfileBody,
    QueryBody,
    ResolveBody,
    RetrieveBody,
    TraverseBody,
    WritebackStoreBody,
    WritebackVectorizeBody,
    decode_command,
    decode_gas_event,
    encode_error_reply,
    encode_reply,
    topology_from_settings,
    writeback_arguments,
)
from .settings import Settings

if TYPE_CHECKING:
    from .metrics import Metrics

log = logging.getLogger("apollo.service")

#: Failures a retry cannot fix: the message is dead-lettered with the reason.
PERMANENT_ERRORS: tuple[type[Exception], ...] = (ValidationError, NotFound, InvalidTransition)
#: Failures that usually pass: retried quietly (anything else is retried and logged in full).
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (StoreUnavailable, TransportError)
OUTBOX_BATCH = 50
STOP_GRACE_SECONDS = 10.0


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
        self.topology = (
            topology or getattr(bus, "topology", None) or topology_from_settings(settings)
        )
        self._subscriptions: list[Subscription] = []
        self._periodic: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()
        self._started = False
        self._stopped = False

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        topology = self.topology
        consumers: list[tuple[str, MessageHandler]] = [
            (topology.ingest_queue, self._on_ingest),
            (topology.query_queue, self._on_request),
            (topology.writeback_store_queue, self._on_writeback_store),
            (topology.writeback_vectorize_queue, self._on_writeback_vectorize),
            (topology.gas_queue, self._on_gas_event),
        ]
        try:
            for queue, handler in consumers:
                subscription = await self.bus.consume(
                    queue, handler, prefetch=self.settings.prefetch
                )
                self._subscriptions.append(subscription)
        except BaseException:
            await self.stop()
            raise
        settings = self.settings
        apollo = self.apollo
        self._every("decay", settings.decay_interval, self._decay)
        self._every("expertise", settings.expertise_interval, apollo.aggregate_expertise)
        self._every(
            "corroboration",
            settings.corroboration_interval,
            lambda: apollo.check_corroboration(settings.corroboration_batch),
        )
        self._every("outbox", settings.outbox_interval, lambda: apollo.process_outbox(OUTBOX_BATCH))
        log.info("consuming %s", ", ".join(queue for queue, _ in consumers))

    async def stop(self) -> None:
        """Graceful: stop consuming and drain the handlers in flight, then the periodic
        actors (a run in progress gets ``STOP_GRACE_SECONDS`` before it is cancelled)."""
        if self._stopped:
            return
        self._stopped = True
        subscriptions, self._subscriptions = self._subscriptions, []
        await asyncio.gather(*(s.cancel() for s in subscriptions), return_exceptions=True)
        self._stopping.set()
        if self._periodic:
            _, late = await asyncio.wait(self._periodic, timeout=STOP_GRACE_SECONDS)
            for task in late:
                task.cancel()
            await asyncio.gather(*self._periodic, return_exceptions=True)
        log.info("stopped")

    async def __aenter__(self) -> ApolloService:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- periodic actors -------------------------------------------------------------------

    def _every(self, name: str, interval: float, job: Callable[[], Awaitable[Any]]) -> None:
        task = asyncio.get_running_loop().create_task(
            self._repeat(name, interval, job), name=f"apollo-{name}"
        )
        self._periodic.append(task)

    async def _repeat(self, name: str, interval: float, job: Callable[[], Awaitable[Any]]) -> None:
        """Run ``job`` every ``interval`` seconds until stopped; a failed run is logged and
        the next one happens on schedule."""
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=interval)
            if self._stopping.is_set():
                return
            try:
                result = await job()
            except Exception:
                log.exception("periodic %s failed; next run in %gs", name, interval)
            else:
                log.debug("periodic %s: %s", name, result)

    async def _decay(self) -> Any:
        result = await self.apollo.run_decay_cycle()
        if self.metrics is not None:
            self.metrics.observe_maintenance(decayed=result.affected, archived=result.archived)
        return result

    # -- consumers -------------------------------------------------------------------------

    async def _on_ingest(self, delivery: Delivery) -> None:
        async def work() -> None:
            body = decode_command(delivery.message.body, accept=MUTATIONS)
            await self._mutate(body, self._caller(delivery, body), delivery.message.message_id)

        await self._settle(delivery, work)

    async def _on_writeback_store(self, delivery: Delivery) -> None:
        async def work() -> None:
            body = decode_command(delivery.message.body, accept={Action.WRITEBACK_STORE})
            assert isinstance(body, WritebackStoreBody)
            expected = self.apollo.deps.embedder.dimension
            if len(body.embedding) != expected:
                raise ValidationError(
                    "embedding",
                    f"has {len(body.embedding)} dimensions; this store uses {expected}",
                )
            await self._writeback(body, delivery)

        await self._settle(delivery, work)

    async def _on_writeback_vectorize(self, delivery: Delivery) -> None:
        async def work() -> None:
            body = decode_command(delivery.message.body, accept={Action.WRITEBACK_VECTORIZE})
            assert isinstance(body, WritebackVectorizeBody)
            await self._writeback(body, delivery)

        await self._settle(delivery, work)

    async def _on_gas_event(self, delivery: Delivery) -> None:
        async def work() -> None:
            event = decode_gas_event(delivery.message.body).event
            result = await self.apollo.process_gas_event(
                event, principal=Principal(delivery.message.user_id)
            )
            log.debug("gas %s: %s", result.request_id, dict(result.deposited))

        await self._settle(delivery, work)

    async def _on_request(self, delivery: Delivery) -> None:
        message = delivery.message
        if not message.reply_to:
            await _reject(delivery, "an RPC request needs reply_to")
            return
        deadline = message.headers.get(DEADLINE_HEADER)
        if isinstance(deadline, int | float) and time.time() > deadline:
            # the caller gave up: answering would boost confidences for nobody
            log.info("request %s expired before it was served; dropped", message.message_id)
            await delivery.ack()
            return
        try:
            body = decode_command(message.body, accept=REQUESTS)
            reply = encode_reply(await self._answer(body, self._caller(delivery, body)))
        except ApolloError as exc:
            log.info("request %s failed: %s", message.message_id, exc)
            reply = encode_error_reply(exc)
        except Exception as exc:
            log.exception("request %s failed", message.message_id)
            reply = encode_error_reply(exc)
        await self.bus.reply(message, reply)
        await delivery.ack()

    # -- work ------------------------------------------------------------------------------

    @staticmethod
    def _caller(delivery: Delivery, body: Body) -> Caller:
        return Caller.of(body.agent_id, Principal(delivery.message.user_id))

    async def _settle(self, delivery: Delivery, work: Callable[[], Awaitable[None]]) -> None:
        message = delivery.message
        try:
            await work()
        except PERMANENT_ERRORS as exc:
            await _reject(delivery, f"{type(exc).__name__}: {exc}")
            return
        except TRANSIENT_ERRORS as exc:
            log.warning(
                "message %s (delivery %d) failed, will retry: %s",
                message.message_id,
                message.delivery_count,
                exc,
            )
            await _retry(delivery, f"{type(exc).__name__}: {exc}")
            return
        except Exception as exc:
            log.exception("message %s failed unexpectedly; will retry", message.message_id)
            await _retry(delivery, f"{type(exc).__name__}: {exc}")
            return
        try:
            await delivery.ack()
        except TransportError as exc:
            log.warning(
                "could not acknowledge %s (%s); its redelivery is idempotent",
                message.message_id,
                exc,
            )

    async def _mutate(self, body: Body, caller: Caller, message_id: str) -> None:
        deps = self.apollo.deps
        if isinstance(body, IngestBody):
            request = services.prepare(
                caller,
                content=body.content,
                content_type=body.content_type,
                tags=body.tags,
                context=body.context,
                source_provider=body.source_provider,
                source_channel=body.source_channel,
                knowledge_domain=body.knowledge_domain,
                access_scope=body.access_scope,
                submitted_by=body.submitted_by,
                submitted_from=body.submitted_from,
            )
            await self._ingest(caller, request, message_id)
            return
        key = f"command:{message_id}"
        async with deps.store.unit_of_work() as uow:
            if await uow.processed.seen(key):
                log.info("message %s already processed; skipped", message_id)
                return
        result: Any
        match body:
            case LinkBody():
                result = await services.link_entries(
                    deps,
                    caller,
                    body.from_entry_id,
                    body.to_entry_id,
                    body.relation_type,
                    body.weight,
                )
            case DeprecateBody():
                result = await services.deprecate_entry(deps, caller, body.entry_id, body.reason)
            case ResolveBody():
                result = await services.resolve_dispute(
                    deps, caller, body.entry_id, body.resolution
                )
            case ForceDecayBody():
                result = await services.force_decay(deps, body.factor)
            case ArchiveStaleBody():
                result = await services.archive_stale(deps, body.days)
                if self.metrics is not None:
                    self.metrics.observe_maintenance(archived=result.archived)
            case _:
                raise ValidationError("action", f"{type(body).__name__} is not a mutation")
        async with deps.store.unit_of_work() as uow:
            await uow.processed.mark(key, deps.clock.now())
            await uow.commit()
        log.debug("message %s: %s", message_id, result)

    async def _writeback(
        self, body: WritebackStoreBody | WritebackVectorizeBody, delivery: Delivery
    ) -> None:
        caller = self._caller(delivery, body)
        request = services.prepare(
            caller, content=body.content, **writeback_arguments(body.metadata)
        )
        await self._ingest(caller, request, delivery.message.message_id)

    async def _ingest(
        self, caller: Caller, request: services.IngestRequest, message_id: str
    ) -> None:
        result = await services.ingest(
            self.apollo.deps, caller, request, idempotency_key=message_id or None
        )
        if self.metrics is not None:
            self.metrics.observe_ingest(result.outcome)
        log.debug("ingest %s: %s %s", message_id, result.outcome.value, result.reason or "")

    async def _answer(self, body: Body, caller: Caller) -> Any:
        deps = self.apollo.deps
        match body:
            case QueryBody():
                started = time.perf_counter()
                answer: Any = await services.query(
                    deps,
                    caller,
                    body.query,
                    min_confidence=body.min_confidence,
                    limit=body.limit,
                    status=body.status,
                    tags=body.tags,
                    knowledge_domain=body.knowledge_domain,
                )
                self._observe_query(started)
                return answer
            case RetrieveBody():
                started = time.perf_counter()
                answer = await services.query(
                    deps,
                    caller,
                    body.query,
                    min_confidence=body.min_confidence,
                    limit=body.limit,
                    tags=body.tags,
                    knowledge_domain=body.knowledge_domain,
                    count_access=False,
                )
                self._observe_query(started)
                return answer
            case TraverseBody():
                return await services.related_entries(
                    deps,
                    caller,
                    body.entry_id,
                    depth=body.depth,
                    relation_types=body.relation_types,
                )
            case ExpertiseBody():
                return await services.get_expertise(deps, body.domain, body.min_proficiency)
            case AtRiskBody():
                return await services.domains_at_risk(deps, body.min_agents)
            case ProfileBody():
                return await services.agent_profile(deps, body.target_agent_id)
        raise ValidationError("action", f"{type(body).__name__} is not a request")

    def _observe_query(self, started: float) -> None:
        if self.metrics is not None:
            self.metrics.observe_query(time.perf_counter() - started)


async def _reject(delivery: Delivery, reason: str) -> None:
    log.warning("dead-lettering message %s: %s", delivery.message.message_id, reason)
    try:
        await delivery.reject(reason)
    except TransportError as exc:
        log.warning("could not dead-letter %s (%s)", delivery.message.message_id, exc)


async def _retry(delivery: Delivery, reason: str) -> None:
    try:
        await delivery.retry(reason)
    except TransportError as exc:
        log.warning("could not requeue %s (%s); it returns later", delivery.message.message_id, exc)


# ------------------------------------------------------------------------------ apollo serve


async def open_bus(settings: Settings, topology: Topology) -> MessageBus:
    """RabbitMQ at ``settings.amqp_url`` (declaring the topology, idempotently), else the
    in-process bus."""
    if settings.amqp_url:
        return await AiormqBus.connect(
            settings.amqp_url, topology=topology, max_redeliveries=settings.max_redeliveries
        )
    return InProcessBus(topology, max_redeliveries=settings.max_redeliveries)


def http_enabled(settings: Settings) -> bool:
    """Whether ``apollo serve`` runs the HTTP API (``settings.http_enabled``, default on)."""
    return settings.http_enabled


def _make_metrics() -> Metrics | None:
    if importlib.util.find_spec("apollo_app.metrics") is None:
        return None
    from .metrics import Metrics

    return Metrics()


async def run_service(
    settings: Settings | None = None, *, stop: asyncio.Event | None = None
) -> None:
    """``apollo serve``: open the store and the bus, run the consumers, the periodic actors
    and the HTTP API until SIGINT/SIGTERM (or ``stop``), then shut down gracefully."""
    settings = settings or Settings.from_env()
    topology = topology_from_settings(settings)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    handled: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)
    metrics = _make_metrics()
    try:
        async with Apollo.open(settings) as apollo:
            bus = await open_bus(settings, topology)
            try:
                service = ApolloService(apollo, bus, settings, metrics, topology=topology)
                await service.start()
                try:
                    await _serve_until(stop, apollo, settings, metrics)
                finally:
                    await service.stop()
            finally:
                await bus.close()
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


async def _serve_until(
    stop: asyncio.Event, apollo: Apollo, settings: Settings, metrics: Metrics | None
) -> None:
    waiting = asyncio.ensure_future(stop.wait())
    tasks: set[asyncio.Future[Any]] = {waiting}
    http: asyncio.Task[None] | None = None
    if http_enabled(settings) and importlib.util.find_spec("apollo_app.http") is not None:
        from .http import serve_http

        ready = asyncio.Event()
        http = asyncio.ensure_future(serve_http(apollo, settings, metrics, ready=ready))
        tasks.add(http)
        started = asyncio.ensure_future(ready.wait())
        await asyncio.wait({started, http}, return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
    log.info(
        "Apollo service running: %s; bus: %s; store: %s",
        _http_address(settings) if http is not None else "HTTP API disabled",
        "RabbitMQ" if settings.amqp_url else "in-process",
        "PostgreSQL at APOLLO_DATABASE_URL"
        if settings.database_url
        else f"embedded PostgreSQL in {settings.data_dir}",
    )
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if http is not None and http in done:
            http.result()  # an HTTP server that failed takes the service down with it
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    log.info("shutting down")


def _http_address(settings: Settings) -> str:
    from .http import bind_host

    host = bind_host(settings.http_host, settings.api_tokens)
    note = "" if settings.api_tokens else " (no APOLLO_API_TOKENS: loopback only, anonymous)"
    return f"HTTP API on http://{host}:{settings.http_port}/api/apollo/{note}"


def main() -> int:
    """``python -m apollo_app.service``: run the service with settings from the environment."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = Settings.from_env()
    except ConfigurationError as exc:
        log.error("invalid settings: %s", exc)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_service(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["ApolloService", "http_enabled", "main", "open_bus", "run_service"]
