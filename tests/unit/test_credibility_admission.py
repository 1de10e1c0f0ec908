"""Source credibility as Beta(α, β) with labels, and the three admission rules (seed 002)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apollo_domain.admission import RejectReason, admit
from apollo_domain.credibility import SourceCredibility
from apollo_domain.errors import ValidationError
from apollo_domain.policy import DEFAULT_POLICY, ConfidencePolicy
from tests.strategies import credibilities, positive_weights, similarities

# -- credibility ------------------------------------------------------------------------


def test_a_new_source_is_half_credible() -> None:
    """Beta(1, 1): α / (α + β) = 0.5."""
    assert 0.5 == SourceCredibility("claude-new").credibility


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("moderator", 1.0),
        ("admin", 1.0),
        ("troll", 0.05),
        ("flagged", 0.05),
        (" Moderator ", 1.0),
        ("TROLL", 0.05),
    ],
)
def test_labels_override_the_evidence(label: str, expected: float) -> None:
    """A label fixes credibility whatever the accumulated evidence says."""
    source = SourceCredibility("agent").validated(10).refuted(3).labelled(label)
    assert expected == source.credibility


@pytest.mark.parametrize("label", [None, "", "vip"])
def test_other_labels_leave_the_evidence_in_charge(label: str | None) -> None:
    """No label, an empty one, or one without an override: α / (α + β)."""
    source = SourceCredibility("agent").validated(2).labelled(label)
    assert 3 / 4 == source.credibility


def test_validated_evidence_adds_to_alpha() -> None:
    """validated() adds 1 to α; validated(w) adds w."""
    source = SourceCredibility("agent").validated().validated(2.5)
    assert (4.5, 1.0) == (source.alpha, source.beta)


def test_refuted_evidence_adds_to_beta() -> None:
    """refuted() adds 1 to β; refuted(w) adds w."""
    source = SourceCredibility("agent").refuted().refuted(0.5)
    assert (1.0, 2.5) == (source.alpha, source.beta)


def test_evidence_weight_is_clamped_to_ten() -> None:
    """A weight above 10 counts as 10."""
    source = SourceCredibility("agent").validated(50).refuted(1e9)
    assert (11.0, 11.0) == (source.alpha, source.beta)


@pytest.mark.parametrize("weight", [0, 0.0, -1.0, math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("side", ["validated", "refuted"])
def test_non_positive_or_non_finite_weights_are_rejected(side: str, weight: float) -> None:
    """Zero, negative, NaN and infinite weights are a ValidationError on 'weight'."""
    with pytest.raises(ValidationError) as raised:
        getattr(SourceCredibility("agent"), side)(weight)
    assert "weight" == raised.value.field


@given(st.lists(st.tuples(st.booleans(), st.none() | positive_weights), max_size=30))
def test_credibility_stays_in_the_half_open_unit_interval(
    evidence: list[tuple[bool, float | None]],
) -> None:
    """Whatever evidence accumulates, credibility stays in (0, 1]."""
    source = SourceCredibility("agent")
    for confirmed, weight in evidence:
        source = source.validated(weight) if confirmed else source.refuted(weight)
    assert 0.0 < source.credibility <= 1.0


@given(st.none() | positive_weights)
def test_validation_raises_and_refutation_lowers_credibility(weight: float | None) -> None:
    """Validated evidence never lowers credibility; refuted evidence never raises it."""
    source = SourceCredibility("agent", alpha=3.0, beta=2.0)
    assert (
        source.validated(weight).credibility
        > source.credibility
        > source.refuted(weight).credibility
    )


# -- admission --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("credibility", "max_similarity", "repeats", "expected"),
    [
        (0.5, None, False, None),
        (0.5, 0.5, False, None),
        (0.05, None, False, RejectReason.LOW_CREDIBILITY),
        (0.0, None, False, RejectReason.LOW_CREDIBILITY),
        (0.01, 0.99, True, RejectReason.LOW_CREDIBILITY),
        (0.5, 0.95, True, RejectReason.NEAR_DUPLICATE),
        (0.5, 0.99, True, RejectReason.NEAR_DUPLICATE),
        (0.5, 0.94, True, None),
        (0.5, 0.99, False, RejectReason.LOW_NOVELTY),
        (0.06, 0.7, False, RejectReason.LOW_NOVELTY),
        (1.0, 0.97, False, None),
    ],
    ids=[
        "nothing-similar",
        "new-enough",
        "credibility-at-floor",
        "no-credibility",
        "credibility-checked-first",
        "near-duplicate-at-threshold",
        "near-duplicate",
        "repeat-below-near-duplicate-threshold",
        "low-novelty",
        "low-credibility-times-novelty",
        "credible-enough-for-a-close-neighbour",
    ],
)
def test_admission_rules_in_order(
    credibility: float, max_similarity: float | None, repeats: bool, expected: RejectReason | None
) -> None:
    """Credibility floor, then near-duplicate of the own source, then novelty; first one decides."""
    decision = admit(DEFAULT_POLICY, credibility, max_similarity, repeats_own_source=repeats)
    assert (expected is None, expected) == (decision.admitted, decision.reason)


def test_credibility_just_above_the_floor_is_admitted() -> None:
    """The floor is inclusive for rejection: anything above it passes rule 1."""
    policy = ConfidencePolicy(credibility_floor=0.25, admission_novelty_threshold=0.0)
    expected = (False, True)
    assert expected == (admit(policy, 0.25, None).admitted, admit(policy, 0.250001, None).admitted)


def test_novelty_exactly_at_threshold_is_admitted() -> None:
    """credibility · novelty equal to the threshold is not below it: admitted."""
    policy = ConfidencePolicy(admission_novelty_threshold=0.25)
    decision = admit(policy, 0.5, 0.5)
    assert (True, None, 0.5) == (decision.admitted, decision.reason, decision.novelty)


@given(credibilities, st.none() | similarities, st.booleans())
def test_admission_rejects_with_the_first_failing_rule(
    credibility: float, max_similarity: float | None, repeats: bool
) -> None:
    """The decision is the first of the three rules that fails, or admission when none does."""
    policy = DEFAULT_POLICY
    novelty = 1.0 if max_similarity is None else 1.0 - max_similarity
    if credibility <= policy.credibility_floor:
        expected = RejectReason.LOW_CREDIBILITY
    elif repeats and max_similarity is not None and max_similarity >= 0.95:
        expected = RejectReason.NEAR_DUPLICATE
    elif credibility * novelty < policy.admission_novelty_threshold:
        expected = RejectReason.LOW_NOVELTY
    else:
        expected = None
    decision = admit(policy, credibility, max_similarity, repeats_own_source=repeats)
    assert (expected is None, expected) == (decision.admitted, decision.reason)
