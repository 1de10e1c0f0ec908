"""Apollo's HTTP API (Starlette), its OpenAPI document and the uvicorn runner."""

from .app import create_app
from .errors import error_body, map_error
from .openapi import openapi_document
from .operations import OPERATIONS, PREFIX
from .server import (
    HttpServer,
    PortUnavailable,
    bind_host,
    host_overridden,
    listen,
    serve_http,
)

__all__ = [
    "OPERATIONS",
    "PREFIX",
    "HttpServer",
    "PortUnavailable",
    "bind_host",
    "create_app",
    "error_body",
    "host_overridden",
    "listen",
    "map_error",
    "openapi_document",
    "serve_http",
]
