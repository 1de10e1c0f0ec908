"""The token bucket of a principal's write rate (:mod:`apollo_domain.rates`) and its
settings (``APOLLO_WRITE_RATE``, ``APOLLO_WRITE_BURST``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from apollo_app import Settings
from apollo_domain.errors import ConfigurationError
from apollo_domain.rates import Bucket, WriteRate, charge, refilled

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_new_bucket_is_full_and_a_write_takes_its_cost():
    rate = WriteRate(per_second=2, burst=10)
    first = charge(None, rate, 4, T0)
    assert first.granted
    assert Bucket(6, T0) == first.bucket


def test_a_write_passes_while_one_token_is_left_and_may_take_the_bucket_below_zero():
    """One token left: a write of five passes and leaves -4; the next waits (1 - -4) / 2."""
    rate = WriteRate(per_second=2, burst=10)
    bucket = Bucket(1, T0)
    passed = charge(bucket, rate, 5, T0)
    assert passed.granted and -4 == passed.bucket.tokens
    refused = charge(passed.bucket, rate, 1, T0)
    assert not refused.granted
    assert 2.5 == refused.retry_after
    assert passed.bucket == refused.bucket, "a refusal only refills"


def test_refill_is_capped_at_the_burst_and_never_runs_backwards():
    rate = WriteRate(per_second=2, burst=10)
    assert 10 == refilled(Bucket(0, T0), rate, T0 + timedelta(hours=1))
    assert 3 == refilled(Bucket(3, T0), rate, T0 - timedelta(seconds=30))


def test_forced_charges_pass_on_an_empty_bucket():
    """The rest of a write already granted (a text's statements after its split)."""
    rate = WriteRate(per_second=2, burst=10)
    forced = charge(Bucket(-3, T0), rate, 4, T0, force=True)
    assert forced.granted and -7 == forced.bucket.tokens


@settings(max_examples=300, deadline=None)
@given(
    per_second=st.floats(0.1, 100),
    burst=st.floats(1, 200),
    steps=st.lists(
        st.tuples(st.floats(0, 5), st.integers(1, 50)),  # (seconds since the last, cost)
        min_size=1,
        max_size=60,
    ),
)
def test_no_sequence_of_writes_gets_more_than_the_burst_plus_the_rate(per_second, burst, steps):
    """Whatever the writes and their spacing: the entries granted by time t are at most
    ``burst + per_second * t`` plus the largest write's cost (one that took the bucket
    below zero), and a refused write is told a wait after which one token is there."""
    rate = WriteRate(per_second=per_second, burst=burst)
    bucket: Bucket | None = None
    now, granted, refusals, largest = T0, 0, 0, 0
    for gap, cost in steps:
        now += timedelta(seconds=gap)
        result = charge(bucket, rate, cost, now)
        if result.granted:
            granted += cost
            largest = max(largest, cost)
        else:
            refusals += 1
            later = charge(result.bucket, rate, 1, now + timedelta(seconds=result.retry_after))
            assert later.granted
        bucket = result.bucket
        elapsed = (now - T0).total_seconds()
        assert granted <= burst + per_second * elapsed + largest + 1e-6
    event(f"refusals: {'none' if refusals == 0 else 'some'}")
    event(f"bucket below zero: {bucket is not None and bucket.tokens < 0}")


def test_the_settings_default_on_and_read_off_or_a_rate():
    assert WriteRate(100, 1_000) == Settings().write_limit
    assert Settings.from_env({"APOLLO_WRITE_RATE": "off"}).write_limit is None
    read = Settings.from_env({"APOLLO_WRITE_RATE": "2.5", "APOLLO_WRITE_BURST": "40"})
    assert WriteRate(2.5, 40) == read.write_limit


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({"APOLLO_WRITE_RATE": "fast"}, "APOLLO_WRITE_RATE"),
        ({"APOLLO_WRITE_RATE": "0"}, "APOLLO_WRITE_RATE"),
        ({"APOLLO_WRITE_RATE": "-3"}, "APOLLO_WRITE_RATE"),
        ({"APOLLO_WRITE_RATE": "nan"}, "APOLLO_WRITE_RATE"),
        ({"APOLLO_WRITE_BURST": "0.5"}, "APOLLO_WRITE_BURST"),
    ],
)
def test_bad_write_rate_settings_are_refused_naming_the_variable(environ, variable):
    with pytest.raises(ConfigurationError) as refused:
        Settings.from_env(environ)
    assert variable == refused.value.variable
