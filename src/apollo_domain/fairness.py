"""Fair pages (docs/retrieval.md, "Fair pages"): how a query's fused ranking becomes the
page it returns, so that one source cannot drown the others.

Three rules, applied in this order to every candidate the signals found (each signal reads
:func:`candidate_depth` of them, a bounded multiple of the page):

1. **Evidence weighs in.** A candidate's rank score is its fused score times its evidence
   weight (:func:`evidence_weight`): 1 for a confirmed entry (the corroboration checker
   confirms a candidate that an independent source corroborated, so confirmed covers
   corroborated), ``(1 + credibility) / 2`` for any other, the credibility being its
   source's. At equal relevance a confirmed entry outranks a candidate, a candidate of a
   credible source one of a doubtful source; a candidate keeps at least half its relevance
   whatever its source. Ties: confirmed first, then by id.
2. **Near-duplicates of one source fold.** Walking the candidates best first, an entry folds
   into an earlier shown one of the same source (the same agent, or the same principal)
   when the two are near-duplicates (:func:`near_duplicates`): cosine of their embeddings at
   least the fold similarity (the policy's ``corroboration_similarity``, 0.9 by default: the
   similarity at which the store holds two texts to say the same thing), or the same content
   family of at least :data:`FAMILY_MIN_WORDS` words (:func:`content_family`: the same words,
   in any order, whatever numbers they carry: one template filled in again and again).
   The best one is shown, with ``folded`` counting the others. Entries of different
   sources never fold.
3. **No source holds more than a third of the page while others match.** At most
   :func:`share_cap` (⌈limit / 3⌉) results of one agent, and of one principal; the entries
   over the cap wait, and fill the rest of the page, best first, after every other
   source's entry (only once no other source's entry remains).

When the question names a day or span of time, the candidates of that time
(:mod:`apollo_domain.temporal`) are walked first, then the others, each part by these rules.

Nothing here reads the store: the query service reads the candidates (one round trip per
signal; the vector and lexical signals cap each source at :func:`source_depth` in the
store), the candidates whole, the close pairs among those that share a source (compared
where the vectors are) and their sources' credibility (one round trip each), then calls
:func:`fair_page`.
"""

from __future__ import annotations

import functools
import heapq
import math
import operator
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Final
from uuid import UUID

from attrs import frozen

from .model import Entry, Status
from .normalize import canonical_content
from .retrieval import Fused

#: No one source holds more than ⌈limit / SHARE_DIVISOR⌉ of a page while others match.
SHARE_DIVISOR: Final = 3
#: Each signal reads this many times the page's limit (at least the retrieval settings'
#: ``candidates``): room for the entries the share cap and the folding set aside.
OVERFETCH: Final = 3
#: The vector and lexical signals read at most this many times the limit of one source's
#: candidates (the store caps them in the signal's one statement).
SOURCE_OVERFETCH: Final = 2
#: A candidate is compared with at most this many earlier shown entries of its source for
#: folding (the best ones): the fold's work stays linear in the candidates.
FOLD_COMPARISONS: Final = 16

#: A content family folds only texts of at least this many words: in a shorter one ("the
#: timeout is 30 s") the number is the fact, not a filler of a repeated template.
FAMILY_MIN_WORDS: Final = 6

#: A whole word (a run of word characters) holding no digit: "offer" of "offer 17", not
#: "a1b" or any part of it.
_WORD_WITHOUT_DIGITS = re.compile(r"\b[^\W\d]+\b")


def share_cap(limit: int) -> int:
    """The most results of one agent (or one principal) a page of ``limit`` holds while
    other sources have matching entries: ⌈limit / 3⌉."""
    return -(-limit // SHARE_DIVISOR)


def candidate_depth(limit: int, candidates: int) -> int:
    """How many candidates each signal reads for a page of ``limit``."""
    return max(candidates, OVERFETCH * limit)


def source_depth(limit: int) -> int:
    """How many of one source's candidates the vector and the lexical signal read for a page
    of ``limit``: enough to fill the page from that source alone with room for its
    near-duplicates to fold, and no more, so that one source's many matches cannot push
    every other source's out of the candidates."""
    return SOURCE_OVERFETCH * limit


def evidence_weight(entry: Entry, credibility: float) -> float:
    """1 for a confirmed entry, ``(1 + credibility) / 2`` for any other (``credibility`` is
    its source's, in [0, 1])."""
    if entry.status is Status.CONFIRMED:
        return 1.0
    return (1.0 + min(max(credibility, 0.0), 1.0)) / 2.0


#: The contents whose families are remembered (the candidates of recent pages recur).
FAMILY_CACHE = 4_096


@functools.lru_cache(maxsize=FAMILY_CACHE)
def content_family(content: str) -> frozenset[str]:
    """The words of the canonical content (:func:`~apollo_domain.normalize.canonical_content`)
    without those holding a digit: texts that differ only in word order, case, spacing,
    punctuation or numbers ("offer 17", "offer 18") are one family."""
    return frozenset(_WORD_WITHOUT_DIGITS.findall(canonical_content(content)))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two vectors (0 when either is zero)."""
    return _dot(_unit(a), _unit(b))


def _unit(vector: Sequence[float]) -> list[float]:
    """``vector`` as plain floats scaled to length 1 (all zeros for the zero vector): one
    pass over an array type the store hands back, so each comparison is float arithmetic."""
    values = list(map(float, vector))
    length = math.sqrt(_dot(values, values))
    return [x / length for x in values] if length > 0.0 else [0.0] * len(values)


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return float(sum(map(operator.mul, a, b)))


def near_duplicates(a: Entry, b: Entry, fold_similarity: float) -> bool:
    """Whether two entries say the same thing: the same content family of at least
    :data:`FAMILY_MIN_WORDS` words, or (both embedded) a cosine of at least
    ``fold_similarity``."""
    family = content_family(a.content)
    if len(family) >= FAMILY_MIN_WORDS and family == content_family(b.content):
        return True
    return _embeddings_close(a, b, fold_similarity)


def _embeddings_close(
    a: Entry, b: Entry, fold_similarity: float, units: dict[UUID, list[float]] | None = None
) -> bool:
    """:func:`cosine` of the two embeddings against ``fold_similarity``; ``units`` keeps
    each entry's unit vector (by id) across the comparisons of one page."""
    if a.embedding is None or b.embedding is None:
        return False
    units = {} if units is None else units
    for entry in (a, b):
        if entry.id not in units:
            units[entry.id] = _unit(entry.embedding or ())
    return _dot(units[a.id], units[b.id]) >= fold_similarity


@frozen
class Placed:
    """One result of a fair page: the fused ranking's entry, its rank score (fused score ×
    evidence weight) and how many near-duplicates of its source folded into it."""

    fused: Fused
    score: float
    folded: int = 0

    @property
    def entry_id(self) -> UUID:
        return self.fused.entry_id


def fair_page(
    ranked: Sequence[Fused],
    entries: Mapping[UUID, Entry],
    credibility: Mapping[str, float],
    limit: int,
    fold_similarity: float,
    near: Collection[tuple[UUID, UUID]] | None = None,
    dated: Collection[UUID] = (),
) -> list[Placed]:
    """The page of at most ``limit`` results the module docstring describes, best first.

    ``ranked``: the fused ranking (an entry missing from ``entries``, deleted since it was
    ranked, is left out); ``credibility``: each source agent's (a source missing counts as
    new, 0.5); ``near``: the pairs of entries (smaller id first) whose embeddings are
    within ``fold_similarity``, as the store compared them
    (:meth:`~apollo_domain.ports.EntryReads.near_pairs`), else the entries' own
    embeddings are compared here; ``dated``: the entries of the time the question names
    (:mod:`apollo_domain.temporal`), ranked before all others."""
    units: dict[UUID, list[float]] = {}  # each entry's unit vector, made once per page
    partners: dict[UUID, set[UUID]] | None = None  # each entry's near ones, from ``near``
    if near is not None:
        partners = {}
        for a, b in near:
            partners.setdefault(a, set()).add(b)
            partners.setdefault(b, set()).add(a)

    scored: list[tuple[bool, float, bool, int, Fused, Entry]] = []
    for fused in ranked:
        entry = entries.get(fused.entry_id)
        if entry is None:
            continue
        weight = evidence_weight(entry, credibility.get(entry.source.agent_id, 0.5))
        confirmed = entry.status is Status.CONFIRMED
        # the id's integer orders as its text does (fixed width hexadecimal)
        scored.append(
            (fused.entry_id in dated, fused.score * weight, confirmed, entry.id.int, fused, entry)
        )
    scored.sort(key=lambda item: (not item[0], -item[1], not item[2], item[3]))

    # Walking best first, each candidate folds into an earlier shown one of its source, or
    # is shown: ``shown`` holds (score, fused, entry, source keys, confirmed).
    shown: list[tuple[float, Fused, Entry, tuple[str, ...], bool]] = []
    folded: list[int] = []
    by_source: dict[str, list[int]] = {}
    by_family: dict[tuple[str, frozenset[str]], int] = {}
    for _, score, confirmed, _, fused, entry in scored:
        keys = _source_keys(entry)
        family = content_family(entry.content)
        into = None
        if len(family) >= FAMILY_MIN_WORDS:
            into = next(
                (by_family[key, family] for key in keys if (key, family) in by_family), None
            )
        if into is None:
            into = _near_earlier(entry, keys, by_source, shown, partners, fold_similarity, units)
        if into is not None:
            folded[into] += 1
            continue
        index = len(shown)
        shown.append((score, fused, entry, keys, confirmed))
        folded.append(0)
        for key in keys:
            by_source.setdefault(key, []).append(index)
            by_family.setdefault((key, family), index)

    cap = share_cap(limit)
    held: dict[str, int] = {}
    page: list[int] = []
    waiting: list[int] = []

    def order(index: int) -> tuple[bool, int, int]:
        _, _, _, keys, confirmed = shown[index]
        return (not confirmed, max(held.get(key, 0) for key in keys), index)

    def place(index: int) -> None:
        """On the page, or waiting when one of its sources holds its share already."""
        keys = shown[index][3]
        if any(held.get(key, 0) >= cap for key in keys):
            waiting.append(index)
            return
        page.append(index)
        for key in keys:
            held[key] = held.get(key, 0) + 1

    start = 0
    while start < len(shown) and len(page) < limit:
        end = start + 1
        while (
            end < len(shown)
            and shown[end][0] == shown[start][0]
            and ((shown[end][1].entry_id in dated) == (shown[start][1].entry_id in dated))
        ):
            end += 1
        # Of equally ranked entries, a confirmed one first, then the one whose source
        # holds the fewest results so far: a tie is spread over its sources. A source's
        # count only grows, so an entry whose order is stale goes back in the heap.
        if end == start + 1:  # no tie (the usual case): no order to settle
            place(start)
            start = end
            continue
        tied = [order(index) for index in range(start, end)]
        heapq.heapify(tied)
        while tied and len(page) < limit:
            first = heapq.heappop(tied)
            index = first[2]
            now = order(index)
            if now != first:
                heapq.heappush(tied, now)
                continue
            place(index)
        start = end
    # No other source remains: the waiting entries fill the page, after the others.
    page.extend(waiting[: limit - len(page)])
    return [Placed(shown[i][1], shown[i][0], folded[i]) for i in page]


def _near_earlier(
    entry: Entry,
    keys: tuple[str, ...],
    by_source: Mapping[str, list[int]],
    shown: Sequence[tuple[float, Fused, Entry, tuple[str, ...], bool]],
    partners: Mapping[UUID, set[UUID]] | None,
    fold_similarity: float,
    units: dict[UUID, list[float]],
) -> int | None:
    """The first of the best :data:`FOLD_COMPARISONS` shown entries of ``entry``'s sources
    whose embedding is within ``fold_similarity`` of its own (as the store compared them
    when ``partners`` is given), else None."""
    mine = None if partners is None else partners.get(entry.id, set())
    if mine is not None and not mine:
        return None  # the store found none near it
    lists = [by_source[key] for key in keys if key in by_source]
    if not lists:
        return None
    # each list grows in shown order: the best of the union are among each one's best
    if len(lists) == 1:
        earlier = lists[0][:FOLD_COMPARISONS]
    else:
        earlier = sorted({i for found in lists for i in found[:FOLD_COMPARISONS]})
        earlier = earlier[:FOLD_COMPARISONS]
    if mine is not None:
        return next((i for i in earlier if shown[i][2].id in mine), None)
    return next(
        (i for i in earlier if _embeddings_close(entry, shown[i][2], fold_similarity, units)),
        None,
    )


def foldable(entries: Iterable[Entry]) -> list[UUID]:
    """The ids of ``entries`` that share a source (an agent or a principal) with another
    of them: the only ones a fair page may fold by their embeddings, so the only ones whose
    near pairs it needs."""
    listed = list(entries)
    counts: dict[str, int] = {}
    for entry in listed:
        for key in _source_keys(entry):
            counts[key] = counts.get(key, 0) + 1
    return [e.id for e in listed if any(counts[key] > 1 for key in _source_keys(e))]


def _source_keys(entry: Entry) -> tuple[str, ...]:
    """The keys one source's share is counted under: its agent, and its principal if any
    (the principal that owns the entry, else the one recorded as submitting it)."""
    agent = f"agent:{entry.source.agent_id}"
    principal = entry.owner_id or entry.source.submitted_by
    return (agent,) if principal is None else (agent, f"principal:{principal}")


__all__ = [
    "FAMILY_MIN_WORDS",
    "FOLD_COMPARISONS",
    "OVERFETCH",
    "SHARE_DIVISOR",
    "SOURCE_OVERFETCH",
    "Placed",
    "candidate_depth",
    "content_family",
    "cosine",
    "evidence_weight",
    "fair_page",
    "foldable",
    "near_duplicates",
    "share_cap",
    "source_depth",
]
