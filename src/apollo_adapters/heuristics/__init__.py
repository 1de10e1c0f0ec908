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

from .contradiction import HeuristicContradictionJudge
from .extraction import HeuristicEntityExtractor, extract_entities

__all__ = ["HeuristicContradictionJudge", "HeuristicEntityExtractor", "extract_entities"]
