"""Lifecycle transitions as pure functions (docs/architecture.md, "The use cases").

Each returns the changed entry, or the same entry when the call is a no-op, and raises a
typed error — leaving nothing changed — when the transition does not apply.
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta
from typing import Any

from attrs import evolve

from .errors import InvalidTransition, UnknownResolution, ValidationError
from .limits import MAX_DAYS
from .model import Entry, Status
from .validation import bounded_float


class Resolution(enum.StrEnum):
    ACCEPT = "accept"
    KEEP = "keep"
    REJECT = "reject"


def _context(entry: Entry, **updates: Any) -> dict[str, Any]:
    context = dict(entry.source_context)
    context.update(updates)
    return context


def deprecate(entry: Entry, reason: str, now: datetime) -> Entry:
    """Archive the entry, keep its source metadata, store ``deprecation_reason``.

    Repeating the same call (already archived with the same reason) is a no-op.
    """
    text = reason.strip() if isinstance(reason, str) else ""
    if not text:
        raise ValidationError("reason", "must be a non-empty string")
    if entry.status is Status.ARCHIVED and entry.source_context.get("deprecation_reason") == text:
        return entry
    return evolve(
        entry,
        status=Status.ARCHIVED,
        source_context=_context(entry, deprecation_reason=text),
        updated_at=now,
    )


def validate_decay_factor(factor: object) -> float:
    """force_decay's factor: a finite number with 0 ≤ factor ≤ 1."""
    return bounded_float("factor", factor, 0.0, 1.0)


def validate_stale_days(days: object) -> float:
    """archive_stale's days: a finite number ≥ 0 (at most a century)."""
    return bounded_float("days", days, 0.0, MAX_DAYS)


def stale_cutoff(now: datetime, days: float) -> datetime:
    return now - timedelta(days=days)


def is_stale(entry: Entry, cutoff: datetime) -> bool:
    """Non-archived and COALESCE(updated_at, created_at) older than the cutoff."""
    if entry.status is Status.ARCHIVED:
        return False
    last_touch = entry.updated_at or entry.created_at
    return last_touch < cutoff


def parse_resolution(resolution: object) -> Resolution:
    text = str(resolution).strip().lower().removeprefix(":") if resolution is not None else ""
    try:
        return Resolution(text)
    except ValueError:
        raise UnknownResolution(
            f"unknown resolution {resolution!r}; expected accept, keep or reject"
        ) from None


def resolve_dispute(entry: Entry, resolution: object, now: datetime) -> Entry:
    """accept/keep confirm a disputed entry (confirmed_at set), reject archives it;
    ``dispute_resolution`` recorded; confidence unchanged."""
    decided = parse_resolution(resolution)
    if entry.status is not Status.DISPUTED:
        raise InvalidTransition(
            f"entry {entry.id} is {entry.status.value}, not disputed; nothing to resolve"
        )
    context = _context(entry, dispute_resolution=decided.value)
    if decided is Resolution.REJECT:
        return evolve(entry, status=Status.ARCHIVED, source_context=context, updated_at=now)
    return evolve(
        entry,
        status=Status.CONFIRMED,
        confirmed_at=now,
        source_context=context,
        updated_at=now,
    )


LOST_DISPUTE = "lost_dispute"


def lose_dispute(entry: Entry, now: datetime) -> Entry:
    """The other side of an accepted entry: archived with ``archive_reason =
    lost_dispute``, confidence unchanged. An archived entry stays as it is."""
    if entry.status is Status.ARCHIVED:
        return entry
    return evolve(
        entry,
        status=Status.ARCHIVED,
        source_context=_context(entry, archive_reason=LOST_DISPUTE),
        updated_at=now,
    )


def settle(entry: Entry, now: datetime) -> Entry:
    """A disputed entry whose last contradiction was rejected returns to its prior status:
    confirmed when it was confirmed before (``confirmed_at`` set), else candidate. Any
    other entry stays as it is."""
    if entry.status is not Status.DISPUTED:
        return entry
    prior = Status.CONFIRMED if entry.confirmed_at is not None else Status.CANDIDATE
    return evolve(entry, status=prior, updated_at=now)


def confirm(entry: Entry, confidence: float, now: datetime, **context: Any) -> Entry:
    """Promote a candidate (corroboration checker)."""
    if entry.status is not Status.CANDIDATE:
        raise InvalidTransition(f"entry {entry.id} is {entry.status.value}, not a candidate")
    return evolve(
        entry,
        status=Status.CONFIRMED,
        confidence=confidence,
        confirmed_at=now,
        updated_at=now,
        source_context=_context(entry, **context) if context else entry.source_context,
    )


def dispute(entry: Entry, now: datetime) -> Entry:
    """Mark an active entry disputed (contradiction found); archived entries stay archived."""
    if entry.status in (Status.ARCHIVED, Status.DISPUTED):
        return entry
    return evolve(entry, status=Status.DISPUTED, updated_at=now)


__all__ = [
    "LOST_DISPUTE",
    "Resolution",
    "confirm",
    "deprecate",
    "dispute",
    "is_stale",
    "lose_dispute",
    "parse_resolution",
    "resolve_dispute",
    "settle",
    "stale_cutoff",
    "validate_decay_factor",
    "validate_stale_days",
]
