"""The request headers a caller carries from one request to the next: its causal token
(reading its own writes) and a mutation's idempotency key (applying it once)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from apollo_domain import commands as c
from apollo_domain.actions import action_of
from apollo_domain.errors import ValidationError
from apollo_domain.validation import MAX_IDEMPOTENCY_KEY, checked_key

#: The causal token (:mod:`apollo_domain.causal`): answered on every response of a call
#: that wrote (or was presented one), accepted on every request; a read presenting it
#: sees the caller's writes, whichever copy of the store serves it. A value that is not a
#: token is ignored.
CAUSAL_TOKEN_HEADER = "Apollo-Causal-Token"
#: A mutation's idempotency key: sent again with the same key by the same principal, the
#: request is applied once, and the repeat answers as an "already processed" replay (the
#: bus's message ids use the same record). Ignored on reads, which change nothing.
IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"


def idempotency_key(request: Request, command: c.Command[Any]) -> str | None:
    """The request's :data:`IDEMPOTENCY_KEY_HEADER` for a mutation (None: none sent, or a
    read); :class:`ValidationError` naming the header for one that is empty, longer than
    :data:`MAX_IDEMPOTENCY_KEY` or not visible ASCII, before anything is done."""
    sent = request.headers.getlist(IDEMPOTENCY_KEY_HEADER)
    if not sent or not action_of(command).mutates:
        return None
    if len(sent) > 1:
        raise ValidationError(IDEMPOTENCY_KEY_HEADER, "must be sent once")
    (key,) = sent
    return checked_key(IDEMPOTENCY_KEY_HEADER, key)


__all__ = [
    "CAUSAL_TOKEN_HEADER",
    "IDEMPOTENCY_KEY_HEADER",
    "MAX_IDEMPOTENCY_KEY",
    "checked_key",
    "idempotency_key",
]
