"""RabbitMQ transport (aiormq): Apollo's topology declared on the broker and the message bus
over it. ``Topology`` and its values live in :mod:`apollo_domain.ports.topology`; they are
re-exported here for convenience."""

from apollo_adapters.bus_support import exponential_backoff
from apollo_domain.ports.topology import Binding, Exchange, Queue, Topology

from .bus import AiormqBus
from .topology import declare_topology

__all__ = [
    "AiormqBus",
    "Binding",
    "Exchange",
    "Queue",
    "Topology",
    "declare_topology",
    "exponential_backoff",
]
