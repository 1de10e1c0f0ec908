"""RabbitMQ transport (aiormq): Apollo's topology and the message bus over it."""

from .bus import AiormqBus, exponential_backoff
from .topology import Binding, Exchange, Queue, Topology

__all__ = ["AiormqBus", "Binding", "Exchange", "Queue", "Topology", "exponential_backoff"]
