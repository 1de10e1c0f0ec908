"""What both message buses share: running a consumer's handler and the retry backoff.

Transport-neutral (no broker client here), so each bus package depends on this module and
never on the other bus.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from apollo_domain.errors import TransportError
from apollo_domain.ports.messaging import Delivery, MessageHandler

log = logging.getLogger(__name__)


def exponential_backoff(attempt: int) -> float:
    """Seconds to wait before redelivering after the ``attempt``-th failed delivery."""
    return min(0.2 * 2.0 ** (attempt - 1), 10.0)


async def run_handler(
    handler: MessageHandler, delivery: Delivery, queue: str, settled: Callable[[], bool]
) -> None:
    """Run a consumer's handler; a handler that raises, or returns without settling the
    delivery, counts as a retry (bounded by the bus)."""
    try:
        await handler(delivery)
    except Exception as e:
        log.exception("handler for %r failed", queue)
        reason = describe(e)
    else:
        reason = "not settled by the handler"
    if settled():
        return
    try:
        await delivery.retry(reason)
    except TransportError as e:
        log.warning("could not settle a delivery from %r (%s)", queue, e)


def describe(error: BaseException) -> str:
    """A short text for an error (``str`` of a broker client's error is often empty)."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else repr(error)


__all__ = ["describe", "exponential_backoff", "run_handler"]
