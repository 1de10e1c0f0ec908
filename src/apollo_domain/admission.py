"""The admission gate: credibility floor, near-duplicate, novelty threshold (seed 002)."""

from __future__ import annotations

import enum

from attrs import frozen

from .policy import ConfidencePolicy


class RejectReason(enum.StrEnum):
    LOW_CREDIBILITY = "low_credibility"
    NEAR_DUPLICATE = "near_duplicate"
    LOW_NOVELTY = "low_novelty"


@frozen
class AdmissionDecision:
    admitted: bool
    reason: RejectReason | None = None
    novelty: float = 1.0
    detail: str = ""


ADMIT = AdmissionDecision(admitted=True)


def check_credibility(policy: ConfidencePolicy, credibility: float) -> AdmissionDecision:
    """Rule 1: effective credibility ≤ floor → reject."""
    if credibility <= policy.credibility_floor:
        return AdmissionDecision(
            admitted=False,
            reason=RejectReason.LOW_CREDIBILITY,
            detail=f"source credibility {credibility:.3f} ≤ floor {policy.credibility_floor}",
        )
    return ADMIT


def check_novelty(
    policy: ConfidencePolicy, credibility: float, max_similarity: float | None
) -> AdmissionDecision:
    """Rule 3: credibility · (1 − max_similarity) < threshold → reject."""
    novelty = policy.novelty(max_similarity)
    score = credibility * novelty
    if score < policy.admission_novelty_threshold:
        return AdmissionDecision(
            admitted=False,
            reason=RejectReason.LOW_NOVELTY,
            novelty=novelty,
            detail=(
                f"credibility {credibility:.3f} × novelty {novelty:.3f} = {score:.4f} "
                f"< {policy.admission_novelty_threshold}"
            ),
        )
    return AdmissionDecision(admitted=True, novelty=novelty)


def admit(
    policy: ConfidencePolicy,
    credibility: float,
    max_similarity: float | None,
    *,
    repeats_own_source: bool = False,
) -> AdmissionDecision:
    """The three rules in order. ``repeats_own_source``: the nearest neighbour at or above
    the near-duplicate similarity already carries evidence from a source not independent
    of this one (a source repeating itself)."""
    decision = check_credibility(policy, credibility)
    if not decision.admitted:
        return decision
    if (
        repeats_own_source
        and max_similarity is not None
        and policy.is_near_duplicate(max_similarity)
    ):
        return AdmissionDecision(
            admitted=False,
            reason=RejectReason.NEAR_DUPLICATE,
            novelty=policy.novelty(max_similarity),
            detail=f"similarity {max_similarity:.3f} to an entry from the same source",
        )
    return check_novelty(policy, credibility, max_similarity)


__all__ = [
    "AdmissionDecision",
    "RejectReason",
    "admit",
    "check_credibility",
    "check_novelty",
]
