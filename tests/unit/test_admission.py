"""Admission control at the HTTP edge: commands queue for the store; health never does."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from apollo_app import Apollo
from apollo_app.entrypoints.http.admission import Admission
from apollo_app.entrypoints.http.app import create_app
from apollo_app.entrypoints.http.errors import map_error
from apollo_domain.errors import StoreBusy

API = "/api/apollo"


async def _until(condition) -> None:
    """Let the other tasks run until ``condition()`` holds (a guard of 10,000 turns)."""
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


async def test_at_most_capacity_requests_run_at_once_and_the_rest_queue_in_order():
    admission = Admission(2)
    release = asyncio.Event()
    running: list[int] = []
    order: list[int] = []

    async def request(i: int) -> None:
        async with admission.admitted():
            running.append(i)
            order.append(i)
            await release.wait()
            running.remove(i)

    tasks = [asyncio.create_task(request(i)) for i in range(5)]
    await _until(lambda: admission.waiting == 3)
    assert [0, 1] == running
    release.set()
    await asyncio.gather(*tasks)
    assert [0, 1, 2, 3, 4] == order


async def test_a_request_that_waited_its_limit_is_told_to_come_back_and_did_nothing():
    admission = Admission(1, max_wait=0.05)
    ran = []
    async with admission.admitted():
        with pytest.raises(StoreBusy) as refused:
            async with admission.admitted():
                ran.append(1)
    assert [] == ran
    response = map_error(refused.value)
    assert 503 == response.status_code
    assert "1" == response.headers["retry-after"]
    assert b'"store_busy"' in bytes(response.body)
    async with admission.admitted():  # the slot was given back
        ran.append(2)
    assert [2] == ran


async def test_health_is_answered_while_every_slot_is_taken():
    apollo = Apollo.in_memory()
    admission = Admission(1, max_wait=0.05)
    app = create_app(apollo, admission=admission)
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            async with admission.admitted():
                health = await http.get(f"{API}/health")
                busy = await http.post(f"{API}/ingest", json={"content": "queued too long"})
            admitted = await http.post(f"{API}/ingest", json={"content": "served in turn"})
        stored = await apollo.client("reader").query_knowledge(query="")
    finally:
        await apollo.close()
    assert 200 == health.status_code
    assert (503, "store_busy") == (busy.status_code, busy.json()["error"]["type"])
    assert "retry-after" in busy.headers
    assert 201 == admitted.status_code
    assert ["served in turn"] == [e.content for e in stored.entries]
