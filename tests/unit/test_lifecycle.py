"""Lifecycle transitions: deprecate, force_decay, archive_stale, resolve_dispute
(docs/architecture.md, "The use cases")."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st

from apollo_domain.errors import InvalidTransition, UnknownResolution, ValidationError
from apollo_domain.lifecycle import (
    deprecate,
    is_stale,
    lose_dispute,
    resolve_dispute,
    settle,
    stale_cutoff,
    validate_decay_factor,
    validate_stale_days,
)
from apollo_domain.model import Entry, Status
from tests.strategies import EPOCH, datetimes, entries, make_entry

NOW = EPOCH + timedelta(days=30)
LATER = NOW + timedelta(hours=5)

# -- deprecate --------------------------------------------------------------------------


def test_deprecate_archives_keeping_the_source_and_storing_the_reason() -> None:
    """Status archived, source untouched, reason recorded next to the caller's context."""
    entry = make_entry()
    deprecated = deprecate(entry, "superseded by v2", NOW)
    expected = (
        Status.ARCHIVED,
        entry.source,
        {"origin": "test", "deprecation_reason": "superseded by v2"},
        NOW,
        entry.confidence,
    )
    actual = (
        deprecated.status,
        deprecated.source,
        dict(deprecated.source_context),
        deprecated.updated_at,
        deprecated.confidence,
    )
    assert expected == actual


def test_deprecate_leaves_the_input_entry_as_it_was() -> None:
    """The given entry (and its context mapping) is not mutated."""
    entry = make_entry()
    before = evolve(entry, source_context=dict(entry.source_context))
    deprecate(entry, "obsolete", NOW)
    assert (before, {"origin": "test"}) == (entry, dict(entry.source_context))


def test_repeating_the_same_deprecation_is_a_no_op() -> None:
    """The same reason on an entry already deprecated with it returns that very entry."""
    once = deprecate(make_entry(), "obsolete", NOW)
    assert once is deprecate(once, "obsolete", LATER)


def test_the_same_reason_with_surrounding_spaces_is_the_same_call() -> None:
    """Reasons are stripped before comparison."""
    once = deprecate(make_entry(), "obsolete", NOW)
    assert once is deprecate(once, "  obsolete ", LATER)


def test_deprecating_again_with_another_reason_updates_it() -> None:
    """A different reason replaces the recorded one."""
    once = deprecate(make_entry(), "obsolete", NOW)
    twice = deprecate(once, "wrong", LATER)
    expected = (Status.ARCHIVED, "wrong", LATER)
    actual = (twice.status, twice.source_context["deprecation_reason"], twice.updated_at)
    assert expected == actual


@pytest.mark.parametrize("reason", ["", "   ", None, 42])
def test_deprecation_needs_a_reason(reason: object) -> None:
    """An empty or non-text reason is a ValidationError on 'reason'."""
    with pytest.raises(ValidationError) as raised:
        deprecate(make_entry(), reason, NOW)  # type: ignore[arg-type]
    assert "reason" == raised.value.field


# -- force_decay ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "factor",
    [-0.1, -1, 1.0000001, 2, math.nan, math.inf, -math.inf, True, False, "half", "0.5", None],
    ids=[
        "negative",
        "negative-int",
        "just-above-one",
        "two",
        "nan",
        "inf",
        "minus-inf",
        "true",
        "false",
        "word",
        "numeric-string",
        "none",
    ],
)
def test_force_decay_rejects_bad_factors(factor: object) -> None:
    """Anything but a finite number in [0, 1] is a ValidationError on 'factor'."""
    with pytest.raises(ValidationError) as raised:
        validate_decay_factor(factor)
    assert "factor" == raised.value.field


@pytest.mark.parametrize("factor", [0, 0.0, 0.5, 1, 1.0])
def test_force_decay_accepts_the_closed_unit_interval(factor: float) -> None:
    """0 and 1 are both allowed, as floats or ints."""
    assert float(factor) == validate_decay_factor(factor)


# -- archive_stale ----------------------------------------------------------------------


@pytest.mark.parametrize("days", [-1, -0.001, math.nan, math.inf, True, "week", None], ids=str)
def test_archive_stale_rejects_bad_days(days: object) -> None:
    """Days must be a finite number ≥ 0, else ValidationError on 'days'."""
    with pytest.raises(ValidationError) as raised:
        validate_stale_days(days)
    assert "days" == raised.value.field


@pytest.mark.parametrize("days", [0, 0.5, 30, 3650])
def test_archive_stale_accepts_non_negative_days(days: float) -> None:
    """Zero and positive day counts are valid."""
    assert float(days) == validate_stale_days(days)


def test_stale_cutoff_is_now_minus_days() -> None:
    """The cutoff is now − days."""
    assert NOW - timedelta(days=7.5) == stale_cutoff(NOW, 7.5)


@pytest.mark.parametrize(
    ("created", "updated", "status", "expected"),
    [
        (NOW - timedelta(days=40), NOW - timedelta(days=40), Status.CONFIRMED, True),
        (NOW - timedelta(days=40), NOW - timedelta(days=1), Status.CONFIRMED, False),
        (NOW - timedelta(days=40), None, Status.CANDIDATE, True),
        (NOW - timedelta(days=1), None, Status.CANDIDATE, False),
        (NOW - timedelta(days=30), NOW - timedelta(days=30), Status.DISPUTED, False),
        (NOW - timedelta(days=40), NOW - timedelta(days=40), Status.ARCHIVED, False),
    ],
    ids=[
        "untouched-for-long",
        "recently-updated",
        "never-updated-old",
        "never-updated-new",
        "exactly-at-cutoff",
        "already-archived",
    ],
)
def test_staleness_uses_last_update_else_creation(
    created: datetime, updated: datetime | None, status: Status, expected: bool
) -> None:
    """Stale = not archived and COALESCE(updated_at, created_at) strictly older than cutoff."""
    entry = make_entry(created_at=created, updated_at=updated, status=status)
    assert expected == is_stale(entry, stale_cutoff(NOW, 30))


@given(entries(), datetimes)
def test_staleness_property(entry: Entry, cutoff: datetime) -> None:
    """is_stale is exactly: active and COALESCE(updated_at, created_at) < cutoff."""
    last_touch = entry.updated_at if entry.updated_at is not None else entry.created_at
    expected = entry.status is not Status.ARCHIVED and last_touch < cutoff
    assert expected == is_stale(entry, cutoff)


# -- resolve_dispute --------------------------------------------------------------------

DISPUTED = make_entry(status=Status.DISPUTED, confidence=0.42)


@pytest.mark.parametrize("resolution", ["accept", "keep", " ACCEPT ", ":keep"])
def test_accept_and_keep_confirm_a_disputed_entry(resolution: str) -> None:
    """accept/keep: confirmed, confirmed_at set, resolution recorded, confidence unchanged."""
    resolved = resolve_dispute(DISPUTED, resolution, NOW)
    word = resolution.strip().lower().removeprefix(":")
    expected = (Status.CONFIRMED, NOW, word, 0.42, DISPUTED.source)
    actual = (
        resolved.status,
        resolved.confirmed_at,
        resolved.source_context["dispute_resolution"],
        resolved.confidence,
        resolved.source,
    )
    assert expected == actual


def test_reject_archives_a_disputed_entry() -> None:
    """reject: archived, not confirmed, resolution recorded, confidence unchanged."""
    resolved = resolve_dispute(DISPUTED, "reject", NOW)
    expected = (Status.ARCHIVED, None, "reject", 0.42)
    actual = (
        resolved.status,
        resolved.confirmed_at,
        resolved.source_context["dispute_resolution"],
        resolved.confidence,
    )
    assert expected == actual


def test_resolving_keeps_the_callers_context_and_the_input_entry() -> None:
    """The recorded resolution joins the existing context; the input entry is not mutated."""
    resolved = resolve_dispute(DISPUTED, "accept", NOW)
    expected = ({"origin": "test", "dispute_resolution": "accept"}, {"origin": "test"})
    assert expected == (dict(resolved.source_context), dict(DISPUTED.source_context))


@pytest.mark.parametrize("resolution", ["maybe", "", None, "accepted", 1])
def test_an_unknown_resolution_fails(resolution: object) -> None:
    """Anything but accept/keep/reject is UnknownResolution, itself an InvalidTransition."""
    with pytest.raises(UnknownResolution) as raised:
        resolve_dispute(DISPUTED, resolution, NOW)
    assert (True, "resolution") == (isinstance(raised.value, InvalidTransition), raised.value.field)


@pytest.mark.parametrize("status", [Status.CANDIDATE, Status.CONFIRMED, Status.ARCHIVED])
@pytest.mark.parametrize("resolution", ["accept", "keep", "reject"])
def test_only_disputed_entries_can_be_resolved(status: Status, resolution: str) -> None:
    """A non-disputed entry is an InvalidTransition (not an unknown resolution)."""
    entry = make_entry(status=status)
    with pytest.raises(InvalidTransition) as raised:
        resolve_dispute(entry, resolution, NOW)
    assert (False, {"origin": "test"}) == (
        isinstance(raised.value, UnknownResolution),
        dict(entry.source_context),
    )


@given(entries(), st.sampled_from(["accept", "keep", "reject", "maybe"]))
def test_resolution_never_touches_confidence_or_content(entry: Entry, resolution: str) -> None:
    """Whatever the outcome, confidence, content and source stay as they were."""
    try:
        resolved = resolve_dispute(entry, resolution, NOW)
    except InvalidTransition:
        assert entry.status is not Status.DISPUTED or resolution == "maybe"
        return
    expected = (entry.confidence, entry.content, entry.source, entry.id)
    assert expected == (resolved.confidence, resolved.content, resolved.source, resolved.id)


# -- the other side of a dispute ----------------------------------------------------------


@given(entries())
def test_losing_a_dispute_archives_with_the_reason_and_keeps_confidence(entry: Entry) -> None:
    """Any active entry is archived with ``archive_reason = lost_dispute``; an archived one
    is left as it is."""
    lost = lose_dispute(entry, NOW)
    if entry.status is Status.ARCHIVED:
        assert lost is entry
        return
    expected = (Status.ARCHIVED, "lost_dispute", entry.confidence, entry.confirmed_at, NOW)
    assert expected == (
        lost.status,
        lost.source_context["archive_reason"],
        lost.confidence,
        lost.confirmed_at,
        lost.updated_at,
    )


@pytest.mark.parametrize(
    ("confirmed_at", "prior"), [(None, Status.CANDIDATE), (EPOCH, Status.CONFIRMED)]
)
def test_a_settled_dispute_returns_the_entry_to_its_prior_status(
    confirmed_at: datetime | None, prior: Status
) -> None:
    """Confirmed when it had been confirmed (confirmed_at kept), else candidate."""
    entry = make_entry(status=Status.DISPUTED, confirmed_at=confirmed_at)
    settled = settle(entry, NOW)
    assert (prior, confirmed_at, entry.confidence, NOW) == (
        settled.status,
        settled.confirmed_at,
        settled.confidence,
        settled.updated_at,
    )


@pytest.mark.parametrize("status", [Status.CANDIDATE, Status.CONFIRMED, Status.ARCHIVED])
def test_settling_leaves_an_undisputed_entry_alone(status: Status) -> None:
    entry = make_entry(status=status)
    assert entry is settle(entry, NOW)
