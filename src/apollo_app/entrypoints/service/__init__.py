"""Service mode: the actors that consume Apollo's queues, the periodic work, ``apollo serve``."""

from .consumers import ApolloService
from .runner import http_enabled, main, run_service

__all__ = ["ApolloService", "http_enabled", "main", "run_service"]
