"""The service's outbox drainer: contradiction scans run as soon as ingests commit them,
keep running while they find work, and wait (woken, or after the interval) when idle."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from apollo_adapters.inprocess import InProcessBus
from apollo_app import Apollo, RemoteClient, Settings, Status
from apollo_app.entrypoints.service import ApolloService
from apollo_app.entrypoints.service.drainer import OutboxDrainer
from apollo_domain.model import AccessScope
from apollo_domain.normalize import content_hash
from apollo_domain.ports.topology import Topology
from apollo_domain.results import ContradictionReport
from tests.support import eventually_within

PATIENCE = 10.0
#: Far longer than any test: only a wake-up can start an idle worker's next run.
NEVER = 3_600.0


class ScriptedDrain:
    """A drain whose runs report the scripted numbers of items (then 0); ``called(n)``
    is set once it has run ``n`` times."""

    def __init__(self, *found: int, fail_first: bool = False) -> None:
        self.script = list(found)
        self.fail_first = fail_first
        self.calls = 0
        self._reached: dict[int, asyncio.Event] = {}

    def called(self, times: int) -> asyncio.Event:
        return self._reached.setdefault(times, asyncio.Event())

    async def __call__(self) -> ContradictionReport:
        self.calls += 1
        self.called(self.calls).set()
        if self.fail_first and self.calls == 1:
            raise ConnectionError("store unavailable")
        found = self.script.pop(0) if self.script else 0
        return ContradictionReport(found, 0, 0)


async def _stop_after(drainer: OutboxDrainer, event: asyncio.Event) -> None:
    try:
        async with asyncio.timeout(PATIENCE):
            await event.wait()
    finally:
        await drainer.stop()


async def test_a_worker_runs_again_at_once_while_it_finds_work_then_waits_for_a_wake():
    drain = ScriptedDrain(16, 16, 3)
    drainer = OutboxDrainer(drain, NEVER, workers=1)
    drainer.start()
    try:
        async with asyncio.timeout(PATIENCE):
            await drain.called(4).wait()  # 16, 16, 3, then a run that finds nothing
        assert 4 == drain.calls
        drainer.wake()
        async with asyncio.timeout(PATIENCE):
            await drain.called(5).wait()
    finally:
        await drainer.stop()
    assert 5 == drain.calls


async def test_a_failed_run_is_retried_after_the_interval():
    drain = ScriptedDrain(fail_first=True)
    drainer = OutboxDrainer(drain, 0.01, workers=1)
    drainer.start()
    await _stop_after(drainer, drain.called(2))
    assert drain.calls >= 2


async def test_without_workers_nothing_runs():
    drain = ScriptedDrain(16)
    drainer = OutboxDrainer(drain, 0.01, workers=0)
    drainer.start()
    drainer.wake()
    await drainer.stop()
    assert 0 == drain.calls


@pytest.fixture
async def service() -> AsyncIterator[tuple[Apollo, InProcessBus]]:
    """A service whose idle drainer would not look for work again for an hour."""
    async with Apollo.in_memory() as apollo:
        bus = InProcessBus(Topology(), login="mesh")
        running = ApolloService(apollo, bus, Settings(embedder="hashing", outbox_interval=NEVER))
        await running.start()
        try:
            yield apollo, bus
        finally:
            await running.stop()
            await bus.close()


async def test_a_contradiction_published_to_an_idle_service_is_judged_at_once(service):
    """The ingest that queues the scan wakes the drainer: no wait for the interval."""
    apollo, bus = service
    old = "The billing cache keeps every entry for 300 seconds before eviction."
    new = "The billing cache keeps every entry for 900 seconds before eviction."
    await RemoteClient(bus, agent_id="claude-a").store_knowledge(content=old)
    await RemoteClient(bus, agent_id="openai-b").store_knowledge(content=new)

    async def disputed() -> bool:
        async with apollo.store.unit_of_work() as uow:
            found = await uow.entries.find_by_hashes(
                [(content_hash(text), AccessScope.GLOBAL, None) for text in (old, new)]
            )
        return all(e is not None and e.status is Status.DISPUTED for e in found)

    await eventually_within(PATIENCE, disputed, "both entries are disputed")
