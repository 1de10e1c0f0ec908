"""Bearer tokens → principals."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from starlette.requests import Request

from apollo_domain.model import Principal

UNAUTHORIZED_HEADERS = {"WWW-Authenticate": "Bearer"}


class Unauthorized(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Authenticator:
    """Maps ``Authorization: Bearer <token>`` to the token's principal, in constant time over
    the configured tokens; no header means the anonymous principal."""

    def __init__(self, tokens: Mapping[str, str] | None) -> None:
        self._tokens = [(t.encode(), p) for t, p in (tokens or {}).items()]
        self.configured = bool(self._tokens)

    def principal(self, request: Request) -> Principal:
        header = request.headers.get("authorization")
        if header is None:
            return Principal(None)
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("expected 'Authorization: Bearer <token>'")
        presented = token.strip().encode("utf-8", "surrogateescape")
        found: str | None = None
        for known, principal in self._tokens:  # no early exit: constant time over tokens
            if hmac.compare_digest(presented, known):
                found = principal
        if found is None:
            raise Unauthorized("unknown bearer token")
        return Principal(found)


__all__ = ["UNAUTHORIZED_HEADERS", "Authenticator", "Unauthorized"]
