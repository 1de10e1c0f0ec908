"""MCP over stdio: one local agent (a desktop or IDE agent) on Apollo's store.

The process that starts ``apollo mcp`` speaks MCP on its stdin and stdout; the caller is
the local identity it was started with (principal, role, agent), as the embedding program
of a library is: nothing a tool's arguments say changes who is calling.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from io import TextIOWrapper
from typing import Any, BinaryIO, cast

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, ErrorData, JSONRPCError

from apollo_domain.services import Caller

from ...wire.codec import DuplicateKey, refuse_duplicate_keys
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
    wire: open the store inside.

    Each line read is checked before the SDK parses it (its parser keeps the last of two
    values for one key): a line holding a key twice, at any depth, never reaches a tool;
    it is answered with a JSON-RPC invalid request (-32600) naming the key."""
    ready = anyio.Event()
    streams: Any = None

    async def answer(refusal: JSONRPCError) -> None:
        await ready.wait()
        await streams[1].send(SessionMessage(refusal))

    with _claimed_stdin() as wire:
        text = TextIOWrapper(wire, encoding="utf-8", errors="replace")
        checked = CheckedLines(anyio.wrap_file(text), answer)
        try:
            async with stdio_server(stdin=cast("anyio.AsyncFile[str]", checked)) as streams:
                ready.set()
                yield streams
        finally:
            with suppress(ValueError):  # the buffer is not this wrapper's to close
                text.detach()


class CheckedLines:
    """The lines of ``lines`` that hold no key twice; each other one is answered through
    ``answer`` (a JSON-RPC error with the request's id where it has one) and dropped."""

    def __init__(
        self, lines: AsyncIterable[str], answer: Callable[[JSONRPCError], Awaitable[None]]
    ) -> None:
        self.lines = lines
        self.answer = answer

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self.lines:
            try:
                refuse_duplicate_keys(line)
            except DuplicateKey as exc:
                error = ErrorData(code=INVALID_REQUEST, message=f"message: {exc}")
                await self.answer(JSONRPCError(jsonrpc="2.0", id=_request_id(line), error=error))
                continue
            yield line


def _request_id(line: str) -> int | str | None:
    """The ``id`` of a JSON-RPC line, when its top level gives exactly one that is a string
    or an integer (JSON-RPC answers ``null`` when it cannot tell)."""
    members = json.loads(line, object_pairs_hook=lambda pairs: pairs)
    if not isinstance(members, list):
        return None
    ids = [value for key, value in members if key == "id"]
    if len(ids) == 1 and isinstance(ids[0], str | int) and not isinstance(ids[0], bool):
        return ids[0]
    return None


@contextmanager
def _claimed_stdin() -> Iterator[BinaryIO]:
    """Standard input read from a private duplicate while file descriptor 0 points at the
    null device (as the SDK's transport does for the stdin it reads itself), so no child
    process can take the client's bytes; restored on exit. Where descriptors cannot be
    moved, the process's own stdin buffer."""
    try:
        if sys.stdin is None or sys.stdin.buffer.fileno() != 0:
            raise OSError("stdin is not descriptor 0")
        private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)  # never 1 or 2
    except (AttributeError, OSError, ValueError):
        yield sys.stdin.buffer
        return
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        # closefd=False: a worker thread may still block on it after the transport exits.
        yield os.fdopen(private, "rb", closefd=False)
    finally:
        os.dup2(private, 0)


async def serve(edge: ApolloMcp, streams: Any) -> None:
    """Serve ``edge`` on ``streams`` until the client closes them."""
    server = edge.server()
    read, write = streams
    await server.run(read, write, server.create_initialization_options())


__all__ = ["CheckedLines", "local_caller", "serve", "stdio_streams"]
