"""Prometheus metrics of one Apollo service, in a private registry (never the global one)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from apollo_domain.commands import Command, QueryKnowledge, Retrieve
from apollo_domain.model import Outcome
from apollo_domain.ports.messaging import BrokerLink
from apollo_domain.ports.rates import WriteBudget
from apollo_domain.results import IngestResult, MaintenanceResult

QUERY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ReplicaCounts(Protocol):
    """A store that reads on a replica: how many reads ran there, and how many it could
    not take (they ran on the primary), in all and by cause."""

    @property
    def replica_reads(self) -> int: ...

    @property
    def replica_fallbacks(self) -> int: ...

    @property
    def replica_fallback_causes(self) -> Mapping[str, int]: ...


class _WriteRateCollector:
    def __init__(self, budget: WriteBudget) -> None:
        self.budget = budget

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "apollo_write_rate",
            "Writes charged to their principal's write rate (APOLLO_WRITE_RATE) in this"
            " process, by outcome (granted; limited: refused with 429 or delayed on the bus).",
            labels=["outcome"],
        )
        for outcome, count in sorted(self.budget.outcomes().items()):
            family.add_metric([outcome], count)
        yield family


class _ReplicaCollector:
    def __init__(self, store: ReplicaCounts) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "apollo_replica_reads",
            "Reads meant for the read replica, by where they ran (primary: the replica was"
            " down or behind).",
            labels=["served_by"],
        )
        family.add_metric(["replica"], self._store.replica_reads)
        family.add_metric(["primary"], self._store.replica_fallbacks)
        yield family
        causes = CounterMetricFamily(
            "apollo_replica_fallbacks",
            "Reads meant for the read replica that ran on the primary, by cause (no_replica:"
            " down or skipped after a failure; wait_timed_out: it had not replayed the"
            " caller's causal token within APOLLO_REPLICA_WAIT_SECONDS; replica_error: it"
            " failed the read).",
            labels=["cause"],
        )
        for cause, count in self._store.replica_fallback_causes.items():
            causes.add_metric([cause], count)
        yield causes


class _BrokerCollector:
    def __init__(self, broker: BrokerLink) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        broker = self.broker
        connected = GaugeMetricFamily(
            "apollo_broker_connected",
            "1 while the service has its RabbitMQ connection, else 0, by node address.",
            labels=["node"],
        )
        connected.add_metric([broker.node], 1 if broker.connected else 0)
        yield connected
        yield GaugeMetricFamily(
            "apollo_broker_reconnects",
            "RabbitMQ connections re-established after a lost one since the service started.",
            value=broker.reconnects,
        )
        redeliveries = CounterMetricFamily(
            "apollo_broker_redeliveries",
            "Deliveries that were not a message's first, by cause: returned (handed out"
            " before to a consumer lost without settling it) or retried (after a failed"
            " handler).",
            labels=["cause"],
        )
        for cause, count in sorted(broker.redeliveries.items()):
            redeliveries.add_metric([cause], count)
        yield redeliveries


class Metrics:
    """What Apollo counts. Each instance owns its :class:`CollectorRegistry`, so two services
    (or two tests) in one process never share counters.

    The service feeds it: :meth:`observe_ingest` per ingest outcome, :meth:`observe_query`
    per query, :meth:`observe_maintenance` after decay and archive work,
    :meth:`set_queue_depth` with the depth of each queue (the outbox, bus queues),
    :meth:`watch_broker` with the service's broker link, and :meth:`observe_http` per
    HTTP request.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.ingest = Counter(
            "apollo_ingest",
            "Ingests by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.query_seconds = Histogram(
            "apollo_query_seconds",
            "Time to answer a query or retrieve.",
            buckets=QUERY_BUCKETS,
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "apollo_queue_depth",
            "Messages or items waiting, by queue (outbox: pending contradiction scans).",
            ["queue"],
            registry=self.registry,
        )
        self.decayed = Counter(
            "apollo_decayed", "Entries whose confidence was decayed.", registry=self.registry
        )
        self.archived = Counter(
            "apollo_archived",
            "Entries archived by decay or staleness.",
            registry=self.registry,
        )
        self.http_requests = Counter(
            "apollo_http_requests",
            "HTTP requests by method, route template and status code.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.http_seconds = Histogram(
            "apollo_http_request_seconds",
            "HTTP request latency by route template.",
            ["route"],
            buckets=QUERY_BUCKETS,
            registry=self.registry,
        )
        self._broker: _BrokerCollector | None = None
        self._write_rate: _WriteRateCollector | None = None
        for outcome in Outcome:
            self.ingest.labels(outcome=outcome.value)

    def observe_ingest(self, outcome: Outcome | str) -> None:
        self.ingest.labels(outcome=Outcome(outcome).value).inc()

    def observe_query(self, seconds: float) -> None:
        self.query_seconds.observe(max(0.0, seconds))

    def observe_maintenance(self, *, decayed: int = 0, archived: int = 0) -> None:
        if decayed > 0:
            self.decayed.inc(decayed)
        if archived > 0:
            self.archived.inc(archived)

    def observe_command(self, command: Command[Any], result: Any, seconds: float) -> None:
        """What every edge reports after carrying out a command: ingest outcomes, query
        latency, decayed and archived counts."""
        if isinstance(result, IngestResult):
            self.observe_ingest(result.outcome)
        elif isinstance(command, QueryKnowledge | Retrieve):
            self.observe_query(seconds)
        elif isinstance(result, MaintenanceResult):
            decayed = result.affected if result.action in ("decay", "force_decay") else 0
            self.observe_maintenance(decayed=decayed, archived=result.archived)

    def set_queue_depth(self, queue: str, depth: int) -> None:
        self.queue_depth.labels(queue=queue).set(max(0, depth))

    def watch_broker(self, broker: BrokerLink) -> None:
        """Export ``broker``'s connection as it is at each scrape: ``apollo_broker_connected``
        (1 or 0, one series, labelled with the node in use, an address without
        credentials), ``apollo_broker_reconnects`` and ``apollo_broker_redeliveries_total``
        by cause. Watching another broker replaces the first."""
        if self._broker is None:
            self._broker = _BrokerCollector(broker)
            self.registry.register(self._broker)
        self._broker.broker = broker

    def observe_http(self, method: str, route: str, status: int, seconds: float) -> None:
        self.http_requests.labels(method=method, route=route, status=str(status)).inc()
        self.http_seconds.labels(route=route).observe(max(0.0, seconds))

    def watch_replica(self, store: object) -> None:
        """Export ``store``'s replica counts (``apollo_replica_reads_total`` and
        ``apollo_replica_fallbacks_total``) when it reads on a replica (the PostgreSQL
        store opened with ``APOLLO_READ_DATABASE_URL``)."""
        if (
            hasattr(store, "replica_reads")
            and hasattr(store, "replica_fallbacks")
            and hasattr(store, "replica_fallback_causes")
        ):
            self.registry.register(_ReplicaCollector(store))

    def watch_write_budget(self, budget: WriteBudget | None) -> None:
        """Export ``budget``'s outcomes (``apollo_write_rate_total``) when there is one;
        watching another budget replaces the first."""
        if budget is None:
            return
        if self._write_rate is None:
            self._write_rate = _WriteRateCollector(budget)
            self.registry.register(self._write_rate)
        self._write_rate.budget = budget

    def render(self) -> tuple[bytes, str]:
        """The Prometheus text exposition and its content type, without the ``*_created``
        timestamp series (they read like counts beside the counters they belong to)."""
        lines = generate_latest(self.registry).splitlines(keepends=True)
        kept = [line for line in lines if not _is_created_series(line)]
        return b"".join(kept), CONTENT_TYPE_LATEST


def _is_created_series(line: bytes) -> bool:
    name = line.split(b"{", 1)[0].split(b" ", 1)[0]
    if line.startswith(b"#"):
        parts = line.split(b" ")
        name = parts[2] if len(parts) > 2 else b""
    return name.endswith(b"_created")


__all__ = ["Metrics"]
