"""The confidence policy: one frozen value, and the formulas every store applies with it.

The policy is a value: its settings are tuned (``ConfidencePolicy(retrieval_boost=0.05)``,
:meth:`ConfidencePolicy.from_overrides`, ``APOLLO_POLICY_<NAME>``), its formulas are fixed.
The stores run the boosts and the decay in SQL or numpy, set-based, with the policy's
numbers (the amount of a boost, the decay factor, the archive threshold); the methods below
state those formulas once, and the policy contract test (``tests/contract``) runs a tuned
policy on every store to pin the two together. So the class cannot be subclassed: a
subclass changing a formula would change the paths computed in Python and not those the
stores run.

Every function returns a value in [0, 1] for inputs in [0, 1]; boosts never decrease a
confidence, decay never increases one, and decay over h1 then h2 equals decay over h1 + h2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, final

from attrs import field, frozen, validators

from .errors import ValidationError

_unit = [validators.instance_of(float), validators.ge(0.0), validators.le(1.0)]


def _unit_field(default: float) -> float:
    return field(default=default, converter=float, validator=_unit)


def clamp01(value: float) -> float:
    """``value`` forced into [0, 1]; NaN becomes 0."""
    if math.isnan(value):
        return 0.0
    return min(max(value, 0.0), 1.0)


@final
@frozen
class ConfidencePolicy:
    """Every number of the confidence rules (see the module docstring: a value, never
    subclassed)."""

    initial_confidence: float = _unit_field(0.5)
    retrieval_boost: float = _unit_field(0.02)
    corroboration_boost: float = _unit_field(0.3)
    corroboration_similarity: float = _unit_field(0.9)
    decay_factor_per_hour: float = _unit_field(0.998)
    archive_below: float = _unit_field(0.1)
    write_gate_confidence: float = _unit_field(0.6)
    write_gate_novelty: float = _unit_field(0.3)
    near_duplicate_similarity: float = _unit_field(0.95)
    credibility_floor: float = _unit_field(0.05)
    admission_novelty_threshold: float = _unit_field(0.02)
    contradiction_similarity: float = _unit_field(0.7)
    relation_confidence_gate: float = _unit_field(0.7)
    synthesis_confidence_cap: float = _unit_field(0.7)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise TypeError(
            "ConfidencePolicy is a value and cannot be subclassed: the stores apply its"
            " formulas with its numbers; tune its settings instead, e.g."
            " ConfidencePolicy(decay_factor_per_hour=0.999)"
        )

    @classmethod
    def from_overrides(cls, **overrides: object) -> ConfidencePolicy:
        """A policy with some defaults replaced; unknown names or bad values →
        :class:`ValidationError` naming the setting."""
        known = set(_policy_names())
        for name, value in overrides.items():
            if name not in known:
                raise ValidationError(name, "is not a confidence policy setting")
            try:
                v = float(value)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                raise ValidationError(name, f"must be a number, got {value!r}") from None
            if not (0.0 <= v <= 1.0):
                raise ValidationError(name, f"must be within [0, 1], got {v}")
        return cls(**overrides)  # type: ignore[arg-type]

    # -- boosts --------------------------------------------------------------------------

    def after_retrieval(self, confidence: float) -> float:
        """Each time a query returns the entry (once per principal per boost window):
        min(c + retrieval_boost, 1.0). The store applies it (``EntryRepository.boost`` with
        ``retrieval_boost`` as the amount)."""
        return clamp01(min(clamp01(confidence) + self.retrieval_boost, 1.0))

    @staticmethod
    def credibility_weight(credibility: float) -> float:
        """w = min(1, 2 · credibility of the corroborating source)."""
        return min(1.0, 2.0 * clamp01(credibility))

    def corroboration_amount(self, credibility: float) -> float:
        """What a corroborating source of that credibility adds: corroboration_boost · w."""
        return self.corroboration_boost * self.credibility_weight(credibility)

    def after_corroboration(self, confidence: float, credibility: float) -> float:
        """min(c + corroboration_boost · w, 1.0). The store applies it
        (``EntryRepository.boost`` with :meth:`corroboration_amount` as the amount), at
        ingest and in the corroboration checker alike."""
        return clamp01(min(clamp01(confidence) + self.corroboration_amount(credibility), 1.0))

    # -- decay ---------------------------------------------------------------------------

    def decay_multiplier(self, hours: float) -> float:
        """decay_factor_per_hour ** hours, for hours ≥ 0 (negative or NaN elapsed time → 1)."""
        if math.isnan(hours) or hours <= 0.0:
            return 1.0
        return float(self.decay_factor_per_hour**hours)

    def decayed(self, confidence: float, hours: float) -> float:
        """c · decay_factor_per_hour^hours: never increases, composes over consecutive
        intervals. The store applies it to every active entry at once
        (``EntryRepository.decay`` with ``decay_factor_per_hour``), with the hours since
        each entry's last decay (or its creation)."""
        return clamp01(clamp01(confidence) * self.decay_multiplier(hours))

    def should_archive(self, confidence: float) -> bool:
        """Periodic decay archives active entries whose confidence < archive_below (the
        store decides it in the same pass, with ``archive_below``)."""
        return confidence < self.archive_below

    # -- gates ---------------------------------------------------------------------------

    def meets_write_gate(self, confidence: float, novelty: float) -> bool:
        """The tick write-back gate: confidence > 0.6 and novelty > 0.3 (both strict)."""
        return confidence > self.write_gate_confidence and novelty > self.write_gate_novelty

    @staticmethod
    def novelty(max_similarity: float | None) -> float:
        """1 − the highest similarity to anything already stored (1.0 with no neighbour)."""
        if max_similarity is None:
            return 1.0
        return clamp01(1.0 - clamp01(max_similarity))

    def corroborates(self, similarity: float) -> bool:
        return similarity >= self.corroboration_similarity

    def is_near_duplicate(self, similarity: float) -> bool:
        return similarity >= self.near_duplicate_similarity

    def synthesis_confidence(self, source_confidences: Sequence[float]) -> float:
        """min(geometric mean of the sources' confidences (0.5 with none), cap)."""
        values = [clamp01(c) for c in source_confidences]
        if not values:
            mean = 0.5
        elif any(v == 0.0 for v in values):
            mean = 0.0
        else:
            mean = math.exp(sum(math.log(v) for v in values) / len(values))
        return clamp01(min(mean, self.synthesis_confidence_cap))


def _policy_names() -> list[str]:
    return [a.name for a in ConfidencePolicy.__attrs_attrs__]


DEFAULT_POLICY = ConfidencePolicy()


def meets_write_gate(confidence: float, novelty: float) -> bool:
    """Module-level shortcut for the default policy's write gate."""
    return DEFAULT_POLICY.meets_write_gate(confidence, novelty)


__all__ = ["DEFAULT_POLICY", "ConfidencePolicy", "clamp01", "meets_write_gate"]
