"""The time budget of one request (``APOLLO_REQUEST_TIMEOUT``; docs/concepts.md, "The rules in one
page").

An HTTP request or a bus message whose handling takes longer than the budget is cancelled:
the unit of work it had open rolls back (every store rolls back a unit of work that was not
committed), and the caller gets :class:`~apollo_domain.errors.RequestTimeout` (HTTP 503
``request_timeout`` with ``Retry-After``; a bus message is retried, then dead-lettered). Work
already handed to a worker thread runs to its end, but its result is dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import TypeVar

from apollo_domain.errors import RequestTimeout

Result = TypeVar("Result")


class Budget:
    """The deadline of a request under way (:func:`request_budget`)."""

    def __init__(self, seconds: float, timeout: asyncio.Timeout) -> None:
        self.seconds = seconds
        self._timeout = timeout

    def pause(self) -> None:
        """No deadline until :meth:`restart` (while waiting for the caller, not working)."""
        self._timeout.reschedule(None)

    def restart(self) -> None:
        """A whole budget again, from now."""
        self._timeout.reschedule(asyncio.get_running_loop().time() + self.seconds)


@asynccontextmanager
async def request_budget(seconds: float) -> AsyncIterator[Budget]:
    """A block cancelled after ``seconds`` with :class:`RequestTimeout`; the :class:`Budget`
    it is given may pause and restart the count (the HTTP edge pauses it while a request's
    body arrives: the upload has a timeout of its own). A ``TimeoutError`` the block raises
    itself passes unchanged."""
    timeout = asyncio.timeout(seconds)
    try:
        async with timeout:
            yield Budget(seconds, timeout)
    except TimeoutError:
        if not timeout.expired():
            raise
        raise RequestTimeout(f"the request was not carried out within {seconds:g} s") from None


async def within_budget(seconds: float | None, work: Awaitable[Result]) -> Result:
    """``await work``, cancelled after ``seconds`` (None: no budget) with
    :class:`RequestTimeout` (:func:`request_budget`)."""
    if seconds is None:
        return await work
    async with request_budget(seconds):
        return await work


__all__ = ["Budget", "request_budget", "within_budget"]
