"""Admission control: the requests that use the store queue for it instead of failing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from apollo_domain.errors import StoreBusy

#: How long a request waits in the queue for its turn before it is told to come back.
ADMISSION_WAIT_SECONDS = 30.0


class Admission:
    """At most ``capacity`` requests use the store at once (size it from the store's
    connection pool, so an admitted request never waits long for a connection); the
    others wait their turn, first come first served. A request that waited ``max_wait``
    seconds is refused with :class:`StoreBusy` (503 with ``Retry-After``), having done
    nothing. Routes that do not use the store (health) are not queued."""

    def __init__(self, capacity: int, *, max_wait: float = ADMISSION_WAIT_SECONDS) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.max_wait = max_wait
        self._slots = asyncio.Semaphore(capacity)
        self.waiting = 0

    @asynccontextmanager
    async def admitted(self) -> AsyncIterator[None]:
        self.waiting += 1
        try:
            await asyncio.wait_for(self._slots.acquire(), self.max_wait)
        except TimeoutError:
            raise StoreBusy(
                "the service is at capacity; retry later", retry_after=self.max_wait / 10
            ) from None
        finally:
            self.waiting -= 1
        try:
            yield
        finally:
            self._slots.release()


__all__ = ["ADMISSION_WAIT_SECONDS", "Admission"]
