"""The MCP SDK's own client against Apollo: over streamable HTTP with a bearer token, or
over stdio against ``apollo mcp`` started as a subprocess; and what the tests ask of a
tool result."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from tests.environ import without_apollo_settings
from tests.service_processes import SOURCES

#: How long one MCP request may take before the client gives up (the first one over
#: stdio waits for the store to open).
READ_TIMEOUT = 60.0


@asynccontextmanager
async def http_client(
    url: str, token: str | None = None, *, mode: str = "auto"
) -> AsyncIterator[Client]:
    """The SDK's client on ``url`` (``.../mcp``), sending ``token`` as a bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=READ_TIMEOUT) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, read_timeout_seconds=READ_TIMEOUT) as client:
            yield client


def stdio_parameters(args: Sequence[str], settings: Mapping[str, str]) -> StdioServerParameters:
    """``apollo mcp ARGS`` of this checkout with ``settings`` as its only ``APOLLO_*``
    variables."""
    env = without_apollo_settings()
    env["PYTHONPATH"] = os.pathsep.join([SOURCES, *filter(None, [env.get("PYTHONPATH")])])
    env.update(settings)
    return StdioServerParameters(
        command=sys.executable, args=["-m", "apollo_app.cli", "mcp", *args], env=env
    )


@asynccontextmanager
async def stdio_client(
    args: Sequence[str], settings: Mapping[str, str], *, mode: str = "auto"
) -> AsyncIterator[Client]:
    """The SDK's client on ``apollo mcp ARGS`` as a subprocess (ended when this exits)."""
    params = stdio_parameters(args, settings)
    async with Client(params, mode=mode, read_timeout_seconds=READ_TIMEOUT) as client:
        yield client


async def tool_names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


async def ok(client: Client, name: str, arguments: Mapping[str, Any] | None = None) -> Any:
    """The structured content of a tool call that must succeed."""
    result = await client.call_tool(name, dict(arguments or {}))
    assert not result.is_error, f"{name} failed: {_text(result)}"
    assert result.structured_content is not None
    return result.structured_content


async def refused(
    client: Client, name: str, arguments: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The error (``{"type", "message", "field"}``) of a tool call that must fail as a tool
    error, never as a protocol failure."""
    result = await client.call_tool(name, dict(arguments or {}))
    assert result.is_error, f"{name} did not fail: {_text(result)}"
    assert isinstance(result.structured_content, dict)
    error: dict[str, Any] = result.structured_content["error"]
    assert error["type"] in _text(result)
    return error


def _text(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


__all__ = [
    "READ_TIMEOUT",
    "http_client",
    "ok",
    "refused",
    "stdio_client",
    "stdio_parameters",
    "tool_names",
]
