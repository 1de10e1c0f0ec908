"""Credentials of the HTTP adapters (embedders, LLM), kept out of URLs and messages.

A base URL may carry ``user:password@``: :func:`split_credentials` moves them into an
``httpx.BasicAuth``, so the URL httpx logs and the adapters put in their error messages
holds no secret; :func:`redact` (with the adapter's secrets) cleans what a server or
transport error adds.
"""

from __future__ import annotations

import httpx
from attrs import frozen

from apollo_domain.secrets import redact


@frozen
class Credentials:
    """A base URL without user information, the basic auth it carried, and the secrets
    (password, API key) that must never appear in a message."""

    url: str
    auth: httpx.BasicAuth | None
    secrets: tuple[str, ...]

    @property
    def request_auth(self) -> httpx.BasicAuth | httpx._client.UseClientDefault:
        """What to pass as a request's ``auth``: the URL's credentials, else the client's."""
        return self.auth if self.auth is not None else httpx.USE_CLIENT_DEFAULT

    def clean(self, text: str) -> str:
        """``text`` with these secrets and any URL user information masked."""
        return redact(text, self.secrets)


def split_credentials(url: str, api_key: str | None = None) -> Credentials:
    """``url`` without its user information (which becomes basic auth); ``api_key`` and the
    password are the secrets to mask."""
    parsed = httpx.URL(url)
    secrets = [secret for secret in (api_key, parsed.password) if secret]
    if not parsed.userinfo:
        return Credentials(url.rstrip("/"), None, tuple(secrets))
    auth = httpx.BasicAuth(parsed.username, parsed.password)
    bare = str(parsed.copy_with(userinfo=b"")).rstrip("/")
    return Credentials(bare, auth, tuple(secrets))


__all__ = ["Credentials", "split_credentials"]
