"""Validation shared by the rules and the use cases: bounded numbers, bounded nesting,
bounded JSON objects, and the one cleaning every stored string goes through
(:func:`storable_text`)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .bounds import JSON_DEPTH, Bound
from .errors import ValidationError

#: The deepest nesting of objects and arrays Apollo accepts in a caller's JSON value (an
#: entry's context, a GAS event, writeback metadata); the value itself is level 1.
MAX_JSON_DEPTH = JSON_DEPTH.limit
#: The bidirectional embedding, override and isolate controls (LRE, RLE, PDF, LRO, RLO;
#: LRI, RLI, FSI, PDI). They reorder how the text around them is shown, so a reader (a
#: person in a console, an agent quoting it) can be shown something other than what is
#: stored ("Trojan Source"). Removed from every stored string; the bidi marks U+200E,
#: U+200F and U+061C (which reorder nothing, they only set a direction) and right-to-left
#: letters stay.
BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


def storable_text(text: str) -> str:
    """``text`` without what Apollo never stores: NUL characters and lone surrogates (no
    store can hold them) and the bidirectional controls :data:`BIDI_CONTROLS` (they make
    text show other than it reads). Every string Apollo stores from a caller passes here:
    content, source fields, context keys and values, reasons, request ids."""
    text = text.replace("\x00", "")
    if text.isascii():
        return text
    text = text.encode("utf-8", "ignore").decode("utf-8")  # lone surrogates cannot encode
    return BIDI_CONTROLS.sub("", text)


#: The longest idempotency key a caller may send (visible ASCII only): the HTTP API's
#: ``Idempotency-Key`` header, an MCP tool call's ``_meta`` key.
MAX_IDEMPOTENCY_KEY = 255
_KEY_TEXT = re.compile(r"[\x21-\x7e]+")


def checked_key(field: str, key: object) -> str:
    """``key`` as an idempotency key: visible ASCII, 1 to :data:`MAX_IDEMPOTENCY_KEY`
    characters; else :class:`ValidationError` naming ``field``."""
    if not isinstance(key, str):
        raise ValidationError(field, "must be a string")
    if len(key) > MAX_IDEMPOTENCY_KEY:
        raise ValidationError(field, f"is longer than {MAX_IDEMPOTENCY_KEY} characters")
    if _KEY_TEXT.fullmatch(key) is None:
        raise ValidationError(field, "must be visible ASCII, at least one")
    return key


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to about ``limit`` characters, for an error message that echoes
    what a caller sent (a megabyte of input never comes back in an error)."""
    text = repr(value) if not isinstance(value, str) or len(value) <= limit else repr(value[:limit])
    return text if len(text) <= limit + 2 else text[:limit] + "…"


def bounded_float(name: str, value: object, low: float, high: float) -> float:
    """``value`` as a finite float within [low, high]; else :class:`ValidationError` naming
    ``name``. Booleans and strings are not numbers here, even "0.5"."""
    if isinstance(value, bool | str | bytes):
        raise ValidationError(name, f"must be a number, got {shown(value)}")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValidationError(name, f"must be a number, got {shown(value)}") from None
    if not math.isfinite(number) or not low <= number <= high:
        raise ValidationError(name, f"must be finite and within [{low:g}, {high:g}], got {value!r}")
    return number


def check_depth(name: str, value: object, max_depth: int = MAX_JSON_DEPTH) -> None:
    """:class:`ValidationError` naming ``name`` when mappings and lists (tuples) in ``value``
    nest more than ``max_depth`` levels deep. Iterative, so any depth (even a value that
    contains itself) is measured without recursion."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[object]
        if isinstance(item, Mapping):
            children = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > max_depth:
            raise ValidationError(name, f"is nested more than {max_depth} levels deep")
        stack.extend((child, depth + 1) for child in children)


def bounded_json(name: str, value: Mapping[Any, Any], bound: Bound) -> dict[str, Any]:
    """``value`` as the JSON object it serializes to (keys as strings, every key and string
    value through :func:`storable_text`; two keys that become one that way are refused):
    nested at most ``MAX_JSON_DEPTH`` levels and at most ``bound`` bytes of
    compact UTF-8 JSON, else :class:`ValidationError` naming ``name``."""
    check_depth(name, value)
    try:
        encoded = json.dumps(
            value, allow_nan=False, default=str, ensure_ascii=False, separators=(",", ":")
        )
    except (TypeError, ValueError) as exc:
        raise ValidationError(name, f"must be JSON-serializable: {exc}") from None
    bound.check(len(encoded.encode("utf-8", "surrogatepass")), name)
    return dict(_storable(name, json.loads(encoded)))


def _storable(name: str, value: Any) -> Any:
    """A decoded JSON value with its strings and keys through :func:`storable_text`;
    recursion is bounded by the depth checked before."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, list):
        return [_storable(name, item) for item in value]
    if isinstance(value, dict):
        members: dict[str, Any] = {}
        for key, item in value.items():
            clean = storable_text(key)
            if clean in members:  # "a\u202e" and "a": one key would silently win
                raise ValidationError(name, f"holds the key {shown(clean)} more than once")
            members[clean] = _storable(name, item)
        return members
    return value


__all__ = [
    "BIDI_CONTROLS",
    "MAX_IDEMPOTENCY_KEY",
    "MAX_JSON_DEPTH",
    "bounded_float",
    "bounded_json",
    "check_depth",
    "checked_key",
    "shown",
    "storable_text",
]
