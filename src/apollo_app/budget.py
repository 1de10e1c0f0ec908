"""The time budget of one request (``APOLLO_REQUEST_TIMEOUT``, DESIGN §2 "Load and hostile
input").

An HTTP request or a bus message whose handling takes longer than the budget is cancelled:
the unit of work it had open rolls back (every store rolls back a unit of work that was not
committed), and the caller gets :class:`~apollo_domain.errors.RequestTimeout` (HTTP 503
``request_timeout`` with ``Retry-After``; a bus message is retried, then dead-lettered). Work
already handed to a worker thread runs to its end, but its result is dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from apollo_domain.errors import RequestTimeout

Result = TypeVar("Result")


async def within_budget(seconds: float | None, work: Awaitable[Result]) -> Result:
    """``await work``, cancelled after ``seconds`` (None: no budget) with
    :class:`RequestTimeout`. A ``TimeoutError`` the work raises itself passes unchanged."""
    if seconds is None:
        return await work
    budget = asyncio.timeout(seconds)
    try:
        async with budget:
            return await work
    except TimeoutError:
        if not budget.expired():
            raise
        raise RequestTimeout(f"the request was not carried out within {seconds:g} s") from None


__all__ = ["within_budget"]
