"""The one error hierarchy of Apollo.

Adapters translate their library's exceptions into these at their edge
(``raise StoreUnavailable(...) from exc``); nothing from psycopg, aiormq or httpx
crosses a port.
"""

from __future__ import annotations


class ApolloError(Exception):
    """Base of every error Apollo raises on purpose."""


class ValidationError(ApolloError, ValueError):
    """Bad input. ``field`` names the offending argument or payload field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class NotFound(ApolloError, LookupError):
    """The entry (or other object) does not exist, or is not visible to the caller."""


class Forbidden(ApolloError):
    """The caller may not do this (its role, or the object is not its own). Nothing changed.

    ``field`` names the input that asked for too much, when one did (``agent_id``)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class Conflict(ApolloError):
    """A concurrent writer won, or a uniqueness rule would be broken."""


class InvalidTransition(ApolloError):
    """A lifecycle operation does not apply to the entry in its current state."""


class UnknownResolution(InvalidTransition):
    """A dispute resolution other than accept, keep or reject."""

    field = "resolution"


class StoreUnavailable(ApolloError):
    """The store cannot serve the request right now (connection lost, missing table, ...).

    Transient: the same call may succeed later. Nothing was written.
    """


class StoreBusy(StoreUnavailable):
    """Every connection of the store stayed taken for as long as a caller may wait for one:
    back-pressure, not an outage. Nothing was written; the same call may pass after
    ``retry_after`` seconds."""

    def __init__(self, message: str, *, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TransientConflict(StoreBusy):
    """The store broke this unit of work apart for a concurrent one (a deadlock, a
    serialization failure): all of it was rolled back, and running it again may pass."""


class RateLimited(ApolloError):
    """The caller's principal wrote faster than its write rate allows
    (:mod:`apollo_domain.rates`). Nothing was written; the same write may pass after
    ``retry_after`` seconds."""

    def __init__(self, message: str, *, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PersistenceFailed(ApolloError):
    """The store accepted the connection but failed to persist a change; nothing was written."""


class TransportError(ApolloError):
    """The message transport failed (broker unreachable, publish not confirmed, RPC timeout)."""


class RpcTimeout(TransportError, TimeoutError):
    """No reply arrived for an RPC request within its timeout."""


class RequestTimeout(ApolloError):
    """A request (an HTTP request, a bus message) was not carried out within its time
    budget. Its unit of work rolled back: nothing it did was committed. Transient: the same
    request may pass when the service is less busy."""


class EmbeddingError(ApolloError):
    """The embedder failed or returned vectors of the wrong shape."""


class ConfigurationError(ApolloError):
    """Settings are invalid; ``variable`` names the environment variable or option."""

    def __init__(self, variable: str, message: str) -> None:
        super().__init__(f"{variable}: {message}")
        self.variable = variable
        self.message = message


__all__ = [
    "ApolloError",
    "ConfigurationError",
    "Conflict",
    "EmbeddingError",
    "Forbidden",
    "InvalidTransition",
    "NotFound",
    "PersistenceFailed",
    "RateLimited",
    "RequestTimeout",
    "RpcTimeout",
    "StoreBusy",
    "StoreUnavailable",
    "TransientConflict",
    "TransportError",
    "UnknownResolution",
    "ValidationError",
]
