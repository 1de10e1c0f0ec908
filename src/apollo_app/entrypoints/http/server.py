"""Running the HTTP API with uvicorn inside an asyncio program (beside the service actors)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Generator, Mapping

import uvicorn
from starlette.types import ASGIApp

from apollo_domain.errors import ApolloError
from apollo_domain.ports.messaging import BrokerLink

from ...facade import Apollo
from ...metrics import Metrics
from ...settings import Settings
from .admission import Admission
from .app import create_app
from .connections import guarded_protocol

LOOPBACK = "127.0.0.1"
logger = logging.getLogger("apollo.http")
GRACEFUL_SHUTDOWN_SECONDS = 5
#: Defaults of a server built without settings (``Settings`` has the same ones).
HEADER_TIMEOUT_SECONDS = 10.0
BODY_TIMEOUT_SECONDS = 30.0
MAX_CONNECTIONS = 512


def bind_host(settings_host: str, tokens: Mapping[str, str] | None) -> str:
    """Where to listen: without tokens there is no authentication, so only loopback,
    whatever the host setting says (:func:`host_overridden` says so in words)."""
    return settings_host if tokens else LOOPBACK


def host_overridden(settings_host: str, tokens: Mapping[str, str] | None) -> str | None:
    """The warning to log when :func:`bind_host` does not listen where
    ``APOLLO_HTTP_HOST`` says; None when it does."""
    host = bind_host(settings_host, tokens)
    if host == settings_host or settings_host == "localhost":
        return None
    return (
        f"APOLLO_HTTP_HOST={settings_host} is overridden: without APOLLO_API_TOKENS the API"
        f" is anonymous, so it listens on {host} only; set APOLLO_API_TOKENS to listen on"
        f" {settings_host}"
    )


class PortUnavailable(ApolloError):
    """The HTTP API cannot listen on its address (the port is busy, or not permitted)."""


def listen(host: str, port: int) -> socket.socket:
    """A non-blocking socket listening on ``host``:``port`` (0 picks a free port).

    Raises :class:`PortUnavailable` when the address cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        raise PortUnavailable(f"cannot listen on {host}:{port}: {reason}") from exc
    return sock


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the embedding program owns the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class HttpServer:
    """A uvicorn server on a socket bound up front (so a busy port raises
    :class:`PortUnavailable` from :meth:`start` instead of exiting the process, and port 0
    picks a free port), or on ``sock``, a socket already bound with :func:`listen`.

    A client has ``header_timeout`` seconds to send a request's headers and
    ``body_timeout`` more for its body (else ``408`` and the connection closes, see
    :mod:`.connections`); with ``max_connections`` connections open or requests in
    flight, a new request is answered ``503``.

    ``await server.start()`` returns once it accepts connections; ``await server.stop()``
    shuts it down gracefully (bounded) and closes the socket. ``async with HttpServer(...)``
    does both.
    """

    def __init__(
        self,
        app: ASGIApp,
        host: str = LOOPBACK,
        port: int = 0,
        *,
        sock: socket.socket | None = None,
        header_timeout: float = HEADER_TIMEOUT_SECONDS,
        body_timeout: float = BODY_TIMEOUT_SECONDS,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.app = app
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.max_connections = max_connections
        self.host = host
        self.requested_port = port
        self._socket: socket.socket | None = sock
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        if self._socket is None:
            raise RuntimeError("the server is not started")
        return int(self._socket.getsockname()[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("the server is already started")
        if self._socket is None:
            self._socket = listen(self.host, self.requested_port)
        sock = self._socket
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
            http=guarded_protocol(self.header_timeout, self.body_timeout),
            limit_concurrency=self.max_connections,
        )
        self._server = _Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                await self._task  # raises what made startup fail
                raise RuntimeError("the HTTP server exited during startup")
            await asyncio.sleep(0.01)

    async def wait(self) -> None:
        """Until the server exits (``should_exit`` set, or :meth:`stop`)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        try:
            await self._task
        finally:
            if self._socket is not None:
                self._socket.close()

    async def __aenter__(self) -> HttpServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def serve_http(
    apollo: Apollo,
    settings: Settings,
    metrics: Metrics | None,
    *,
    ready: asyncio.Event | None = None,
    sock: socket.socket | None = None,
    broker: BrokerLink | None = None,
) -> None:
    """Serve the API on ``bind_host(settings.http_host, settings.api_tokens)`` and
    ``settings.http_port`` (or on ``sock``, bound there beforehand with :func:`listen`)
    until cancelled, then shut down gracefully and re-raise. ``broker``: the service's
    RabbitMQ bus, whose connection ``/health`` and ``/metrics`` report."""
    tokens = settings.api_tokens
    # As many commands at once as the store has pooled connections: the rest queue.
    app = create_app(
        apollo,
        tokens=tokens,
        metrics=metrics,
        request_timeout=settings.request_timeout,
        admission=Admission(settings.pool_max),
        broker=broker,
    )
    host = bind_host(settings.http_host, tokens)
    warning = host_overridden(settings.http_host, tokens)
    if sock is None and warning is not None:  # with ``sock``, whoever bound it said so
        logger.warning(warning)
    server = HttpServer(
        app,
        host,
        settings.http_port,
        sock=sock,
        header_timeout=settings.http_header_timeout,
        body_timeout=settings.http_body_timeout,
        max_connections=settings.http_max_connections,
    )
    try:
        await server.start()
    except BaseException:
        if sock is not None:
            sock.close()
        raise
    if ready is not None:
        ready.set()
    try:
        await server.wait()
    finally:
        await server.stop()


__all__ = [
    "HttpServer",
    "PortUnavailable",
    "bind_host",
    "host_overridden",
    "listen",
    "serve_http",
]
