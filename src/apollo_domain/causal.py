"""Causal tokens: a caller reads its own writes, whichever copy of the store serves it.

A commit reaches a position in the store's history (PostgreSQL: its WAL position). A
write hands its caller that position as a :class:`CausalToken`; a later read that presents
it is served only by a copy that has replayed that far (a replica that caught up, else the
primary), and a read that presents none may be served by any copy at once. Callers keep
the latest token they were given and present it with every call; to them it is opaque
text, ``c1.<hex>``: a version prefix and the position in lowercase hexadecimal, no leading
zeros. Anything else (garbage, a forgery, another version's token) reads as no token: a
read never fails because of what a caller sent. A forged position far ahead costs the read
no more than the replica wait, then it runs on the primary.

A call runs inside a :func:`causal_scope`: the token the caller presented, raised by
every commit the call makes (the store reports them, :meth:`CausalScope.observe`), so a
call that writes and then reads waits for its own write too, and the edge answers with
:attr:`CausalScope.token`. Outside any scope (periodic work, the bus consumer) the store
falls back to what its whole process wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from attrs import define, field, frozen

#: The version prefix of the tokens this code writes and reads.
PREFIX = "c1."
#: The furthest position a token can name (PostgreSQL's WAL positions are 64-bit).
MAX_POSITION = 2**64 - 1
#: The longest text that can be a token; a longer one is not read at all.
MAX_TOKEN_LENGTH = len(PREFIX) + 16
_TOKEN = re.compile(r"c1\.(0|[1-9a-f][0-9a-f]{0,15})")


def _position(instance: object, attribute: object, value: int) -> None:
    if type(value) is not int or not 0 <= value <= MAX_POSITION:
        raise ValueError(f"a causal position is an integer from 0 to 2**64 - 1, got {value!r}")


@frozen(order=True)
class CausalToken:
    """A position in the store's history: what a read must have replayed to see a write."""

    position: int = field(validator=_position)

    def __str__(self) -> str:
        return format_token(self)


def format_token(token: CausalToken) -> str:
    """The token's text (``c1.`` and the position in lowercase hexadecimal)."""
    return f"{PREFIX}{token.position:x}"


def parse_token(text: object) -> CausalToken | None:
    """The token ``text`` names; None for anything else (not text, too long, another
    version, not canonical): garbage is never an error, it is no token."""
    if not isinstance(text, str) or len(text) > MAX_TOKEN_LENGTH:
        return None
    if _TOKEN.fullmatch(text) is None:
        return None
    return CausalToken(int(text[len(PREFIX) :], 16))


def latest(*tokens: CausalToken | None) -> CausalToken | None:
    """The furthest of ``tokens`` (None when there are none): what a read must wait for to
    see every one of them."""
    known = [t for t in tokens if t is not None]
    return max(known) if known else None


@define
class CausalScope:
    """One call's causal position: what it was presented, raised by what it committed."""

    seen: CausalToken | None = None

    def observe(self, token: CausalToken | None) -> None:
        """A commit of this call reached ``token``: later reads wait for it too (a commit
        heard back late never lowers the position)."""
        self.seen = latest(self.seen, token)

    @property
    def token(self) -> str | None:
        """The text to hand back to the caller, None when it has no position to keep."""
        return None if self.seen is None else format_token(self.seen)


_SCOPE: ContextVar[CausalScope | None] = ContextVar("apollo_causal_scope", default=None)


@contextmanager
def causal_scope(presented: object = None) -> Iterator[CausalScope]:
    """Run a call in its own scope, starting at ``presented``: a token, or what a caller
    sent, read with :func:`parse_token` (anything else starts at no token). Tasks the call
    starts share the scope."""
    start = presented if isinstance(presented, CausalToken) else parse_token(presented)
    scope = CausalScope(start)
    reset = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(reset)


def current_scope() -> CausalScope | None:
    """The scope of the call running now; None outside every call (process-wide work)."""
    return _SCOPE.get()


__all__ = [
    "MAX_POSITION",
    "MAX_TOKEN_LENGTH",
    "PREFIX",
    "CausalScope",
    "CausalToken",
    "causal_scope",
    "current_scope",
    "format_token",
    "latest",
    "parse_token",
]
