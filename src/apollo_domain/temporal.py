"""Temporal cues (docs/retrieval.md, "Temporal cues"): the day or span of time a question
names, read as a window of time, and the candidates whose time falls in it.

A question names a time in English, one of:

- a day: ``2026-03-23``, ``23 March``, ``23rd of March 2026``, ``March 23``,
  ``Mar 23, 2026``, ``today``, ``yesterday``, ``3 days ago``;
- a week: ``last week``, ``this week``, ``last weekend``, ``2 weeks ago`` (weeks run
  Monday to Sunday);
- a month: ``in March``, ``March 2026``, ``last month``, ``this month``, ``2 months ago``;
- a year: ``in 2025``, ``last year``, ``this year``.

A date without a year is the latest one not after the question's time (``now``, the store's
clock); relative cues count back from it. The first cue within the text's first
:data:`CUE_CHARS` characters is the one read. Times are in UTC and a question's time zone
is unknown, so a day (and each span) is widened to every zone's reading of it: from 14
hours before its UTC start to 12 hours after its end.

The candidates the signals found whose time (:func:`entry_time`: the time of the turn a
statement was said in, else when the entry was stored) falls in the window
(:func:`in_window`) come first on the page, each part in its usual order
(:func:`~apollo_domain.fairness.fair_page`), and name :data:`TEMPORAL` among their signals.
A question's time is its most specific part: the day asked about outranks a closer wording
of another day. No entry is added or dropped, so a wrong reading of a question can reorder
a page, never fill it with what no signal found.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final
from uuid import UUID

from attrs import frozen

from .episodes import EPISODE_CONTEXT
from .model import Entry
from .retrieval import Fused

#: What a result of the time its question names shows among its signals (score 1).
TEMPORAL: Final = "temporal"

#: A question names its time within this many characters: a longer text is a passage, whose
#: dates are what it says, not when to look (and reading it stays under a millisecond or so).
CUE_CHARS: Final = 1_000

#: Every zone's reading of a UTC day starts at most this long before it (UTC+14) ...
EARLIEST_ZONE: Final = timedelta(hours=14)
#: ... and ends at most this long after it (UTC-12).
LATEST_ZONE: Final = timedelta(hours=12)

#: English month names (written out: ``calendar``'s follow the process's locale).
_MONTH_NAMES: Final = (
    *("january", "february", "march", "april", "may", "june", "july", "august"),
    *("september", "october", "november", "december"),
)
_MONTHS: Final = {
    name: number for number, full in enumerate(_MONTH_NAMES, start=1) for name in (full, full[:3])
} | {"sept": 9}
_MONTH: Final = "|".join(sorted(_MONTHS, key=len, reverse=True))
_COUNTS: Final = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_COUNT: Final = r"\d{1,4}|" + "|".join(_COUNTS)
_ORDINAL: Final = r"(?:st|nd|rd|th)?"

#: Each cue's pattern, by name; every quantifier is bounded, so a hostile text costs time
#: linear in its length.
_CUES: Final = re.compile(
    r"\b(?:"  # every cue starts a word: the other places fail at once
    + "|".join(
        (
            r"(?P<iso>(?P<iy>\d{4})-(?P<im>\d{1,2})-(?P<id>\d{1,2})\b)",
            rf"(?P<dm>(?P<dmd>\d{{1,2}}){_ORDINAL}(?: of)? (?P<dmm>{_MONTH})\.?"
            r"(?:,? (?P<dmy>\d{4}))?\b)",
            rf"(?P<md>(?P<mdm>{_MONTH})\.? (?P<mdd>\d{{1,2}}){_ORDINAL}"
            r"(?:,? (?P<mdy>\d{4}))?\b)",
            rf"(?P<my>(?P<mym>{_MONTH}) (?P<myy>\d{{4}})\b)",
            rf"(?P<inm>(?:in|during) (?P<inmm>{_MONTH})\b)",
            r"(?P<iny>(?:in|during) (?P<inyy>\d{4})\b)",
            r"(?P<day>(?P<dayw>today|yesterday)\b)",
            rf"(?P<ago>(?P<agon>{_COUNT}) (?P<agou>day|week|month|year)s? ago\b)",
            r"(?P<rel>(?P<relw>last|this) (?P<relu>weekend|week|month|year)\b)",
        )
    )
    + ")",
    re.IGNORECASE,
)


#: A text can name a time only if it holds a digit, ``May``, a month's other names,
#: "today" or "yesterday", or a unit with "last", "this" or "ago" (a cheap test that
#: spares most questions the patterns above).
_NAMED_DAYS: Final = (frozenset(_MONTHS) - {"may"}) | {"today", "yesterday"}
_UNITS: Final = frozenset(
    {"day", "days", "week", "weeks", "weekend", "month", "months", "year", "years"}
)
_RELATIVE: Final = frozenset({"last", "this", "ago"})
_DIGIT: Final = re.compile(r"\d")
_WORD: Final = re.compile(r"[a-z]+")


def _may_name_a_time(head: str) -> bool:
    if _DIGIT.search(head) or "May" in head:
        return True
    words = set(_WORD.findall(head.lower()))
    return not words.isdisjoint(_NAMED_DAYS) or (
        not words.isdisjoint(_RELATIVE) and not words.isdisjoint(_UNITS)
    )


@frozen
class Window:
    """A span of time, ``start`` included, ``end`` not."""

    start: datetime
    end: datetime

    def __contains__(self, when: object) -> bool:
        return isinstance(when, datetime) and self.start <= when < self.end


def time_window(text: str, now: datetime) -> Window | None:
    """The window of the first time ``text`` names (the module docstring), read at ``now``
    (timezone-aware); None when it names none, or none that exists ("30 February"). Only
    the first :data:`CUE_CHARS` characters are read."""
    head = text[:CUE_CHARS]
    if not _may_name_a_time(head):
        return None
    today = now.astimezone(UTC).date()
    for match in _CUES.finditer(head):
        try:
            span = _span(match, today)
        except (ValueError, OverflowError):  # no such day, or out of the calendar
            continue
        if span is not None:
            first, after = span
            try:
                return Window(_midnight(first) - EARLIEST_ZONE, _midnight(after) + LATEST_ZONE)
            except OverflowError:
                continue
    return None


def _span(match: re.Match[str], today: date) -> tuple[date, date] | None:
    """The days ``[first, after)`` a matched cue names, or None when the words only look
    like one ("may 3 times": the month May is only read capitalised)."""
    kind = match.lastgroup
    group = match.group
    if kind == "iso":
        return _day(date(int(group("iy")), int(group("im")), int(group("id"))))
    if kind in ("dm", "md"):
        month_word = group(f"{kind}m")
        if not _is_month(month_word):
            return None
        month, day = _MONTHS[month_word.lower()], int(group(f"{kind}d"))
        year = group(f"{kind}y")
        if year is not None:
            return _day(date(int(year), month, day))
        return _day(_latest(lambda y: date(y, month, day), today))
    if kind in ("my", "inm"):
        month_word = group("mym") if kind == "my" else group("inmm")
        if not _is_month(month_word):
            return None
        month = _MONTHS[month_word.lower()]
        if kind == "my":
            return _month(int(group("myy")), month)
        first = _latest(lambda y: date(y, month, 1), today)
        return _month(first.year, month)
    if kind == "iny":
        year = int(group("inyy"))
        return date(year, 1, 1), date(year + 1, 1, 1)
    if kind == "day":
        back = 0 if group("dayw").lower() == "today" else 1
        return _day(today - timedelta(days=back))
    if kind == "ago":
        count_word = group("agon").lower()
        count = _COUNTS[count_word] if count_word in _COUNTS else int(count_word)
        return _ago(group("agou").lower(), count, today)
    if kind == "rel":
        last = group("relw").lower() == "last"
        unit = group("relu").lower()
        if unit == "weekend":  # the Saturday and Sunday of last (or this) week
            monday = _monday(today) - timedelta(weeks=1 if last else 0)
            return monday + timedelta(days=5), monday + timedelta(days=7)
        return _ago(unit, 1 if last else 0, today)
    return None


def _is_month(word: str) -> bool:
    """Whether a matched month name is one: ``may`` only as ``May``."""
    return word.lower() != "may" or word == "May"


def _day(day: date) -> tuple[date, date]:
    return day, day + timedelta(days=1)


def _month(year: int, month: int) -> tuple[date, date]:
    first = date(year, month, 1)
    return first, date(year + month // 12, month % 12 + 1, 1)


def _monday(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _latest(on: Any, today: date) -> date:
    """``on(year)`` for this year, or last year's when this year's is still to come (a
    day that does not exist this year, 29 February, is looked for in earlier years)."""
    for year in range(today.year, today.year - 8, -1):
        try:
            day: date = on(year)
        except ValueError:
            continue
        if day <= today:
            return day
    raise ValueError("no such day in recent years")


def _ago(unit: str, count: int, today: date) -> tuple[date, date]:
    """The day, week, month or year ``count`` of them before today's (0: today's)."""
    if unit == "day":
        return _day(today - timedelta(days=count))
    if unit == "week":
        monday = _monday(today) - timedelta(weeks=count)
        return monday, monday + timedelta(weeks=1)
    if unit == "month":
        months = today.year * 12 + today.month - 1 - count
        return _month(months // 12, months % 12 + 1)
    year = today.year - count
    return date(year, 1, 1), date(year + 1, 1, 1)


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def entry_time(entry: Entry) -> datetime:
    """When an entry was said: the time of the turn a conversation's statement came from
    (``source_context["episode"]["at"]``, written by Apollo alone), else when it was
    stored."""
    place = entry.source_context.get(EPISODE_CONTEXT)
    if isinstance(place, Mapping):
        at = place.get("at")
        if isinstance(at, str):
            try:
                when = datetime.fromisoformat(at)
            except ValueError:
                return entry.created_at
            if when.tzinfo is not None:
                return when
    return entry.created_at


def in_window(ranking: Sequence[Fused], entries: Mapping[UUID, Entry], window: Window) -> set[UUID]:
    """The ids of the entries of ``ranking`` whose time is in ``window`` (an entry missing
    from ``entries``, deleted since it was ranked, is not)."""
    found = set()
    for fused in ranking:
        entry = entries.get(fused.entry_id)
        if entry is not None and entry_time(entry) in window:
            found.add(fused.entry_id)
    return found


__all__ = [
    "CUE_CHARS",
    "EARLIEST_ZONE",
    "LATEST_ZONE",
    "TEMPORAL",
    "Window",
    "entry_time",
    "in_window",
    "time_window",
]
