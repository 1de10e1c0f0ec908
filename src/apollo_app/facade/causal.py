"""The causal tokens of this process's in-process callers (:mod:`apollo_domain.causal`).

A caller of the library has no edge to carry its token back and forth, so the
:class:`~apollo_app.Apollo` it calls keeps it: the latest token of each caller (its agent
and principal), so every :class:`~apollo_app.Client` of one caller reads that caller's
writes, and only its own writes are waited for."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Hashable
from typing import TypeVar

from apollo_domain.causal import CausalToken, causal_scope, latest

T = TypeVar("T")
#: How many callers' tokens are kept; the least recently used is dropped beyond (its
#: next read then waits for nothing, and may miss a write of its own a replica lags on).
CALLERS_KEPT = 4096


class CallerTokens:
    """The latest causal token of each caller, bounded (:data:`CALLERS_KEPT`)."""

    def __init__(self, capacity: int = CALLERS_KEPT) -> None:
        self._capacity = capacity
        self._tokens: OrderedDict[Hashable, CausalToken] = OrderedDict()

    def get(self, caller: Hashable) -> CausalToken | None:
        token = self._tokens.get(caller)
        if token is not None:
            self._tokens.move_to_end(caller)
        return token

    def keep(self, caller: Hashable, token: CausalToken | None) -> None:
        """Remember ``token`` for ``caller`` unless it knows a later one already."""
        furthest = latest(self._tokens.get(caller), token)
        if furthest is None:
            return
        self._tokens[caller] = furthest
        self._tokens.move_to_end(caller)
        while len(self._tokens) > self._capacity:
            self._tokens.popitem(last=False)

    async def carry(self, caller: Hashable, call: Awaitable[T]) -> T:
        """Run ``call`` in a causal scope starting at ``caller``'s token, and keep what the
        scope reached (also when the call fails: what it committed stays committed)."""
        with causal_scope(self.get(caller)) as scope:
            try:
                return await call
            finally:
                self.keep(caller, scope.seen)


__all__ = ["CALLERS_KEPT", "CallerTokens"]
