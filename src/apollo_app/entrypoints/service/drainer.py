"""The outbox drainer: contradiction scans run as they are queued, not on a timetable."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from apollo_domain.results import ContradictionReport

from .periodic import STOP_GRACE_SECONDS

log = logging.getLogger("apollo.service")


class OutboxDrainer:
    """``workers`` tasks each run ``drain`` (one bounded outbox run) again at once as long
    as the last run found work, so a backlog drains at the pace the store and the judge
    allow instead of one batch per interval. An idle worker waits until :meth:`wake` (this
    process committed new work) or ``interval`` seconds have passed (work queued by another
    process, or a failed scan whose retry came due). Workers never judge one item twice:
    each run claims its items under a lease. A failed run is logged and retried after
    ``interval``. With no workers, nothing runs (another process drains the outbox).
    ``stop`` gives runs in progress ``STOP_GRACE_SECONDS``."""

    def __init__(
        self,
        drain: Callable[[], Awaitable[ContradictionReport]],
        interval: float,
        workers: int = 1,
    ) -> None:
        self._drain = drain
        self._interval = interval
        self._wakes = [asyncio.Event() for _ in range(workers)]
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._work(wake), name=f"apollo-outbox-{i}")
            for i, wake in enumerate(self._wakes)
        ]

    def wake(self) -> None:
        """New work was committed: idle workers look for it now."""
        for wake in self._wakes:
            wake.set()

    async def _work(self, wake: asyncio.Event) -> None:
        while not self._stopping:
            wake.clear()
            try:
                report = await self._drain()
            except Exception:
                log.exception("outbox run failed; next run in %gs", self._interval)
                found = False
            else:
                found = report.processed + report.failed > 0
                if found:
                    log.debug("outbox: %s", report)
            if found or self._stopping:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=self._interval)

    async def stop(self) -> None:
        self._stopping = True
        self.wake()
        if self._tasks:
            _, late = await asyncio.wait(self._tasks, timeout=STOP_GRACE_SECONDS)
            for task in late:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)


__all__ = ["OutboxDrainer"]
