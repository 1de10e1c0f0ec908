"""Validation shared by the rules and the use cases: bounded numbers and bounded nesting."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from .errors import ValidationError

#: The deepest nesting of objects and arrays Apollo accepts in a caller's JSON value (an
#: entry's context, a GAS event, writeback metadata); the value itself is level 1.
MAX_JSON_DEPTH = 32


def bounded_float(name: str, value: object, low: float, high: float) -> float:
    """``value`` as a finite float within [low, high]; else :class:`ValidationError` naming
    ``name``. Booleans and strings are not numbers here, even "0.5"."""
    if isinstance(value, bool | str | bytes):
        raise ValidationError(name, f"must be a number, got {value!r}")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValidationError(name, f"must be a number, got {value!r}") from None
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


__all__ = ["MAX_JSON_DEPTH", "bounded_float", "check_depth"]
