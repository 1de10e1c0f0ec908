"""Lexical matching: the terms of a text, and which query terms are worth matching.

Both stores match a query against entries by their terms (DESIGN §4 "Query"): PostgreSQL
through its full-text parser with the ``simple`` configuration, the in-memory store through
:func:`terms`, which follows that parser on ordinary text. ``simple`` lowercases and keeps
every token as written: names, numbers, versions and identifiers (``v1.2.3``, ``node.js``,
``2023``) match exactly, and nothing is stemmed, so a term never matches a different word
that happens to share its stem (paraphrases are the vector signal's job). Stop words are
kept in the index but dropped from queries (:func:`query_terms`): a query is the OR of its
remaining terms, so ``the`` or ``where`` would otherwise match nearly every entry.
"""

from __future__ import annotations

import re
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
_EMAIL = re.compile(rf"[\w.+\-]+@{_WORD}(?:[.\-]{_WORD})*")


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


__all__ = ["STOPWORDS", "query_terms", "terms"]
