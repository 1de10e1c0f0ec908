"""Apollo in an agent's tick: the ``knowledge_retrieval`` phase and the write-back gate.

``knowledge_retrieval`` is phase 4 of a tick, after ``memory_retrieval`` and before
``working_memory_integration``. It asks Apollo only when the agent's local memory has no
match at or above a confidence threshold for the tick's context; the tick's write-back
path keeps a conclusion only when it passes the confidence policy's write gate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from attrs import frozen

from apollo_domain.errors import ValidationError
from apollo_domain.policy import DEFAULT_POLICY, ConfidencePolicy
from apollo_domain.results import EntryView, QueryResult

#: The phases of an agent tick, in order (``knowledge_retrieval`` is phase 4).
TICK_PHASES: tuple[str, ...] = (
    "sensory_processing",
    "emotional_evaluation",
    "memory_retrieval",
    "knowledge_retrieval",
    "working_memory_integration",
    "procedural_check",
    "prediction_engine",
    "mesh_interface",
    "gut_instinct",
    "action_selection",
    "memory_consolidation",
    "post_tick_reflection",
)
KNOWLEDGE_RETRIEVAL_PHASE = TICK_PHASES.index("knowledge_retrieval") + 1
DEFAULT_THRESHOLD = 0.6


def phase_number(name: str) -> int:
    """The 1-based position of a tick phase; :class:`ValidationError` for an unknown one."""
    try:
        return TICK_PHASES.index(name) + 1
    except ValueError:
        raise ValidationError("phase", f"unknown tick phase {name!r}") from None


class KnowledgeSource(Protocol):
    """What the phase needs from a client: the in-process ``Client`` or a ``RemoteClient``."""

    async def retrieve(self, query: str, limit: int = 5) -> QueryResult: ...


@frozen
class KnowledgeRetrieval:
    """What the phase did: ``skipped`` with the reason, or the entries Apollo returned."""

    skipped: bool
    reason: str
    entries: tuple[EntryView, ...] = ()
    best_local_confidence: float | None = None


async def knowledge_retrieval(
    client: KnowledgeSource,
    context: str,
    local_matches: Sequence[tuple[str, float]],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    limit: int = 5,
) -> KnowledgeRetrieval:
    """Phase 4: retrieve from Apollo for ``context`` unless a local match (text, confidence)
    already has confidence ≥ ``threshold``. Retrieval does not count as an access (no
    access-log rows), like ``Client.retrieve``."""
    if isinstance(threshold, bool) or not (math.isfinite(threshold) and 0 <= threshold <= 1):
        raise ValidationError("threshold", f"must be within [0, 1], got {threshold!r}")
    best = max((float(confidence) for _, confidence in local_matches), default=None)
    if best is not None and best >= threshold:
        return KnowledgeRetrieval(
            True,
            f"local memory has a match with confidence {best:.2f} ≥ {threshold:g}",
            best_local_confidence=best,
        )
    if not isinstance(context, str) or not context.strip():
        return KnowledgeRetrieval(True, "the tick has no context to look up", (), best)
    found = await client.retrieve(context.strip(), limit=limit)
    reason = (
        "no local match" if best is None else f"best local match {best:.2f} is below {threshold:g}"
    )
    return KnowledgeRetrieval(False, reason, tuple(found.entries), best)


def should_write_back(
    confidence: float, novelty: float, policy: ConfidencePolicy | None = None
) -> bool:
    """The tick's write-back gate: ``policy.meets_write_gate`` (confidence > 0.6 and
    novelty > 0.3 by default, both strict)."""
    return (policy or DEFAULT_POLICY).meets_write_gate(confidence, novelty)


__all__ = [
    "DEFAULT_THRESHOLD",
    "KNOWLEDGE_RETRIEVAL_PHASE",
    "TICK_PHASES",
    "KnowledgeRetrieval",
    "KnowledgeSource",
    "knowledge_retrieval",
    "phase_number",
    "should_write_back",
]
