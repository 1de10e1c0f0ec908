"""The confidence policy (docs/configuration.md, "Configuration"): defaults, overrides, and the
invariants
of every rule."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
from attrs import fields
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from apollo_domain.errors import ValidationError
from apollo_domain.policy import DEFAULT_POLICY, ConfidencePolicy, clamp01, meets_write_gate
from apollo_domain.testing import POLICY_CASES, check_policy_invariants, policy_invariants_test
from tests.strategies import (
    confidences,
    credibilities,
    hours,
    policies,
    similarities,
    unit_floats,
)

DOCUMENTED_DEFAULTS = {
    "initial_confidence": 0.5,
    "retrieval_boost": 0.02,
    "corroboration_boost": 0.3,
    "corroboration_similarity": 0.9,
    "decay_factor_per_hour": 0.998,
    "archive_below": 0.1,
    "write_gate_confidence": 0.6,
    "write_gate_novelty": 0.3,
    "near_duplicate_similarity": 0.95,
    "credibility_floor": 0.05,
    "admission_novelty_threshold": 0.02,
    "contradiction_similarity": 0.7,
    "relation_confidence_gate": 0.7,
    "synthesis_confidence_cap": 0.7,
}


def in_unit(value: float) -> bool:
    return 0.0 <= value <= 1.0


# -- defaults and overrides -------------------------------------------------------------


def test_defaults_are_the_design_table() -> None:
    """Every setting of ConfidencePolicy, and only those, with the default the policy table of
    docs/configuration.md
    table gives."""
    actual = {a.name: getattr(ConfidencePolicy(), a.name) for a in fields(ConfidencePolicy)}
    assert DOCUMENTED_DEFAULTS == actual


def test_overrides_replace_only_the_named_settings() -> None:
    """from_overrides changes the settings it names and keeps every other default."""
    policy = ConfidencePolicy.from_overrides(retrieval_boost=0.05, archive_below=0)
    expected = {**DOCUMENTED_DEFAULTS, "retrieval_boost": 0.05, "archive_below": 0.0}
    assert expected == {a.name: getattr(policy, a.name) for a in fields(ConfidencePolicy)}


def test_overrides_reject_an_unknown_setting_by_name() -> None:
    """An unknown setting name is a ValidationError whose field is that name."""
    with pytest.raises(ValidationError) as raised:
        ConfidencePolicy.from_overrides(retrieval_bost=0.05)
    assert "retrieval_bost" == raised.value.field


@pytest.mark.parametrize("value", [-0.01, 1.01, math.nan, math.inf, -math.inf, "lots", None])
@pytest.mark.parametrize("name", sorted(DOCUMENTED_DEFAULTS))
def test_overrides_reject_out_of_range_values_naming_the_setting(name: str, value: object) -> None:
    """A value outside [0, 1] (or not a number) is a ValidationError naming the setting."""
    with pytest.raises(ValidationError) as raised:
        ConfidencePolicy.from_overrides(**{name: value})
    assert name == raised.value.field


@pytest.mark.parametrize("value", [0, 0.0, 1, 1.0])
def test_overrides_accept_the_closed_unit_interval(value: float) -> None:
    """Both ends of [0, 1] are valid settings."""
    assert float(value) == ConfidencePolicy.from_overrides(archive_below=value).archive_below


def test_the_policy_is_a_value_that_cannot_be_subclassed() -> None:
    """A subclass could change a formula in Python and not in the stores, which apply the
    formulas with the policy's numbers: defining one is refused, naming what to do."""
    with pytest.raises(TypeError, match="tune its settings"):

        class SlowDecay(ConfidencePolicy):  # type: ignore[misc]
            def decayed(self, confidence: float, hours: float) -> float:
                return confidence


def test_policies_refuse_a_name_that_is_not_a_setting() -> None:
    with pytest.raises(ValueError, match="retrieval_bost"):
        policies(retrieval_bost=0.05)


# -- every function stays within [0, 1] -------------------------------------------------


@given(policies(), confidences)
def test_retrieval_stays_in_unit_interval_and_never_decreases(
    policy: ConfidencePolicy, confidence: float
) -> None:
    """after_retrieval maps [0, 1] into [0, 1] and never lowers a confidence."""
    boosted = policy.after_retrieval(confidence)
    assert in_unit(boosted)
    assert boosted >= confidence


@given(confidences)
def test_retrieval_adds_the_boost_capped_at_one(confidence: float) -> None:
    """after_retrieval(c) == min(c + 0.02, 1.0) with the default policy."""
    assert min(confidence + 0.02, 1.0) == DEFAULT_POLICY.after_retrieval(confidence)


@given(policies(), confidences, credibilities)
def test_corroboration_stays_in_unit_interval_and_never_decreases(
    policy: ConfidencePolicy, confidence: float, credibility: float
) -> None:
    """after_corroboration maps [0, 1]² into [0, 1] and never lowers a confidence."""
    boosted = policy.after_corroboration(confidence, credibility)
    assert in_unit(boosted)
    assert boosted >= confidence


@given(confidences, credibilities)
def test_corroboration_is_weighted_by_source_credibility(
    confidence: float, credibility: float
) -> None:
    """after_corroboration(c, k) == min(c + 0.3 · min(1, 2k), 1.0)."""
    expected = min(confidence + 0.3 * min(1.0, 2.0 * credibility), 1.0)
    assert expected == pytest.approx(DEFAULT_POLICY.after_corroboration(confidence, credibility))


@given(credibilities, credibilities)
def test_corroboration_boost_grows_with_credibility(low: float, high: float) -> None:
    """A more credible source never boosts less than a less credible one."""
    low, high = sorted((low, high))
    assert DEFAULT_POLICY.after_corroboration(0.4, low) <= DEFAULT_POLICY.after_corroboration(
        0.4, high
    )


@given(policies(), confidences, hours)
def test_decay_stays_in_unit_interval_and_never_increases(
    policy: ConfidencePolicy, confidence: float, elapsed: float
) -> None:
    """decayed maps [0, 1] into [0, 1] and never raises a confidence."""
    decayed = policy.decayed(confidence, elapsed)
    assert in_unit(decayed)
    assert decayed <= confidence


@given(policies(), confidences, hours, hours)
def test_decay_composes_over_consecutive_intervals(
    policy: ConfidencePolicy, confidence: float, h1: float, h2: float
) -> None:
    """Decaying over h1 and then over h2 equals decaying once over h1 + h2 (within 1e-9)."""
    stepwise = policy.decayed(policy.decayed(confidence, h1), h2)
    assert policy.decayed(confidence, h1 + h2) == pytest.approx(stepwise, abs=1e-9)


@given(confidences, hours)
def test_decay_is_the_hourly_factor_to_the_elapsed_hours(confidence: float, elapsed: float) -> None:
    """decayed(c, h) == c · 0.998^h with the default policy."""
    assert confidence * 0.998**elapsed == pytest.approx(
        DEFAULT_POLICY.decayed(confidence, elapsed), abs=1e-12
    )


@given(confidences)
def test_no_elapsed_time_is_no_decay(confidence: float) -> None:
    """Zero hours leave a confidence unchanged."""
    assert confidence == DEFAULT_POLICY.decayed(confidence, 0.0)


@given(policies(), st.lists(confidences, max_size=6))
def test_synthesis_confidence_is_in_unit_interval_and_capped(
    policy: ConfidencePolicy, sources: list[float]
) -> None:
    """A synthesis never starts above the cap, nor outside [0, 1]."""
    synthesized = policy.synthesis_confidence(sources)
    assert in_unit(synthesized)
    assert synthesized <= policy.synthesis_confidence_cap


@given(st.lists(st.floats(min_value=0.01, max_value=1.0), min_size=1, max_size=6))
def test_synthesis_confidence_is_the_capped_geometric_mean(sources: list[float]) -> None:
    """min(geometric mean of the sources, 0.7)."""
    geometric = math.prod(sources) ** (1.0 / len(sources))
    assert min(geometric, 0.7) == pytest.approx(DEFAULT_POLICY.synthesis_confidence(sources))


def test_synthesis_without_sources_starts_at_one_half() -> None:
    """With no source confidences the geometric mean is replaced by 0.5."""
    assert 0.5 == DEFAULT_POLICY.synthesis_confidence([])


@given(similarities)
def test_novelty_is_one_minus_similarity(similarity: float) -> None:
    """novelty(s) == 1 − s, within [0, 1]."""
    novelty = ConfidencePolicy.novelty(similarity)
    assert in_unit(novelty)
    assert 1.0 - similarity == novelty


def test_novelty_without_a_neighbour_is_one() -> None:
    """Nothing stored yet: everything is new."""
    assert 1.0 == ConfidencePolicy.novelty(None)


@given(st.floats(min_value=-10.0, max_value=10.0))
def test_novelty_is_in_unit_interval_for_any_cosine(similarity: float) -> None:
    """Cosines outside [0, 1] (negative, rounding above 1) still give a novelty in [0, 1]."""
    assert in_unit(ConfidencePolicy.novelty(similarity))


# -- gates ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("confidence", "novelty", "expected"),
    [
        (0.6, 0.9, False),
        (0.9, 0.3, False),
        (0.6, 0.3, False),
        (0.6000001, 0.3000001, True),
        (1.0, 1.0, True),
        (0.0, 0.0, False),
    ],
)
def test_write_gate_is_strict_at_its_boundaries(
    confidence: float, novelty: float, expected: bool
) -> None:
    """meets_write_gate(c, n) is c > 0.6 and n > 0.3: the boundaries themselves fail."""
    assert expected == meets_write_gate(confidence, novelty)


@given(confidences, unit_floats)
def test_write_gate_shortcut_matches_the_definition(confidence: float, novelty: float) -> None:
    """The module-level gate is exactly c > 0.6 and n > 0.3."""
    assert (confidence > 0.6 and novelty > 0.3) == meets_write_gate(confidence, novelty)


@pytest.mark.parametrize(
    ("similarity", "expected"), [(0.9, True), (0.8999999, False), (1.0, True), (0.0, False)]
)
def test_corroboration_similarity_is_inclusive(similarity: float, expected: bool) -> None:
    """cosine ≥ 0.9 corroborates; just below does not."""
    assert expected == DEFAULT_POLICY.corroborates(similarity)


@pytest.mark.parametrize(
    ("confidence", "expected"), [(0.0999999, True), (0.1, False), (0.5, False)]
)
def test_archive_below_is_strict(confidence: float, expected: bool) -> None:
    """Decay archives confidences strictly below 0.1."""
    assert expected == DEFAULT_POLICY.should_archive(confidence)


# -- the public invariant checks (apollo_domain.testing) --------------------------------

test_the_default_policy_keeps_every_invariant = policy_invariants_test(st.just(DEFAULT_POLICY))
test_every_drawn_policy_keeps_every_invariant = policy_invariants_test(policies())


def test_the_invariant_checks_meet_every_notable_case() -> None:
    """Drawn policies and points reach each assertion with a non-trivial case: boosts that
    raise and boosts capped at 1, decay that lowers and composes above 0, a capped synthesis.
    (Inside the run each case is also a hypothesis event; see the example test of
    docs/testing.md.)"""
    met: set[str] = set()

    @settings(derandomize=True, max_examples=300, database=None)
    @given(
        policies(),
        confidences,
        credibilities,
        hours,
        hours,
        st.lists(confidences, max_size=6),
    )
    def run(
        policy: ConfidencePolicy,
        confidence: float,
        credibility: float,
        h1: float,
        h2: float,
        sources: list[float],
    ) -> None:
        met.update(
            check_policy_invariants(
                policy, confidence, credibility, h1, h2, source_confidences=sources
            )
        )

    run()
    assert set(POLICY_CASES) == met


class PolicyDouble:
    """The default policy with one formula broken, as a program might write it by mistake:
    a stand-in that delegates everything else (the policy itself cannot be subclassed)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(DEFAULT_POLICY, name)


class LowersOnRetrieval(PolicyDouble):
    def after_retrieval(self, confidence: float) -> float:
        return clamp01(confidence - 0.01)


class EscapesOnRetrieval(PolicyDouble):
    def after_retrieval(self, confidence: float) -> float:
        return confidence + 0.5


class LowersOnCorroboration(PolicyDouble):
    def after_corroboration(self, confidence: float, credibility: float) -> float:
        return confidence * 0.9


class RaisesOnDecay(PolicyDouble):
    def decayed(self, confidence: float, hours: float) -> float:
        return clamp01(confidence + 0.001 * hours)


class ForgetsWhenDecayRan(PolicyDouble):
    def decayed(self, confidence: float, hours: float) -> float:
        return confidence * self.decay_factor_per_hour ** math.sqrt(hours)


class UncappedSynthesis(PolicyDouble):
    def synthesis_confidence(self, source_confidences: Sequence[float]) -> float:
        if not source_confidences:
            return 0.5
        return math.prod(source_confidences) ** (1.0 / len(source_confidences))


class NegativeNovelty(PolicyDouble):
    @staticmethod
    def novelty(max_similarity: float | None) -> float:
        return (max_similarity or 0.0) - 1.0


BROKEN_POLICIES = [
    (LowersOnRetrieval(), "after_retrieval(0.9) = 0.89 lowers the confidence"),
    (EscapesOnRetrieval(), "after_retrieval(0.9) = 1.4 is outside [0, 1]"),
    (LowersOnCorroboration(), "after_corroboration(0.9, 0.5) = 0.81 lowers the confidence"),
    (RaisesOnDecay(), "decayed(0.9, 10.0) = 0.91 raises the confidence"),
    (ForgetsWhenDecayRan(), "decayed over 10.0 h then 20.0 h"),
    (UncappedSynthesis(), "synthesis_confidence([0.9, 0.95]) = 0.92"),
    (NegativeNovelty(), "novelty(0.5) = -0.5 is outside [0, 1]"),
]

BROKEN_IDS = [type(policy).__name__ for policy, _ in BROKEN_POLICIES]


@pytest.mark.parametrize(("policy", "message"), BROKEN_POLICIES, ids=BROKEN_IDS)
def test_the_check_names_the_broken_invariant(policy: Any, message: str) -> None:
    """A policy that breaks one invariant fails the check with a message naming the call."""
    with pytest.raises(AssertionError) as raised:
        check_policy_invariants(
            policy, 0.9, 0.5, 10.0, 20.0, similarity=0.5, source_confidences=[0.9, 0.95]
        )
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize(("policy", "message"), BROKEN_POLICIES, ids=BROKEN_IDS)
def test_the_generated_test_finds_a_broken_policy(policy: Any, message: str) -> None:
    """policy_invariants_test draws its own points and still catches every broken rule."""
    test = settings(
        derandomize=True,
        database=None,
        report_multiple_bugs=False,
        phases=[Phase.generate],  # finding the failure is the point, not shrinking it
    )(policy_invariants_test(st.just(policy)))
    with pytest.raises(AssertionError):
        test()


@pytest.mark.parametrize(
    ("arguments", "name"),
    [
        ((1.5, 0.5, 1.0, 1.0), "confidence"),
        ((0.5, -0.1, 1.0, 1.0), "credibility"),
        ((0.5, 0.5, -1.0, 1.0), "hours"),
        ((0.5, 0.5, 1.0, math.nan), "more_hours"),
    ],
)
def test_the_check_refuses_inputs_the_invariants_do_not_cover(
    arguments: tuple[float, float, float, float], name: str
) -> None:
    """The invariants speak of inputs in [0, 1] and elapsed hours ≥ 0: others are a
    ValueError naming the argument, not a verdict on the policy."""
    with pytest.raises(ValueError, match=f"^{name} must be"):
        check_policy_invariants(DEFAULT_POLICY, *arguments)
