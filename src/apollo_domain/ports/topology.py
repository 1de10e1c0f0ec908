"""Apollo's messaging topology: the names of its exchanges, queues and bindings.

Plain values, the same for every bus: the RabbitMQ adapter declares them on the broker, the
in-process bus routes by them.
"""

from __future__ import annotations

from attrs import evolve, frozen

from apollo_domain.errors import ValidationError

#: The kinds of RabbitMQ queue Apollo declares its durable queues as (``APOLLO_QUEUE_TYPE``):
#: replicated quorum queues (the default) or classic queues.
QUEUE_TYPES = ("quorum", "classic")


def check_queue_type(queue_type: str) -> str:
    """``queue_type`` if it is one of :data:`QUEUE_TYPES`, else :class:`ValidationError`."""
    if queue_type not in QUEUE_TYPES:
        raise ValidationError(
            "queue_type", f"must be one of {', '.join(QUEUE_TYPES)}, got {queue_type!r}"
        )
    return queue_type


@frozen
class Exchange:
    name: str
    type: str  # "direct", "topic" or "fanout"


@frozen
class Queue:
    name: str
    dead_letter_exchange: str | None


@frozen
class Binding:
    exchange: str
    queue: str
    routing_key: str


@frozen
class Topology:
    """Names of Apollo's messaging entities; the defaults are the production names.

    Every work queue is durable, dead-letters into ``dead_letter_exchange`` (fanout) and so
    into ``dead_letter_queue``. The four Apollo queues are bound to ``exchange`` (direct)
    with their own name as routing key; ``gas_queue`` is bound to ``audit_exchange`` (topic)
    with ``audit_routing_key``.
    """

    exchange: str = "legion.apollo"
    ingest_queue: str = "legion.apollo.ingest"
    query_queue: str = "legion.apollo.query"
    writeback_store_queue: str = "legion.apollo.writeback.store"
    writeback_vectorize_queue: str = "legion.apollo.writeback.vectorize"
    gas_queue: str = "legion.apollo.gas"
    audit_exchange: str = "llm.audit"
    audit_routing_key: str = "llm.audit.complete"
    dead_letter_exchange: str = "legion.apollo.dlx"
    dead_letter_queue: str = "legion.apollo.dead"

    def with_prefix(self, prefix: str) -> Topology:
        """The same topology with ``prefix`` before every exchange and queue name (routing
        keys of the Apollo queues follow their names; the audit routing key is kept)."""
        return evolve(
            self,
            exchange=prefix + self.exchange,
            ingest_queue=prefix + self.ingest_queue,
            query_queue=prefix + self.query_queue,
            writeback_store_queue=prefix + self.writeback_store_queue,
            writeback_vectorize_queue=prefix + self.writeback_vectorize_queue,
            gas_queue=prefix + self.gas_queue,
            audit_exchange=prefix + self.audit_exchange,
            dead_letter_exchange=prefix + self.dead_letter_exchange,
            dead_letter_queue=prefix + self.dead_letter_queue,
        )

    @property
    def apollo_queues(self) -> tuple[str, ...]:
        """The queues bound to ``exchange`` by their own name."""
        return (
            self.ingest_queue,
            self.query_queue,
            self.writeback_store_queue,
            self.writeback_vectorize_queue,
        )

    @property
    def exchanges(self) -> tuple[Exchange, ...]:
        return (
            Exchange(self.exchange, "direct"),
            Exchange(self.audit_exchange, "topic"),
            Exchange(self.dead_letter_exchange, "fanout"),
        )

    @property
    def queues(self) -> tuple[Queue, ...]:
        work = [Queue(name, self.dead_letter_exchange) for name in self.apollo_queues]
        return (
            *work,
            Queue(self.gas_queue, self.dead_letter_exchange),
            Queue(self.dead_letter_queue, None),
        )

    @property
    def bindings(self) -> tuple[Binding, ...]:
        return (
            *(Binding(self.exchange, name, name) for name in self.apollo_queues),
            Binding(self.audit_exchange, self.gas_queue, self.audit_routing_key),
            Binding(self.dead_letter_exchange, self.dead_letter_queue, ""),
        )


__all__ = ["QUEUE_TYPES", "Binding", "Exchange", "Queue", "Topology", "check_queue_type"]
