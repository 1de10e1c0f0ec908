"""An exact, incremental BM25 index over the entry rows, with undo.

Postings map each term to the rows holding it and how often; the statistics (row count,
total length) move with every row added or removed, so scores are exact BM25 over the
entries the store holds at that moment — archived ones included, as in PostgreSQL.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from apollo_domain.lexical import terms

from ._columns import Mask, Undo

K1 = 1.2  # term-frequency saturation
B = 0.75  # length normalization


class LexicalIndex:
    """Term postings of the entry rows and BM25 scoring over them."""

    def __init__(self) -> None:
        self._postings: dict[str, dict[int, int]] = {}
        self._terms: dict[int, Counter[str]] = {}
        self._lengths: dict[int, int] = {}
        self._total = 0

    def add(self, row: int, text: str, undo: Undo) -> None:
        words = terms(text)
        self._insert(row, Counter(words), len(words))
        undo.append(lambda: self._delete(row))

    def remove(self, row: int, undo: Undo) -> None:
        if row not in self._terms:
            return
        counts, length = self._terms[row], self._lengths[row]
        self._delete(row)
        undo.append(lambda: self._insert(row, counts, length))

    def _insert(self, row: int, counts: Counter[str], length: int) -> None:
        for term, count in counts.items():
            self._postings.setdefault(term, {})[row] = count
        self._terms[row] = counts
        self._lengths[row] = length
        self._total += length

    def _delete(self, row: int) -> None:
        for term in self._terms.pop(row):
            postings = self._postings[term]
            del postings[row]
            if not postings:
                del self._postings[term]
        self._total -= self._lengths.pop(row)

    def scores(self, query: Sequence[str], allowed: Mask) -> dict[int, float]:
        """BM25 of every allowed row holding at least one of the ``query`` terms."""
        documents = len(self._lengths)
        if documents == 0:
            return {}
        average = self._total / documents or 1.0
        found: dict[int, float] = {}
        lengths = self._lengths
        for term in query:
            postings = self._postings.get(term)
            if not postings:
                continue
            df = len(postings)
            idf = math.log(1.0 + (documents - df + 0.5) / (df + 0.5))
            for row, tf in postings.items():
                if row < allowed.size and allowed[row]:
                    norm = K1 * (1.0 - B + B * lengths[row] / average)
                    found[row] = found.get(row, 0.0) + idf * tf * (K1 + 1.0) / (tf + norm)
        return found
