"""The time budget of a request at the edges (``APOLLO_REQUEST_TIMEOUT``; docs/concepts.md, "The
rules
in one page"): an HTTP request over its budget is answered 503 ``request_timeout``
with ``Retry-After``, a bus message over its budget is retried, then dead-lettered; nothing
is stored either way. (That the unit of work of a command cancelled inside it rolls back,
on every store, is in ``tests/contract/test_request_budget_contract.py``.)

The ingest is stalled in its entity extractor, which never answers: the budget is what
ends it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from attrs import define, field

from apollo_adapters.inprocess import InProcessBus
from apollo_app import Apollo, Principal, RemoteClient, Settings, bootstrap
from apollo_app.bootstrap import Overrides
from apollo_app.entrypoints.http import create_app
from apollo_app.entrypoints.service import ApolloService
from apollo_domain.entities import Extraction
from apollo_domain.ports.topology import Topology
from tests.support import eventually_within

API = "/api/apollo"
BUDGET = 0.2
LOGIN = "alice"


@define
class StalledExtractor:
    """An entity extractor that never answers."""

    entered: asyncio.Event = field(factory=asyncio.Event)

    async def extract(self, text: str) -> Extraction:
        self.entered.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


@pytest.fixture
async def stalled() -> AsyncIterator[tuple[Apollo, StalledExtractor]]:
    extractor = StalledExtractor()
    wired = bootstrap.in_memory(Overrides(extractor=extractor))
    apollo = Apollo(wired.deps, closers=wired.closers)
    yield apollo, extractor
    await apollo.close()


async def test_an_http_request_over_its_budget_is_a_503_with_retry_after(
    stalled: tuple[Apollo, StalledExtractor],
) -> None:
    apollo, extractor = stalled
    app = create_app(apollo, request_timeout=BUDGET)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        response = await http.post(f"{API}/ingest", json={"content": "Stalled in extraction"})
        health = await http.get(f"{API}/health")

    assert extractor.entered.is_set()
    assert 503 == response.status_code
    assert "1" == response.headers["retry-after"]
    error = response.json()["error"]
    assert "request_timeout" == error["type"]
    assert f"{BUDGET:g} s" in error["message"]
    assert 200 == health.status_code, "a request within its budget is served as before"
    assert 0 == (await apollo.stats()).total


async def test_the_budget_of_an_http_request_counts_from_the_end_of_its_body() -> None:
    """A body that takes longer than the budget to arrive (its upload has a timeout of its
    own) still leaves the whole budget to carry the request out."""
    released = asyncio.Event()

    async def slow_body() -> AsyncIterator[bytes]:
        yield b'{"content": "Uploaded slowly, '
        await asyncio.sleep(2 * BUDGET)
        released.set()
        yield b'stored all the same"}'

    async with Apollo.in_memory() as apollo:
        app = create_app(apollo, request_timeout=BUDGET)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            response = await http.post(
                f"{API}/ingest", content=slow_body(), headers={"content-type": "application/json"}
            )

    assert 201 == response.status_code, response.text
    assert released.is_set()


async def test_a_bus_message_over_its_budget_is_retried_then_dead_lettered(
    stalled: tuple[Apollo, StalledExtractor],
) -> None:
    apollo, extractor = stalled
    bus = InProcessBus(Topology(), max_redeliveries=1, retry_backoff=lambda n: 0.01, login=LOGIN)
    service = ApolloService(
        apollo, bus, Settings(embedder="hashing", prefetch=4, request_timeout=BUDGET)
    )
    await service.start()
    letters: list[object] = []

    async def dead_letters() -> list[object]:
        letters.extend(await bus.drain_dead_letters())
        return letters

    try:
        client = RemoteClient(bus, agent_id="claude-net-1", rpc_timeout=10.0)
        await client.store_knowledge(content="Stalled in extraction")
        (letter,) = await eventually_within(10.0, dead_letters, "the message gives up")
    finally:
        await service.stop()
        await bus.close()

    assert extractor.entered.is_set()
    assert "RequestTimeout" in getattr(letter, "reason", "")
    assert 0 == (await apollo.stats(Principal(LOGIN))).total
