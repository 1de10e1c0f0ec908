"""Charging an edge's writes to its principal's write rate (:mod:`apollo_domain.rates`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

from ..errors import RateLimited
from .context import Caller, Deps

#: The key of the bucket every anonymous caller shares (no identity: one source).
ANONYMOUS: Final = ""
#: Set while an edge carries out, in parts, a write it charged whole (:func:`prepaid`).
_PREPAID: ContextVar[bool] = ContextVar("apollo_write_prepaid", default=False)


def bucket_key(caller: Caller) -> str:
    """The bucket a caller's writes are charged to: its principal's (the anonymous
    callers' one shared bucket when it has no identity)."""
    return caller.principal.id or ANONYMOUS


async def charge_write(deps: Deps, caller: Caller, cost: int, *, force: bool = False) -> None:
    """Charge an edge caller's write of ``cost`` entries to its principal's bucket, or
    raise :class:`RateLimited` having changed nothing. The embedding program's own calls
    (no edge) and a store wired without a write rate are not charged."""
    budget = deps.write_budget
    if budget is None or caller.edge is None or caller.trusted or cost <= 0 or _PREPAID.get():
        return
    wait = await budget.take(bucket_key(caller), cost, force=force)
    if wait > 0:
        raise RateLimited(
            f"this principal writes at most {budget.rate.per_second:g} entries a second"
            f" (a burst of {budget.rate.burst:g}); retry in {wait:.2f} s",
            retry_after=wait,
        )


@contextmanager
def prepaid() -> Iterator[None]:
    """The writes carried out within are not charged again: the edge that sends one write
    in several parts (MCP's ``store_many``, chunk by chunk) charged the whole of it first."""
    token = _PREPAID.set(True)
    try:
        yield
    finally:
        _PREPAID.reset(token)


__all__ = ["ANONYMOUS", "bucket_key", "charge_write", "prepaid"]
