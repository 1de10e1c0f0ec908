"""MCP over streamable HTTP at ``/mcp``, in the HTTP API's process and on its port.

Stateless: every POST is served on its own, so several ``apollo serve`` processes behind a
load balancer serve one client. Identity is the HTTP API's: the bearer token of each
request names the principal, its role and its agent (``APOLLO_API_TOKENS``); without a
valid token once tokens are configured the answer is 401 with ``WWW-Authenticate`` naming
the protected-resource metadata (RFC 9728) at ``/.well-known/oauth-protected-resource/mcp``;
without tokens the whole application answers loopback callers only, with the same Host and
Origin checks as the API. A body over the ``MESSAGE`` bound is refused (413) before it is
read whole.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import INVALID_REQUEST
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Receive, Scope, Send

from apollo_domain.bounds import MESSAGE
from apollo_domain.handlers import handle
from apollo_domain.model import Principal
from apollo_domain.services import Caller
from apollo_domain.services.write_rate import charge_write

from ...facade import Apollo
from ...metrics import Metrics
from ...wire.codec import DuplicateKey, encode_json, refuse_duplicate_keys
from ..http.auth import Authenticator, Unauthorized
from ..http.errors import JSON, error_body, retry_after_header
from ..http.operations import HTTP_AGENT
from .server import RETRY_AFTER_SCOPE, ApolloMcp
from .tools import mcp_actions, tools_of

PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource" + PATH
#: The edge an MCP call is recorded as coming from (``submitted_from``).
EDGE = "mcp"
_PRINCIPAL = "apollo.principal"
#: What a request that asks for progress notifications carries (in ``params._meta``).
_PROGRESS = b'"progressToken"'


def http_caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
    """The caller of an MCP request over HTTP: the principal its bearer token names (put in
    the request's scope by :class:`McpHttp`), acting as the token's agent. An anonymous
    caller (no tokens configured) is the HTTP API's one anonymous source."""
    request = ctx.request
    principal = request.scope.get(_PRINCIPAL) if isinstance(request, Request) else None
    if not isinstance(principal, Principal):
        raise RuntimeError("an MCP request reached Apollo without its principal")
    return Caller.of(principal.agent or principal.id or HTTP_AGENT, principal, edge=EDGE)


class McpHttp:
    """The ``/mcp`` endpoint and its metadata route. Each request is served by a session
    manager of its own (stateless: there is nothing to share between requests), so the
    endpoint needs no lifespan from the application that mounts it."""

    def __init__(
        self,
        apollo: Apollo,
        auth: Authenticator,
        *,
        admission: Callable[[], AbstractAsyncContextManager[None]] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        async def run(caller: Caller, command: Any, key: str | None) -> Any:
            return await handle(apollo.deps, caller, command, idempotency_key=key)

        async def charge(caller: Caller, cost: int) -> None:
            await charge_write(apollo.deps, caller, cost)

        self.edge = ApolloMcp(
            tools_of(mcp_actions()),
            run,
            http_caller,
            admission=admission,
            metrics=metrics,
            charge=charge,
        )
        self.auth = auth
        self.server = self.edge.server()

    def routes(self) -> list[BaseRoute]:
        return [
            # Stateless: no stream to GET, no session to DELETE (405, as the protocol asks).
            Route(PATH, self, methods=["POST"]),
            Route(METADATA_PATH, self.metadata, methods=["GET"]),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            principal = self.auth.principal(request)
            if self.auth.configured and principal.id is None:
                raise Unauthorized("a bearer token is required")
        except Unauthorized as exc:
            response = Response(
                encode_json(error_body("unauthorized", exc.message)),
                status_code=401,
                media_type=JSON,
                headers={"WWW-Authenticate": self.challenge(request, exc)},
            )
            await response(scope, receive, send)
            return
        scope[_PRINCIPAL] = principal
        body = await _body(request)
        if body is None:
            await _too_large()(scope, receive, send)
            return
        try:  # the SDK's parser would keep the last of two values for one key: refuse both
            refuse_duplicate_keys(body)
        except DuplicateKey as exc:
            await _invalid(f"body: {exc}")(scope, receive, send)
            return
        # Progress notifications need a stream; any other answer is one JSON body.
        manager = StreamableHTTPSessionManager(
            app=self.server,
            stateless=True,
            max_request_body_size=MESSAGE.limit,
            json_response=_PROGRESS not in body,
        )
        async with manager.run():
            await manager.handle_request(scope, _replay(body, receive), _limited(scope, send))

    def challenge(self, request: Request, exc: Unauthorized) -> str:
        """``WWW-Authenticate`` of a 401: the bearer scheme, why, and where the
        protected-resource metadata is."""
        kind = "invalid_token" if request.headers.get("authorization") else "invalid_request"
        reason = exc.message.replace('"', "'")
        return (
            f'Bearer error="{kind}", error_description="{reason}", '
            f'resource_metadata="{_origin(request)}{METADATA_PATH}"'
        )

    async def metadata(self, request: Request) -> Response:
        """The protected-resource metadata of ``/mcp`` (RFC 9728). Apollo's tokens are
        issued by its operator (``APOLLO_API_TOKENS``), not by an OAuth authorization
        server, so none is listed: a client sends its token as a bearer header."""
        document = {
            "resource": f"{_origin(request)}{PATH}",
            "bearer_methods_supported": ["header"],
            "resource_name": "Apollo",
        }
        return Response(encode_json(document), media_type=JSON)


async def _body(request: Request) -> bytes | None:
    """The request's body, or None past the ``MESSAGE`` bound (refused before it is read
    whole: a declared length over it is not read at all)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MESSAGE.limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MESSAGE.limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` that hands over ``body`` first, as the transport reads it."""
    pending = True

    async def replayed() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _limited(scope: Scope, send: Send) -> Send:
    """``send`` that answers 429 with ``Retry-After`` (whole seconds, rounded up) when the
    call was refused for its principal's write rate (:data:`RETRY_AFTER_SCOPE`), its
    JSON-RPC error in the body. A streamed answer has begun before any tool ran: it keeps
    its status, and the error in the stream says the same."""

    async def sending(message: Message) -> None:
        wait = scope.get(RETRY_AFTER_SCOPE)
        if message["type"] == "http.response.start" and isinstance(wait, int | float):
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"retry-after"]
            headers.append((b"retry-after", retry_after_header(wait).encode()))
            message = {**message, "status": 429, "headers": headers}
        await send(message)

    return sending


def _too_large() -> Response:
    message = f"request bodies are limited to {MESSAGE.limit:,} bytes ({MESSAGE.name})"
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}}
    return Response(encode_json(error), status_code=413, media_type=JSON)


def _invalid(message: str) -> Response:
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}}
    return Response(encode_json(error), status_code=400, media_type=JSON)


def _origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}"


__all__ = ["EDGE", "METADATA_PATH", "PATH", "McpHttp", "http_caller"]
