"""The contradiction judge port: does one text contradict another?"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class ContradictionJudge(Protocol):
    """Decides whether ``new`` contradicts ``existing`` (both plain texts).

    The contradiction scan asks it about each close neighbour of a new entry (those above
    the policy's ``contradiction_similarity``), with no unit of work open. A failure (any
    exception) counts a failed attempt of that entry's scan, which the outbox retries
    later. Adapters: the built-in heuristic (no model) and an LLM.
    """

    async def contradicts(self, new: str, existing: str) -> bool: ...


__all__ = ["ContradictionJudge"]
