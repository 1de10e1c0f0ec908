"""Causal tokens on every store (:mod:`apollo_domain.causal`): a commit that wrote raises
the running call's scope, the library client keeps its caller's latest token, and the HTTP
API answers with it and accepts it, garbage included, without failing a read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from mcp import Client as McpClient

from apollo_app import Apollo
from apollo_app.entrypoints.http import create_app
from apollo_app.entrypoints.http.app import (
    CAUSAL_TOKEN_HEADER,
    IDEMPOTENCY_KEY_HEADER,
    MAX_IDEMPOTENCY_KEY,
)
from apollo_app.entrypoints.mcp import ApolloMcp, local_caller, mcp_actions, tools_of
from apollo_app.entrypoints.mcp.server import CAUSAL_TOKEN_META
from apollo_domain import commands as c
from apollo_domain.causal import CausalToken, causal_scope, current_scope, parse_token
from apollo_domain.handlers import handle
from apollo_domain.model import Principal
from apollo_domain.ports import Store
from apollo_domain.services import Caller
from apollo_domain.testing import make_entry
from tests.contract.stores import STORE_DIMENSION, ApolloFactory

API = "/api/apollo"
TOOLS = tools_of(mcp_actions())


def _entry(content: str) -> object:
    return make_entry(content, embedding=[1.0] + [0.0] * (STORE_DIMENSION - 1))


async def test_a_commit_that_wrote_raises_the_scope_and_one_that_did_not_leaves_it(
    store: Store,
) -> None:
    with causal_scope() as scope:
        async with store.unit_of_work() as uow:
            await uow.entries.add(_entry("the first write"))  # type: ignore[arg-type]
            await uow.commit()
        first = scope.seen
        assert first is not None
        async with store.unit_of_work() as uow:  # reads only: nothing committed
            await uow.commit()
        assert first == scope.seen
        async with store.unit_of_work() as uow:
            await uow.entries.add(_entry("the second write"))  # type: ignore[arg-type]
            await uow.commit()
        second = scope.seen
        assert second is not None and first < second
    async with store.unit_of_work() as uow:  # outside every scope: a commit as ever
        await uow.entries.add(_entry("written by process-wide work"))  # type: ignore[arg-type]
        await uow.commit()


async def test_the_client_keeps_its_callers_latest_token(make_apollo: ApolloFactory) -> None:
    """Every client of one caller (agent and principal) shares the caller's token; another
    caller's writes never move it."""
    apollo = await make_apollo()
    alice = apollo.client("claude-a", "alice")
    assert alice.causal_token is None
    await alice.store_knowledge(content="BGP hold timers default to 180 seconds")
    first = parse_token(alice.causal_token)
    assert first is not None
    await apollo.client("claude-b", "bob").store_knowledge(
        content="OSPF hello intervals default to 10 seconds"
    )
    assert alice.causal_token == apollo.client("claude-a", "alice").causal_token
    assert first == parse_token(alice.causal_token)
    await apollo.client("claude-a", "alice").store_knowledge(
        content="IS-IS uses a two-level hierarchy"
    )
    latest = parse_token(alice.causal_token)
    assert latest is not None and first < latest


@pytest.fixture
async def http(make_apollo: ApolloFactory) -> AsyncIterator[tuple[httpx.AsyncClient, Apollo]]:
    apollo = await make_apollo()
    transport = httpx.ASGITransport(app=create_app(apollo))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client, apollo


async def test_http_answers_a_write_with_its_token_and_reads_accept_it_back(
    http: tuple[httpx.AsyncClient, Apollo],
) -> None:
    client, _ = http
    stored = await client.post(
        f"{API}/ingest", json={"content": "VRRP elects a master router per virtual group"}
    )
    assert 201 == stored.status_code
    token = stored.headers[CAUSAL_TOKEN_HEADER]
    assert parse_token(token) is not None
    answer = await client.post(
        f"{API}/query",
        json={"query": "VRRP master router election"},
        headers={CAUSAL_TOKEN_HEADER: token},
    )
    assert 200 == answer.status_code
    assert stored.json()["entry_id"] in [e["id"] for e in answer.json()["entries"]]
    echoed = parse_token(answer.headers[CAUSAL_TOKEN_HEADER])  # never lower than presented
    assert echoed is not None and parse_token(token) <= echoed  # type: ignore[operator]


@pytest.mark.parametrize(
    "sent", ["c1.ffffffffffffffff", "garbage", "c1.FF", "c1." + "a" * 200, "c9.1", ""]
)
async def test_http_takes_a_forged_or_garbage_token_as_no_token_or_a_bounded_wait(
    http: tuple[httpx.AsyncClient, Apollo], sent: str
) -> None:
    """A read presenting what no write answered never fails because of it."""
    client, _ = http
    answer = await client.post(
        f"{API}/query", json={"query": "anything at all"}, headers={CAUSAL_TOKEN_HEADER: sent}
    )
    assert 200 == answer.status_code
    kept = answer.headers.get(CAUSAL_TOKEN_HEADER)
    assert kept is None or parse_token(kept) is not None


# -- idempotency keys on mutating HTTP requests -----------------------------------------

TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}
ALICE = {"Authorization": "Bearer tok-alice"}
BOB = {"Authorization": "Bearer tok-bob"}


@pytest.fixture
async def authed(make_apollo: ApolloFactory) -> AsyncIterator[httpx.AsyncClient]:
    apollo = await make_apollo()
    transport = httpx.ASGITransport(app=create_app(apollo, tokens=TOKENS))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


async def _contents(client: httpx.AsyncClient, headers: dict[str, str]) -> list[str]:
    listed = await client.post(f"{API}/query", json={"query": "", "limit": 100}, headers=headers)
    assert 200 == listed.status_code
    return sorted(e["content"] for e in listed.json()["entries"])


async def test_a_mutation_sent_again_with_its_idempotency_key_is_applied_once(
    authed: httpx.AsyncClient,
) -> None:
    """The key names the request: its repeat (whatever it carries) changes nothing and is
    answered as already processed; the same key of another principal is its own."""
    keyed = {**ALICE, IDEMPOTENCY_KEY_HEADER: "ingest-0001"}
    first = await authed.post(
        f"{API}/ingest", json={"content": "LACP bundles links into one channel"}, headers=keyed
    )
    assert 201 == first.status_code
    again = await authed.post(
        f"{API}/ingest", json={"content": "a different text under the same key"}, headers=keyed
    )
    assert (200, "already processed") == (again.status_code, again.json()["reason"])
    assert ["LACP bundles links into one channel"] == await _contents(authed, ALICE)
    bobs = await authed.post(
        f"{API}/ingest",
        json={"content": "STP blocks redundant links to break loops"},
        headers={**BOB, IDEMPOTENCY_KEY_HEADER: "ingest-0001"},
    )
    assert 201 == bobs.status_code


@pytest.mark.parametrize("key", ["", "x" * (MAX_IDEMPOTENCY_KEY + 1), "white space", "tab\tkey"])
async def test_a_bad_idempotency_key_is_refused_before_anything_is_done(
    authed: httpx.AsyncClient, key: str
) -> None:
    refused = await authed.post(
        f"{API}/ingest",
        json={"content": "never stored"},
        headers={**ALICE, IDEMPOTENCY_KEY_HEADER: key},
    )
    assert 400 == refused.status_code
    assert IDEMPOTENCY_KEY_HEADER == refused.json()["error"]["field"]
    assert [] == await _contents(authed, ALICE)


async def test_an_idempotency_key_on_a_read_is_ignored(authed: httpx.AsyncClient) -> None:
    for _ in range(2):
        answer = await authed.post(
            f"{API}/query",
            json={"query": "anything"},
            headers={**ALICE, IDEMPOTENCY_KEY_HEADER: "not for reads"},
        )
        assert 200 == answer.status_code


# -- MCP: the token in _meta --------------------------------------------------------------


async def test_mcp_answers_a_write_with_its_token_in_meta_and_takes_it_back(
    make_apollo: ApolloFactory,
) -> None:
    """A tool result of a write carries the token; a later call's ``_meta`` hands it to
    the read (its scope starts there); garbage there is no token, and no error."""
    apollo = await make_apollo()
    presented: list[CausalToken | None] = []

    async def run(caller: Caller, command: c.Command[Any], key: str | None = None) -> Any:
        scope = current_scope()
        assert scope is not None
        presented.append(scope.seen)
        return await handle(apollo.deps, caller, command)

    edge = ApolloMcp(TOOLS, run, local_caller(Caller.of("eve", Principal("eve"), edge="mcp")))
    async with McpClient(edge.server()) as client:
        stored = await client.call_tool(
            "store_knowledge", {"content": "GLBP balances load across gateways"}
        )
        assert not stored.is_error
        assert stored.meta is not None
        token = parse_token(stored.meta[CAUSAL_TOKEN_META])
        assert token is not None
        found = await client.call_tool(
            "query_knowledge",
            {"query": "GLBP gateway load balancing"},
            meta={CAUSAL_TOKEN_META: str(token)},  # type: ignore[typeddict-unknown-key]
        )
        assert not found.is_error
        forged = await client.call_tool(
            "query_knowledge",
            {"query": "GLBP gateway load balancing"},
            meta={CAUSAL_TOKEN_META: "c1.NOT-A-TOKEN"},  # type: ignore[typeddict-unknown-key]
        )
        assert not forged.is_error
    assert [None, token, None] == presented


def test_the_openapi_document_names_both_headers_where_they_apply() -> None:
    """Every command takes and answers the causal token; only mutations take a key."""
    from apollo_app.entrypoints.http.openapi import openapi_document

    document = openapi_document()
    ingest = document["paths"][f"{API}/ingest"]["post"]
    query = document["paths"][f"{API}/query"]["post"]
    assert {CAUSAL_TOKEN_HEADER, IDEMPOTENCY_KEY_HEADER} == {
        p["name"] for p in ingest["parameters"] if p["in"] == "header"
    }
    assert {CAUSAL_TOKEN_HEADER} == {p["name"] for p in query["parameters"] if p["in"] == "header"}
    assert CAUSAL_TOKEN_HEADER in ingest["responses"]["201"]["headers"]
    assert CAUSAL_TOKEN_HEADER in query["responses"]["200"]["headers"]
