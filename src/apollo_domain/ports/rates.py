"""The write budget: each principal's token bucket (:mod:`apollo_domain.rates`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from ..rates import WriteRate

#: The outcomes a budget counts.
GRANTED = "granted"
LIMITED = "limited"


class WriteBudget(Protocol):
    """The buckets of every principal, at one ``rate``.

    :meth:`take` is atomic per key: of concurrent takes on one bucket, each sees the
    others' effect (none is lost, none counted twice), in every process that shares the
    budget. Memory for the buckets is bounded: a bucket refilled to full may be forgotten
    (it is the same as none)."""

    @property
    def rate(self) -> WriteRate: ...

    async def take(self, key: str, cost: int, *, force: bool = False) -> float:
        """Charge ``cost`` tokens to ``key``'s bucket now (:func:`apollo_domain.rates.
        charge`): 0 when granted, else the seconds to wait, the bucket only refilled.
        ``force`` charges without the check (the rest of a write already granted)."""
        ...

    def outcomes(self) -> Mapping[str, int]:
        """How many takes this process made, by outcome (:data:`GRANTED`,
        :data:`LIMITED`)."""
        ...


__all__ = ["GRANTED", "LIMITED", "WriteBudget"]
