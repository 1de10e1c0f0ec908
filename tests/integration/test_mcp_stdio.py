"""``apollo mcp`` as a subprocess, driven over stdio by the MCP SDK's own client: on a
PostgreSQL database given by ``APOLLO_DATABASE_URL``, and on the embedded default store.

The caller is the identity the process was started with (``--principal``, ``--role``,
``--agent``); no tool argument changes it."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from apollo_adapters.postgres.embedded import temporary_folder
from apollo_app import Apollo, Settings
from apollo_app.entrypoints.mcp import mcp_actions
from tests.mcp_support import (
    READ_TIMEOUT,
    ok,
    refused,
    stdio_client,
    stdio_parameters,
    tool_names,
)
from tests.postgres_support import PostgresTestServer

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
async def database(postgres_server: PostgresTestServer) -> AsyncIterator[dict[str, str]]:
    """The settings of ``apollo mcp`` processes sharing one fresh database."""
    name = await postgres_server.create_database(dimension=384)
    yield {"APOLLO_DATABASE_URL": postgres_server.conninfo(name), "APOLLO_EMBEDDER": "hashing"}


@pytest.fixture
def folder() -> Iterator[Path]:
    made = temporary_folder("apollo-mcp-stdio-")
    yield made
    shutil.rmtree(made, ignore_errors=True)


async def test_each_role_started_lists_its_tools(database: dict[str, str]) -> None:
    every = {action.name for action in mcp_actions()}
    listed = {}
    for role in ("reader", "admin"):  # a writer's: the default of every other test here
        async with stdio_client(["--principal", f"p-{role}", "--role", role], database) as c:
            listed[role] = await tool_names(c)
    assert every == listed["admin"]
    assert listed["reader"] < listed["admin"]
    assert {"store_knowledge", "resolve_dispute"}.isdisjoint(listed["reader"])


async def test_three_local_agents_corroborate_and_a_local_reader_finds_it_confirmed(
    database: dict[str, str],
) -> None:
    """Three processes, three principals: one stores, two state the same fact; the
    corroboration checker confirms it; a reader's process finds it confirmed."""
    fact = "The build farm has 48 ARM runners since March"
    async with stdio_client(["--principal", "ann"], database) as ann:
        first = await ok(ann, "store_knowledge", {"content": fact, "tags": ["ci"]})
    async with stdio_client(["--principal", "ben"], database) as ben:
        await ok(ben, "store_knowledge", {"content": fact, "tags": ["ci"]})
    async with stdio_client(["--principal", "cyd"], database) as cyd:
        await ok(cyd, "store_knowledge", {"content": fact, "tags": ["ci"]})
    settings = Settings(embedder="hashing", database_url=database["APOLLO_DATABASE_URL"])
    async with Apollo.open(settings) as apollo:
        report = await apollo.check_corroboration()
    assert report.bootstrapped + report.promoted >= 1
    async with stdio_client(["--principal", "rex", "--role", "reader"], database) as rex:
        found = await ok(rex, "query_knowledge", {"query": fact, "min_confidence": 0})
        (entry,) = [e for e in found["entries"] if e["id"] == first["entry_id"]]
        assert "confirmed" == entry["status"]
        error = await refused(rex, "store_knowledge", {"content": "a reader writes"})
        assert "forbidden" == error["type"]


async def test_the_started_identity_holds_whatever_the_arguments_say(
    database: dict[str, str],
) -> None:
    """A writer acts as its one agent: naming another is refused; its private entry is
    no other principal's to see."""
    secret = "The vault rotation key lives in the basement safe"
    async with stdio_client(["--principal", "dora", "--agent", "dora-laptop"], database) as dora:
        error = await refused(dora, "store_knowledge", {"content": secret, "agent_id": "eve"})
        assert ("forbidden", "agent_id") == (error["type"], error["field"])
        stored = await ok(dora, "store_knowledge", {"content": secret, "access_scope": "private"})
        entry = await ok(dora, "get_entry", {"entry_id": stored["entry_id"]})
        assert ("dora-laptop", "dora", "mcp") == (
            entry["source"]["agent_id"],
            entry["source"]["submitted_by"],
            entry["source"]["submitted_from"],
        )
    async with stdio_client(["--principal", "eve"], database) as eve:
        found = await ok(eve, "query_knowledge", {"query": secret, "min_confidence": 0})
        assert stored["entry_id"] not in [e["id"] for e in found["entries"]]
        error = await refused(eve, "get_entry", {"entry_id": stored["entry_id"]})
        assert "not_found" == error["type"]


async def test_on_the_embedded_default_store(folder: Path) -> None:
    """Without ``APOLLO_DATABASE_URL``: the embedded PostgreSQL in the data folder (its
    server's output never reaches the MCP wire)."""
    settings = {"APOLLO_DATA_DIR": str(folder / "store"), "APOLLO_EMBEDDER": "hashing"}
    async with stdio_client(["--principal", "solo"], settings) as solo:
        stored = await ok(solo, "store_knowledge", {"content": "Embedded stores persist"})
        entry = await ok(solo, "get_entry", {"entry_id": stored["entry_id"]})
    assert "Embedded stores persist" == entry["content"]
    assert (folder / "store").is_dir()


async def _exchange(process: asyncio.subprocess.Process, message: dict[str, Any] | str) -> Any:
    """Write one JSON-RPC line (a dict, or raw text) and read the next answer line."""
    line = message if isinstance(message, str) else json.dumps(message)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(line.encode() + b"\n")
    await process.stdin.drain()
    return json.loads(await asyncio.wait_for(process.stdout.readline(), READ_TIMEOUT))


def _call(ident: int, name: str, arguments: str) -> str:
    return (
        f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call",'
        f'"params":{{"name":"{name}","arguments":{arguments}}}}}'
    )


@pytest.mark.parametrize(
    ("arguments", "key"),
    [
        ('{"content":"x","access_scope":"private","access_scope":"global"}', "access_scope"),
        ('{"content":"x","context":{"a":[{"k":1,"k":2}]}}', "k"),
    ],
)
async def test_a_line_with_a_key_given_twice_is_an_invalid_request_and_changes_nothing(
    database: dict[str, str], arguments: str, key: str
) -> None:
    """Raw lines on the real stdin of ``apollo mcp`` (the SDK's client cannot send a key
    twice): the line is refused before the SDK's parser keeps one of the two values,
    answered with the request's id, and the server goes on serving."""
    params = stdio_parameters(["--principal", "dup"], database)
    process = await asyncio.create_subprocess_exec(
        params.command,
        *params.args,
        env=params.env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        hello = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        }
        assert "result" in await _exchange(process, hello)
        assert process.stdin is not None
        process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        before = await _exchange(process, _call(2, "stats", "{}"))
        answer = await _exchange(process, _call(3, "store_knowledge", arguments))
        assert (3, -32600) == (answer["id"], answer["error"]["code"])
        assert f"message: holds the key '{key}' more than once" == answer["error"]["message"]
        after = await _exchange(process, _call(4, "stats", "{}"))
        counted = before["result"]["structuredContent"]["total"]
        assert counted == after["result"]["structuredContent"]["total"]
        unique = await _exchange(process, _call(5, "store_knowledge", '{"content":"once only"}'))
        assert not unique["result"]["isError"]
    finally:
        assert process.stdin is not None
        process.stdin.close()
        await asyncio.wait_for(process.wait(), READ_TIMEOUT)
