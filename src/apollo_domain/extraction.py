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
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Final

from .entities import EntityMention, Extraction, TypedMention, normalize_entity_name
from .lexical import STOPWORDS

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
_QUANTITIES = (
    re.compile(r"[$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:k|K|m|M|bn|million|billion))?\b"),
    re.compile(rf"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s?({_UNITS})(?![\w/])"),
)
_IDENTIFIERS = (
    re.compile(r"\bv\d+(?:\.\d+){1,3}\b"),
    re.compile(r"(?<![\w.])\d+\.\d+\.\d+(?:\.\d+)?\b"),
    re.compile(r"\b[A-Z][A-Z0-9]+[-_][A-Z0-9]+(?:[-_][A-Z0-9]+)*\b"),
    re.compile(r"\b[a-z][a-z0-9]*_[a-z0-9_]*[a-z0-9]\b"),
    re.compile(r"\b[a-z][a-z0-9-]*\.(?:js|py|io|com|org|net|dev|ai|rs)\b"),
)
# Capitalized at the head of a sentence, but no part of a name.
_OPENER_WORDS = (
    "also later today yesterday tomorrow tonight however meanwhile finally first next"
    " recently currently previously still maybe perhaps please note update summary yes"
    " hello hi thanks since although though instead besides overall anyway lastly"
)
_OPENERS: Final = frozenset(_OPENER_WORDS.split())
_CONNECTORS: Final = frozenset({"of", "de", "da", "del", "van", "von", "der", "la", "le", "du"})
_CAPITALIZED = re.compile(r"[A-Z][\w'’&.-]*[\w]|[A-Z]")
_WORD = re.compile(r"[\w'’&.-]*\w|\S")
_SENTENCE_END = re.compile(r"[.!?:;]\s*$|^\s*$")
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


class HeuristicEntityExtractor:
    """The :class:`~apollo_domain.ports.EntityExtractor` without a model."""

    async def extract(self, text: str) -> Extraction:
        return extract_entities(text)


def extract_entities(text: str) -> Extraction:
    """Entities and typed edges of ``text`` (see the module docstring)."""
    spans: list[Span] = []
    taken = bytearray(len(text))

    def take(start: int, end: int, name: str, kind: str) -> None:
        if any(taken[start:end]) or not normalize_entity_name(name):
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
    for match in _QUANTITIES[0].finditer(text):
        take(match.start(), match.end(), _squeeze(match.group()), "quantity")
    for match in _QUANTITIES[1].finditer(text):
        number, unit = match.group(1), match.group(2)
        name = f"{number}{unit}" if unit == "%" else f"{number} {unit}"
        take(match.start(), match.end(), name, "quantity")
    for pattern in _IDENTIFIERS:
        for match in pattern.finditer(text):
            take(match.start(), match.end(), match.group(), "identifier")
    for start, end, name in _names(text, taken):
        take(start, end, name, "name")
    spans.sort()
    entities = tuple(EntityMention(name, kind) for _, _, name, kind in spans)
    return Extraction(_unique(entities), tuple(_typed_edges(text, spans)))


def _squeeze(value: str) -> str:
    return " ".join(value.split())


def _unique(mentions: tuple[EntityMention, ...]) -> tuple[EntityMention, ...]:
    seen: dict[str, EntityMention] = {}
    for mention in mentions:
        seen.setdefault(mention.key, mention)
    return tuple(seen.values())


def _names(text: str, taken: bytearray) -> list[tuple[int, int, str]]:
    """Runs of capitalized words (connectors allowed inside), single capitalized words
    that do not open a sentence, and one that does when its sentence names something else
    too (``Globex headquarters are in Paris``, not ``Soup is hot``)."""
    words = [m for m in _WORD.finditer(text) if not any(taken[m.start() : m.end()])]
    found: list[tuple[int, int, str]] = []
    openers: list[tuple[int, int, str]] = []
    run: list[re.Match[str]] = []

    def flush() -> None:
        while run and run[-1].group().lower() in _CONNECTORS:
            run.pop()
        while run and _ignorable(run[0].group()):
            run.pop(0)
        if run:
            start, end = run[0].start(), run[-1].end()
            opens_sentence = _SENTENCE_END.search(text[:start]) is not None
            name = text[start:end].rstrip(".")
            if len(run) > 1:
                found.append((start, start + len(name), name))
            elif len(name) > 1:
                (openers if opens_sentence else found).append((start, start + len(name), name))
        run.clear()

    previous_end = 0
    for word in words:
        token = word.group()
        gap = text[previous_end : word.start()]
        contiguous = not run or (gap.strip() == "" and "\n" not in gap)
        if not contiguous or (run and run[-1].group().endswith(".")):
            flush()
        capitalized = _CAPITALIZED.fullmatch(token) and not _ignorable_inside(token)
        if capitalized or (run and token.lower() in _CONNECTORS):
            run.append(word)
        else:
            flush()
        previous_end = word.end()
    flush()
    for start, end, name in openers:
        stop = _SENTENCE_STOP.search(text, end)
        sentence_end = len(text) if stop is None else stop.start()
        if any(end <= other < sentence_end for other, _, _ in found):
            found.append((start, end, name))
    return sorted(found)


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


__all__ = ["HeuristicEntityExtractor", "extract_entities"]
