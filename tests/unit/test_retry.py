"""The outbox's backoff: capped exponential waits and a finite attempt budget."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import event, given

from apollo_domain.errors import ValidationError
from apollo_domain.retry import OutboxRetry
from tests.strategies import EPOCH, failure_counts, outbox_retries


def test_the_default_waits_double_from_five_seconds_to_ten_minutes():
    """Defaults: 5 s, doubling, capped at 600 s; the 20th failure is the last."""
    retry = OutboxRetry()
    waits = [retry.delay(n).total_seconds() for n in range(10)]
    assert [5, 10, 20, 40, 80, 160, 320, 600, 600, 600] == waits
    assert EPOCH + timedelta(seconds=600) == retry.retry_at(18, EPOCH)
    assert retry.retry_at(19, EPOCH) is None
    total = sum((retry.delay(n) for n in range(19)), timedelta())
    assert timedelta(hours=2) < total


@given(outbox_retries(), failure_counts)
def test_waits_grow_until_the_cap_and_never_pass_it(retry, failures):
    """Each wait is base · 2^failures or the cap, whichever is smaller: at least the
    previous one, at most the cap, and the first is the base."""
    wait = retry.delay(failures)
    previous = retry.delay(failures - 1) if failures else wait
    at_cap = wait == timedelta(seconds=retry.max_seconds)
    event("capped" if at_cap else "doubling")
    assert previous <= wait <= timedelta(seconds=retry.max_seconds)
    assert timedelta(seconds=retry.base_seconds) == retry.delay(0)
    if not at_cap:
        assert pytest.approx(retry.base_seconds * 2.0**failures) == wait.total_seconds()


@given(outbox_retries(), failure_counts)
def test_an_item_is_dead_exactly_when_its_attempts_are_spent(retry, failures):
    """``retry_at`` is None (dead) once this failure is the ``max_attempts``-th, else now
    plus the wait."""
    dead = failures + 1 >= retry.max_attempts
    event("dead" if dead else "retried")
    expected = None if dead else EPOCH + retry.delay(failures)
    assert expected == retry.retry_at(failures, EPOCH)


def test_a_lease_starts_at_the_claim():
    assert EPOCH + timedelta(seconds=30) == OutboxRetry(lease_seconds=30).lease_until(EPOCH)


@pytest.mark.parametrize(
    ("changes", "name"),
    [
        ({"base_seconds": 0}, "base_seconds"),
        ({"max_seconds": -1}, "max_seconds"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"lease_seconds": 0}, "lease_seconds"),
    ],
)
def test_out_of_range_values_are_refused(changes, name):
    with pytest.raises(ValueError, match=name):
        OutboxRetry(**changes)


def test_a_cap_below_the_base_is_refused_naming_the_cap():
    with pytest.raises(ValidationError) as err:
        OutboxRetry(base_seconds=60, max_seconds=10)
    assert "max_seconds" == err.value.field
