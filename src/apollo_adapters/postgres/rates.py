"""The write budget in PostgreSQL: every process of a fleet charges the same buckets."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import psycopg

from apollo_domain.ports import Clock
from apollo_domain.ports.rates import GRANTED, LIMITED
from apollo_domain.rates import TOLERANCE, WriteRate, wait_for_token

from .errors import translated


class _Connections(Protocol):
    def connection(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]: ...


#: The bucket refilled to now (:func:`apollo_domain.rates.refilled`, in SQL).
_REFILLED = (
    "least(%(burst)s, b.tokens + %(per_second)s"
    " * greatest(0, extract(epoch FROM %(now)s::timestamptz - b.at)::float8))"
)
#: One atomic statement per charge (:func:`apollo_domain.rates.charge`): a new principal's
#: bucket starts full; the row lock of the upsert orders concurrent charges of one bucket,
#: each seeing the one before it, in whichever process they run.
_CHARGE = f"""
INSERT INTO write_budgets AS b (principal, tokens, at, granted)
VALUES (%(key)s, %(burst)s - %(cost)s, %(now)s, true)
ON CONFLICT (principal) DO UPDATE SET
    tokens = CASE WHEN {_REFILLED} >= %(least)s OR %(force)s
                  THEN {_REFILLED} - %(cost)s ELSE {_REFILLED} END,
    granted = {_REFILLED} >= %(least)s OR %(force)s,
    at = greatest(b.at, %(now)s::timestamptz)
RETURNING granted, tokens
"""


class PostgresWriteBudget:
    """Each principal's bucket as a row of ``write_budgets``, charged by one upsert on the
    primary (autocommit: it commits at once, whatever the write it pays for does next).
    One row per principal that ever wrote over an edge: the table is as bounded as the
    principals are (tokens and bus users the operator configures, plus one anonymous)."""

    def __init__(self, store: _Connections, rate: WriteRate, clock: Clock) -> None:
        self._store = store
        self._rate = rate
        self._clock = clock
        self._outcomes: Counter[str] = Counter({GRANTED: 0, LIMITED: 0})

    @property
    def rate(self) -> WriteRate:
        return self._rate

    async def take(self, key: str, cost: int, *, force: bool = False) -> float:
        params = {
            "key": key,
            "cost": float(cost),
            "force": force,
            "now": self._clock.now(),
            "burst": self._rate.burst,
            "per_second": self._rate.per_second,
            "least": 1 - TOLERANCE,
        }
        async with self._store.connection() as conn:
            with translated():
                cur = await conn.execute(_CHARGE, params)
                row = await cur.fetchone()
        assert row is not None
        granted, tokens = bool(row[0]), float(row[1])
        self._outcomes[GRANTED if granted else LIMITED] += 1
        return 0.0 if granted else wait_for_token(tokens, self._rate)

    def outcomes(self) -> Mapping[str, int]:
        return dict(self._outcomes)


__all__ = ["PostgresWriteBudget"]
