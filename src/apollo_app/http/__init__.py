"""Apollo's HTTP API (Starlette), its OpenAPI document and the uvicorn runner."""

from .app import OPERATIONS, PREFIX, create_app, openapi_document
from .server import HttpServer, bind_host, serve_http

__all__ = [
    "OPERATIONS",
    "PREFIX",
    "HttpServer",
    "bind_host",
    "create_app",
    "openapi_document",
    "serve_http",
]
