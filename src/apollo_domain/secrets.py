"""Secrets never leave Apollo in text: one helper for every log line and stored error.

:func:`redact` replaces the user information of any URL (``scheme://user:pass@host`` →
``scheme://***@host``), the value of secret-looking URL parameters (``api_key=``,
``token=``, ``password=``, ...), bearer tokens (8 characters or more), and every secret it
is given (an API key) with ``***``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "***"
#: Shorter "secrets" are not masked: replacing every "a" would garble the text.
MIN_SECRET_CHARS = 4

# Every pattern reads its input once (linear): a scheme is matched possessively from the start
# of its run of scheme characters only (the run ``a-a-a-…`` is not re-read from each letter),
# and the user information possessively (it cannot hold the ``@`` that ends it).
_USERINFO = re.compile(r"(?P<scheme>(?<![a-zA-Z0-9+.-])[a-zA-Z0-9+.-]++://)[^@/\s?#\"'<>]++@")
_SECRET_PARAMETER = re.compile(
    r"(?P<name>\b(?:api[_-]?key|access[_-]?token|token|secret|password|passwd|pwd)=)[^&\s\"'<>]++",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<scheme>\b[Bb]earer\s++)[A-Za-z0-9._~+/=-]{8,}")


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with URL user information, secret URL parameters, bearer tokens and each of
    ``secrets`` (None and very short values are ignored) masked."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET_CHARS:
            text = text.replace(secret, MASK)
    text = _USERINFO.sub(rf"\g<scheme>{MASK}@", text)
    text = _SECRET_PARAMETER.sub(rf"\g<name>{MASK}", text)
    return _BEARER.sub(rf"\g<scheme>{MASK}", text)


__all__ = ["MASK", "redact"]
