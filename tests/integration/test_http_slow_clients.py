"""Slow and vanishing clients against the real HTTP server (uvicorn on 127.0.0.1, raw
sockets): late headers and late bodies are answered 408 and closed, however steadily the
bytes trickle; a client that leaves mid-body is one INFO line, never an ERROR traceback;
requests beyond the connection cap are answered 503.

The timeouts here are short (half a second); the bounds asserted are generous (they only
tell "closed by the timer" from "left open")."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import pytest

from apollo_app import Apollo
from apollo_app.entrypoints.http import HttpServer, create_app
from tests.support import eventually_within

TIMEOUT = 0.5
#: Far beyond TIMEOUT, far below "left open" (the observed failure was over 65 s).
CLOSED_WITHIN = 10.0
HEALTH = b"GET /api/apollo/health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"


@contextlib.asynccontextmanager
async def _serving(deadline: float) -> AsyncIterator[HttpServer]:
    """The HTTP server over an in-memory Apollo, ``deadline`` seconds for headers and bodies."""
    async with Apollo.in_memory() as apollo:
        app = create_app(apollo)
        async with HttpServer(
            app, "127.0.0.1", 0, header_timeout=deadline, body_timeout=deadline
        ) as running:
            yield running


@pytest.fixture
async def server() -> AsyncIterator[HttpServer]:
    async with _serving(TIMEOUT) as running:
        yield running


async def _connect(server: HttpServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", server.port)


async def _trickle(writer: asyncio.StreamWriter, data: bytes, sent: list[int]) -> None:
    """Send ``data`` a byte at a time, a byte every 50 ms, until the server closes the
    connection (or all is sent), counting the bytes sent in ``sent``."""
    for byte in data:
        try:
            writer.write(bytes([byte]))
            await writer.drain()
        except (ConnectionError, OSError):
            return
        sent.append(byte)
        await asyncio.sleep(0.05)


async def _answer_then_close(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection (bounded)."""
    async with asyncio.timeout(CLOSED_WITHIN):
        try:
            return await reader.read(-1)
        except ConnectionResetError:
            return b""


async def _slow_exchange(server: HttpServer, head: bytes, trickled: bytes) -> tuple[bytes, int]:
    """Send ``head`` at once then ``trickled`` byte by byte; what the server answered before
    it closed the connection, and how many trickled bytes it took meanwhile."""
    reader, writer = await _connect(server)
    writer.write(head)
    await writer.drain()
    sent: list[int] = []
    trickling = asyncio.create_task(_trickle(writer, trickled, sent))
    try:
        answer = await _answer_then_close(reader)
    finally:
        trickling.cancel()
        await asyncio.gather(trickling, return_exceptions=True)
        writer.close()
    return answer, len(sent)


async def test_headers_sent_a_byte_at_a_time_get_408_and_the_connection_closes(server):
    """Every byte arrives well within the idle timeout, but the headers as a whole are late."""
    head = b"POST /api/apollo/query HTTP/1.1\r\nhost: 127.0.0.1\r\n" + b"x-pad: " + b"a" * 400
    answer, sent = await _slow_exchange(server, b"", head)
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b'"type":"request_timeout"' in answer
    assert 0 < sent < len(head)


async def test_a_silent_connection_gets_408_and_closes(server):
    reader, writer = await _connect(server)
    answer = await _answer_then_close(reader)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]


async def test_a_body_sent_a_byte_at_a_time_gets_408_and_the_connection_closes(server, caplog):
    """The application waiting for the body sees the client leave: INFO lines only."""
    caplog.set_level(logging.INFO)
    body = b'{"query": "' + b"k" * 400 + b'"}'
    head = (
        b"POST /api/apollo/query HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)
    )
    answer, sent = await _slow_exchange(server, head, body)
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b"request bodies must arrive within 0.5s" in answer
    assert 0 < sent < len(body)
    assert [] == [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_body_the_application_does_not_read_cannot_hold_the_connection(server):
    """Health answers without reading the body; the client keeps trickling it: the answer
    comes at once and the connection closes when the body is late."""
    head = b"GET /api/apollo/health HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 1000\r\n\r\n"
    answer, sent = await _slow_exchange(server, head, b"z" * 1000)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    assert 0 < sent < 1000


async def test_a_kept_alive_connection_owes_its_next_headers_in_time_too(server):
    """The first request is answered; the second one's headers trickle: 408, closed."""
    reader, writer = await _connect(server)
    writer.write(HEALTH)
    await writer.drain()
    status = await reader.readuntil(b"\r\n")
    assert status.startswith(b"HTTP/1.1 200 ")
    trickled = HEALTH[:-2] + b"x-pad: " + b"a" * 400
    trickling = asyncio.create_task(_trickle(writer, trickled, []))
    try:
        answer = await _answer_then_close(reader)
    finally:
        trickling.cancel()
        await asyncio.gather(trickling, return_exceptions=True)
        writer.close()
    assert b"HTTP/1.1 408 " in answer, answer[-300:]


#: The header deadline of the many-clients test: the 250 trickles (5,000 writes a second
#: in this one event loop, server and clients together) may hold the loop past half a
#: second on a loaded machine, and the prompt request must not miss its deadline for that;
#: the trickled headers (about 22 s of bytes) are still far later than it.
CROWD_TIMEOUT = 3.0


async def test_many_slow_clients_are_all_dropped_and_the_server_still_answers():
    """250 connections trickling headers (as many as left open past 65 s before the
    timers) are all answered 408 and closed; a prompt request made meanwhile is answered."""
    head = b"GET /api/apollo/health HTTP/1.1\r\nhost: 127.0.0.1\r\nx-pad: " + b"a" * 400
    async with _serving(CROWD_TIMEOUT) as server:
        slow = [asyncio.create_task(_slow_exchange(server, b"", head)) for _ in range(250)]
        reader, writer = await _connect(server)
        writer.write(HEALTH)
        await writer.drain()
        assert (await reader.readuntil(b"\r\n")).startswith(b"HTTP/1.1 200 ")
        writer.close()
        answers = await asyncio.gather(*slow)
    assert all(answer.startswith(b"HTTP/1.1 408 ") for answer, _ in answers)
    assert all(0 < sent < len(head) for _, sent in answers)  # cut by the timer, not done


async def test_a_client_that_leaves_mid_body_is_one_info_line_and_no_error(server, caplog):
    """The application is waiting for the rest of the body when the client goes away."""
    caplog.set_level(logging.INFO)
    _, writer = await _connect(server)
    writer.write(
        b"POST /api/apollo/query HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        b"content-type: application/json\r\ncontent-length: 100\r\n\r\n"
        b'{"query": "kafka'
    )
    await writer.drain()
    writer.close()
    await writer.wait_closed()

    def left() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "went away" in r.getMessage()]

    async def logged() -> list[logging.LogRecord]:
        return left()

    records = await eventually_within(CLOSED_WITHIN, logged, "the departure is logged")
    assert 1 == len(records)
    assert (logging.INFO, "apollo.http") == (records[0].levelno, records[0].name)
    assert [] == [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_client_that_leaves_mid_response_is_one_info_line_and_no_error(caplog):
    """The application has sent half its response when the client goes away; it learns
    so from ``receive`` and its last send goes nowhere, quietly."""
    caplog.set_level(logging.INFO)
    finished = asyncio.Event()

    async def half_then_rest(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"half", "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass
        await send({"type": "http.response.body", "body": b" and the rest"})
        finished.set()

    async with HttpServer(half_then_rest, "127.0.0.1", 0) as server:
        reader, writer = await _connect(server)
        writer.write(HEALTH)
        await writer.drain()
        assert (await reader.readuntil(b"half")).startswith(b"HTTP/1.1 200 ")
        writer.close()
        await writer.wait_closed()
        async with asyncio.timeout(CLOSED_WITHIN):
            await finished.wait()

    left = [r for r in caplog.records if "went away" in r.getMessage()]
    assert [(logging.INFO, "apollo.http")] == [(r.levelno, r.name) for r in left]
    assert [] == [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_requests_beyond_the_connection_cap_are_answered_503():
    """With two connections open, a request on a third is refused, not queued."""
    async with (
        Apollo.in_memory() as apollo,
        HttpServer(create_app(apollo), "127.0.0.1", 0, max_connections=2) as server,
    ):
        idle = [await _connect(server) for _ in range(2)]
        reader, writer = await _connect(server)
        writer.write(HEALTH)
        await writer.drain()
        status = await reader.readuntil(b"\r\n")
        for _, other in [*idle, (reader, writer)]:
            other.close()
        assert status.startswith(b"HTTP/1.1 503 "), status
