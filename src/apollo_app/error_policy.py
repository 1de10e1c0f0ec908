"""One error policy for every edge: HTTP status, RPC error name and bus settlement.

Each :class:`ApolloError` subclass means the same thing everywhere. The HTTP API answers
with ``http_status`` and ``{"error": {"type": name, ...}}``; an RPC reply carries ``name``
(and the client raises the same class again); the bus consumer dead-letters a message whose
failure a retry cannot fix and retries one that may pass (the store or the broker briefly
away, a concurrent writer that won); a write over its principal's rate is delivered again
once the rate allows it, never dead-lettered for that.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final

from attrs import frozen

from apollo_domain.errors import (
    ApolloError,
    ConfigurationError,
    Conflict,
    EmbeddingError,
    Forbidden,
    InvalidTransition,
    NotFound,
    PersistenceFailed,
    RateLimited,
    RequestTimeout,
    RpcTimeout,
    StoreBusy,
    StoreUnavailable,
    TransportError,
    UnknownResolution,
    ValidationError,
)
from apollo_domain.secrets import redact


class Settlement(enum.StrEnum):
    """What the bus does with a message whose handling failed."""

    DEAD_LETTER = "dead_letter"  # a retry cannot succeed: park it with the reason
    RETRY = "retry"  # may pass later: redeliver with backoff (bounded), then dead-letter
    DELAY = "delay"  # will pass later: deliver again after the error's retry_after, unbounded


@frozen
class ErrorRule:
    error: type[BaseException]
    http_status: int
    name: str  # the HTTP error ``type`` and the RPC error name
    settlement: Settlement


_DEAD = Settlement.DEAD_LETTER
_RETRY = Settlement.RETRY
_DELAY = Settlement.DELAY

#: Most specific class first: the first rule whose class matches applies.
ERROR_POLICY: Final[tuple[ErrorRule, ...]] = (
    ErrorRule(ValidationError, 400, "validation_error", _DEAD),
    ErrorRule(UnknownResolution, 400, "unknown_resolution", _DEAD),
    ErrorRule(Forbidden, 403, "forbidden", _DEAD),
    ErrorRule(NotFound, 404, "not_found", _DEAD),
    ErrorRule(InvalidTransition, 409, "invalid_transition", _DEAD),
    ErrorRule(Conflict, 409, "conflict", _RETRY),
    ErrorRule(RateLimited, 429, "rate_limited", _DELAY),
    ErrorRule(StoreBusy, 503, "store_busy", _RETRY),
    ErrorRule(StoreUnavailable, 503, "store_unavailable", _RETRY),
    ErrorRule(EmbeddingError, 503, "embedding_unavailable", _RETRY),
    ErrorRule(RequestTimeout, 503, "request_timeout", _RETRY),
    ErrorRule(RpcTimeout, 504, "rpc_timeout", _RETRY),
    ErrorRule(TransportError, 503, "transport_unavailable", _RETRY),
    ErrorRule(PersistenceFailed, 500, "persistence_failed", _RETRY),
    ErrorRule(ConfigurationError, 500, "configuration_error", _RETRY),
)
#: Anything else, Apollo's own or not: a server fault whose text is not shown to callers.
INTERNAL = ErrorRule(Exception, 500, "internal_error", _RETRY)

_BY_NAME: Final[Mapping[str, ErrorRule]] = {rule.name: rule for rule in ERROR_POLICY}


def rule_for(error: BaseException) -> ErrorRule:
    """The rule that applies to ``error`` (:data:`INTERNAL` when none does)."""
    for rule in ERROR_POLICY:
        if isinstance(error, rule.error):
            return rule
    return INTERNAL


def retry_after_of(error: BaseException) -> float | None:
    """The seconds after which the same call may pass, for an error that says so (a busy
    store, a write over its rate)."""
    value = getattr(error, "retry_after", None)
    return float(value) if isinstance(value, int | float) and value >= 0 else None


def field_of(error: BaseException) -> str | None:
    """The input field an error names, if any."""
    value = getattr(error, "field", None)
    return value if isinstance(value, str) and value else None


def message_of(error: BaseException) -> str:
    """What a caller is told: the error's message (secrets masked), or nothing specific
    for a server fault."""
    if rule_for(error) is INTERNAL:
        return "internal error"
    if isinstance(error, ValidationError):
        return redact(error.message)
    return redact(str(error))


def error_named(name: str, message: str, field: str | None = None) -> ApolloError:
    """The error an RPC reply reports, as the same class the service raised (an unknown
    name as a plain :class:`ApolloError`)."""
    rule = _BY_NAME.get(name)
    if rule is None:
        return ApolloError(f"{name}: {message}")
    if rule.error is ValidationError:
        return ValidationError(field or "request", message)
    if rule.error is ConfigurationError:
        return ConfigurationError(field or "service", message)
    error = rule.error(message)
    assert isinstance(error, ApolloError)
    return error


__all__ = [
    "ERROR_POLICY",
    "INTERNAL",
    "ErrorRule",
    "Settlement",
    "error_named",
    "field_of",
    "message_of",
    "retry_after_of",
    "rule_for",
]
