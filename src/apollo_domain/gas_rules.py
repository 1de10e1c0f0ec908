"""GAS (knowledge from LLM audit events): relation gating and deposit accounting."""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

from attrs import define, frozen

from .model import AccessScope, Outcome, RelationType

FALLBACK_RELATION = RelationType.SIMILAR_TO
FALLBACK_RELATION_CONFIDENCE = 0.5
RELATION_CANDIDATES_PER_FACT = 3


@frozen
class FactDeposit:
    """The ingest result of one GAS fact."""

    index: int
    outcome: Outcome | None  # None: the ingest raised
    entry_id: UUID | None
    access_scope: AccessScope

    @property
    def succeeded(self) -> bool:
        return (
            self.outcome is not None
            and self.outcome is not Outcome.REJECTED
            and (self.entry_id is not None)
        )


@frozen
class ProposedRelation:
    fact_index: int
    target_id: UUID
    relation_type: str
    confidence: float


class RelationVerdict(enum.StrEnum):
    PERSIST = "persist"
    SKIP = "skip"
    FAIL = "fail"


@frozen
class RelationDecision:
    verdict: RelationVerdict
    reason: str = ""
    relation_type: RelationType | None = None
    from_id: UUID | None = None


def parse_relation_type(value: object) -> RelationType | None:
    try:
        return RelationType(str(value).strip().lower().removeprefix(":"))
    except ValueError:
        return None


def valid_confidence(value: object) -> bool:
    """A relation confidence (it becomes the edge weight): a finite number in [0, 1]."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0.0 <= value <= 1.0
    )


def unambiguous_deposits(deposits: Iterable[FactDeposit]) -> dict[int, FactDeposit]:
    """Successful fact deposits whose entry id no other fact of the batch also landed on."""
    deposits = list(deposits)
    owners: dict[UUID, int] = {}
    for d in deposits:
        if d.succeeded and d.entry_id is not None:
            owners[d.entry_id] = owners.get(d.entry_id, 0) + 1
    return {
        d.index: d
        for d in deposits
        if d.succeeded and d.entry_id is not None and owners[d.entry_id] == 1
    }


def gate_relation(
    proposal: ProposedRelation,
    deposits: Mapping[int, FactDeposit],
    target_scope: AccessScope | None,
    seen: set[tuple[UUID, UUID, RelationType]],
    *,
    confidence_gate: float,
) -> RelationDecision:
    """Whether a proposed GAS relation is persisted, skipped on purpose, or failed.

    ``deposits``: the batch's unambiguous successful fact deposits by fact index;
    ``target_scope``: the target's access scope, None when the target does not exist (or is
    not visible); ``seen``: edges already decided in this batch (updated on PERSIST).
    A confidence that is not a finite number in [0, 1] (a model's NaN or 4.2) is skipped:
    it would become the edge weight.
    """
    if not valid_confidence(proposal.confidence):
        return RelationDecision(
            RelationVerdict.SKIP, f"confidence {proposal.confidence!r} is not within [0, 1]"
        )
    if proposal.confidence < confidence_gate:
        return RelationDecision(RelationVerdict.SKIP, "below confidence gate")
    relation_type = parse_relation_type(proposal.relation_type)
    if relation_type is None:
        return RelationDecision(
            RelationVerdict.SKIP, f"unsupported type {proposal.relation_type!r}"
        )
    deposit = deposits.get(proposal.fact_index)
    if deposit is None or deposit.entry_id is None:
        return RelationDecision(RelationVerdict.FAIL, "no unambiguous fact deposit")
    if target_scope is None:
        return RelationDecision(RelationVerdict.FAIL, "target entry missing")
    if deposit.entry_id == proposal.target_id:
        return RelationDecision(RelationVerdict.SKIP, "self-link")
    if target_scope is not deposit.access_scope:
        return RelationDecision(RelationVerdict.SKIP, "target in another access scope")
    key = (deposit.entry_id, proposal.target_id, relation_type)
    if key in seen:
        return RelationDecision(RelationVerdict.SKIP, "duplicate in batch")
    seen.add(key)
    return RelationDecision(RelationVerdict.PERSIST, "", relation_type, deposit.entry_id)


@define
class DepositCounts:
    """Storage outcomes of one GAS event (the result's ``deposited`` object)."""

    deposited: int = 0
    facts: int = 0
    synthesis: int = 0
    failed: int = 0
    relations: int = 0
    relations_failed: int = 0
    relations_skipped: int = 0

    def count_ingest(
        self, outcome: Outcome | None, entry_id: UUID | None, *, synthesis: bool
    ) -> None:
        """Successful ingests with an entry id count (deduplication included); rejected or
        raised ingests count as failed."""
        if outcome is not None and outcome is not Outcome.REJECTED and entry_id is not None:
            self.deposited += 1
            if synthesis:
                self.synthesis += 1
            else:
                self.facts += 1
        else:
            self.failed += 1

    def count_relation(self, verdict: RelationVerdict) -> None:
        if verdict is RelationVerdict.PERSIST:
            self.relations += 1
        elif verdict is RelationVerdict.SKIP:
            self.relations_skipped += 1
        else:
            self.relations_failed += 1

    def as_dict(self) -> dict[str, int]:
        return {
            "deposited": self.deposited,
            "facts": self.facts,
            "synthesis": self.synthesis,
            "failed": self.failed,
            "relations": self.relations,
            "relations_failed": self.relations_failed,
            "relations_skipped": self.relations_skipped,
        }


def coerce_facts(items: Iterable[Mapping[str, Any]]) -> list[tuple[str, str | None]]:
    """(content, content_type) pairs from LLM output, dropping malformed or empty items."""
    facts: list[tuple[str, str | None]] = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        content = item.get("content")
        if isinstance(content, str) and content.strip():
            kind = item.get("content_type")
            facts.append((content.strip(), str(kind) if kind is not None else None))
    return facts


__all__ = [
    "FALLBACK_RELATION",
    "FALLBACK_RELATION_CONFIDENCE",
    "RELATION_CANDIDATES_PER_FACT",
    "DepositCounts",
    "FactDeposit",
    "ProposedRelation",
    "RelationDecision",
    "RelationVerdict",
    "coerce_facts",
    "extract_entities",
    "gate_relation",
    "parse_relation_type",
    "unambiguous_deposits",
    "valid_confidence",
]


_ENTITY = re.compile(
    r"\b(?:[A-Z][a-zA-Z0-9]*(?:[-.][A-Za-z0-9]+)*(?:\s+[A-Z][a-zA-Z0-9]*)*"  # Capitalised phrases
    r"|[a-z]+_[a-z0-9_]+"  # snake_case identifiers
    r"|[a-z]+[A-Z][A-Za-z0-9]*)\b"  # camelCase identifiers
)
_STOP_ENTITIES = frozenset(
    {
        "The",
        "A",
        "An",
        "This",
        "That",
        "These",
        "Those",
        "It",
        "In",
        "On",
        "At",
        "For",
        "If",
        "When",
        "Then",
        "And",
        "Or",
        "But",
        "With",
        "To",
        "Of",
        "By",
        "As",
        "Is",
        "Are",
        "We",
        "I",
        "You",
        "They",
        "He",
        "She",
        "Use",
        "Each",
        "Every",
        "All",
        "No",
        "Not",
    }
)


def extract_entities(texts: Iterable[str]) -> list[str]:
    """Named things mentioned in the texts (capitalised phrases, acronyms, identifiers),
    normalized (trimmed, inner whitespace collapsed), deduplicated case-insensitively in order."""
    found: dict[str, str] = {}
    for text in texts:
        for match in _ENTITY.finditer(text):
            words = match.group(0).split()
            first = 0  # (an index, not pop(0): a phrase may hold thousands of stop words)
            while first < len(words) and words[first] in _STOP_ENTITIES:
                first += 1
            name = " ".join(words[first:])
            if len(name) >= 2:
                found.setdefault(name.lower(), name)
    return list(found.values())
