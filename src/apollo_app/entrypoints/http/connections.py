"""Connection guards under uvicorn's h11 protocol: a client has ``header_timeout`` seconds
to send a request's line and headers, and ``body_timeout`` seconds from then to send its
body, whatever the pace of its bytes (a slow client holds a connection, never the server).

uvicorn bounds only the idle time between requests (``timeout_keep_alive``); these timers
bound the time within one. A request whose headers are late is answered ``408`` and its
connection closed. A body that is late is answered ``408`` while the application still
waits for it (the application sees the client leave, as when it disconnects), or, when the
application has answered without reading it, the connection is closed. A 408 is followed
by a short lingering close, so that the client reads it instead of a reset.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from ...wire.codec import encode_json
from .errors import JSON, error_body

logger = logging.getLogger("apollo.http")
#: A connection closed by a timer stops sending, then discards what the client still sends
#: for this long before it closes: closing with unread bytes would reset the connection,
#: and the client could lose the answer.
LINGER_SECONDS = 1.0


def _timeout_response(message: str) -> bytes:
    """A whole ``408`` response in Apollo's error shape, closing the connection."""
    body = encode_json(error_body("request_timeout", message))
    head = (
        "HTTP/1.1 408 Request Timeout\r\n"
        f"content-type: {JSON}\r\nconnection: close\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode("ascii") + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header timer and a body timer per request.

    The header timer runs while the client owes a request (h11's ``IDLE``): armed when the
    connection opens and when the first byte of a later request arrives, stopped when the
    request line and headers are parsed. The body timer runs from then until the client's
    side of the request is complete. Subclass it with :func:`guarded_protocol`."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._linger: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def data_received(self, data: bytes) -> None:
        if self._linger is not None:
            return  # answered 408: whatever comes now is dropped
        if self._header_timer is None and self.conn.their_state is h11.IDLE:
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()  # a pipelined request may have been parsed from the buffer

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        self._stop_body_timer()
        if self._linger is not None:
            self._linger.cancel()
        cycle = self.cycle
        if cycle is not None and cycle.response_started and not cycle.response_complete:
            logger.info("%s went away before its response was complete", _peer(self.client))
        super().connection_lost(exc)

    def _follow(self) -> None:
        """Move the timers along with the client's side of the exchange."""
        state = self.conn.their_state
        if state is not h11.IDLE:
            self._stop_header_timer()
        if state is h11.SEND_BODY:
            if self._body_timer is None:
                self._body_timer = self.loop.call_later(self.body_timeout, self._body_late)
        else:
            self._stop_body_timer()

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _stop_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a response is still being written; its end starts the next wait
        logger.info(
            "closing a connection from %s: no request headers within %gs",
            _peer(self.client),
            self.header_timeout,
        )
        self._refuse(f"request headers must arrive within {self.header_timeout:g}s")

    def _body_late(self) -> None:
        self._body_timer = None
        cycle = self.cycle
        if self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY:
            return
        logger.info(
            "closing a connection from %s: request body not received within %gs",
            _peer(self.client),
            self.body_timeout,
        )
        if cycle is not None and cycle.response_started and not cycle.response_complete:
            cycle.keep_alive = False  # let the response finish, then close
            return
        if cycle is not None and not cycle.response_started:
            cycle.disconnected = True  # the application sees the client leave
            cycle.message_event.set()
            self._refuse(f"request bodies must arrive within {self.body_timeout:g}s")
            return
        self._close_lingering()  # answered without reading the body

    def _refuse(self, message: str) -> None:
        """Answer 408 and close."""
        self.transport.write(_timeout_response(message))
        self._close_lingering()

    def _close_lingering(self) -> None:
        """Stop sending, drop what arrives, close after :data:`LINGER_SECONDS`."""
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._linger = self.loop.call_later(LINGER_SECONDS, self.transport.close)


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "an unknown peer"


def guarded_protocol(header_timeout: float, body_timeout: float) -> type[GuardedH11Protocol]:
    """A :class:`GuardedH11Protocol` with these timeouts, for ``uvicorn.Config(http=...)``."""
    return type(
        "GuardedH11Protocol",
        (GuardedH11Protocol,),
        {"header_timeout": header_timeout, "body_timeout": body_timeout},
    )


__all__ = ["GuardedH11Protocol", "guarded_protocol"]
