"""Validation of numeric arguments, shared by the rules and the use cases."""

from __future__ import annotations

import math

from .errors import ValidationError


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


__all__ = ["bounded_float"]
