"""``apollo serve``: the store, the bus, the service actors and the HTTP API in one process."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import signal
import socket
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from apollo_domain.errors import ApolloError, ConfigurationError
from apollo_domain.ports.messaging import BrokerLink

from ... import bootstrap
from ...facade import Apollo
from ...logs import configure_logging
from ...settings import Settings
from .consumers import ApolloService

if TYPE_CHECKING:
    from ...metrics import Metrics

log = logging.getLogger("apollo.service")


def http_enabled(settings: Settings) -> bool:
    """Whether ``apollo serve`` runs the HTTP API (``settings.http_enabled``, default on)."""
    return settings.http_enabled


def _make_metrics() -> Metrics | None:
    if importlib.util.find_spec("apollo_app.metrics") is None:
        return None
    from ...metrics import Metrics

    return Metrics()


async def run_service(
    settings: Settings | None = None, *, stop: asyncio.Event | None = None
) -> None:
    """``apollo serve``: open the store and the bus, run the consumers, the periodic actors
    and the HTTP API until SIGINT/SIGTERM (or ``stop``), then shut down gracefully."""
    settings = settings or Settings.from_env()
    topology = bootstrap.topology_of(settings)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    handled: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)
    metrics = _make_metrics()
    try:
        # Bound before anything starts: a busy port fails fast and nothing says "running".
        with _http_socket(settings) as sock:
            async with Apollo.open(settings) as apollo:
                if metrics is not None and settings.read_database_url is not None:
                    metrics.watch_replica(apollo.deps.store)
                bus = await bootstrap.open_bus(settings, topology)
                try:
                    service = ApolloService(apollo, bus, settings, metrics, topology=topology)
                    await service.start()
                    try:
                        broker = bus if isinstance(bus, BrokerLink) else None
                        await _serve_until(stop, apollo, settings, metrics, sock, broker)
                    finally:
                        await service.stop()
                finally:
                    await bus.close()
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


def _serves_http(settings: Settings) -> bool:
    return (
        http_enabled(settings)
        and importlib.util.find_spec("apollo_app.entrypoints.http") is not None
    )


@contextlib.contextmanager
def _http_socket(settings: Settings) -> Iterator[socket.socket | None]:
    """The HTTP API's listening socket (None when the API is off), closed on the way out.

    Raises ``PortUnavailable`` when the port is busy."""
    if not _serves_http(settings):
        yield None
        return
    from ..http import bind_host, host_overridden, listen

    warning = host_overridden(settings.http_host, settings.api_tokens)
    if warning is not None:
        log.warning(warning)
    sock = listen(bind_host(settings.http_host, settings.api_tokens), settings.http_port)
    with sock:
        yield sock


async def _serve_until(
    stop: asyncio.Event,
    apollo: Apollo,
    settings: Settings,
    metrics: Metrics | None,
    sock: socket.socket | None,
    broker: BrokerLink | None = None,
) -> None:
    waiting = asyncio.ensure_future(stop.wait())
    tasks: set[asyncio.Future[Any]] = {waiting}
    http: asyncio.Task[None] | None = None
    if sock is not None:
        from ..http import serve_http

        ready = asyncio.Event()
        http = asyncio.ensure_future(
            serve_http(apollo, settings, metrics, ready=ready, sock=sock, broker=broker)
        )
        tasks.add(http)
        started = asyncio.ensure_future(ready.wait())
        await asyncio.wait({started, http}, return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
        if not ready.is_set():  # the HTTP server failed before it served: say why
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
            http.result()
            raise RuntimeError("the HTTP server stopped before it started")
    log.info(
        "Apollo service running: %s; bus: %s; store: %s",
        _http_address(settings) if http is not None else "HTTP API disabled",
        "RabbitMQ" if settings.amqp_url else "in-process",
        "PostgreSQL at APOLLO_DATABASE_URL"
        if settings.database_url
        else f"embedded PostgreSQL in {settings.data_dir}",
    )
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if http is not None and http in done:
            http.result()  # an HTTP server that failed takes the service down with it
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    log.info("shutting down")


def _http_address(settings: Settings) -> str:
    from ..http import bind_host

    host = bind_host(settings.http_host, settings.api_tokens)
    note = "" if settings.api_tokens else " (no APOLLO_API_TOKENS: loopback only, anonymous)"
    return f"HTTP API on http://{host}:{settings.http_port}/api/apollo/{note}"


def main() -> int:
    """``python -m apollo_app.service``: run the service with settings from the environment."""
    configure_logging()
    try:
        settings = Settings.from_env()
    except ConfigurationError as exc:
        log.error("invalid settings: %s", exc)
        return 2
    configure_logging(settings.secrets)
    try:
        asyncio.run(run_service(settings))
    except KeyboardInterrupt:
        pass
    except ApolloError as exc:
        log.error("%s: %s", type(exc).__name__, exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["http_enabled", "main", "run_service"]
