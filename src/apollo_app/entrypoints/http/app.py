"""The Starlette application: each route decodes its inputs into a command, hands it to the
handler table and shows the result, as the operation table says."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from apollo_domain import commands as c
from apollo_domain.bounds import MESSAGE
from apollo_domain.causal import causal_scope
from apollo_domain.errors import ApolloError, ValidationError
from apollo_domain.handlers import handle
from apollo_domain.ports.messaging import BrokerLink
from apollo_domain.services import Caller

from ...facade import Apollo
from ...metrics import Metrics
from ...wire.codec import decode_json, encode_json, json_type, make_converter
from ...wire.envelope import structure
from .admission import Admission
from .auth import UNAUTHORIZED_HEADERS, Authenticator, Unauthorized
from .console_app import console_routes
from .errors import JSON, error_response, http_error, map_error, server_error
from .headers import (
    CAUSAL_TOKEN_HEADER,
    IDEMPOTENCY_KEY_HEADER,
    MAX_IDEMPOTENCY_KEY,
    idempotency_key,
)
from .middleware import Instrumentation, LoopbackOnly, RequestBudget
from .openapi import openapi_document
from .operations import HTTP_AGENT, OPERATIONS, Call, Operation

logger = logging.getLogger("apollo.http")
#: The ``MESSAGE`` bound: a larger body is refused (413) before it is parsed.
MAX_BODY_BYTES = MESSAGE.limit
#: Commands served at once when no admission is given: the default connection pool's size.
DEFAULT_CAPACITY = 10


class _TooLarge(Exception):
    pass


class _NotJson(Exception):
    pass


def _require_json(request: Request) -> None:
    """A body must be declared JSON: a browser cannot send that cross-site without a CORS
    preflight, which Apollo never grants."""
    declared = request.headers.get("content-type", "")
    media_type = declared.split(";", 1)[0].strip().lower()
    if media_type != JSON:
        raise _NotJson(f"request bodies must be {JSON}, got {media_type or 'none'}")


async def _read_body(request: Request) -> bytes:
    """The body, refusing (:class:`_TooLarge`) more than :data:`MAX_BODY_BYTES`."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _query_value(attribute: attrs.Attribute, raw: str) -> Any:  # type: ignore[type-arg]
    """A query-string value as its field's type (numbers parsed, everything else text)."""
    kind = attribute.type
    try:
        if kind is int:
            return int(raw)
        if kind is float:
            return float(raw)
    except ValueError:
        noun = "an integer" if kind is int else "a number"
        raise ValidationError(attribute.name, f"must be {noun}, got {raw!r}") from None
    return raw


async def _inputs(op: Operation, request: Request) -> dict[str, Any]:
    """What the caller sent for the operation's inputs: the JSON body, or the query string."""
    accepted = {a.name: a for a in op.inputs()}
    if not op.reads_body:
        data: dict[str, Any] = {}
        for name, raw in request.query_params.items():
            attribute = accepted.get(name)
            if attribute is None:
                raise ValidationError(name, "unknown query parameter")
            data[name] = _query_value(attribute, raw)
        return data
    unknown = sorted(request.query_params)
    if unknown:
        raise ValidationError(unknown[0], "unknown query parameter")
    received = await _read_body(request)
    if not received:
        return {}  # no body at all means {}
    _require_json(request)
    body = decode_json(received)  # no body at all means {}
    if not isinstance(body, dict):
        raise ValidationError("body", f"must be a JSON object, got {json_type(body)}")
    aliases = op.aliases()
    extra = sorted(set(body) - set(accepted) - set(aliases))
    if extra:
        listed = ", ".join(repr(name) for name in extra)
        raise ValidationError(extra[0], f"unknown field{'s' if len(extra) > 1 else ''} {listed}")
    return c.unalias(op.command, body) if op.command is not None and aliases else body


def _command(op: Operation, call: Call, data: Mapping[str, Any]) -> c.Command[Any]:
    assert op.command is not None
    merged: dict[str, Any] = dict(data)
    merged.update(
        {target: call.request.path_params[name] for name, target in op.path_fields.items()}
    )
    if op.fill is not None:
        merged.update(op.fill(call))
    kind = op.choose(merged) if op.choose is not None else op.command
    known = attrs.fields_dict(kind)
    merged = {name: value for name, value in merged.items() if name in known}
    command: c.Command[Any] = structure(call.converter, merged, kind)
    return command


def _endpoint(
    op: Operation,
    apollo: Apollo,
    auth: Authenticator,
    metrics: Metrics | None,
    converter: Any,
    admission: Admission,
    broker: BrokerLink | None,
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        principal = auth.principal(request)
        if op.command is not None and auth.configured and principal.id is None:
            raise Unauthorized("a bearer token is required")
        data = await _inputs(op, request)
        call = Call(request, apollo, metrics, principal, converter)
        headers: dict[str, str] = {}
        if op.command is None:
            status, payload = await _health(apollo, broker)
        else:
            command = _command(op, call, data)
            caller = Caller.of(
                principal.agent or principal.id or HTTP_AGENT, principal, edge=HTTP_AGENT
            )
            started = time.perf_counter()
            key = idempotency_key(request, command)
            with causal_scope(request.headers.get(CAUSAL_TOKEN_HEADER)) as scope:
                async with admission.admitted():
                    result = await handle(apollo.deps, caller, command, idempotency_key=key)
            if metrics is not None:
                metrics.observe_command(command, result, time.perf_counter() - started)
            status, payload = op.present(call, result)
            if scope.token is not None:
                headers[CAUSAL_TOKEN_HEADER] = scope.token
        return Response(encode_json(payload), status_code=status, media_type=JSON, headers=headers)

    return endpoint


def _too_large(request: Request, exc: Exception) -> Response:
    return error_response(
        413,
        "payload_too_large",
        f"request bodies are limited to {MAX_BODY_BYTES:,} bytes ({MESSAGE.name})",
        MESSAGE.field,
    )


def _unauthorized(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Unauthorized)
    return error_response(401, "unauthorized", exc.message, headers=UNAUTHORIZED_HEADERS)


def _not_json(request: Request, exc: Exception) -> Response:
    return error_response(415, "unsupported_media_type", str(exc))


def _apollo_error(request: Request, exc: Exception) -> Response:
    return map_error(exc)


def _gone(request: Request, exc: Exception) -> Response:
    """Nobody is left to answer: one line, no traceback (499: client closed request)."""
    client = request.client
    peer = f"{client.host}:{client.port}" if client else "a client"
    logger.info("%s went away before its request to %s was read", peer, request.url.path)
    return Response(status_code=499)


#: What every route's errors are answered with, in one place (Starlette looks each raised
#: exception up here, most specific class first). Anything else is a server fault: 500
#: ``internal`` without its text, and the server logs it with its traceback.
EXCEPTION_HANDLERS: Mapping[Any, Callable[[Request, Exception], Response | Awaitable[Response]]] = {
    _TooLarge: _too_large,
    _NotJson: _not_json,
    Unauthorized: _unauthorized,
    ApolloError: _apollo_error,
    ClientDisconnect: _gone,
    HTTPException: http_error,
    Exception: server_error,
}


async def _health(apollo: Apollo, broker: BrokerLink | None) -> tuple[int, Any]:
    health = await apollo.health()
    body: dict[str, Any] = {"status": health.status, "data_available": health.data_available}
    if broker is not None:
        body["bus"] = "ok" if broker.connected else "degraded"
        if not broker.connected:
            body["status"] = "degraded"  # no work arrives: a load balancer should look away
    return (200 if body["status"] == "ok" else 503), body


def create_app(
    apollo: Apollo,
    *,
    tokens: Mapping[str, str] | None = None,
    metrics: Metrics | None = None,
    request_timeout: float | None = None,
    admission: Admission | None = None,
    broker: BrokerLink | None = None,
) -> Starlette:
    """The Starlette application of Apollo's HTTP API (``/api/apollo/...``, ``/metrics``,
    ``/openapi.json``), of MCP over streamable HTTP (``/mcp``) and of the console (``/``
    and ``/console/...``, static files outside the API document). ``tokens`` maps bearer
    tokens to principal ids; a request not carried out within ``request_timeout`` seconds
    (None: no budget) is answered with 503. Every command waits for ``admission``
    (default: :data:`DEFAULT_CAPACITY` at once); health does not. With ``broker`` (the
    service's RabbitMQ bus), health is degraded while it has no connection, and
    ``/metrics`` shows the connection's state."""
    converter = make_converter(forbid_extra_keys=False, round_scores=True)
    admission = admission or Admission(DEFAULT_CAPACITY)
    if metrics is not None and broker is not None:
        metrics.watch_broker(broker)
    if metrics is not None:
        metrics.watch_write_budget(apollo.deps.write_budget)
    auth = Authenticator(tokens)
    document = encode_json(openapi_document())
    routes: list[BaseRoute] = [
        Route(
            op.full_path,
            _endpoint(op, apollo, auth, metrics, converter, admission, broker),
            methods=[op.method],
        )
        for op in OPERATIONS
    ]

    async def openapi(request: Request) -> Response:
        return Response(document, media_type=JSON)

    async def exposition(request: Request) -> Response:
        """The counters are the whole store's (private writes included): with tokens, an
        admin's only."""
        principal = auth.principal(request)
        if auth.configured and principal.id is None:
            raise Unauthorized("a bearer token is required")
        if auth.configured and not principal.role.administers:
            return error_response(403, "forbidden", "the metrics are an admin's")
        if metrics is None:
            return error_response(404, "not_found", "metrics are not enabled")
        try:
            async with apollo.store.unit_of_work() as uow:
                metrics.set_queue_depth("outbox", await uow.outbox.pending())
        except ApolloError as exc:
            logger.warning("outbox depth unavailable: %s", exc)
        payload, content_type = metrics.render()
        return Response(payload, media_type=content_type)

    routes.append(Route("/openapi.json", openapi, methods=["GET"]))
    routes.append(Route("/metrics", exposition, methods=["GET"]))
    from ..mcp.http import McpHttp  # here: the MCP edge reads this package's tables

    mcp = McpHttp(apollo, auth, admission=admission.admitted, metrics=metrics)
    routes.extend(mcp.routes())
    routes.extend(console_routes())
    # Instrumentation first (outermost), so it counts what LoopbackOnly refuses too.
    middleware = [Middleware(Instrumentation, metrics=metrics)] if metrics is not None else []
    if request_timeout is not None:
        middleware.append(Middleware(RequestBudget, seconds=request_timeout))
    if not auth.configured:  # no authentication: only this machine's own pages and tools
        middleware.append(Middleware(LoopbackOnly))
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers=dict(EXCEPTION_HANDLERS),
    )


__all__ = [
    "CAUSAL_TOKEN_HEADER",
    "IDEMPOTENCY_KEY_HEADER",
    "MAX_BODY_BYTES",
    "MAX_IDEMPOTENCY_KEY",
    "create_app",
    "idempotency_key",
]
