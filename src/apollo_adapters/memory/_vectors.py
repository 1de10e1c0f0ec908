"""Nearest neighbours by cosine similarity: one matrix product per batch, then top-k."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import numpy as np
import numpy.typing as npt

from apollo_domain.model import Entry
from apollo_domain.ports import BatchNeighbours, ScoredEntry, SearchFilter

from ._columns import NO_OWNER, Rows
from ._filters import EntryFilters

#: A capped search numbers at most this many of its best matches first (all of them when
#: there are no more), four times as many while they hold fewer than it keeps.
PREFIX_ROWS = 1024


class VectorSearch(EntryFilters):
    """Nearest-neighbour search over the normalised float32 matrix of the entry rows."""

    def nearest(
        self, embedding: Sequence[float], flt: SearchFilter, limit: int
    ) -> list[ScoredEntry]:
        return self.nearest_many([embedding], flt, limit)[0]

    def near_pairs(self, ids: Sequence[UUID], similarity: float) -> set[tuple[UUID, UUID]]:
        """Pairs (smaller id first) of distinct live embedded rows among ``ids`` whose
        cosine is at least ``similarity``: one product of their unit vectors."""
        if self.matrix is None:
            return set()
        row_of, has_emb = self.row_of, self.has_emb
        found = [
            (entry_id, row)
            for entry_id in dict.fromkeys(ids)
            if (row := row_of.get(entry_id, -1)) >= 0 and has_emb[row]
        ]
        if len(found) < 2:
            return set()
        block = self.matrix[[row for _, row in found]]
        close = np.nonzero(block @ block.T >= np.float32(similarity))
        pairs = set()
        for a, b in zip(*(side.tolist() for side in close), strict=True):
            if a < b:
                first, second = found[a][0], found[b][0]
                pairs.add((first, second) if first < second else (second, first))
        return pairs

    def nearest_capped(
        self, embedding: Sequence[float], flt: SearchFilter, limit: int, per_source: int
    ) -> list[tuple[UUID, float]]:
        """The ids and cosines of the first ``limit`` matches, best first (ties by id),
        whose place among their agent's matches and among their principal's (its owner,
        else who submitted it) is within ``per_source``, as PostgreSQL numbers them: every
        match scored, ordered and numbered within its sources by array operations (no
        entry is rebuilt)."""
        if limit <= 0 or self.matrix is None:
            return []
        query = self._vector(embedding)
        selected = self.selected(flt, embedded=True)
        if selected is None or selected.size == 0:
            return []
        count = int(selected.size)
        if count * 4 < self.n:
            scores = self.matrix[selected] @ query
        else:  # most rows match: one product over the matrix as it is, no copy of it
            scores = (self.matrix[: self.n] @ query)[selected]
        # A row's place among its sources' matches depends only on the matches before it,
        # so in a large store the numbering runs on the best ones (every tie at the
        # boundary kept: a prefix of the order).
        prefix = PREFIX_ROWS
        while True:
            if prefix < count:
                best = np.argpartition(-scores, prefix - 1)[:prefix]
                head = np.flatnonzero(scores >= scores[best].min())
                rows, order = self._ranked(selected[head], scores[head])
                order = head[order]
            else:
                rows, order = self._ranked(selected, scores)
            kept = np.flatnonzero(self._within(rows, per_source))[:limit]
            if kept.size >= limit or rows.size == count:
                break
            prefix *= 4
        base = self.base
        return [
            (_live(base[row]).id, float(scores[at]))
            for row, at in zip(rows[kept].tolist(), order[kept].tolist(), strict=True)
        ]

    def _ranked(
        self, rows: Rows, scores: npt.NDArray[np.float32]
    ) -> tuple[Rows, npt.NDArray[np.intp]]:
        """``rows`` best first (ties by id), and where each came from in ``rows``."""
        order = np.argsort(-scores, kind="stable")
        ordered = scores[order]
        if bool((ordered[1:] == ordered[:-1]).any()):  # a tie: ordered by id as well
            order = np.lexsort((self.id_lo[rows], self.id_hi[rows], -scores))
        return rows[order], order

    def _within(self, rows: Rows, per_source: int) -> npt.NDArray[np.bool_]:
        """Whether each of ``rows`` (in rank order) is within ``per_source`` of its agent's
        and of its principal's rows before it."""
        within = np.ones(rows.size, dtype=np.bool_)
        for codes in (self.agent[rows], self.principal[rows]):
            owned = codes != NO_OWNER
            if not owned.any():
                continue
            over = np.flatnonzero(np.bincount(codes[owned]) > per_source)
            if over.size <= FEW_SOURCES:  # the rows past each crowded source's first ones
                for code in over.tolist():
                    within[np.flatnonzero(codes == code)[per_source:]] = False
            else:
                within &= ~owned | (_rank_in_group(codes.astype(np.int64)) < per_source)
        return within

    def nearest_many(
        self, embeddings: Sequence[Sequence[float]], flt: SearchFilter, limit: int
    ) -> list[list[ScoredEntry]]:
        """One matrix product for the whole batch, then top-k per query."""
        empty: list[list[ScoredEntry]] = [[] for _ in embeddings]
        if limit <= 0 or self.matrix is None or not embeddings:
            return empty
        queries = np.stack([self._vector(e) for e in embeddings])
        selected = self.selected(flt, embedded=True)
        if selected is None or selected.size == 0:
            return empty
        n = self.n
        count = int(selected.size)
        rows: Rows | None
        if count * 4 < n:
            rows = selected
            scores = queries @ self.matrix[rows].T
        else:
            rows = None
            # (queries, rows): each query's scores contiguous for the top-k selection
            scores = queries @ self.matrix[:n].T
            if count < n:
                mask = np.ones(n, dtype=np.bool_)
                mask[selected] = False
                scores[:, mask] = np.float32(-np.inf)
        return [self._top(scores[i], rows, count, limit) for i in range(len(embeddings))]

    def nearest_batch(
        self, embeddings: Sequence[Sequence[float]], flt: SearchFilter, limit: int
    ) -> list[BatchNeighbours]:
        """``nearest_many``, and each embedding's similarity to the earlier ones of the batch
        as ``nearest`` would score their stored entries (normalised float32 dot products)."""
        stored = self.nearest_many(embeddings, flt, limit)
        if not embeddings:
            return []
        queries = np.stack([self._vector(e) for e in embeddings])
        batch: list[BatchNeighbours] = []
        for i, found in enumerate(stored):
            scores = [float(s) for s in queries[:i] @ queries[i]] if i else []
            floor = found[-1].similarity if len(found) >= limit > 0 else -np.inf
            earlier = sorted(
                ((j, s) for j, s in enumerate(scores) if s >= floor), key=lambda p: (-p[1], p[0])
            )
            batch.append(BatchNeighbours(found, earlier))
        return batch

    def _top(
        self,
        scores: npt.NDArray[np.float32],
        rows: npt.NDArray[np.intp] | None,
        count: int,
        limit: int,
    ) -> list[ScoredEntry]:
        k = min(limit, count)
        if k < scores.size:
            top = np.argpartition(scores, scores.size - k)[scores.size - k :]
            threshold = scores[top].min()
            top = np.flatnonzero(scores >= threshold)  # every tie at the boundary
        else:
            top = np.arange(scores.size)
        chosen = top if rows is None else rows[top]
        order = np.lexsort((self.id_lo[chosen], self.id_hi[chosen], -scores[top]))[:k]
        return [
            ScoredEntry(entry=self.entry(int(chosen[i])), similarity=float(scores[top[i]]))
            for i in order
        ]


#: Up to this many sources over their cap are cut one by one (a comparison each), more
#: by numbering every row within its source.
FEW_SOURCES = 8


def _live(entry: Entry | None) -> Entry:
    """A selected (live) row's entry."""
    assert entry is not None
    return entry


def _rank_in_group(groups: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Each element's place (0-based) among the elements of its group before it."""
    if groups.size == 0:
        return np.zeros(0, dtype=np.int64)
    by_group = np.argsort(groups, kind="stable")
    ordered = groups[by_group]
    first = np.empty(ordered.size, dtype=np.bool_)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    lengths = np.diff(starts, append=ordered.size)
    places = np.arange(ordered.size) - np.repeat(starts, lengths)
    ranks = np.empty_like(places)
    ranks[by_group] = places
    return ranks
