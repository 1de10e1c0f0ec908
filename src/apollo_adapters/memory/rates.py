"""The write budget of one process: each principal's token bucket in a bounded table."""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Mapping
from datetime import datetime

from apollo_domain.ports import Clock
from apollo_domain.ports.rates import GRANTED, LIMITED
from apollo_domain.rates import Bucket, WriteRate, charge, is_full

#: The most buckets one process keeps (about 200 bytes each).
MAX_BUCKETS = 100_000


class InMemoryWriteBudget:
    """The buckets in this process, for the in-memory store (whose one process is the
    whole deployment). At most ``capacity`` buckets: past it, those refilled to full are
    forgotten (they are as if absent), then the least recently charged (the one that has
    had longest to refill) down to nine tenths of it, so memory stays bounded whatever the
    number of principals."""

    def __init__(self, rate: WriteRate, clock: Clock, *, capacity: int = MAX_BUCKETS) -> None:
        self._rate = rate
        self._clock = clock
        self._capacity = capacity
        self._buckets: OrderedDict[str, Bucket] = OrderedDict()
        self._outcomes: Counter[str] = Counter({GRANTED: 0, LIMITED: 0})

    @property
    def rate(self) -> WriteRate:
        return self._rate

    def __len__(self) -> int:
        return len(self._buckets)

    async def take(self, key: str, cost: int, *, force: bool = False) -> float:
        now = self._clock.now()
        result = charge(self._buckets.get(key), self._rate, cost, now, force=force)
        self._buckets[key] = result.bucket
        self._buckets.move_to_end(key)
        self._outcomes[GRANTED if result.granted else LIMITED] += 1
        if len(self._buckets) > self._capacity:
            self._forget(now)
        return result.retry_after

    def outcomes(self) -> Mapping[str, int]:
        return dict(self._outcomes)

    def _forget(self, now: datetime) -> None:
        """Down to nine tenths of the capacity, so that the scan runs once per tenth of it."""
        rate = self._rate
        for key in [key for key, bucket in self._buckets.items() if is_full(bucket, rate, now)]:
            del self._buckets[key]
        while len(self._buckets) > self._capacity * 9 // 10:
            self._buckets.popitem(last=False)


__all__ = ["MAX_BUCKETS", "InMemoryWriteBudget"]
