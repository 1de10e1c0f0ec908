"""The built-in entity extractor: regular expressions, no model; precision over recall.

It finds, in this order (a span taken by one rule is not read again by a later one):
quoted names (``"Project Orion"``), dates (``2024-05-01``, ``March 3, 2024``, ``May 2023``,
a year such as ``2023``), quantities (a number with a unit or currency: ``42 kg``,
``$1,200``, ``15%``), identifiers and versions (``v2.4.1``, ``INC-1234``, ``max_connections``,
``node.js``), then names: runs of capitalized words (``Alice Moreau``, ``Bank of America``)
and single capitalized words inside a sentence (``Lisbon``), or opening one that names
another name (``Globex`` in ``Globex headquarters are in Paris``), never a stop word or a
month.
Typed edges come from a few unambiguous verbs between two names of one sentence
(``Alice Moreau works at Acme`` → ``works_at``).

Every rule reads the text once, so extraction is linear in the text's length: no pattern can
backtrack over a run it has already read (possessive quantifiers), and a rule whose match
may start anywhere inside a run of its characters (``a-b-c.js``, ``1,2,3 kg``) matches the
whole run once and picks its start in Python, instead of re-reading the run from each
character.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterator
from itertools import pairwise
from typing import Final

from attrs import frozen

from apollo_domain.entities import EntityMention, Extraction, TypedMention, normalize_entity_name
from apollo_domain.lexical import STOPWORDS

from ..threads import off_loop

_MONTH_NAMES = (
    "january february march april may june july august september october november december"
)
_MONTHS: Final = frozenset(_MONTH_NAMES.split())
_MONTH = r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|" + (
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_DAY_NAMES = "monday tuesday wednesday thursday friday saturday sunday"
_DAYS: Final = frozenset(_DAY_NAMES.split())
_YEAR = r"(?:19|20)\d{2}"

_QUOTED = re.compile(r"[\"“]([^\"“”\n]{2,60})[\"”]")
_DATES = (
    re.compile(rf"\b{_YEAR}-\d{{2}}-\d{{2}}\b"),
    re.compile(rf"\b{_MONTH}\.? \d{{1,2}}(?:st|nd|rd|th)?,? {_YEAR}\b"),
    re.compile(rf"\b\d{{1,2}}(?:st|nd|rd|th)? {_MONTH}\.?,? {_YEAR}\b"),
    re.compile(rf"\b{_MONTH}\.? {_YEAR}\b"),
    re.compile(rf"(?<![\d.,$€£-]){_YEAR}(?![\d.,]\d|\s?%)\b"),
)
_UNITS = (
    r"%|percent|kg|g|mg|t|km|m|cm|mm|mi|miles?|ft|feet|lbs?|ms|s|sec(?:onds?)?|min(?:utes?)?|"
    r"h|hours?|days?|weeks?|months?|years?|[kKMGT]i?B|[kKMG]Hz|W|kW|kWh|V|°C|°F|req/s|rps|"
    r"USD|EUR|GBP|dollars?|euros?|people|users|employees|cores|nodes|servers"
)
_CURRENCY = re.compile(r"[$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:k|K|m|M|bn|million|billion))?\b")
# A number with a unit starts at a digit not preceded by a word character or a dot: the
# whole run of digits and commas is matched from its first character (group 1), and the
# number starts at the run's first such digit (:func:`_number_start`).
_QUANTITY = re.compile(rf"(?<![\d,])([\d,]++)((?:\.\d++)?+)\s?({_UNITS})(?![\w/])")
_IDENTIFIERS = (
    re.compile(r"\bv\d+(?:\.\d+){1,3}\b"),
    re.compile(r"(?<![\w.])\d+\.\d+\.\d+(?:\.\d+)?\b"),
    re.compile(r"\b[A-Z][A-Z0-9]++[-_][A-Z0-9]++(?:[-_][A-Z0-9]++)*\b"),
    re.compile(r"\b[a-z][a-z0-9]*+_[a-z0-9_]*[a-z0-9]\b"),
)
# A host-like name (``node.js``) starts at a lowercase letter at a word boundary: the rest of
# a run of its characters is matched from where the search resumes (group 1), and the name
# starts at the first such letter (:func:`_hosts`).
_HOST = r"([a-z0-9-]++)\.(?:js|py|io|com|org|net|dev|ai|rs)\b"
_HOST_AT = re.compile(_HOST)
_HOST_RUN = re.compile(rf"(?<![a-z0-9-]){_HOST}")
_WORD_OR_DOT = re.compile(r"[\w.]")
_WORD_CHAR = re.compile(r"\w")
# Capitalized at the head of a sentence, but no part of a name.
_OPENER_WORDS = (
    "also later today yesterday tomorrow tonight however meanwhile finally first next"
    " recently currently previously still maybe perhaps please note update summary yes"
    " hello hi thanks since although though instead besides overall anyway lastly"
)
_OPENERS: Final = frozenset(_OPENER_WORDS.split())
_CONNECTORS: Final = frozenset({"of", "de", "da", "del", "van", "von", "der", "la", "le", "du"})
# A word is a run of word characters, apostrophes, ampersands, dots and dashes, up to its
# last word character (``O'Neil``, ``AT&T``, ``U.S``). Names are made of the words that
# start with a capital and of connectors; anything else between two of them (another word,
# punctuation) ends a name, so only those words are read, each run of word characters once.
_TRAILING = "'’&.-"
_NAME_WORD = re.compile(
    rf"(?<![\w{_TRAILING}])"
    rf"(?:[A-Z][\w{_TRAILING}]*+|(?i:{'|'.join(sorted(_CONNECTORS))})[{_TRAILING}]*+(?!\w))"
)
_SENTENCE_ENDS = ".!?:;"
_SENTENCE_STOP = re.compile(r"[.!?:;](?=\s|$)|\n")

_RELATIONS: Final = (
    ("works_at", r"works? (?:at|for)|is employed (?:at|by)|joined"),
    ("lives_in", r"lives? in|moved to|relocated to|is based in"),
    ("uses", r"uses?|adopted|switched to|runs on|migrated to"),
    ("leads", r"leads?|manages?|heads?|runs"),
    ("part_of", r"(?:is )?part of|belongs to|is a member of"),
    ("founded", r"founded|co-founded|started"),
    ("reports_to", r"reports? to"),
)
_BETWEEN = [
    (relation, re.compile(rf"^\s+(?:{verbs})\s+(?:the\s+)?$", re.IGNORECASE))
    for relation, verbs in _RELATIONS
]

Span = tuple[int, int, str, str]  # start, end, name, kind


def extract_entities(text: str) -> Extraction:
    """Entities and typed edges of ``text`` (see the module docstring)."""
    spans: list[Span] = []
    taken = bytearray(len(text))

    def take(start: int, end: int, name: str, kind: str) -> None:
        if taken.find(1, start, end) != -1 or not normalize_entity_name(name):
            return
        taken[start:end] = b"\x01" * (end - start)
        spans.append((start, end, name, kind))

    for match in _QUOTED.finditer(text):
        inner = match.group(1).strip()
        if any(c.isalpha() for c in inner) and len(inner.split()) <= 6:
            take(match.start(), match.end(), inner, "quoted")
    for pattern in _DATES:
        for match in pattern.finditer(text):
            take(match.start(), match.end(), match.group(), "date")
    for match in _CURRENCY.finditer(text):
        take(match.start(), match.end(), _squeeze(match.group()), "quantity")
    for match in _QUANTITY.finditer(text):
        start = _number_start(text, match.start(), match.end(1))
        if start is not None:
            number, unit = text[start : match.end(2)], match.group(3)
            name = f"{number}{unit}" if unit == "%" else f"{number} {unit}"
            take(start, match.end(), name, "quantity")
    for pattern in _IDENTIFIERS:
        for match in pattern.finditer(text):
            take(match.start(), match.end(), match.group(), "identifier")
    for start, end in _hosts(text):
        take(start, end, text[start:end], "identifier")
    for start, end, name in _names(text, taken):
        take(start, end, name, "name")
    spans.sort()
    entities = tuple(EntityMention(name, kind) for _, _, name, kind in spans)
    return Extraction(_unique(entities), tuple(_typed_edges(text, spans)))


def _squeeze(value: str) -> str:
    return " ".join(value.split())


def _number_start(text: str, start: int, end: int) -> int | None:
    """Where a number begins in the run of digits and commas ``text[start:end]``: at its
    first digit that follows neither a word character nor a dot (at the run's start), or a
    comma (inside it); None when no digit does."""
    if text[start].isdecimal() and (start == 0 or not _WORD_OR_DOT.match(text[start - 1])):
        return start
    position = text.find(",", start, end)
    while position != -1 and position + 1 < end:
        if text[position + 1].isdecimal():
            return position + 1
        position = text.find(",", position + 1, end)
    return None


def _hosts(text: str) -> Iterator[tuple[int, int]]:
    """The spans of host-like names, as ``finditer`` of
    ``\\b[a-z][a-z0-9-]*\\.(?:js|...)\\b`` finds them, each run read once: a search resumes
    at the end of the last name (which a run of the name's characters may continue), or
    else at the start of a run."""
    position, resumed = 0, False
    while True:
        match = _HOST_AT.match(text, position) if resumed else None
        if match is None:
            match = _HOST_RUN.search(text, position)
            if match is None:
                return
        start = _host_start(text, match.start(), match.end(1))
        if start is None:  # no name starts in the run; one may start after it
            position, resumed = match.end(1), False
        else:
            yield start, match.end()
            position, resumed = match.end(), True


def _host_start(text: str, start: int, end: int) -> int | None:
    """Where a host-like name begins in the run ``text[start:end]`` of lowercase letters,
    digits and dashes: at its first letter at a word boundary (the run's start after a
    non-word character, or just after a dash); None when no letter is."""
    if "a" <= text[start] <= "z" and (start == 0 or not _WORD_CHAR.match(text[start - 1])):
        return start
    position = text.find("-", start, end)
    while position != -1 and position + 1 < end:
        if "a" <= text[position + 1] <= "z":
            return position + 1
        position = text.find("-", position + 1, end)
    return None


def _unique(mentions: tuple[EntityMention, ...]) -> tuple[EntityMention, ...]:
    seen: dict[str, EntityMention] = {}
    for mention in mentions:
        seen.setdefault(mention.key, mention)
    return tuple(seen.values())


def _names(text: str, taken: bytearray) -> list[tuple[int, int, str]]:
    """Runs of capitalized words (connectors allowed inside), single capitalized words
    that do not open a sentence, and one that does when its sentence names something else
    too (``Globex headquarters are in Paris``, not ``Soup is hot``)."""
    found: list[tuple[int, int, str]] = []
    openers: list[tuple[int, int, str]] = []
    run: list[tuple[int, int, str]] = []

    def flush() -> None:
        while run and run[-1][2].lower() in _CONNECTORS:
            run.pop()
        first = 0
        while first < len(run) and _ignorable(run[first][2]):
            first += 1
        if first < len(run):
            start, end = run[first][0], run[-1][1]
            name = text[start:end].rstrip(".")
            if len(run) - first > 1:
                found.append((start, start + len(name), name))
            elif len(name) > 1:
                opener = _opens_sentence(text, start)
                (openers if opener else found).append((start, start + len(name), name))
        run.clear()

    previous_end = 0
    for match in _NAME_WORD.finditer(text):
        start = match.start()
        token = match.group().rstrip(_TRAILING)
        end = start + len(token)
        if taken.find(1, start, end) != -1:
            continue
        if run:
            gap = text[previous_end:start]
            if gap.strip() or "\n" in gap or run[-1][2].endswith("."):
                flush()
        capitalized = "A" <= token[0] <= "Z" and not _ignorable_inside(token)
        if capitalized or (run and token.lower() in _CONNECTORS):
            run.append((start, end, token))
        else:
            flush()
        previous_end = end
    flush()
    # An opener is a name when a name found above starts in the rest of its sentence: the
    # names are in order, so a binary search finds the first one after the opener, and the
    # next sentence stop found for one opener serves the openers before it.
    starts = [start for start, _, _ in found]
    stop_at = -1
    for start, end, name in openers:
        if stop_at < end:
            stop = _SENTENCE_STOP.search(text, end)
            stop_at = len(text) if stop is None else stop.start()
        following = bisect_left(starts, end)
        if following < len(starts) and starts[following] < stop_at:
            found.append((start, end, name))
    return sorted(found)


def _opens_sentence(text: str, start: int) -> bool:
    """Whether only whitespace stands between ``start`` and the text's start or the end of a
    sentence (``.!?:;``)."""
    position = start - 1
    while position >= 0 and text[position].isspace():
        position -= 1
    return position < 0 or text[position] in _SENTENCE_ENDS


def _ignorable(token: str) -> bool:
    """A capitalized word that does not start a name: a stop word, a sentence opener
    (``Later``), a month, a day, I."""
    lowered = token.lower().rstrip(".")
    return (
        lowered in STOPWORDS
        or lowered in _OPENERS
        or lowered in _MONTHS
        or lowered in _DAYS
        or token == "I"
    )


def _ignorable_inside(token: str) -> bool:
    lowered = token.lower().rstrip(".")
    return lowered in _MONTHS or lowered in _DAYS or token == "I"


def _typed_edges(text: str, spans: list[Span]) -> list[TypedMention]:
    """A relation verb alone between two consecutive entities of a sentence."""
    edges: list[TypedMention] = []
    for (_, end, src, _), (start, _, dst, _) in pairwise(spans):
        between = text[end:start]
        for relation, pattern in _BETWEEN:
            if pattern.match(between):
                edges.append(TypedMention(src, relation, dst))
                break
    return edges


@frozen
class HeuristicEntityExtractor:
    """The :class:`~apollo_domain.ports.EntityExtractor` over a pure extraction function
    (:func:`extract_entities` by default), run off the event loop for long texts."""

    function: Callable[[str], Extraction] = extract_entities

    async def extract(self, text: str) -> Extraction:
        return await off_loop(len(text), self.function, text)


__all__ = ["HeuristicEntityExtractor", "extract_entities"]
