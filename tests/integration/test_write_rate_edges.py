"""Each principal's write rate at the edges (Security model, "Write rates"): over HTTP a
write past the rate is 429 with ``Retry-After``; over MCP it is a JSON-RPC error naming
``rate_limited`` with ``retry_after`` in its data, and over HTTP its status is 429 with
``Retry-After`` too; nothing refused is written. In memory behind the real HTTP server,
and on PostgreSQL through two real ``apollo serve`` processes that share the buckets."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from apollo_adapters.postgres.embedded import temporary_folder
from apollo_app import Apollo
from apollo_app.entrypoints.http import HttpServer, create_app
from apollo_app.entrypoints.mcp.server import RATE_LIMITED_CODE
from apollo_app.metrics import Metrics
from apollo_domain.rates import WriteRate
from tests.mcp_support import http_client, ok
from tests.postgres_support import PostgresTestServer
from tests.service_processes import ServiceProcesses, service_environment

TOKENS = {f"tok-{name}": f"{name}:writer" for name in ("alice", "bob", "carol", "dave", "erin")}
TOKENS["tok-ops"] = "ops:admin"
API = "/api/apollo"
#: Three entries at once, then one every ten seconds: a test never waits for a refill.
RATE = WriteRate(per_second=0.1, burst=3)


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer tok-{name}"}


def fact(n: int, who: str) -> dict[str, Any]:
    return {"content": f"{who}'s service {n} listens on port {9000 + n}", "tags": ["ports"]}


@pytest.fixture(scope="module")
async def memory() -> AsyncIterator[tuple[str, Apollo, Metrics]]:
    metrics = Metrics()
    async with Apollo.in_memory(write_rate=RATE) as apollo:
        app = create_app(apollo, tokens=TOKENS, metrics=metrics)
        async with HttpServer(app) as server:
            yield server.url, apollo, metrics


async def _total(http: httpx.AsyncClient, base: str) -> int:
    stats = await http.get(f"{base}{API}/stats", headers=bearer("ops"))
    assert 200 == stats.status_code, stats.text
    return int(stats.json()["total"])


async def test_http_writes_past_the_rate_are_429_with_retry_after_and_write_nothing(memory):
    """Alice's three writes pass; her fourth is 429 ``rate_limited`` with Retry-After (the
    ten seconds one token takes), and the store holds what it held; Bob's bucket is his
    own; the refusals are counted in /metrics."""
    base, _, _ = memory
    async with httpx.AsyncClient(base_url=base) as http:
        for n in range(3):
            response = await http.post(
                f"{API}/ingest", json=fact(n, "alice"), headers=bearer("alice")
            )
            assert 201 == response.status_code, response.text
        before = await _total(http, base)
        refused = await http.post(f"{API}/ingest", json=fact(3, "alice"), headers=bearer("alice"))
        assert 429 == refused.status_code, refused.text
        assert "rate_limited" == refused.json()["error"]["type"]
        assert 1 <= int(refused.headers["retry-after"]) <= 10
        text = {"text": "The cache runs on Redis. The queue runs on RabbitMQ."}
        refused_text = await http.post(f"{API}/texts", json=text, headers=bearer("alice"))
        assert 429 == refused_text.status_code, refused_text.text
        assert before == await _total(http, base), "a refused write changed nothing"

        other = await http.post(f"{API}/ingest", json=fact(0, "bob"), headers=bearer("bob"))
        assert 201 == other.status_code, other.text
        exposition = await http.get("/metrics", headers=bearer("ops"))
        assert 'apollo_write_rate_total{outcome="limited"} 2.0' in exposition.text
        assert 'apollo_write_rate_total{outcome="granted"} 4.0' in exposition.text


async def test_a_text_larger_than_the_bucket_passes_whole(memory):
    """Carol's conversation of ten statements against a bucket of three is stored whole
    (never cut), and then she waits."""
    base, _, _ = memory
    turns = [{"speaker": "Carol", "text": fact(n, "carol")["content"] + "."} for n in range(10)]
    async with httpx.AsyncClient(base_url=base) as http:
        stored = await http.post(f"{API}/texts", json={"text": turns}, headers=bearer("carol"))
        assert 200 == stored.status_code, stored.text
        assert 10 == len(stored.json()["statements"])
        after = await http.post(f"{API}/ingest", json=fact(99, "carol"), headers=bearer("carol"))
        assert 429 == after.status_code, after.text


async def test_mcp_writes_past_the_rate_are_a_rate_limited_error_and_an_http_429(memory):
    """Over MCP with the SDK's client: Dave's store_many of 300 items (two chunks of the
    bulk path, against a bucket of three) is stored whole, charged once, no chunk refused
    midway, the debt to be waited off; his next store_knowledge is the JSON-RPC error
    RATE_LIMITED_CODE whose data names rate_limited and the wait. Sent as a plain POST,
    the same call is answered 429 with Retry-After and that error in its body."""
    base, apollo, _ = memory
    url = f"{base}/mcp"
    items = [{"content": f"dave's shard {n} lives on node {n % 7}"} for n in range(300)]
    async with http_client(url, "tok-dave") as dave:
        stored = await ok(dave, "store_many", {"items": items})
        assert 300 == len(stored["results"])
        with pytest.raises(MCPError) as refused:
            await dave.call_tool("store_knowledge", fact(1, "dave"))
    assert RATE_LIMITED_CODE == refused.value.code
    assert "rate_limited" == refused.value.data["type"]
    assert refused.value.data["retry_after"] > 0

    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "store_knowledge", "arguments": fact(2, "dave")},
    }
    headers = {**bearer("dave"), "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient() as http:
        before = (await apollo.stats()).total
        response = await http.post(url, json=call, headers=headers)
    assert 429 == response.status_code, response.text
    # the 300 items put the bucket of three 297 tokens in debt: (1 + 297) / 0.1 s
    assert 2_970 <= int(response.headers["retry-after"]) <= 2_980
    body = response.json()
    assert (7, RATE_LIMITED_CODE) == (body["id"], body["error"]["code"])
    assert "rate_limited" == body["error"]["data"]["type"]
    assert before == (await apollo.stats()).total


@pytest.mark.postgres
async def test_two_processes_on_one_database_share_each_principals_bucket(
    postgres_server: PostgresTestServer,
) -> None:
    """Two ``apollo serve`` processes (APOLLO_WRITE_RATE=0.1, APOLLO_WRITE_BURST=3) on one
    PostgreSQL database: Erin's three writes through the first spend her bucket for the
    second too, where her fourth over HTTP is 429 and over MCP the rate_limited error."""
    database = await postgres_server.create_database(dimension=384)
    folder = temporary_folder("apollo-rate-")
    settings = service_environment(
        database_url=postgres_server.conninfo(database),
        api_tokens=",".join(f"{t}={g}" for t, g in TOKENS.items()),
        write_rate=0.1,
        write_burst=3,
    )
    fleet = ServiceProcesses(2, settings, folder)
    await asyncio.to_thread(fleet.start)
    try:
        async with httpx.AsyncClient() as http:
            for n in range(3):
                response = await http.post(
                    f"{fleet[0].api}/ingest", json=fact(n, "erin"), headers=bearer("erin")
                )
                assert 201 == response.status_code, response.text
            refused = await http.post(
                f"{fleet[1].api}/ingest", json=fact(3, "erin"), headers=bearer("erin")
            )
            assert 429 == refused.status_code, refused.text
            assert 1 <= int(refused.headers["retry-after"]) <= 10
            assert 3 == await _total(http, fleet[1].base)
        async with http_client(f"{fleet[1].base}/mcp", "tok-erin") as erin:
            with pytest.raises(MCPError) as mcp_refused:
                await erin.call_tool("store_knowledge", fact(4, "erin"))
        assert RATE_LIMITED_CODE == mcp_refused.value.code
    finally:
        await asyncio.to_thread(fleet.stop)
        shutil.rmtree(folder, ignore_errors=True)
