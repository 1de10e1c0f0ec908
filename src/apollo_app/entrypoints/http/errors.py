"""Errors as HTTP responses: one shape, status codes from the one error policy."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ...error_policy import INTERNAL, field_of, message_of, retry_after_of, rule_for
from ...wire.codec import encode_json

logger = logging.getLogger("apollo.http")
JSON = "application/json"


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


def retry_after_header(seconds: float) -> str:
    """``Retry-After`` for a wait of ``seconds``: whole seconds, rounded up, at least one."""
    return str(max(1, math.ceil(seconds)))


def map_error(exc: BaseException) -> Response:
    """Any error as its policy's status and name (a server fault without its text; a busy
    store and a write over its rate with ``Retry-After``, whole seconds rounded up). A
    server-side failure is logged with its cause, which the caller is never shown."""
    rule = rule_for(exc)
    if rule is INTERNAL:
        logger.error("unexpected error", exc_info=exc)
    elif rule.http_status >= 500:
        logger.warning("%s: %s", rule.name, exc, exc_info=exc.__cause__ is not None)
    headers = None
    wait = retry_after_of(exc)
    if wait is not None:
        headers = {"Retry-After": retry_after_header(wait)}
    return error_response(
        rule.http_status, rule.name, message_of(exc), field_of(exc), headers=headers
    )


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (no route, method not allowed) in Apollo's error shape."""
    assert isinstance(exc, HTTPException)
    kinds = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}
    message = exc.detail or "error"
    if exc.status_code == 404:
        message = f"no route for {request.url.path}"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    return error_response(
        exc.status_code, kinds.get(exc.status_code, "http_error"), message, headers=exc.headers
    )


async def server_error(request: Request, exc: Exception) -> Response:
    """An exception no handler knows (a fault of the server): 500 ``internal`` without its
    text, the cause logged (:func:`map_error`)."""
    return map_error(exc)


__all__ = [
    "JSON",
    "error_body",
    "error_response",
    "http_error",
    "map_error",
    "retry_after_header",
    "server_error",
]
