"""Periodic actors: jobs that run every so many seconds until stopped."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("apollo.service")

STOP_GRACE_SECONDS = 10.0


class Periodic:
    """Runs each job every ``interval`` seconds; a failed run is logged and the next one
    happens on schedule. ``stop`` gives a run in progress ``STOP_GRACE_SECONDS``."""

    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()

    def every(self, name: str, interval: float, job: Callable[[], Awaitable[Any]]) -> None:
        task = asyncio.get_running_loop().create_task(
            self._repeat(name, interval, job), name=f"apollo-{name}"
        )
        self._tasks.append(task)

    async def _repeat(self, name: str, interval: float, job: Callable[[], Awaitable[Any]]) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=interval)
            if self._stopping.is_set():
                return
            try:
                result = await job()
            except Exception:
                log.exception("periodic %s failed; next run in %gs", name, interval)
            else:
                log.debug("periodic %s: %s", name, result)

    async def stop(self) -> None:
        self._stopping.set()
        if self._tasks:
            _, late = await asyncio.wait(self._tasks, timeout=STOP_GRACE_SECONDS)
            for task in late:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)


__all__ = ["STOP_GRACE_SECONDS", "Periodic"]
