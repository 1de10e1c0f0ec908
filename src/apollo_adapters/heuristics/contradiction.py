"""The contradiction judge without a model: the domain's contradiction heuristic
(:func:`apollo_domain.contradiction.heuristic_contradicts`), read off the event loop for
long texts."""

from __future__ import annotations

from collections.abc import Callable

from attrs import frozen

from apollo_domain.contradiction import heuristic_contradicts

from ..threads import off_loop


@frozen
class HeuristicContradictionJudge:
    """The :class:`~apollo_domain.ports.ContradictionJudge` over a pure judging function
    (the built-in heuristic by default), run off the event loop for long texts."""

    function: Callable[[str, str], bool] = heuristic_contradicts

    async def contradicts(self, new: str, existing: str) -> bool:
        return await off_loop(len(new) + len(existing), self.function, new, existing)


__all__ = ["HeuristicContradictionJudge"]
