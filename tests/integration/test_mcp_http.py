"""MCP over streamable HTTP with the SDK's own client: against the in-process store behind
the real HTTP server, and against a real ``apollo serve`` process on PostgreSQL.

Identity is the bearer token's, never a tool argument's; a caller sees the tools its role
may run; every refusal and every bad input comes back as a tool error naming its type and
field, and changes nothing."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from attrs import frozen
from mcp.shared.exceptions import MCPError

from apollo_adapters.postgres.embedded import temporary_folder
from apollo_app import Apollo
from apollo_app.entrypoints.http import HttpServer, create_app
from apollo_app.entrypoints.mcp import mcp_actions
from apollo_app.entrypoints.mcp.server import IDEMPOTENCY_KEY_META
from apollo_domain.bounds import CONTENT, JSON_DEPTH, MESSAGE, QUERY, QUERY_LIMIT
from tests.mcp_support import http_client, ok, refused, tool_names
from tests.postgres_support import PostgresTestServer
from tests.service_processes import ServiceProcesses, service_environment

TOKENS = {
    "tok-alice": "alice:writer",
    "tok-bob": "bob:writer",
    "tok-carol": "carol:writer",
    "tok-rita": "rita:reader",
    "tok-gate": "orchestrator:gateway",
    "tok-root": "root:admin",
}
ALL_TOOLS = {action.name for action in mcp_actions()}
#: How long the service's periodic corroboration checker may take to confirm (it runs
#: every second in the service these tests start).
CONFIRM_SECONDS = 60.0


@frozen
class Mesh:
    """An MCP endpoint and how its corroboration checker runs."""

    kind: str
    url: str  # .../mcp
    corroborate: Callable[[], Awaitable[None]]


@pytest.fixture(
    scope="module", params=["memory", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def mesh(request: pytest.FixtureRequest) -> AsyncIterator[Mesh]:
    if request.param == "memory":
        async with (
            Apollo.in_memory() as apollo,
            HttpServer(create_app(apollo, tokens=TOKENS)) as server,
        ):

            async def check() -> None:
                await apollo.check_corroboration()

            yield Mesh("memory", f"{server.url}/mcp", check)
        return
    postgres: PostgresTestServer = request.getfixturevalue("postgres_server")
    database = await postgres.create_database(dimension=384)
    folder = temporary_folder("apollo-mcp-")
    settings = service_environment(
        database_url=postgres.conninfo(database),
        api_tokens=",".join(f"{t}={g}" for t, g in TOKENS.items()),
        corroboration_interval=1,
    )
    fleet = ServiceProcesses(1, settings, folder)
    await asyncio.to_thread(fleet.start)
    try:

        async def periodic() -> None:  # the service runs its checker every second
            return None

        yield Mesh("postgres", f"{fleet[0].base}/mcp", periodic)
    finally:
        await asyncio.to_thread(fleet.stop)
        shutil.rmtree(folder, ignore_errors=True)


def unique(text: str) -> str:
    """Text no other test stores (the endpoint's store is shared by the module)."""
    return f"{text} [{uuid.uuid4().hex[:10]}]"


async def test_each_role_lists_the_tools_it_may_call(mesh: Mesh) -> None:
    """A reader sees only reads, a writer and a gateway also the writes, an admin every
    tool; nobody sees a tool the record does not mark."""
    listed = {}
    for token in ("tok-rita", "tok-alice", "tok-gate", "tok-root"):
        async with http_client(mesh.url, token) as client:
            listed[token] = await tool_names(client)
    reader, writer, gateway, admin = listed.values()
    assert ALL_TOOLS == admin
    assert writer == gateway
    assert reader < writer < admin
    assert {"query_knowledge", "get_entry", "entities"} <= reader
    assert {"store_knowledge", "store_many", "link_entries", "deprecate_entry"} <= writer - reader
    assert {"resolve_dispute", "force_decay", "archive_stale"} <= admin - writer


async def test_three_agents_corroborate_a_fact_that_a_reader_then_finds_confirmed(
    mesh: Mesh,
) -> None:
    """One agent stores a fact, two others state it: agreements from independent sources,
    which the corroboration checker turns into a confirmed entry that a reader finds."""
    fact = unique("The staging cluster runs PostgreSQL 18.1 with pgvector 0.8")
    async with http_client(mesh.url, "tok-alice") as alice:
        first = await ok(alice, "store_knowledge", {"content": fact, "tags": ["infra"]})
    assert ("created", "candidate") == (first["outcome"], first["status"])
    for token in ("tok-bob", "tok-carol"):
        async with http_client(mesh.url, token) as agent:
            again = await ok(agent, "store_knowledge", {"content": fact, "tags": ["infra"]})
        assert first["entry_id"] == again["entry_id"]
    await mesh.corroborate()
    async with http_client(mesh.url, "tok-rita") as reader:
        deadline = time.monotonic() + CONFIRM_SECONDS
        while True:
            found = await ok(reader, "query_knowledge", {"query": fact, "min_confidence": 0})
            (entry,) = [e for e in found["entries"] if e["id"] == first["entry_id"]]
            if entry["status"] == "confirmed" or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)  # the service's checker runs every second
        assert "confirmed" == entry["status"]
        assert entry["confidence"] > first["confidence"]
        evidence = await ok(reader, "get_evidence", {"entry_id": first["entry_id"]})
        sources = [(e["agent_id"], e["independent"]) for e in evidence["evidence"]]
        assert [("alice", True), ("bob", True), ("carol", True)] == sources
        resource = await reader.read_resource(f"apollo://entries/{first['entry_id']}")
    document = json.loads(resource.contents[0].text)  # type: ignore[union-attr]
    assert "confirmed" == document["entry"]["status"]
    assert "embedding" not in document["entry"]
    assert 3 == len(document["evidence"])
    assert [] == document["relations"]


async def test_a_private_entry_shows_nowhere_but_to_its_owner(mesh: Mesh) -> None:
    """Not in another principal's results, counts, entities, or errors: a read of its id
    fails exactly as a read of an id that never existed."""
    secret = unique("Project Zanzibar ships on Friday")
    async with http_client(mesh.url, "tok-bob") as bob:
        before = await ok(bob, "stats")
    async with http_client(mesh.url, "tok-alice") as alice:
        stored = await ok(alice, "store_knowledge", {"content": secret, "access_scope": "private"})
        mine = await ok(alice, "query_knowledge", {"query": secret, "min_confidence": 0})
        assert stored["entry_id"] in [e["id"] for e in mine["entries"]]
    async with http_client(mesh.url, "tok-bob") as bob:
        found = await ok(bob, "query_knowledge", {"query": secret, "min_confidence": 0})
        assert stored["entry_id"] not in [e["id"] for e in found["entries"]]
        assert before["total"] == (await ok(bob, "stats"))["total"]
        names = await ok(bob, "entities", {"query": secret})
        assert "zanzibar" not in json.dumps(names).lower()
        never = str(uuid.uuid4())
        hidden = await refused(bob, "get_entry", {"entry_id": stored["entry_id"]})
        missing = await refused(bob, "get_entry", {"entry_id": never})
        assert hidden["message"].replace(stored["entry_id"], "?") == missing["message"].replace(
            never, "?"
        )
        assert ("not_found", "not_found") == (hidden["type"], missing["type"])
        with pytest.raises(MCPError) as caught:
            await bob.read_resource(f"apollo://entries/{stored['entry_id']}")
        assert secret not in str(caught.value)


async def test_refusals_come_from_the_command_layer_as_tool_errors(mesh: Mesh) -> None:
    """A reader that writes, a writer that poses as another agent: refused, nothing stored.
    A gateway may credit another agent."""
    fact = unique("Reader writes are refused")
    async with http_client(mesh.url, "tok-rita") as reader:
        error = await refused(reader, "store_knowledge", {"content": fact})
        assert "forbidden" == error["type"]
    async with http_client(mesh.url, "tok-alice") as alice:
        error = await refused(alice, "store_knowledge", {"content": fact, "agent_id": "bob"})
        assert ("forbidden", "agent_id") == (error["type"], error["field"])
        error = await refused(
            alice, "resolve_dispute", {"entry_id": str(uuid.uuid4()), "resolution": "accept"}
        )
        assert "forbidden" == error["type"]
        found = await ok(alice, "query_knowledge", {"query": fact, "min_confidence": 0})
        assert fact not in [e["content"] for e in found["entries"]]
    async with http_client(mesh.url, "tok-gate") as gateway:
        stored = await ok(gateway, "store_knowledge", {"content": fact, "agent_id": "worker-7"})
        entry = await ok(gateway, "get_entry", {"entry_id": stored["entry_id"]})
        assert ("worker-7", "orchestrator", "mcp") == (
            entry["source"]["agent_id"],
            entry["source"]["submitted_by"],
            entry["source"]["submitted_from"],
        )


async def test_without_a_valid_token_the_answer_is_401_with_the_resource_metadata(
    mesh: Mesh,
) -> None:
    """No token and an unknown token are 401 before any MCP message is read, with
    ``WWW-Authenticate`` naming the protected-resource metadata, which names ``/mcp``."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=30) as http:
        bare = await http.post(mesh.url, json=initialize, headers=headers)
        wrong = await http.post(
            mesh.url, json=initialize, headers={**headers, "Authorization": "Bearer nope"}
        )
        for response, kind in ((bare, "invalid_request"), (wrong, "invalid_token")):
            assert 401 == response.status_code
            challenge = response.headers["www-authenticate"]
            assert challenge.startswith("Bearer ")
            assert f'error="{kind}"' in challenge
            metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
            assert metadata_url.endswith("/.well-known/oauth-protected-resource/mcp")
            assert "unauthorized" == response.json()["error"]["type"]
        metadata = (await http.get(metadata_url)).json()
        assert mesh.url == metadata["resource"]
        assert ["header"] == metadata["bearer_methods_supported"]
    with pytest.raises(Exception):  # noqa: B017 - the SDK's client cannot even connect
        async with http_client(mesh.url, "nope"):
            pass


async def test_hostile_input_is_refused_naming_the_field_and_changes_nothing(
    mesh: Mesh,
) -> None:
    """The HTTP API's bounds, on every tool: content size, query length, limits, nesting,
    types and unknown arguments, each a tool error naming the field."""
    deep: Any = "x"
    for _ in range(JSON_DEPTH.limit + 2):
        deep = {"a": deep}
    cases = [
        ("store_knowledge", {"content": "x" * (CONTENT.limit + 1)}, "content"),
        ("store_knowledge", {"content": "fine", "context": deep}, "context"),
        ("store_knowledge", {"content": "\u200b\u200b"}, "content"),
        ("store_knowledge", {"content": "fine", "access_scope": "everyone"}, "access_scope"),
        ("store_knowledge", {"content": "fine", "owner": "root"}, "owner"),
        ("query_knowledge", {"query": "q" * (QUERY.limit + 1)}, "query"),
        ("query_knowledge", {"query": "q", "limit": QUERY_LIMIT.limit + 1}, "limit"),
        ("query_knowledge", {"query": "q", "limit": "ten"}, "limit"),
        ("query_knowledge", {}, "query"),
        ("get_entry", {"entry_id": "not-a-uuid"}, "entry_id"),
        ("store_many", {"items": [{"content": "ok"}, {"content": ""}]}, "items[1].content"),
    ]
    async with http_client(mesh.url, "tok-alice") as alice:
        before = await ok(alice, "stats")
        for name, arguments, field in cases:
            error = await refused(alice, name, arguments)
            assert ("validation_error", field) == (error["type"], error["field"]), name
        assert before["total"] == (await ok(alice, "stats"))["total"]
        with pytest.raises(MCPError):
            await alice.call_tool("no_such_tool", {})


#: The headers of a raw MCP POST as alice, for bodies the SDK's client would never send.
_ALICE_RAW_HEADERS = {
    "Authorization": "Bearer tok-alice",
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-11-25",
}


async def test_a_body_over_the_message_bound_and_malformed_json_rpc_are_protocol_errors(
    mesh: Mesh,
) -> None:
    """Too large: 413 before the body is parsed. Not JSON, or not JSON-RPC: a JSON-RPC
    error, never a traceback."""
    headers = _ALICE_RAW_HEADERS
    async with httpx.AsyncClient(timeout=30) as http:
        huge = await http.post(mesh.url, content=b" " * (MESSAGE.limit + 1), headers=headers)
        assert 413 == huge.status_code
        for body in (b"{not json", b'{"hello": "world"}', b"[]"):
            response = await http.post(mesh.url, content=body, headers=headers)
            assert 400 <= response.status_code < 500, body
            error = response.json()["error"]
            assert error["code"] in (-32700, -32600, -32602), body
            assert "Traceback" not in response.text


@pytest.mark.parametrize(
    ("arguments", "key"),
    [
        ('{"content":"x","access_scope":"private","access_scope":"global"}', "access_scope"),
        ('{"content":"x","context":{"a":[{"k":1,"k":2}]}}', "k"),
    ],
)
async def test_a_tool_call_with_a_key_given_twice_is_a_400_and_changes_nothing(
    mesh: Mesh, arguments: str, key: str
) -> None:
    """The SDK's parser would keep one of the two values: the raw body is read first and
    refused, naming the key."""
    headers = _ALICE_RAW_HEADERS
    body = (
        '{"jsonrpc":"2.0","id":7,"method":"tools/call",'
        '"params":{"name":"store_knowledge","arguments":' + arguments + "}}"
    )
    async with http_client(mesh.url, "tok-alice") as alice:
        before = await ok(alice, "stats")
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(mesh.url, content=body.encode(), headers=headers)
        assert 400 == response.status_code
        error = response.json()["error"]
        assert -32600 == error["code"]
        assert f"body: holds the key '{key}' more than once" == error["message"]
        assert before["total"] == (await ok(alice, "stats"))["total"]


async def test_bidirectional_controls_are_neither_stored_nor_returned(mesh: Mesh) -> None:
    """The overrides and isolates go, the direction marks and Hebrew letters stay; content
    of nothing but controls is refused as invisible."""
    tail = uuid.uuid4().hex[:10]
    async with http_client(mesh.url, "tok-alice") as alice:
        stored = await ok(
            alice,
            "store_knowledge",
            {"content": f"grant \u202euser\u202c \u2067שלום\u2069 {tail}\u200f"},
        )
        entry = await ok(alice, "get_entry", {"entry_id": stored["entry_id"]})
        assert f"grant user שלום {tail}\u200f" == entry["content"]
        error = await refused(alice, "store_knowledge", {"content": "\u202a\u2066\u202e"})
        assert ("validation_error", "content") == (error["type"], error["field"])


async def test_repeating_an_idempotent_tool_changes_nothing_the_second_time(mesh: Mesh) -> None:
    """``deprecate_entry`` and ``link_entries`` say they are idempotent: the second call
    reports no change and leaves the entry as the first left it."""
    async with http_client(mesh.url, "tok-alice") as alice:
        tools = {t.name: t for t in (await alice.list_tools()).tools}
        for name in ("deprecate_entry", "link_entries"):
            assert tools[name].annotations is not None
            assert tools[name].annotations.idempotent_hint is True
        one = await ok(alice, "store_knowledge", {"content": unique("Cache TTL is 300 s")})
        two = await ok(alice, "store_knowledge", {"content": unique("The CDN honours it")})
        link = {
            "from_entry_id": one["entry_id"],
            "to_entry_id": two["entry_id"],
            "relation_type": "depends_on",
        }
        assert (await ok(alice, "link_entries", link))["created"] is True
        assert (await ok(alice, "link_entries", link))["created"] is False
        why = {"entry_id": two["entry_id"], "reason": "superseded by the new CDN"}
        first = await ok(alice, "deprecate_entry", why)
        second = await ok(alice, "deprecate_entry", why)
        assert (True, False) == (first["changed"], second["changed"])
        assert first["status"] == second["status"] == "archived"
        relations = await ok(alice, "get_relations", {"entry_id": one["entry_id"]})
        assert 1 == len(relations["relations"])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_store_many_reports_progress_per_chunk(mesh: Mesh, mode: str) -> None:
    """Progress notifications as the chunks commit, the last one at the total, in either
    era of the protocol (2026-07-28, and the 2025-11-25 handshake)."""
    items = [{"content": unique(f"Sensor {i} reads 21.{i % 10} degrees")} for i in range(300)]
    seen: list[tuple[float, float | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total))

    async with http_client(mesh.url, "tok-alice", mode=mode) as alice:
        result = await alice.call_tool("store_many", {"items": items}, progress_callback=progress)
    assert not result.is_error
    assert result.structured_content is not None
    outcomes = [r["outcome"] for r in result.structured_content["results"]]
    assert ["created"] * 300 == outcomes
    assert [(256, 300), (300, 300)] == seen


async def test_a_private_conversation_is_one_episode_only_its_owner_sees(mesh: Mesh) -> None:
    """store_text over MCP: one episode of statements, neighbours at query time, the same
    conversation again storing nothing; another principal sees neither the episode nor its
    statements."""
    ship = unique("Zephyr ships")
    turns = [
        {"speaker": "alice", "text": f"{ship} on the third of May."},
        {"speaker": "carol", "text": f"The {ship} launch needs the new signing keys."},
        {"speaker": "alice", "text": "Security rotates those keys on Monday."},
    ]
    async with http_client(mesh.url, "tok-alice") as alice:
        told = await ok(alice, "store_text", {"text": turns, "access_scope": "private"})
        assert ["created"] * 3 == [s["outcome"] for s in told["statements"]]
        again = await ok(alice, "store_text", {"text": turns, "access_scope": "private"})
        assert told["episode_id"] == again["episode_id"]
        assert ["deduplicated"] * 3 == [s["outcome"] for s in again["statements"]]
        found = await ok(
            alice,
            "query_knowledge",
            {"query": "signing keys launch", "mode": "lexical", "context_window": 1},
        )
        (hit,) = [e for e in found["entries"] if e["episode_id"] == told["episode_id"]][:1]
        near = {n["position"] for n in hit["neighbours"]}
        assert near and near <= {hit["position"] - 1, hit["position"] + 1}
        episode = await ok(alice, "get_episode", {"episode_id": told["episode_id"]})
        assert [t["text"] for t in episode["text"]] == [t["text"] for t in turns]
    async with http_client(mesh.url, "tok-bob") as bob:
        refusal = await refused(bob, "get_episode", {"episode_id": told["episode_id"]})
        assert "not_found" == refusal["type"]
        theirs = await ok(bob, "query_knowledge", {"query": ship, "context_window": 5})
        assert ship not in json.dumps(theirs)


async def test_a_call_sent_again_with_its_idempotency_key_changes_nothing(mesh: Mesh) -> None:
    """``_meta["apollo/idempotency_key"]`` over HTTP: the second call with the key is the
    first one again (what it says is not applied), scoped to the caller's principal."""
    key = {IDEMPOTENCY_KEY_META: f"retry-{uuid.uuid4().hex}"}
    first, second = unique("Orchid ships on Tuesday"), unique("Orchid ships on Wednesday")
    async with http_client(mesh.url, "tok-alice") as alice:
        before = (await ok(alice, "stats"))["total"]
        done = await alice.call_tool("store_knowledge", {"content": first}, meta=key)
        again = await alice.call_tool("store_knowledge", {"content": second}, meta=key)
        assert not done.is_error and not again.is_error
        assert before + 1 == (await ok(alice, "stats"))["total"]
    async with http_client(mesh.url, "tok-carol") as carol:  # another principal's key
        theirs = await carol.call_tool("store_knowledge", {"content": second}, meta=key)
        assert "created" == theirs.structured_content["outcome"]
