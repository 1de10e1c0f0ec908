"""The in-process message bus: the same contract as RabbitMQ, inside one asyncio loop."""

from .bus import InProcessBus

__all__ = ["InProcessBus"]
