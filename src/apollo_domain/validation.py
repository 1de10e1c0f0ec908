"""Validation shared by the rules and the use cases: bounded numbers, bounded nesting and
bounded JSON objects."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from .bounds import JSON_DEPTH, Bound
from .errors import ValidationError

#: The deepest nesting of objects and arrays Apollo accepts in a caller's JSON value (an
#: entry's context, a GAS event, writeback metadata); the value itself is level 1.
MAX_JSON_DEPTH = JSON_DEPTH.limit


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
    """``value`` as the JSON object it serializes to (keys as strings, NUL characters
    dropped): nested at most ``MAX_JSON_DEPTH`` levels and at most ``bound`` bytes of
    compact UTF-8 JSON, else :class:`ValidationError` naming ``name``."""
    check_depth(name, value)
    try:
        encoded = json.dumps(
            value, allow_nan=False, default=str, ensure_ascii=False, separators=(",", ":")
        )
    except (TypeError, ValueError) as exc:
        raise ValidationError(name, f"must be JSON-serializable: {exc}") from None
    bound.check(len(encoded.encode("utf-8", "surrogatepass")), name)
    return dict(_storable(json.loads(encoded)))


def _storable(value: Any) -> Any:
    """A decoded JSON value with what no store can hold dropped from its strings and keys
    (NUL characters, lone surrogates); recursion is bounded by the depth checked before."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, list):
        return [_storable(item) for item in value]
    if isinstance(value, dict):
        return {_text(key): _storable(item) for key, item in value.items()}
    return value


def _text(text: str) -> str:
    if not text.isascii():
        text = text.encode("utf-8", "ignore").decode("utf-8")
    return text.replace("\x00", "")


__all__ = ["MAX_JSON_DEPTH", "bounded_float", "bounded_json", "check_depth", "shown"]
