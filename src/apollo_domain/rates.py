"""A write rate per principal: the token bucket every edge charges an ingest to.

Each principal has a bucket of ``burst`` tokens that refills at ``per_second`` tokens a
second; an entry written costs one token (``store_knowledge`` one, ``store_many`` one per
item, ``store_text`` one per statement). A write passes while its principal's bucket holds
at least one token, and then takes its whole cost, so the bucket may go below zero: a bulk
write larger than the bucket is never refused for its size, and the principal's next
write waits until the bucket has refilled past one token. Over any stretch of time a
principal writes at most ``burst`` entries plus ``per_second`` a second (and one write's
worth more). A refused write changes nothing and says how long to wait
(:class:`~apollo_domain.errors.RateLimited`).

The buckets live where the store is: in the process for the in-memory store, in
PostgreSQL for the PostgreSQL store, so every process of a fleet charges the same bucket
and the rate holds for the principal across them (one atomic statement per write).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Final

from attrs import frozen

from .errors import ConfigurationError

#: How far below one token a bucket still grants: a wait taken as told (whole
#: microseconds) can leave the refill a rounding error short of the token.
TOLERANCE: Final = 1e-9
#: The defaults of ``APOLLO_WRITE_RATE`` and ``APOLLO_WRITE_BURST``: a principal writes up
#: to 1,000 entries at once and 100 a second after that.
DEFAULT_PER_SECOND: Final = 100.0
DEFAULT_BURST: Final = 1_000.0


@frozen
class WriteRate:
    """``per_second`` tokens a second into a bucket of ``burst`` (each at least one)."""

    per_second: float = DEFAULT_PER_SECOND
    burst: float = DEFAULT_BURST

    def __attrs_post_init__(self) -> None:
        if not self.per_second > 0:
            raise ConfigurationError("APOLLO_WRITE_RATE", "must be more than 0 (or off)")
        if not self.burst >= 1:
            raise ConfigurationError("APOLLO_WRITE_BURST", "must be at least 1")


@frozen
class Bucket:
    """A principal's tokens as of ``at``."""

    tokens: float
    at: datetime


@frozen
class Charge:
    """What charging a write did: the bucket after it, and 0 (granted) or the seconds
    until the bucket holds a token again (refused, the bucket only refilled)."""

    bucket: Bucket
    retry_after: float

    @property
    def granted(self) -> bool:
        return self.retry_after == 0


def refilled(bucket: Bucket | None, rate: WriteRate, now: datetime) -> float:
    """The tokens ``bucket`` holds at ``now`` (a new principal's bucket is full; a clock
    that went back refills nothing)."""
    if bucket is None:
        return rate.burst
    elapsed = max(0.0, (now - bucket.at).total_seconds())
    return min(rate.burst, bucket.tokens + elapsed * rate.per_second)


def charge(
    bucket: Bucket | None, rate: WriteRate, cost: int, now: datetime, *, force: bool = False
) -> Charge:
    """Charge ``cost`` tokens at ``now``: granted while the refilled bucket holds at least
    one token (or ``force``: the rest of a write already granted), else refused with the
    wait until it does."""
    tokens = refilled(bucket, rate, now)
    at = now if bucket is None else max(now, bucket.at)
    if tokens >= 1 - TOLERANCE or force:
        return Charge(Bucket(tokens - cost, at), 0.0)
    return Charge(Bucket(tokens, at), wait_for_token(tokens, rate))


def wait_for_token(tokens: float, rate: WriteRate) -> float:
    """Seconds until a bucket holding ``tokens`` (fewer than one) holds one, rounded up to
    the microsecond (a wait taken exactly finds the token there, within
    :data:`TOLERANCE`)."""
    return math.ceil((1 - tokens) / rate.per_second * 1e6) / 1e6


def is_full(bucket: Bucket, rate: WriteRate, now: datetime) -> bool:
    """Whether ``bucket`` has refilled to ``burst`` by ``now``: it is as if it did not exist
    (what a store may forget of it)."""
    return refilled(bucket, rate, now) >= rate.burst


__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_PER_SECOND",
    "TOLERANCE",
    "Bucket",
    "Charge",
    "WriteRate",
    "charge",
    "is_full",
    "refilled",
    "wait_for_token",
]
