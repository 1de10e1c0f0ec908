"""Temporal cues (apollo_domain.temporal): the day or span a question names, read as a
window of time, and the candidates of that time put first."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, date, datetime, timedelta

import pytest
from attrs import evolve
from hypothesis import event, given
from hypothesis import strategies as st

from apollo_domain.fairness import fair_page
from apollo_domain.model import AccessScope, ContentType, Entry, SourceRef, Status
from apollo_domain.retrieval import Fused
from apollo_domain.temporal import (
    CUE_CHARS,
    EARLIEST_ZONE,
    LATEST_ZONE,
    Window,
    entry_time,
    in_window,
    time_window,
)

#: A Friday.
NOW = datetime(2026, 5, 1, 10, 30, tzinfo=UTC)


def _days(first: date, after: date) -> Window:
    """The window of the days ``[first, after)``, widened to every time zone."""
    start = datetime(first.year, first.month, first.day, tzinfo=UTC) - EARLIEST_ZONE
    end = datetime(after.year, after.month, after.day, tzinfo=UTC) + LATEST_ZONE
    return Window(start, end)


@pytest.mark.parametrize(
    ("question", "first", "after"),
    [
        ("Where did Leo have dinner on 2026-03-23?", date(2026, 3, 23), date(2026, 3, 24)),
        ("what happened on 23 March", date(2026, 3, 23), date(2026, 3, 24)),
        ("on the 23rd of March 2025?", date(2025, 3, 23), date(2025, 3, 24)),
        ("on March 23rd", date(2026, 3, 23), date(2026, 3, 24)),
        ("on Mar. 3, 2024", date(2024, 3, 3), date(2024, 3, 4)),
        ("on 3 July", date(2025, 7, 3), date(2025, 7, 4)),  # this year's is still to come
        ("in March", date(2026, 3, 1), date(2026, 4, 1)),
        ("during December", date(2025, 12, 1), date(2026, 1, 1)),
        ("in May", date(2026, 5, 1), date(2026, 6, 1)),
        ("March 2026 releases", date(2026, 3, 1), date(2026, 4, 1)),
        ("in 2025", date(2025, 1, 1), date(2026, 1, 1)),
        ("What did we decide today?", date(2026, 5, 1), date(2026, 5, 2)),
        ("What broke yesterday?", date(2026, 4, 30), date(2026, 5, 1)),
        ("three days ago", date(2026, 4, 28), date(2026, 4, 29)),
        ("a week ago", date(2026, 4, 20), date(2026, 4, 27)),
        ("2 months ago", date(2026, 3, 1), date(2026, 4, 1)),
        ("last week", date(2026, 4, 20), date(2026, 4, 27)),
        ("this week", date(2026, 4, 27), date(2026, 5, 4)),
        ("last weekend", date(2026, 4, 25), date(2026, 4, 27)),
        ("LAST MONTH", date(2026, 4, 1), date(2026, 5, 1)),
        ("this year", date(2026, 1, 1), date(2027, 1, 1)),
        ("last year", date(2025, 1, 1), date(2026, 1, 1)),
        ("yesterday, or on 2026-03-23?", date(2026, 4, 30), date(2026, 5, 1)),  # the first
    ],
)
def test_a_named_day_or_span_is_read_as_its_window(question, first, after):
    assert _days(first, after) == time_window(question, NOW)


@pytest.mark.parametrize(
    "question",
    [
        "kafka static membership",
        "I may 3 times",  # the month May is only read capitalised
        "the timeout is 30 s",
        "since 2019",  # a bare year is no span asked for
        "on 30 February",  # no such day
        "on 2026-13-01",
        "9999-12-31",  # the day after it is out of the calendar
        "10000 days ago",
        "",
    ],
)
def test_a_text_naming_no_time_has_no_window(question):
    assert time_window(question, NOW) is None


def test_a_day_reads_the_same_whatever_the_clock_s_zone():
    elsewhere = NOW.astimezone(__import__("zoneinfo").ZoneInfo("Pacific/Kiritimati"))
    assert time_window("on 23 March", NOW) == time_window("on 23 March", elsewhere)


def test_only_the_first_characters_are_read_for_a_cue():
    padding = "x" * (CUE_CHARS - len(" yesterday") - 1)
    assert time_window(padding + " yesterday", NOW) is not None
    assert time_window(padding + "xx yesterday", NOW) is None


def test_a_hostile_text_is_read_in_bounded_time():
    """Bounded quantifiers and a bounded prefix: the worst texts (every word a start of a
    cue) cost about what any thousand characters cost."""
    hostile = ["1 " * 5_000, "2026-" * 2_000, "in " * 3_000, "3 days ago " * 1_000]
    started = time.perf_counter()
    windows = [time_window(text, NOW) for text in hostile]
    assert [None, None, None, _days(date(2026, 4, 28), date(2026, 4, 29))] == windows
    assert time.perf_counter() - started < 5.0  # seconds: catastrophic backtracking is not


#: Words a question may name a time with, and words around them.
CUE_WORDS = [
    *("on", "in", "during", "of", "ago", "last", "this", "today", "yesterday", "May", "may"),
    *("March", "Mar.", "sept", "day", "days", "week", "weekend", "months", "year", "the"),
    *("23", "3rd", "31", "0", "2026", "1999", "2026-03-23", "2026-02-30", "9999-12-31", ","),
]


@given(
    st.one_of(
        st.text(max_size=300),
        st.lists(st.sampled_from(CUE_WORDS), max_size=12).map(" ".join),
    ),
    st.datetimes(timezones=st.just(UTC)),
)
def test_any_text_gives_no_window_or_a_proper_one(text, now):
    window = time_window(text, now)
    event("a window" if window is not None else "no window")
    if window is not None:
        assert window.start < window.end
        assert window.end - window.start >= timedelta(days=1) + EARLIEST_ZONE + LATEST_ZONE


@given(
    st.dates(min_value=date(2000, 1, 1), max_value=date(2040, 12, 31)),
    st.sampled_from(["on {d:%Y-%m-%d}", "on {d.day} {d:%B} {d.year}", "{d:%B} {d.day}, {d.year}"]),
)
def test_a_named_day_holds_that_day_in_every_zone(day, form):
    window = time_window(form.format(d=day), NOW)
    event(form)
    assert window is not None
    noon = datetime(day.year, day.month, day.day, 12, tzinfo=UTC)
    assert noon in window
    assert noon - timedelta(hours=12 + 14) in window  # 00:00 in UTC+14
    assert noon + timedelta(hours=11 + 12, minutes=59) in window  # 23:59 in UTC-12
    assert noon - timedelta(days=2) not in window


def _entry(number: int, created: datetime, said: str | None = None) -> Entry:
    context = {} if said is None else {"episode": {"id": "e", "turn": 0, "at": said}}
    return Entry(
        id=uuid.UUID(int=number),
        content=f"entry {number}",
        content_hash=f"h{number}",
        content_type=ContentType.FACT,
        knowledge_domain="general",
        tags=(),
        confidence=0.5,
        status=Status.CANDIDATE,
        source=SourceRef("claude", "test"),
        access_scope=AccessScope.GLOBAL,
        owner_id=None,
        created_at=created,
        updated_at=created,
        source_context=context,
    )


def test_an_entry_s_time_is_its_turn_s_else_when_it_was_stored():
    stored = datetime(2026, 4, 1, tzinfo=UTC)
    assert stored == entry_time(_entry(1, stored))
    said = _entry(2, stored, "2026-03-23T18:05:00+00:00")
    assert datetime(2026, 3, 23, 18, 5, tzinfo=UTC) == entry_time(said)
    assert stored == entry_time(_entry(3, stored, "not a time"))
    assert stored == entry_time(_entry(4, stored, "2026-03-23T18:05:00"))  # no zone: unknown


def test_the_window_s_candidates_are_those_of_the_ranking_said_in_it():
    march, april = datetime(2026, 3, 23, 18, tzinfo=UTC), datetime(2026, 4, 13, 18, tzinfo=UTC)
    entries = {e.id: e for e in (_entry(1, april), _entry(2, march), _entry(3, march))}
    ranking = [Fused(uuid.UUID(int=i), 1.0 - i / 10, {"vector": 0.9}) for i in (3, 1, 2, 4)]
    window = time_window("on 23 March", NOW)
    assert window is not None
    assert {uuid.UUID(int=3), uuid.UUID(int=2)} == in_window(ranking, entries, window)
    assert set() == in_window(ranking, entries, Window(NOW, NOW + timedelta(days=1)))


def test_a_fair_page_walks_the_dated_candidates_first_each_part_by_its_rules():
    """The dated ones first whatever their score, then the rest; the share cap still holds
    within the dated ones (a third of the page while others match)."""
    day = datetime(2026, 3, 23, 18, tzinfo=UTC)
    entries = {}
    for number in range(1, 7):  # entries 1-3 of agent a, 4-6 of agent b
        entry = _entry(number, day)
        agent = "a" if number <= 3 else "b"
        entries[entry.id] = evolve(entry, source=SourceRef(agent), content=f"fact {number} x")
    ranking = [Fused(uuid.UUID(int=i), 1.0 - i / 10, {}) for i in range(1, 7)]
    dated = {uuid.UUID(int=i) for i in (2, 3, 6)}
    page = fair_page(ranking, entries, {}, 3, 0.9, set(), dated)
    # dated, best first, one per source (the cap of a page of 3 is 1); then, no other
    # source left with room, the best waiting one: dated too
    assert [2, 6, 3] == [p.entry_id.int for p in page]
    undated = fair_page(ranking, entries, {}, 3, 0.9, set())
    assert [1, 4, 2] == [p.entry_id.int for p in undated]
