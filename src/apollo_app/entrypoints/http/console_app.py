"""The console: static pages (``/`` and ``/console/...``) that show and curate the store
through the API.

The files are public and hold no data: every entry, count and verdict comes from the
``/api/apollo`` routes with the bearer token the user enters. They are not API operations,
so the OpenAPI document leaves them out (``include_in_schema=False``). Every console
response carries a Content-Security-Policy that allows only this origin's own scripts,
styles, images and API calls, so entry content (written by any agent) can never run.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PACKAGE = "apollo_app.entrypoints.http"
FOLDER = "console"
#: Where the console's files are served from (index.html is also ``/``).
MOUNT = "/console"
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


class _Secured:
    """Adds :data:`SECURITY_HEADERS` to every response of ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.decode("latin-1").lower() not in _LOWER_NAMES
                ]
                headers.extend(
                    (k.lower().encode("latin-1"), v.encode("latin-1"))
                    for k, v in SECURITY_HEADERS.items()
                )
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)


_LOWER_NAMES = frozenset(name.lower() for name in SECURITY_HEADERS)


def console_routes() -> list[BaseRoute]:
    """``GET /``: the console page; ``/console/...``: its scripts and styles."""
    files = StaticFiles(packages=[(PACKAGE, FOLDER)])
    index = files.lookup_path("index.html")[0]

    async def page(request: Request) -> Response:
        return FileResponse(index, media_type="text/html", headers=SECURITY_HEADERS)

    return [
        Route("/", page, methods=["GET"], include_in_schema=False),
        Mount(MOUNT, app=_Secured(files), name="console"),
    ]


__all__ = ["CONTENT_SECURITY_POLICY", "MOUNT", "SECURITY_HEADERS", "console_routes"]
