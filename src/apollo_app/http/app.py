"""The HTTP API: one table of operations drives both the Starlette routes and the OpenAPI
document, so the two cannot drift apart."""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import cattrs
from attrs import NOTHING, frozen
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apollo_domain.errors import (
    ApolloError,
    Conflict,
    EmbeddingError,
    InvalidTransition,
    NotFound,
    PersistenceFailed,
    StoreUnavailable,
    TransportError,
    UnknownResolution,
    ValidationError,
)
from apollo_domain.expertise import DomainCoverage
from apollo_domain.model import Entry, Outcome, Principal, Status
from apollo_domain.ports import ExpertiseRecord
from apollo_domain.results import (
    AgentProfile,
    IngestResult,
    LifecycleResult,
    MaintenanceResult,
    QueryResult,
    RelatedEntry,
)

from ..facade import Apollo, Client
from ..metrics import Metrics
from ..serialization import decode_json, encode_json, make_converter
from .bodies import (
    ArchiveStaleBody,
    DecayBody,
    DeprecateBody,
    IngestBody,
    QueryBody,
    ResolveBody,
    RetrieveBody,
    TraverseBody,
    structure_body,
)
from .schema import ERROR_SCHEMA, JsonSchema, SchemaBook

logger = logging.getLogger("apollo.http")

PREFIX = "/api/apollo"
MAX_BODY_BYTES = 2 * 1024 * 1024
HTTP_AGENT = "http"
JSON = "application/json"


# --------------------------------------------------------------------------- errors


def error_body(kind: str, message: str, field_name: str | None = None) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message, "field": field_name}}


def error_response(
    status: int,
    kind: str,
    message: str,
    field_name: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    return Response(
        encode_json(error_body(kind, message, field_name)),
        status_code=status,
        media_type=JSON,
        headers=dict(headers or {}),
    )


def map_error(exc: ApolloError) -> Response:
    """Apollo's error hierarchy → status code and the one error shape (order matters:
    :class:`UnknownResolution` is an :class:`InvalidTransition`)."""
    if isinstance(exc, ValidationError):
        return error_response(400, "validation_error", exc.message, exc.field)
    if isinstance(exc, UnknownResolution):
        return error_response(400, "unknown_resolution", str(exc), "resolution")
    if isinstance(exc, NotFound):
        return error_response(404, "not_found", str(exc))
    if isinstance(exc, InvalidTransition):
        return error_response(409, "invalid_transition", str(exc))
    if isinstance(exc, Conflict):
        return error_response(409, "conflict", str(exc))
    if isinstance(exc, StoreUnavailable):
        return error_response(503, "store_unavailable", str(exc))
    if isinstance(exc, EmbeddingError):
        return error_response(503, "embedding_unavailable", str(exc))
    if isinstance(exc, TransportError):
        return error_response(503, "transport_unavailable", str(exc))
    if isinstance(exc, PersistenceFailed):
        return error_response(500, "persistence_failed", str(exc))
    logger.error("unmapped Apollo error", exc_info=exc)
    return error_response(500, "internal_error", "internal error")


class _Unauthorized(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --------------------------------------------------------------------------- operations


@frozen
class Call:
    """One request as a handler sees it."""

    request: Request
    apollo: Apollo
    metrics: Metrics | None
    principal: Principal
    body: Any
    converter: cattrs.Converter

    def client(self, agent_id: str | None = None) -> Client:
        """Authorship from the body's ``agent_id``, else the principal, else ``http``."""
        agent = agent_id if agent_id and agent_id.strip() else None
        return self.apollo.client(
            agent_id=agent or self.principal.id or HTTP_AGENT, principal=self.principal
        )

    def path(self, name: str) -> str:
        return str(self.request.path_params[name])

    def out(self, value: Any) -> Any:
        return self.converter.unstructure(value)


Handler = Callable[[Call], Awaitable[tuple[int, Any]]]


@frozen
class Param:
    name: str
    location: str  # "path" | "query"
    schema: JsonSchema
    description: str
    required: bool = True


@frozen
class Operation:
    method: str
    path: str
    operation_id: str
    summary: str
    handler: Handler
    responses: Mapping[int, tuple[str, Any]]  # status → (description, type or schema or None)
    body: type[Any] | None = None
    params: tuple[Param, ...] = ()
    tag: str = "knowledge"
    authenticated: bool = False  # needs a token when tokens are configured
    errors: tuple[int, ...] = ()  # documented error statuses (401 always is)


def _query_number(call: Call, name: str, default: float) -> float:
    raw = call.request.query_params.get(name)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValidationError(name, f"must be a number, got {raw!r}") from None


def _query_int(call: Call, name: str, default: int) -> int:
    raw = call.request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValidationError(name, f"must be an integer, got {raw!r}") from None


# --------------------------------------------------------------------------- handlers


async def _health(call: Call) -> tuple[int, Any]:
    health = await call.apollo.health()
    body = {"status": health.status, "data_available": health.data_available}
    return (200 if health.status == "ok" else 503), body


async def _ingest(call: Call) -> tuple[int, Any]:
    body: IngestBody = call.body
    options: dict[str, Any] = {
        name: value
        for name, value in {
            "content_type": body.content_type,
            "tags": body.tags,
            "context": body.context,
            "source_provider": body.source_provider,
            "source_channel": body.source_channel,
            "knowledge_domain": body.knowledge_domain,
            "access_scope": body.access_scope,
        }.items()
        if value is not None
    }
    result = await call.client(body.agent_id).store_knowledge(
        body.content,
        submitted_by=call.principal.id,
        submitted_from=HTTP_AGENT,
        **options,
    )
    if call.metrics is not None:
        call.metrics.observe_ingest(result.outcome)
    if result.outcome is Outcome.REJECTED:
        return 422, error_body("rejected", result.reason or "rejected")
    return 201, call.out(result)


async def _timed_query(call: Call, run: Callable[[], Awaitable[QueryResult]]) -> tuple[int, Any]:
    started = time.perf_counter()
    result = await run()
    if call.metrics is not None:
        call.metrics.observe_query(time.perf_counter() - started)
    return 200, call.out(result)


async def _query(call: Call) -> tuple[int, Any]:
    body: QueryBody = call.body
    client = call.client(body.agent_id)
    return await _timed_query(
        call,
        lambda: client.query_knowledge(
            body.query,
            min_confidence=body.min_confidence,
            limit=body.limit,
            status=body.status,
            tags=body.tags,
            knowledge_domain=body.knowledge_domain,
            min_similarity=body.min_similarity,
        ),
    )


async def _retrieve(call: Call) -> tuple[int, Any]:
    body: RetrieveBody = call.body
    client = call.client(body.agent_id)
    return await _timed_query(
        call,
        lambda: client.retrieve(
            body.query,
            limit=body.limit,
            min_confidence=body.min_confidence,
            tags=body.tags,
            knowledge_domain=body.knowledge_domain,
            min_similarity=body.min_similarity,
        ),
    )


async def _traverse(call: Call) -> tuple[int, Any]:
    body: TraverseBody = call.body
    related = await call.client(body.agent_id).related_entries(
        body.entry_id, depth=body.depth, relation_types=body.relation_types
    )
    return 200, {"related": call.out(related)}


async def _entry(call: Call) -> tuple[int, Any]:
    entry = await call.apollo.get_entry(call.path("entry_id"), principal=call.principal)
    data = call.out(entry)
    data.pop("embedding", None)
    return 200, data


async def _deprecate(call: Call) -> tuple[int, Any]:
    body: DeprecateBody = call.body
    result = await call.client(body.agent_id).deprecate_entry(call.path("entry_id"), body.reason)
    return 200, call.out(result)


async def _resolve(call: Call) -> tuple[int, Any]:
    body: ResolveBody = call.body
    result = await call.client(body.agent_id).resolve_dispute(
        call.path("entry_id"), body.resolution
    )
    return 200, call.out(result)


async def _expertise(call: Call) -> tuple[int, Any]:
    floor = _query_number(call, "min_proficiency", 0.0)
    agents = await call.client().get_expertise(call.path("domain"), floor)
    return 200, {"agents": call.out(agents)}


async def _at_risk(call: Call) -> tuple[int, Any]:
    threshold = _query_int(call, "min_agents", 2)
    domains = await call.client().domains_at_risk(threshold)
    return 200, {"domains": call.out(domains)}


async def _profile(call: Call) -> tuple[int, Any]:
    profile = await call.client().agent_profile(call.path("agent_id"))
    return 200, call.out(profile)


def _observe_maintenance(call: Call, result: MaintenanceResult) -> None:
    if call.metrics is None:
        return
    decayed = result.affected if result.action in ("decay", "force_decay") else 0
    call.metrics.observe_maintenance(decayed=decayed, archived=result.archived)


async def _decay(call: Call) -> tuple[int, Any]:
    body: DecayBody = call.body
    if body.factor is None:
        result = await call.apollo.run_decay_cycle()
    else:
        result = await call.client().force_decay(body.factor)
    _observe_maintenance(call, result)
    return 200, call.out(result)


async def _archive_stale(call: Call) -> tuple[int, Any]:
    body: ArchiveStaleBody = call.body
    try:
        result = await call.client().archive_stale(body.days)
    except OverflowError:  # a cutoff before year 1: reported as input, not a server fault
        raise ValidationError("days", f"is too large, got {body.days!r}") from None
    _observe_maintenance(call, result)
    return 200, call.out(result)


async def _stats(call: Call) -> tuple[int, Any]:
    stats = await call.apollo.stats(call.principal)
    by_status = {status.value: 0 for status in Status}
    by_status.update({str(k): int(v) for k, v in stats.by_status.items()})
    by_status["active"] = sum(by_status[s.value] for s in Status if s.is_active)
    return 200, {
        "total": stats.total,
        "last_24h": stats.last_24h,
        "average_confidence": round(stats.average_confidence, 3),
        "by_status": by_status,
        "by_content_type": {str(k): int(v) for k, v in stats.by_content_type.items()},
        "total_relations": stats.total_relations,
    }


# --------------------------------------------------------------------------- response schemas

_HEALTH_SCHEMA: JsonSchema = {
    "type": "object",
    "required": ["status", "data_available"],
    "properties": {
        "status": {"type": "string", "enum": ["ok", "degraded"]},
        "data_available": {"type": "boolean"},
    },
}
_COUNTS: JsonSchema = {"type": "object", "additionalProperties": {"type": "integer"}}
_STATS_SCHEMA: JsonSchema = {
    "type": "object",
    "required": [
        "total",
        "last_24h",
        "average_confidence",
        "by_status",
        "by_content_type",
        "total_relations",
    ],
    "properties": {
        "total": {"type": "integer"},
        "last_24h": {"type": "integer"},
        "average_confidence": {"type": "number"},
        "by_status": {
            **_COUNTS,
            "required": ["active", *(s.value for s in Status)],
        },
        "by_content_type": _COUNTS,
        "total_relations": {"type": "integer"},
    },
}


def _op(
    method: str,
    path: str,
    operation_id: str,
    summary: str,
    handler: Handler,
    ok: tuple[int, str, Any],
    *,
    body: type[Any] | None = None,
    params: tuple[Param, ...] = (),
    errors: tuple[int, ...] = (),
    tag: str = "knowledge",
    authenticated: bool = False,
) -> Operation:
    status, description, schema = ok
    return Operation(
        method=method,
        path=PREFIX + path,
        operation_id=operation_id,
        summary=summary,
        handler=handler,
        responses={status: (description, schema)},
        body=body,
        params=params,
        tag=tag,
        authenticated=authenticated,
        errors=errors,
    )


_ENTRY_ID = Param("entry_id", "path", {"type": "string", "format": "uuid"}, "The entry's id.")
_ENTRY_ERRORS = (400, 404)
_WRITE_ERRORS = (400, 500, 503)

OPERATIONS: tuple[Operation, ...] = (
    _op(
        "GET",
        "/health",
        "health",
        "Whether every part of the store can be written (503 when degraded).",
        _health,
        (200, "The store is healthy.", _HEALTH_SCHEMA),
        tag="service",
    ),
    _op(
        "POST",
        "/ingest",
        "ingest",
        "Store knowledge: created, deduplicated or corroborated (201), rejected (422).",
        _ingest,
        (201, "Accepted: created, deduplicated or corroborated.", IngestResult),
        body=IngestBody,
        errors=(*_WRITE_ERRORS, 409, 413, 422),
    ),
    _op(
        "POST",
        "/query",
        "query",
        "Semantic search over visible entries (browse newest first below 3 characters).",
        _query,
        (200, "Matching entries.", QueryResult),
        body=QueryBody,
        errors=(*_WRITE_ERRORS, 413),
    ),
    _op(
        "POST",
        "/retrieve",
        "retrieve",
        "Like query, without access counts or access-log rows.",
        _retrieve,
        (200, "Matching entries.", QueryResult),
        body=RetrieveBody,
        errors=(*_WRITE_ERRORS, 413),
    ),
    _op(
        "POST",
        "/traverse",
        "traverse",
        "Spreading activation over relations from a visible entry.",
        _traverse,
        (200, "Related entries, highest activation first.", ("related", RelatedEntry)),
        body=TraverseBody,
        errors=(*_WRITE_ERRORS, 404, 413),
    ),
    _op(
        "GET",
        "/entries/{entry_id}",
        "get_entry",
        "One entry, when the caller may see it.",
        _entry,
        (200, "The entry (without its embedding).", Entry),
        params=(_ENTRY_ID,),
        errors=(*_ENTRY_ERRORS, 503),
    ),
    _op(
        "POST",
        "/entries/{entry_id}/deprecate",
        "deprecate_entry",
        "Archive an entry with a deprecation reason (repeating it changes nothing).",
        _deprecate,
        (200, "Deprecated; `changed` is false for a repeat.", LifecycleResult),
        body=DeprecateBody,
        params=(_ENTRY_ID,),
        errors=(*_WRITE_ERRORS, 404, 413),
    ),
    _op(
        "POST",
        "/entries/{entry_id}/resolve",
        "resolve_dispute",
        "Resolve a disputed entry: accept/keep confirm it, reject archives it.",
        _resolve,
        (200, "Resolved.", LifecycleResult),
        body=ResolveBody,
        params=(_ENTRY_ID,),
        errors=(*_WRITE_ERRORS, 404, 409, 413),
    ),
    _op(
        "GET",
        "/expertise/at-risk",
        "domains_at_risk",
        "Domains covered by fewer than min_agents agents.",
        _at_risk,
        (200, "Thinnest domains first.", ("domains", DomainCoverage)),
        params=(
            Param(
                "min_agents",
                "query",
                {"type": "integer", "minimum": 1, "default": 2},
                "Coverage threshold.",
                required=False,
            ),
        ),
        errors=(400, 503),
        tag="expertise",
    ),
    _op(
        "GET",
        "/expertise/{domain}",
        "get_expertise",
        "Agents by proficiency in a domain.",
        _expertise,
        (200, "Most proficient first.", ("agents", ExpertiseRecord)),
        params=(
            Param("domain", "path", {"type": "string", "minLength": 1}, "Knowledge domain."),
            Param(
                "min_proficiency",
                "query",
                {"type": "number", "minimum": 0, "maximum": 1, "default": 0},
                "Proficiency floor.",
                required=False,
            ),
        ),
        errors=(400, 404, 503),
        tag="expertise",
    ),
    _op(
        "GET",
        "/agents/{agent_id}/profile",
        "agent_profile",
        "An agent's domains, counts, average confidence and last activity.",
        _profile,
        (200, "The profile.", AgentProfile),
        params=(Param("agent_id", "path", {"type": "string", "minLength": 1}, "Agent id."),),
        errors=(400, 404, 503),
        tag="expertise",
    ),
    _op(
        "POST",
        "/maintenance/decay",
        "decay",
        "With factor: force a decay by that factor; without: run the periodic decay cycle.",
        _decay,
        (200, "Counts of decayed and archived entries.", MaintenanceResult),
        body=DecayBody,
        errors=(*_WRITE_ERRORS, 413),
        tag="maintenance",
        authenticated=True,
    ),
    _op(
        "POST",
        "/maintenance/archive-stale",
        "archive_stale",
        "Archive non-archived entries untouched for `days` days.",
        _archive_stale,
        (200, "Count of archived entries.", MaintenanceResult),
        body=ArchiveStaleBody,
        errors=(*_WRITE_ERRORS, 413),
        tag="maintenance",
        authenticated=True,
    ),
    _op(
        "GET",
        "/stats",
        "stats",
        "Counts over the entries the caller may see.",
        _stats,
        (200, "Counts.", _STATS_SCHEMA),
        errors=(503,),
        tag="service",
    ),
)

_ERROR_DESCRIPTIONS = {
    400: "Invalid input: malformed JSON, unknown field, wrong type or value.",
    401: "Unknown bearer token (or, for maintenance, no token while tokens are configured).",
    404: "Unknown, or not visible to the caller.",
    405: "Method not allowed.",
    409: "Not in a state this operation applies to, or a concurrent writer won.",
    413: "Request body too large.",
    422: "Rejected by admission (the reason says why).",
    500: "The store failed to persist the change; nothing was written.",
    503: "The store (or embedder) is unavailable right now; nothing was written.",
}


# --------------------------------------------------------------------------- OpenAPI


def openapi_document(operations: tuple[Operation, ...] = OPERATIONS) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route of :func:`create_app`."""
    book = SchemaBook()
    book.components["Error"] = ERROR_SCHEMA
    error_ref = {"$ref": "#/components/schemas/Error"}
    paths: dict[str, dict[str, Any]] = {}

    def response_schema(spec: Any) -> JsonSchema | None:
        if spec is None:
            return None
        if isinstance(spec, dict):
            return spec
        if isinstance(spec, tuple):
            key, kind = spec
            omit = {"embedding"} if kind is Entry else frozenset()
            return {
                "type": "object",
                "required": [key],
                "properties": {key: {"type": "array", "items": book.schema_of(kind, omit=omit)}},
            }
        omit = {"embedding"} if spec is Entry else frozenset()
        return book.schema_of(spec, omit=omit)

    for op in operations:
        responses: dict[str, Any] = {}
        for status, (description, spec) in op.responses.items():
            schema = response_schema(spec)
            responses[str(status)] = {"description": description}
            if schema is not None:
                responses[str(status)]["content"] = {JSON: {"schema": schema}}
        if op.path.endswith("/health"):
            responses["503"] = {
                "description": "Degraded: some part of the store cannot be written.",
                "content": {JSON: {"schema": _HEALTH_SCHEMA}},
            }
        for status in sorted({*op.errors, 401}):
            responses[str(status)] = {
                "description": _ERROR_DESCRIPTIONS[status],
                "content": {JSON: {"schema": error_ref}},
            }
        operation: dict[str, Any] = {
            "operationId": op.operation_id,
            "summary": op.summary,
            "tags": [op.tag],
            "responses": responses,
        }
        if op.params:
            operation["parameters"] = [
                {
                    "name": p.name,
                    "in": p.location,
                    "required": p.required,
                    "description": p.description,
                    "schema": p.schema,
                }
                for p in op.params
            ]
        if op.body is not None:
            operation["requestBody"] = {
                "required": any(a.default is NOTHING for a in attrs.fields(op.body)),
                "content": {JSON: {"schema": book.schema_of(op.body, closed=True)}},
            }
        if op.authenticated:
            operation["security"] = [{"bearer": []}]
        paths.setdefault(op.path, {})[op.method.lower()] = operation

    paths["/openapi.json"] = {
        "get": {
            "operationId": "openapi",
            "summary": "This document.",
            "tags": ["service"],
            "security": [{}],
            "responses": {"200": {"description": "OpenAPI 3.1 document."}},
        }
    }
    paths["/metrics"] = {
        "get": {
            "operationId": "metrics",
            "summary": "Prometheus metrics (text exposition format).",
            "tags": ["service"],
            "security": [{}],
            "responses": {
                "200": {
                    "description": "Metrics in the Prometheus text format.",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                }
            },
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Apollo",
            "version": "0.1.0",
            "description": (
                "Shared knowledge store for AI agent meshes. Send `Authorization: Bearer "
                "<token>` to act as the token's principal; without a token the caller is "
                "anonymous and sees only global entries."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": book.components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"bearer": []}],
    }


# --------------------------------------------------------------------------- the app


class _Authenticator:
    def __init__(self, tokens: Mapping[str, str] | None) -> None:
        self._tokens = [(t.encode(), p) for t, p in (tokens or {}).items()]
        self.configured = bool(self._tokens)

    def principal(self, request: Request) -> Principal:
        header = request.headers.get("authorization")
        if header is None:
            return Principal(None)
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise _Unauthorized("expected 'Authorization: Bearer <token>'")
        presented = token.strip().encode("utf-8", "surrogateescape")
        found: str | None = None
        for known, principal in self._tokens:  # no early exit: constant time over tokens
            if hmac.compare_digest(presented, known):
                found = principal
        if found is None:
            raise _Unauthorized("unknown bearer token")
        return Principal(found)


_UNAUTHORIZED_HEADERS = {"WWW-Authenticate": "Bearer"}


class _TooLarge(Exception):
    pass


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


def _endpoint(
    op: Operation,
    apollo: Apollo,
    auth: _Authenticator,
    metrics: Metrics | None,
    converter: cattrs.Converter,
) -> Callable[[Request], Awaitable[Response]]:
    allowed_query = {p.name for p in op.params if p.location == "query"}

    async def endpoint(request: Request) -> Response:
        try:
            principal = auth.principal(request)
            if op.authenticated and auth.configured and principal.id is None:
                raise _Unauthorized("this operation needs a bearer token")
            unknown = sorted(set(request.query_params) - allowed_query)
            if unknown:
                raise ValidationError(unknown[0], "unknown query parameter")
            body = None
            if op.body is not None:
                raw = await _read_body(request)
                data = decode_json(raw) if raw else {}  # no body at all means {}
                body = structure_body(converter, data, op.body)
            call = Call(request, apollo, metrics, principal, body, converter)
            status, payload = await op.handler(call)
        except _TooLarge:
            return error_response(
                413, "payload_too_large", f"request bodies are limited to {MAX_BODY_BYTES} bytes"
            )
        except _Unauthorized as exc:
            return error_response(401, "unauthorized", exc.message, headers=_UNAUTHORIZED_HEADERS)
        except ApolloError as exc:
            return map_error(exc)
        except HTTPException:
            raise
        except Exception:
            logger.exception("unexpected error in %s %s", op.method, op.path)
            return error_response(500, "internal_error", "internal error")
        return Response(encode_json(payload), status_code=status, media_type=JSON)

    return endpoint


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kinds = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}
    message = exc.detail or "error"
    if exc.status_code == 404:
        message = f"no route for {request.url.path}"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    return error_response(
        exc.status_code,
        kinds.get(exc.status_code, "http_error"),
        message,
        headers=exc.headers,
    )


async def _server_error(request: Request, exc: Exception) -> Response:
    return error_response(500, "internal_error", "internal error")


class _Instrumentation:
    """Counts every HTTP request by method, route template (``unmatched`` when no route
    matched, so a scan of random paths cannot blow up the label set) and status."""

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
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = scope["method"] if scope["method"] in _METHODS else "OTHER"
            self.metrics.observe_http(method, template, status, time.perf_counter() - started)


_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})


def create_app(
    apollo: Apollo,
    *,
    tokens: Mapping[str, str] | None = None,
    metrics: Metrics | None = None,
) -> Starlette:
    """The Starlette application of Apollo's HTTP API (``/api/apollo/...``, ``/metrics``,
    ``/openapi.json``). ``tokens`` maps bearer tokens to principal ids."""
    converter = make_converter()
    auth = _Authenticator(tokens)
    document = encode_json(openapi_document())
    routes = [
        Route(op.path, _endpoint(op, apollo, auth, metrics, converter), methods=[op.method])
        for op in OPERATIONS
    ]

    async def openapi(request: Request) -> Response:
        return Response(document, media_type=JSON)

    async def exposition(request: Request) -> Response:
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
    middleware = [Middleware(_Instrumentation, metrics=metrics)] if metrics is not None else []
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )


__all__ = ["OPERATIONS", "PREFIX", "create_app", "error_body", "map_error", "openapi_document"]
