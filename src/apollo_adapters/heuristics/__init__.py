"""The built-in heuristics behind two ports, without a model: the regex entity extractor
(:func:`~.extraction.extract_entities`) and the contradiction heuristic
(:func:`apollo_domain.contradiction.heuristic_contradicts`, a pure text function the
domain's negation rule shares).

Both functions are linear in their input, yet reading 100,000 characters takes tens to
hundreds of milliseconds: these adapters read a text longer than
:data:`~apollo_adapters.threads.OFF_LOOP_CHARS` in a worker thread, and a shorter one
inline. The composition root picks them unless an LLM judge or another extractor is
configured.
"""

from __future__ import annotations

from collections.abc import Callable

from attrs import frozen

from apollo_domain.contradiction import heuristic_contradicts
from apollo_domain.entities import Extraction

from ..threads import off_loop
from .extraction import extract_entities


@frozen
class HeuristicEntityExtractor:
    """The :class:`~apollo_domain.ports.EntityExtractor` over a pure extraction function
    (the regex heuristic by default), run off the event loop for long texts."""

    function: Callable[[str], Extraction] = extract_entities

    async def extract(self, text: str) -> Extraction:
        return await off_loop(len(text), self.function, text)


@frozen
class HeuristicContradictionJudge:
    """The :class:`~apollo_domain.ports.ContradictionJudge` over a pure judging function
    (the built-in heuristic by default), run off the event loop for long texts."""

    function: Callable[[str, str], bool] = heuristic_contradicts

    async def contradicts(self, new: str, existing: str) -> bool:
        return await off_loop(len(new) + len(existing), self.function, new, existing)


__all__ = ["HeuristicContradictionJudge", "HeuristicEntityExtractor", "extract_entities"]
