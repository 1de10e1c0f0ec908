"""The OpenAPI 3.1 document of every route, derived from the operation table and the
commands' fields (their ``schema`` metadata describes each)."""

from __future__ import annotations

from typing import Any

import attrs

from apollo_domain.actions import action_of
from apollo_domain.causal import MAX_TOKEN_LENGTH
from apollo_domain.model import Entry

from .errors import JSON
from .headers import CAUSAL_TOKEN_HEADER, IDEMPOTENCY_KEY_HEADER, MAX_IDEMPOTENCY_KEY
from .operations import OPERATIONS, SHAPED, Operation
from .schema import ERROR_SCHEMA, JsonSchema, SchemaBook

ERROR_DESCRIPTIONS = {
    400: "Invalid input: malformed JSON, unknown field, wrong type or value.",
    401: "Unknown bearer token (or, for maintenance, no token while tokens are configured).",
    403: "The caller's role does not allow this, or the object is not the caller's.",
    404: "Unknown, or not visible to the caller.",
    405: "Method not allowed.",
    409: "Not in a state this operation applies to, or a concurrent writer won.",
    413: "Request body too large.",
    415: "Request bodies must be application/json.",
    422: "Rejected by admission (the reason says why).",
    429: (
        "The caller's principal writes faster than its write rate (APOLLO_WRITE_RATE) allows;"
        " nothing was written; retry after Retry-After seconds."
    ),
    500: "The store failed to persist the change; nothing was written.",
    503: (
        "The store (or embedder) is unavailable right now, or the request was not carried out"
        " within its time budget (request_timeout, with Retry-After); nothing was written."
    ),
}


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _field_schema(book: SchemaBook, attribute: attrs.Attribute) -> JsonSchema:  # type: ignore[type-arg]
    schema = dict(book.schema_of(attribute.type))
    schema.update(attribute.metadata.get("schema", {}))
    return schema


#: The causal token a response carries (:data:`CAUSAL_TOKEN_HEADER`).
CAUSAL_TOKEN_RESPONSE = {
    CAUSAL_TOKEN_HEADER: {
        "description": "The caller's causal token after this call, when it wrote (or was"
        " presented one): send it with later requests to read these writes.",
        "schema": {"type": "string", "maxLength": MAX_TOKEN_LENGTH},
    }
}


def _headers(op: Operation) -> list[dict[str, Any]]:
    """The headers a caller carries between requests: its causal token (every command)
    and, on a mutation, an idempotency key."""
    assert op.command is not None
    found: list[dict[str, Any]] = [
        {
            "name": CAUSAL_TOKEN_HEADER,
            "in": "header",
            "required": False,
            "description": "The latest causal token this caller was answered with: the read"
            " sees those writes, whichever copy of the store serves it. Anything else is"
            " ignored.",
            "schema": {"type": "string"},
        }
    ]
    if action_of(op.command).mutates:
        found.append(
            {
                "name": IDEMPOTENCY_KEY_HEADER,
                "in": "header",
                "required": False,
                "description": "Sent again with the same key by the same principal, the"
                " request is carried out once; the repeat is answered as already processed.",
                "schema": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_IDEMPOTENCY_KEY,
                    "pattern": "^[\\x21-\\x7e]+$",
                },
            }
        )
    return found


def _parameters(book: SchemaBook, op: Operation) -> list[dict[str, Any]]:
    if op.command is None:
        return []
    attrs.resolve_types(op.command)
    fields = attrs.fields_dict(op.command)
    found = _headers(op)
    for name, target in op.path_fields.items():
        attribute = fields[target]
        found.append(
            {
                "name": name,
                "in": "path",
                "required": True,
                "description": attribute.metadata.get("schema", {}).get("description", ""),
                "schema": {"type": "string", "minLength": 1},
            }
        )
    if not op.reads_body:
        for attribute in op.inputs():
            schema = _field_schema(book, attribute)
            found.append(
                {
                    "name": attribute.name,
                    "in": "query",
                    "required": attribute.default is attrs.NOTHING,
                    "description": schema.pop("description", ""),
                    "schema": {
                        **schema,
                        **(
                            {"default": attribute.default}
                            if attribute.default is not attrs.NOTHING
                            else {}
                        ),
                    },
                }
            )
    return found


def _request_body(book: SchemaBook, op: Operation) -> dict[str, Any] | None:
    if not op.reads_body or op.command is None:
        return None
    name = f"{_camel(op.operation_id)}Body"
    hidden = {a.name for a in attrs.fields(op.command)} - {a.name for a in op.inputs()}
    ref = book.schema_of(op.command, closed=True, omit=hidden, name=name)
    component = book.components[name]
    component["required"] = [r for r in component["required"] if r not in op.optional]
    for alias, target in op.aliases().items():
        component["properties"][alias] = {
            **component["properties"][target],
            "description": f"Another name for `{target}` (lex-apollo payloads); when both "
            "are given they must be equal.",
        }
    return {"required": bool(component["required"]), "content": {JSON: {"schema": ref}}}


def _response_schema(book: SchemaBook, op: Operation) -> JsonSchema | None:
    spec = op.ok[2]
    if spec is None:
        return SHAPED.get(op.operation_id)
    if isinstance(spec, tuple):
        key, kind = spec
        return {
            "type": "object",
            "required": [key],
            "properties": {key: {"type": "array", "items": book.schema_of(kind)}},
        }
    omit = {"embedding"} if spec is Entry else frozenset()
    return book.schema_of(spec, omit=omit)


def openapi_document(operations: tuple[Operation, ...] = OPERATIONS) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route of :func:`create_app`."""
    book = SchemaBook()
    book.components["Error"] = ERROR_SCHEMA
    error_ref = {"$ref": "#/components/schemas/Error"}
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        status, description, _ = op.ok
        ok: dict[str, Any] = {"description": description}
        schema = _response_schema(book, op)
        if schema is not None:
            ok["content"] = {JSON: {"schema": schema}}
        if op.command is not None:
            ok["headers"] = CAUSAL_TOKEN_RESPONSE
        responses: dict[str, Any] = {str(status): ok}
        for other, other_description in op.also_ok:
            responses[str(other)] = {**ok, "description": other_description}
        if op.operation_id == "health":
            responses["503"] = {
                "description": "Degraded: some part of the store cannot be written.",
                "content": {JSON: {"schema": SHAPED["health"]}},
            }
        codes = {*op.errors, 401}
        if op.command is not None:
            codes.add(403)  # a role that may not, or (no tokens) a foreign Host or Origin
        if op.reads_body:
            codes.add(415)
        for code in sorted(codes):
            responses[str(code)] = {
                "description": ERROR_DESCRIPTIONS[code],
                "content": {JSON: {"schema": error_ref}},
            }
        operation: dict[str, Any] = {
            "operationId": op.operation_id,
            "summary": op.summary,
            "tags": [op.tag],
            "responses": responses,
        }
        parameters = _parameters(book, op)
        if parameters:
            operation["parameters"] = parameters
        body = _request_body(book, op)
        if body is not None:
            operation["requestBody"] = body
        if op.authenticated:
            operation["security"] = [{"bearer": []}]
        paths.setdefault(op.document_path, {})[op.method.lower()] = operation

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
            "summary": "Prometheus metrics (text exposition format); with tokens, an admin's.",
            "tags": ["service"],
            "security": [{}, {"bearer": []}],
            "responses": {
                "200": {
                    "description": "Metrics in the Prometheus text format.",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                },
                **{
                    str(code): {"description": text, "content": {JSON: {"schema": error_ref}}}
                    for code, text in (
                        (401, "Tokens are configured and none (or an unknown one) was sent."),
                        (403, "Tokens are configured and the token is not an admin's."),
                        (404, "Metrics are not enabled."),
                    )
                },
            },
        }
    }
    paths.update(_mcp_paths(error_ref))
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


def _mcp_paths(error_ref: JsonSchema) -> dict[str, Any]:
    """``/mcp`` (MCP over streamable HTTP) and its protected-resource metadata: not REST
    operations, listed so that every route is in the document."""
    errors = {
        str(code): {"description": text, "content": {JSON: {"schema": error_ref}}}
        for code, text in (
            (
                401,
                "Tokens are configured and none (or an unknown one) was sent; "
                "WWW-Authenticate names the protected-resource metadata.",
            ),
            (403, "No tokens are configured and the Host or Origin is not this machine."),
        )
    }
    return {
        "/mcp": {
            "post": {
                "operationId": "mcp",
                "summary": "The Model Context Protocol over streamable HTTP (stateless): one "
                "JSON-RPC 2.0 message per request. Tools are the client methods, with the "
                "caller's role, scopes and bounds.",
                "tags": ["mcp"],
                "security": [{}, {"bearer": []}],
                "requestBody": {
                    "required": True,
                    "content": {JSON: {"schema": {"type": "object"}}},
                },
                "responses": {
                    "200": {
                        "description": "The JSON-RPC response, as JSON or as a stream of "
                        "server-sent events (progress notifications, then the response).",
                        "content": {
                            JSON: {"schema": {"type": "object"}},
                            "text/event-stream": {"schema": {"type": "string"}},
                        },
                    },
                    "202": {"description": "A notification or response was accepted."},
                    "400": {"description": "Not a JSON-RPC message (a JSON-RPC error)."},
                    "413": {"description": "Request body too large."},
                    **errors,
                },
            }
        },
        "/.well-known/oauth-protected-resource/mcp": {
            "get": {
                "operationId": "mcp_protected_resource",
                "summary": "OAuth 2.0 protected-resource metadata of /mcp (RFC 9728).",
                "tags": ["mcp"],
                "security": [{}],
                "responses": {
                    "200": {
                        "description": "The metadata document.",
                        "content": {JSON: {"schema": {"type": "object"}}},
                    }
                },
            }
        },
    }


__all__ = ["ERROR_DESCRIPTIONS", "openapi_document"]
