"""Middleware: request instrumentation for ``/metrics``, the time budget of a request, and
the loopback guard of the no-token mode."""

from __future__ import annotations

import time

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apollo_domain.errors import RequestTimeout

from ...budget import request_budget
from ...error_policy import message_of, rule_for
from ...metrics import Metrics
from ...wire.codec import encode_json
from .errors import error_response

_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})


class Instrumentation:
    """Counts every HTTP request by method, route template and status. A request no route
    serves (404 no such path, 405 no such method on it, or refused before routing) counts
    under ``unmatched``, so a scan of random paths cannot blow up the label set.

    It must be the outermost middleware, so that what the others refuse is counted too."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            template = _template(scope)
            method = scope["method"] if scope["method"] in _METHODS else "OTHER"
            self.metrics.observe_http(method, template, status, time.perf_counter() - started)


def _template(scope: Scope) -> str:
    """The path template of the route that served the request, else ``unmatched`` (the
    router also records a route matched by path only, whose method it then refuses)."""
    route = scope.get("route")
    if not isinstance(route, BaseRoute):
        return "unmatched"
    match, _ = route.matches(scope)
    path = getattr(route, "path", None)
    return path if match is Match.FULL and isinstance(path, str) else "unmatched"


#: What the answer to a request over its time budget suggests: try again after this many
#: seconds.
RETRY_AFTER_SECONDS = 1


class RequestBudget:
    """Each request is carried out within ``seconds`` (``APOLLO_REQUEST_TIMEOUT``), not
    counting the time its body takes to arrive (the upload has a timeout of its own), else
    it is cancelled, its unit of work rolls back, and the answer is 503 ``request_timeout``
    with ``Retry-After`` (:mod:`apollo_app.budget`). A response already under way when the
    budget runs out cannot be replaced: its connection is closed instead."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        responding = False
        body_pending = True  # until the last chunk of the body has arrived

        async def sending(message: Message) -> None:
            nonlocal responding
            responding = responding or message["type"] == "http.response.start"
            await send(message)

        try:
            async with request_budget(self.seconds) as budget:

                async def receiving() -> Message:
                    nonlocal body_pending
                    if not body_pending:
                        return await receive()
                    budget.pause()
                    message = await receive()
                    if message["type"] != "http.request" or not message.get("more_body"):
                        body_pending = False
                        budget.restart()
                    return message

                await self.app(scope, receiving, sending)
        except RequestTimeout as exc:
            if responding:
                raise
            rule = rule_for(exc)
            headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
            response = error_response(rule.http_status, rule.name, message_of(exc), None, headers)
            await response(scope, receive, send)


LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})


def _host_name(value: str) -> str:
    """``host[:port]`` → host, lowercased (IPv6 literals keep their brackets)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value.split("]", 1)[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class LoopbackOnly:
    """Without tokens nobody is authenticated, so the API answers only this machine's own
    callers: a ``Host`` that is not a loopback name (DNS rebinding) or an ``Origin`` that is
    not a loopback page (a cross-site request from a browser) is refused with 403."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        problem = None
        host = headers.get("host")
        if host is not None and _host_name(host) not in LOOPBACK_HOSTS:
            problem = f"host {host!r} is not this machine; without tokens Apollo is loopback-only"
        origin = headers.get("origin")
        if origin is not None and origin != "null":
            origin_host = origin.split("://", 1)[-1].split("/", 1)[0]
            if _host_name(origin_host) not in LOOPBACK_HOSTS:
                problem = f"cross-site requests from {origin!r} are refused"
        elif origin == "null":
            problem = "requests from opaque origins are refused"
        if problem is None:
            await self.app(scope, receive, send)
            return
        body = encode_json({"error": {"type": "forbidden", "message": problem, "field": None}})
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


__all__ = [
    "LOOPBACK_HOSTS",
    "RETRY_AFTER_SECONDS",
    "Instrumentation",
    "LoopbackOnly",
    "RequestBudget",
]
