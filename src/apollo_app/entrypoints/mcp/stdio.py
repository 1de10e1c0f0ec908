"""MCP over stdio: one local agent (a desktop or IDE agent) on Apollo's store.

The process that starts ``apollo mcp`` speaks MCP on its stdin and stdout; the caller is
the local identity it was started with (principal, role, agent), as the embedding program
of a library is: nothing a tool's arguments say changes who is calling.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from apollo_domain.services import Caller

from .server import ApolloMcp


def local_caller(caller: Caller) -> Callable[[ServerRequestContext[Any, Any]], Caller]:
    """Every request's caller: the one the server was started as."""

    def identify(ctx: ServerRequestContext[Any, Any]) -> Caller:
        return caller

    return identify


@asynccontextmanager
async def stdio_streams() -> AsyncIterator[Any]:
    """The process's stdin and stdout as MCP message streams. While they are open, file
    descriptors 0 and 1 point at the null device and at stderr, so nothing else this
    process (or a child it starts, such as the embedded PostgreSQL) writes reaches the
    wire: open the store inside."""
    async with stdio_server() as streams:
        yield streams


async def serve(edge: ApolloMcp, streams: Any) -> None:
    """Serve ``edge`` on ``streams`` until the client closes them."""
    server = edge.server()
    read, write = streams
    await server.run(read, write, server.create_initialization_options())


__all__ = ["local_caller", "serve", "stdio_streams"]
