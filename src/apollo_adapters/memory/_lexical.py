"""An incremental index of the entry rows' terms, with undo, ranking as PostgreSQL does.

Postings map each term to the rows holding it and how often (:func:`occurrences`, the
count PostgreSQL's ``tsvector`` keeps). A query's matches are ranked by
:func:`apollo_domain.lexical.rank`, PostgreSQL's ``ts_rank`` computed from those counts,
so both stores return the same matches in the same order with the same scores, and a
simulation on this store predicts production. The rank needs nothing but a row's own
counts: no corpus statistics, no length normalization (a turn that states a fact among
filler is not ranked below a short note for its filler).
"""

from __future__ import annotations

from collections.abc import Sequence

from apollo_domain.lexical import occurrences, rank

from ._columns import Mask, Undo


class LexicalIndex:
    """Term postings of the entry rows and ``ts_rank`` scoring over them."""

    def __init__(self) -> None:
        self._postings: dict[str, dict[int, int]] = {}
        self._terms: dict[int, dict[str, int]] = {}

    def add(self, row: int, text: str, undo: Undo, counts: dict[str, int] | None = None) -> None:
        """Index ``row`` under the terms of ``text``; ``counts``, when given, are its
        :func:`occurrences` already computed (off the event loop, for a long text)."""
        self._insert(row, occurrences(text) if counts is None else counts)
        undo.append(lambda: self._delete(row))

    def remove(self, row: int, undo: Undo) -> None:
        if row not in self._terms:
            return
        counts = self._terms[row]
        self._delete(row)
        undo.append(lambda: self._insert(row, counts))

    def _insert(self, row: int, counts: dict[str, int]) -> None:
        for term, count in counts.items():
            self._postings.setdefault(term, {})[row] = count
        self._terms[row] = counts

    def _delete(self, row: int) -> None:
        for term in self._terms.pop(row):
            postings = self._postings[term]
            del postings[row]
            if not postings:
                del self._postings[term]

    def scores(self, query: Sequence[str], allowed: Mask) -> dict[int, float]:
        """The rank of every allowed row holding at least one of the distinct ``query``
        terms."""
        held: dict[int, list[int]] = {}
        for term in sorted(query):  # the order rank sums in
            postings = self._postings.get(term)
            if not postings:
                continue
            for row, count in postings.items():
                if row < allowed.size and allowed[row]:
                    counts = held.get(row)
                    if counts is None:
                        held[row] = [count]
                    else:
                        counts.append(count)
        size = len(query)
        ranked: dict[tuple[int, ...], float] = {}  # rows share few distinct count lists
        found: dict[int, float] = {}
        for row, counts in held.items():
            key = tuple(counts)
            score = ranked.get(key)
            if score is None:
                score = ranked[key] = rank(key, size)
            found[row] = score
        return found
