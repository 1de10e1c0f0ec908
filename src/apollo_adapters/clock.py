"""Clocks: the system clock and a manual clock for tests and simulations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from apollo_domain.errors import ValidationError

_DEFAULT_START = datetime(2025, 1, 1, tzinfo=UTC)


def _utc(value: datetime, field: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(field, "must be a timezone-aware datetime")
    return value.astimezone(UTC)


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to. Starts at ``start`` (default 2025-01-01 UTC)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = _DEFAULT_START if start is None else _utc(start, "start")

    def now(self) -> datetime:
        return self._now

    def advance(self, **delta: float) -> datetime:
        """Move forward by ``timedelta(**delta)`` (e.g. ``hours=2``); returns the new now."""
        step = timedelta(**delta)
        if step < timedelta(0):
            raise ValidationError("delta", "a manual clock only moves forward; use set()")
        self._now += step
        return self._now

    def set(self, dt: datetime) -> None:
        self._now = _utc(dt, "dt")


__all__ = ["ManualClock", "SystemClock"]
