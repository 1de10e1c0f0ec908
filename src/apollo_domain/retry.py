"""When a failed outbox item runs again (docs/architecture.md, "Units of work and
concurrency"): capped exponential backoff.

The ``n``-th failure of an item (``attempts`` failures before it) schedules the next try
``min(base · 2^attempts, cap)`` later; the item is dead once it has failed
``max_attempts`` times. With the defaults (5 s, 10 min, 20 attempts) an item survives an
outage of more than two hours: 5 + 10 + … + 320 s, then 600 s a try.

A claimed item is leased: no other claimer sees it until ``lease_seconds`` have passed,
which must outlast one contradiction scan (a few calls of a possibly slow judge). A
worker that dies mid-scan leaves the item to be claimed again when its lease ends.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from attrs import field, frozen, validators

from .errors import ValidationError

#: Past this many doublings every delay is the cap (and 2^n stays a float).
_MAX_DOUBLINGS = 60

_seconds = [validators.instance_of(float), validators.gt(0.0), validators.le(7 * 86_400.0)]


def _seconds_field(default: float) -> float:
    return field(default=default, converter=float, validator=_seconds)


@frozen
class OutboxRetry:
    """The backoff of failed outbox items and the lease of claimed ones.

    - ``base_seconds``: the delay after the first failure, doubled after each further one;
    - ``max_seconds``: the cap of that delay (at least ``base_seconds``);
    - ``max_attempts``: failures after which the item is dead (kept with its last error);
    - ``lease_seconds``: how long a claimed item stays invisible to other claimers.
    """

    base_seconds: float = _seconds_field(5.0)
    max_seconds: float = _seconds_field(600.0)
    max_attempts: int = field(default=20, validator=[validators.instance_of(int), validators.ge(1)])
    lease_seconds: float = _seconds_field(900.0)

    def __attrs_post_init__(self) -> None:
        if self.max_seconds < self.base_seconds:
            raise ValidationError(
                "max_seconds",
                f"must be at least base_seconds ({self.base_seconds:g}), got {self.max_seconds:g}",
            )

    def delay(self, attempts: int) -> timedelta:
        """The wait after a failure that follows ``attempts`` earlier failures."""
        doublings = min(max(attempts, 0), _MAX_DOUBLINGS)
        return timedelta(seconds=min(self.base_seconds * 2.0**doublings, self.max_seconds))

    def retry_at(self, attempts: int, now: datetime) -> datetime | None:
        """When an item that failed now, after ``attempts`` earlier failures, runs again;
        None when this failure exhausts its attempts (the item is dead)."""
        if attempts + 1 >= self.max_attempts:
            return None
        return now + self.delay(attempts)

    def lease_until(self, now: datetime) -> datetime:
        """The end of the lease of an item claimed at ``now``."""
        return now + timedelta(seconds=self.lease_seconds)


__all__ = ["OutboxRetry"]
