"""Source credibility as Beta(α, β) with label overrides (docs/concepts.md, "The rules in one
page")."""

from __future__ import annotations

import math

from attrs import evolve, frozen

from .errors import ValidationError

LABEL_OVERRIDES: dict[str, float] = {
    "moderator": 1.0,
    "admin": 1.0,
    "troll": 0.05,
    "flagged": 0.05,
}
MAX_EVIDENCE_WEIGHT = 10.0


@frozen
class SourceCredibility:
    """Beta(α, β) belief in an agent's reliability; a new source is Beta(1, 1) → 0.5."""

    agent_id: str
    alpha: float = 1.0
    beta: float = 1.0
    label: str | None = None

    @property
    def credibility(self) -> float:
        """The label's fixed value when labelled, else α / (α + β)."""
        if self.label is not None and self.label in LABEL_OVERRIDES:
            return LABEL_OVERRIDES[self.label]
        return self.alpha / (self.alpha + self.beta)

    def validated(self, weight: float | None = None) -> SourceCredibility:
        """Evidence from this source was confirmed: α += weight."""
        return evolve(self, alpha=self.alpha + evidence_weight(weight))

    def refuted(self, weight: float | None = None) -> SourceCredibility:
        """Evidence from this source was refuted: β += weight."""
        return evolve(self, beta=self.beta + evidence_weight(weight))

    def labelled(self, label: str | None) -> SourceCredibility:
        normalized = label.strip().lower() if label else None
        return evolve(self, label=normalized or None)


def parse_label(label: object) -> str:
    """A credibility label: one of :data:`LABEL_OVERRIDES`, stripped and lowercased."""
    text = label.strip().lower() if isinstance(label, str) else ""
    if text not in LABEL_OVERRIDES:
        known = ", ".join(sorted(LABEL_OVERRIDES))
        raise ValidationError("label", f"must be one of {known}, got {label!r}")
    return text


def evidence_weight(weight: float | None) -> float:
    """1 unless given; clamped to (0, 10]. Zero, negative or non-finite weights are errors."""
    if weight is None:
        return 1.0
    w = float(weight)
    if not math.isfinite(w) or w <= 0.0:
        raise ValidationError("weight", f"must be a finite number > 0, got {weight!r}")
    return min(w, MAX_EVIDENCE_WEIGHT)


__all__ = [
    "LABEL_OVERRIDES",
    "MAX_EVIDENCE_WEIGHT",
    "SourceCredibility",
    "evidence_weight",
    "parse_label",
]
