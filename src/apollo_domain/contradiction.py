"""The built-in contradiction heuristic: negation, antonym and number mismatch.

Two texts contradict when they talk about the same things (enough shared entities:
significant words and labels such as ``BGP``, ``X`` or ``ipv6``) and one of them flips
what the other says:

- polarity: exactly one side is negated (``not``, ``never``, ``isn't``, ``cannot``, ...),
  or the two sides use opposite words (``enabled``/``disabled``); a negation and an
  antonym together cancel out ("not enabled" agrees with "disabled");
- numbers: the same context word stands next to different numbers ("port 179" vs
  "port 180"), or the two texts are the same sentence with different numbers.

The rules are symmetric (``heuristic_contradicts(a, b) == heuristic_contradicts(b, a)``)
and a text never contradicts itself. Pure, deterministic, no I/O. The polarity reading is
a domain rule in its own right (:func:`flips_negation`: a negated restatement never
corroborates); the judge that runs :func:`heuristic_contradicts` for the contradiction scan
is an adapter (:class:`apollo_adapters.heuristics.HeuristicContradictionJudge`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from types import MappingProxyType

from attrs import frozen

_PAIRS: tuple[tuple[str, str], ...] = (
    ("enabled", "disabled"),
    ("enable", "disable"),
    ("enables", "disables"),
    ("enabling", "disabling"),
    ("true", "false"),
    ("increase", "decrease"),
    ("increases", "decreases"),
    ("increased", "decreased"),
    ("increasing", "decreasing"),
    ("always", "never"),
    ("allow", "deny"),
    ("allows", "denies"),
    ("allowed", "denied"),
    ("allow", "forbid"),
    ("allowed", "forbidden"),
    ("permitted", "forbidden"),
    ("accept", "reject"),
    ("accepts", "rejects"),
    ("accepted", "rejected"),
    ("up", "down"),
    ("open", "closed"),
    ("opened", "closed"),
    ("on", "off"),
    ("success", "failure"),
    ("succeeds", "fails"),
    ("succeeded", "failed"),
    ("successful", "unsuccessful"),
    ("before", "after"),
    ("more", "less"),
    ("more", "fewer"),
    ("most", "least"),
    ("higher", "lower"),
    ("highest", "lowest"),
    ("high", "low"),
    ("faster", "slower"),
    ("fastest", "slowest"),
    ("fast", "slow"),
    ("larger", "smaller"),
    ("largest", "smallest"),
    ("large", "small"),
    ("bigger", "smaller"),
    ("big", "small"),
    ("better", "worse"),
    ("best", "worst"),
    ("supported", "unsupported"),
    ("valid", "invalid"),
    ("secure", "insecure"),
    ("safe", "unsafe"),
    ("required", "optional"),
    ("mandatory", "optional"),
    ("sync", "async"),
    ("synchronous", "asynchronous"),
    ("stateful", "stateless"),
    ("mutable", "immutable"),
    ("public", "private"),
    ("internal", "external"),
    ("inside", "outside"),
    ("include", "exclude"),
    ("includes", "excludes"),
    ("included", "excluded"),
    ("inclusive", "exclusive"),
    ("available", "unavailable"),
    ("possible", "impossible"),
    ("correct", "incorrect"),
    ("correct", "wrong"),
    ("right", "wrong"),
    ("deprecated", "recommended"),
    ("present", "absent"),
    ("start", "stop"),
    ("starts", "stops"),
    ("started", "stopped"),
    ("add", "remove"),
    ("adds", "removes"),
    ("added", "removed"),
    ("minimum", "maximum"),
    ("min", "max"),
    ("first", "last"),
    ("win", "lose"),
    ("wins", "loses"),
    ("online", "offline"),
    ("encrypted", "unencrypted"),
    ("encrypted", "plaintext"),
    ("blocking", "nonblocking"),
    ("deterministic", "nondeterministic"),
    ("compatible", "incompatible"),
    ("consistent", "inconsistent"),
    ("reliable", "unreliable"),
    ("stable", "unstable"),
    ("ascending", "descending"),
    ("above", "below"),
    ("inbound", "outbound"),
    ("ingress", "egress"),
    ("upstream", "downstream"),
    ("read", "write"),
    ("readonly", "writable"),
    ("locked", "unlocked"),
    ("visible", "hidden"),
    ("lossless", "lossy"),
    ("expensive", "cheap"),
    ("cheaper", "costlier"),
    ("same", "different"),
)

HEURISTIC_ANTONYMS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        word: frozenset(b if a == word else a for a, b in _PAIRS if word in (a, b))
        for pair in _PAIRS
        for word in pair
    }
)
"""Word → its opposites, as used by :func:`heuristic_contradicts` (symmetric)."""

_NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "cannot",
        "without",
        "none",
        "nothing",
        "neither",
        "nor",
        "nobody",
        "nowhere",
        "lacks",
        "lack",
    }
)

_STOPWORD_LIST = """
    a about above across after again against all also am an and any are as at be because
    been being both but by can could did do does doing done down during each either else
    etc even every for from further had has have having he her here hers him his how however
    i if in into is it its itself just let may me might much must my of off on once only or
    other our ours out over own per same she should so some such than that the their theirs
    them then there these they this those though through thus to too under until up upon us
    very via was we were what when where whether which while who whom whose why will with
    would yet you your yours use uses used using one two also well really quite rather
"""
_STOPWORDS = frozenset(_STOPWORD_LIST.split())

_NUMBER_WORDS = {
    "zero": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "twenty": "20",
}

_CONTRACTIONS = re.compile(r"(?i)\b(can|won|shan|ain)['’]t\b|n['’]t\b")
_CONTRACTION_BASE = {"can": "can not", "won": "will not", "shan": "shall not", "ain": "is not"}
_NUMBER = r"\d+(?:,\d{3})*(?:\.\d+)*"
_TOKEN = re.compile(rf"{_NUMBER}[a-zA-Z%]*|[^\W\d_][\w+#-]*")
_NUMBER_WITH_UNIT = re.compile(rf"({_NUMBER})([a-zA-Z%]*)")

_NEGATION_REACH = 4
"""A negation counts only when a shared entity is among the tokens that follow it."""
_NUMBER_CONTEXT_REACH = 2
"""How far from a number to look for the non-stopword that says what it counts."""
_SAME_SENTENCE_JACCARD = 0.6
"""Word overlap above which two texts with different numbers are "the same sentence"."""


@frozen
class _Token:
    text: str  # lowercased
    label: bool  # capitalised in the source, or a mix of letters and digits
    number: str | None  # canonical number when the token is (or starts with) one
    unit: str | None  # the unit glued to a number ("30s" → "s")


@frozen
class _Profile:
    tokens: tuple[_Token, ...]
    entities: frozenset[str]  # significant words (stemmed) and labels
    words: frozenset[str]  # every non-number word, for sentence similarity
    negation_positions: tuple[int, ...]


def _expand_contractions(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        base = match.group(1)
        if base is None:
            return " not"
        return _CONTRACTION_BASE[base.lower()]

    return _CONTRACTIONS.sub(replace, text)


def _canonical_number(raw: str) -> str:
    """``1,000`` → ``1000``, ``007`` → ``7``, ``٤٢`` → ``42``; dotted numbers (``3.10``) are
    kept verbatim. Digit by digit: ``int()`` of a long number is quadratic, and refused past
    4,300 digits."""
    digits = raw.replace(",", "")
    if not digits.isdigit():
        return digits
    if not digits.isascii():
        digits = "".join(str(int(digit)) for digit in digits)
    return digits.lstrip("0") or "0"


def _tokenize(text: str) -> tuple[_Token, ...]:
    tokens: list[_Token] = []
    for raw in _TOKEN.findall(_expand_contractions(text)):
        lower = raw.lower().strip("-")
        if not lower:
            continue
        if raw[0].isdigit():
            match = _NUMBER_WITH_UNIT.fullmatch(raw)
            if match is not None:
                unit = match.group(2).lower() or None
                tokens.append(_Token(lower, False, _canonical_number(match.group(1)), unit))
                continue
        if lower in _NUMBER_WORDS:
            tokens.append(_Token(lower, False, _NUMBER_WORDS[lower], None))
            continue
        has_digit = any(c.isdigit() for c in raw)
        label = (raw[0].isupper() or has_digit) and lower not in _STOPWORDS
        tokens.append(_Token(lower, label, None, None))
    return tuple(tokens)


def _stem(word: str) -> str:
    if len(word) <= 4:
        return word
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and not word.endswith(("ss", "us", "is")):
            return word[: -len(suffix)]
    return word


def _is_entity(token: _Token) -> bool:
    if token.number is not None or token.text in _NEGATIONS:
        return False
    if token.label:
        return True
    return len(token.text) >= 3 and token.text not in _STOPWORDS


@lru_cache(maxsize=16)
def _profile(text: str) -> _Profile:
    tokens = _tokenize(text)
    return _Profile(
        tokens=tokens,
        entities=frozenset(_stem(t.text) for t in tokens if _is_entity(t)),
        words=frozenset(t.text for t in tokens if t.number is None),
        negation_positions=tuple(i for i, t in enumerate(tokens) if t.text in _NEGATIONS),
    )


def _antonym_pairs(a: frozenset[str], b: frozenset[str]) -> tuple[int, frozenset[str]]:
    """How many opposite-word pairs stand across the texts, and the words involved.

    Counts (word of one text, its opposite in the other) pairs, which is symmetric.
    """
    only_a, only_b = a - b, b - a
    count = 0
    used: set[str] = set()
    for word in only_a:
        matched = HEURISTIC_ANTONYMS.get(word, frozenset()) & only_b
        if matched:
            count += len(matched)
            used.add(word)
            used.update(matched)
    return count, frozenset(used)


def _negated(profile: _Profile, subjects: frozenset[str], consumed: frozenset[str]) -> bool:
    """True when a negation (not used up as an antonym) has one of ``subjects`` in its scope."""
    tokens = profile.tokens
    for position in profile.negation_positions:
        if tokens[position].text in consumed:
            continue
        scope = tokens[position + 1 : position + 1 + _NEGATION_REACH]
        if any(_stem(token.text) in subjects for token in scope):
            return True
    return False


def _numbers_by_context(tokens: Iterable[_Token]) -> dict[str, set[str]]:
    """Context word (a unit, or the nearest significant neighbour) → numbers next to it."""
    listed = list(tokens)
    contexts: dict[str, set[str]] = {}
    for i, token in enumerate(listed):
        if token.number is None:
            continue
        words: set[str] = set()
        if token.unit:
            words.add(token.unit)
        for step in (-1, 1):
            for distance in range(1, _NUMBER_CONTEXT_REACH + 1):
                j = i + step * distance
                if not 0 <= j < len(listed) or listed[j].number is not None:
                    break
                neighbour = listed[j].text
                if neighbour not in _STOPWORDS and neighbour not in _NEGATIONS:
                    words.add(_stem(neighbour))
                    break
        for word in words:
            contexts.setdefault(word, set()).add(token.number)
    return contexts


def _number_mismatch(a: _Profile, b: _Profile) -> bool:
    numbers_a = {t.number for t in a.tokens if t.number is not None}
    numbers_b = {t.number for t in b.tokens if t.number is not None}
    if not numbers_a or not numbers_b or numbers_a == numbers_b:
        return False
    context_a = _numbers_by_context(a.tokens)
    context_b = _numbers_by_context(b.tokens)
    for word in context_a.keys() & context_b.keys():
        if context_a[word].isdisjoint(context_b[word]):
            return True
    union = a.words | b.words
    if not union:
        return numbers_a.isdisjoint(numbers_b)
    return len(a.words & b.words) / len(union) >= _SAME_SENTENCE_JACCARD


def _about_the_same_things(shared: frozenset[str], a: frozenset[str], b: frozenset[str]) -> bool:
    smaller = min(len(a), len(b))
    if not shared or smaller == 0:
        return False
    if len(shared) < 2 and smaller > 1:
        return False
    return len(shared) / smaller >= 0.5


def _polarity(a: _Profile, b: _Profile) -> bool | None:
    """None when the two texts are not about the same things (at least two shared
    entities, or the only one the shorter text has, and at least half of the shorter
    text's entities); else whether one flips what the other says by negation or antonym
    (an odd number of flips: "not enabled" agrees with "disabled")."""
    antonyms, consumed = _antonym_pairs(a.words, b.words)
    opposed = frozenset(_stem(word) for word in consumed)
    entities_a, entities_b = a.entities - opposed, b.entities - opposed
    shared = entities_a & entities_b
    if not _about_the_same_things(shared, entities_a, entities_b):
        return None
    flips = antonyms
    in_scope = shared | opposed
    if _negated(a, in_scope, consumed) != _negated(b, in_scope, consumed):
        flips += 1
    return flips % 2 == 1


def flips_negation(a: str, b: str) -> bool:
    """Whether one text says the opposite of the other about the same things: exactly one
    side negated ("X is not enabled" against "X is enabled") or opposite words ("enabled"
    against "disabled"). Symmetric; a text never flips itself.

    The one rule that keeps a negated restatement from counting as the same claim: however
    close the two embed, such a pair is never corroboration, agreement or a near copy, and
    the contradiction judge sees it (docs/concepts.md, "The rules in one page")."""
    return bool(_polarity(_profile(a), _profile(b)))


def heuristic_contradicts(new: str, existing: str) -> bool:
    """Whether ``new`` contradicts ``existing`` by negation, antonym or number mismatch.

    Both texts must share enough entities (at least two, or the only one the shorter
    text has, and at least half of the shorter text's entities) before any mismatch
    counts: "Redis is fast" never contradicts "Paris is in France".
    """
    a, b = _profile(new), _profile(existing)
    flipped = _polarity(a, b)
    if flipped is None:
        return False
    return flipped or _number_mismatch(a, b)


__all__ = [
    "HEURISTIC_ANTONYMS",
    "flips_negation",
    "heuristic_contradicts",
]
