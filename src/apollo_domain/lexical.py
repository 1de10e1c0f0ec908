"""Lexical matching: the terms of a text, which query terms are worth matching, and the
one ranking both stores order matches by.

Both stores match a query against entries by their terms (docs/retrieval.md, "How retrieval
works"): PostgreSQL
through its full-text parser with the ``simple`` configuration, the in-memory store through
:func:`terms`, which follows that parser on ordinary text. ``simple`` lowercases and keeps
every token as written: names, numbers, versions and identifiers (``v1.2.3``, ``node.js``,
``2023``) match exactly, and nothing is stemmed, so a term never matches a different word
that happens to share its stem (paraphrases are the vector signal's job). Stop words are
kept in the index but dropped from queries (:func:`query_terms`): a query is the OR of its
remaining terms, so ``the`` or ``where`` would otherwise match nearly every entry.

Matches are ranked by :func:`rank`, PostgreSQL's ``ts_rank`` (default weights,
normalization 0) over that OR query: PostgreSQL computes it itself, the in-memory store
computes the same number from the counts :func:`occurrences` gives, so a simulation on the
in-memory store ranks lexical matches exactly as production does. The rank grows with
each query term an entry holds and, with diminishing returns, with how often it holds it;
it is not normalized by length, so a long entry that states a fact among filler is not
ranked below a short one that merely names the same person, and it depends on nothing
but the entry and the query (no corpus statistics: entries a reader cannot see never
sway that reader's ranking).
"""

from __future__ import annotations

import re
import struct
from collections import Counter
from collections.abc import Iterable
from typing import Final

_SNOWBALL_ENGLISH = """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what which
    who whom this that these those am is are was were be been being have has had having do
    does did doing a an the and but if or because as until while of at by for with about
    against between into through during before after above below to from up down in out on
    off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will
    just don should now
"""
#: The stop words of PostgreSQL's ``english`` configuration (the Snowball list): dropped from
#: queries, never from the index.
STOPWORDS: Final = frozenset(_SNOWBALL_ENGLISH.split())

# A word is letters and digits (the underscore separates words, as in PostgreSQL's parser);
# words joined by dots (hosts, versions, decimals) or hyphens stay one token.
_WORD = r"[^\W_]+"
_TOKEN = re.compile(rf"{_WORD}(?:[.\-]{_WORD})*")
# Possessive, and only from the start of a run of local-part characters: a long run without
# an ``@`` is read once, not once per character.
_EMAIL = re.compile(rf"(?<![\w.+\-])[\w.+\-]++@{_WORD}(?:[.\-]{_WORD})*+")


def terms(text: str) -> list[str]:
    """The terms of ``text`` in order, lowercased: each token, plus the parts of a
    hyphenated token after it (``foo-bar`` → ``foo-bar``, ``foo``, ``bar``). E-mail
    addresses and dotted tokens stay whole."""
    found: list[str] = []
    lowered = text.lower()
    position = 0
    for email in _EMAIL.finditer(lowered):
        found.extend(_tokens(lowered[position : email.start()]))
        found.append(email.group())
        position = email.end()
    found.extend(_tokens(lowered[position:]))
    return found


def _tokens(text: str) -> list[str]:
    found: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group()
        found.append(token)
        if "-" in token and "." not in token:
            found.extend(part for part in token.split("-") if part)
    return found


def query_terms(text: str) -> list[str]:
    """The distinct terms of a query worth matching, in order of first appearance."""
    return list(dict.fromkeys(t for t in terms(text) if t not in STOPWORDS))


#: ``to_tsvector`` keeps at most this many positions of one lexeme (a ``tsvector`` may hold
#: 256, but the parser stops one short)...
MAX_POSITIONS: Final = 255
#: ...and caps a word position at this one (later occurrences all share it).
MAX_POSITION: Final = 16383


def occurrences(text: str) -> dict[str, int]:
    """How many positions of each term of ``text`` PostgreSQL's ``tsvector`` keeps: word
    positions count from 1 (a hyphenated token and each of its parts take one each),
    every position past :data:`MAX_POSITION` is that one, and a term keeps at most
    :data:`MAX_POSITIONS` of them."""
    words = terms(text)
    if len(words) > MAX_POSITION:  # the tail shares one position
        words = [*words[: MAX_POSITION - 1], *dict.fromkeys(words[MAX_POSITION - 1 :])]
    found = Counter(words)
    return {term: min(count, MAX_POSITIONS) for term, count in found.items()}


_FLOAT = struct.Struct("f")


def _single(value: float) -> float:
    """``value`` rounded to single precision, as a C ``float`` holds it."""
    result: float = _FLOAT.unpack(_FLOAT.pack(value))[0]
    return result


# ts_rank's weight of an unweighted ('D') lexeme, and the sum of 1/i² to infinity (π²/6).
_WEIGHT = _single(0.1)
_ZETA_2 = 1.64493406685


def _term_rank(count: int) -> float:
    """The share of one query term held ``count`` times, in PostgreSQL's own arithmetic
    (``calc_rank_or`` in src/backend/utils/adt/tsrank.c): the j-th occurrence adds
    weight / j², in single precision, and the sum is divided by π²/6 in double."""
    total = 0.0
    for j in range(1, count + 1):
        total = _single(total + _single(_WEIGHT / (j * j)))
    # (wjm + resj - wjm / (jm + 1)^2) with every weight equal: jm = 0, so wjm / 1.
    return _single(_single(_WEIGHT + total) - _WEIGHT) / _ZETA_2


_TERM_RANKS: Final = tuple(_term_rank(count) for count in range(MAX_POSITIONS + 1))


def rank(counts: Iterable[int], query_size: int) -> float:
    """The lexical rank of an entry for a query of ``query_size`` distinct terms, given
    ``counts``: the :func:`occurrences` of each query term the entry holds, in the order
    of those terms sorted (PostgreSQL sums them in that order).

    This is ``ts_rank(tsvector, 'a' | 'b' | ...)`` with default weights and no
    normalization, computed step by step in PostgreSQL's single precision, so equal
    ranks tie exactly as they do there: each term held ``n`` times adds
    0.1 · (1 + 1/2² + … + 1/n²) / (π²/6), and the sum is divided by ``query_size``. A term
    held once adds 0.0608, twice 0.0760, and at most (255 times) 0.0998."""
    total = 0.0
    ranks, pack, unpack = _TERM_RANKS, _FLOAT.pack, _FLOAT.unpack  # (a hot loop)
    for count in counts:
        total = unpack(pack(total + ranks[count if count < MAX_POSITIONS else MAX_POSITIONS]))[0]
    return _single(total / query_size) if query_size > 0 else 0.0


__all__ = [
    "MAX_POSITION",
    "MAX_POSITIONS",
    "STOPWORDS",
    "occurrences",
    "query_terms",
    "rank",
    "terms",
]
