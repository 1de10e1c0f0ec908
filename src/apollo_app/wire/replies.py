"""RPC replies: ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {...}}``.

Scores in a result are rounded to :data:`apollo_app.wire.codec.SCORE_DIGITS` decimals, as
on every edge. The error carries the name :mod:`apollo_app.error_policy` gives its class,
so the client raises the same class the service did.
"""

from __future__ import annotations

from typing import Any, TypeVar

from attrs import frozen

from apollo_domain.errors import TransportError, ValidationError

from ..error_policy import error_named, field_of, message_of, rule_for
from . import codec
from .codec import make_converter
from .envelope import structure

T = TypeVar("T")
_replies = make_converter(forbid_extra_keys=False, round_scores=True)


@frozen
class ReplyError:
    type: str
    message: str
    field: str | None = None


@frozen
class Receipt:
    """The service's answer to a mutation published with ``reply_to``: it committed, and
    the causal token of that commit (a later read presents it to see the write)."""

    causal_token: str | None = None


def encode_reply(result: Any) -> bytes:
    """A successful RPC reply carrying ``result``."""
    return codec.encode_json({"ok": True, "result": _replies.unstructure(result)})


def encode_error_reply(error: BaseException) -> bytes:
    """A failed RPC reply: the error's policy name, message and field. A server fault is
    reported as ``internal_error`` without its text."""
    described = ReplyError(rule_for(error).name, message_of(error), field_of(error))
    return codec.encode_json({"ok": False, "error": _replies.unstructure(described)})


def decode_reply(raw: bytes, result_type: type[T] | Any) -> T:
    """The result of an RPC reply, or the error the service reported, raised again."""
    try:
        document = codec.decode_json(raw, name="reply")
    except ValidationError as exc:
        raise TransportError(f"the service sent an unreadable reply: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("ok"), bool):
        raise TransportError("the service sent a reply without 'ok'")
    if not document["ok"]:
        error: ReplyError = structure(_replies, document.get("error"), ReplyError)
        raise error_named(error.type, error.message, error.field)
    try:
        result: T = structure(_replies, document.get("result"), result_type)
        return result
    except ValidationError as exc:
        raise TransportError(f"the service sent an unreadable result: {exc}") from None


__all__ = ["Receipt", "ReplyError", "decode_reply", "encode_error_reply", "encode_reply"]
