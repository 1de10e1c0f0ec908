"""Entry storage: numpy filter columns, a normalised float32 matrix and Python indexes.

Every entry owns one row. ``confidence``, ``status``, ``updated_at`` and ``decayed_at``
live authoritatively in numpy columns, so set-based maintenance (decay, scaling,
archiving) never touches Python objects; an entry whose row changed that way is marked
stale and rebuilt from the columns when it is read. Every mutation pushes its inverse
onto the unit of work's undo log.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any
from uuid import UUID

import attrs
import numpy as np
import numpy.typing as npt

from apollo_domain.errors import Conflict, NotFound, PersistenceFailed, ValidationError
from apollo_domain.model import (
    AccessScope,
    ContentType,
    Entry,
    Evidence,
    Relation,
    RelationType,
    SourceRef,
    Status,
    Viewer,
)
from apollo_domain.ports import (
    AgentDomainStats,
    DecayOutcome,
    ScoredEntry,
    SearchFilter,
    StoreStats,
)

Undo = list[Callable[[], object]]
Mask = npt.NDArray[np.bool_]
Rows = npt.NDArray[np.intp]

STATUSES: tuple[Status, ...] = (
    Status.CANDIDATE,
    Status.CONFIRMED,
    Status.DISPUTED,
    Status.ARCHIVED,
)
SCOPES: tuple[AccessScope, ...] = (AccessScope.GLOBAL, AccessScope.TEAM, AccessScope.PRIVATE)
CONTENT_TYPES: tuple[ContentType, ...] = tuple(ContentType)
STATUS_CODE = {s: i for i, s in enumerate(STATUSES)}
SCOPE_CODE = {s: i for i, s in enumerate(SCOPES)}
TYPE_CODE = {t: i for i, t in enumerate(CONTENT_TYPES)}
ARCHIVED = STATUS_CODE[Status.ARCHIVED]
CANDIDATE = STATUS_CODE[Status.CANDIDATE]
GLOBAL, TEAM, PRIVATE = (SCOPE_CODE[s] for s in SCOPES)
NO_TIME = np.iinfo(np.int64).min
NO_OWNER = -1
REASONS = (None, "decayed", "stale")  # pending archive_reason per row, by code
DECAYED, STALE = 1, 2

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
_US_PER_HOUR = 3_600_000_000.0
_LOW64 = (1 << 64) - 1


def micros(value: datetime, field: str = "timestamp") -> int:
    """Microseconds since the epoch of a timezone-aware datetime."""
    try:
        return (value - _EPOCH) // _MICRO
    except TypeError as exc:
        raise ValidationError(field, "must be a timezone-aware datetime") from exc


def from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


class Interner:
    """Strings to dense int32 codes, never forgotten (codes are harmless after a rollback)."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.names: list[str] = []

    def intern(self, name: str) -> int:
        code = self.codes.get(name)
        if code is None:
            code = self.codes[name] = len(self.names)
            self.names.append(name)
        return code


_COLUMNS: tuple[tuple[str, Any, Any], ...] = (
    ("alive", np.bool_, False),
    ("has_emb", np.bool_, False),
    ("stale", np.bool_, False),
    ("reason", np.int8, 0),
    ("status", np.int8, 0),
    ("scope", np.int8, 0),
    ("ctype", np.int8, 0),
    ("owner", np.int32, NO_OWNER),
    ("domain", np.int32, 0),
    ("agent", np.int32, 0),
    ("conf", np.float64, 0.0),
    ("created", np.int64, 0),
    ("updated", np.int64, 0),
    ("decayed", np.int64, NO_TIME),
    ("id_hi", np.uint64, 0),
    ("id_lo", np.uint64, 0),
)


class EntryTable:
    """All entries of a store, plus their evidence and relations (deleted together)."""

    alive: Mask
    has_emb: Mask
    stale: Mask
    reason: npt.NDArray[np.int8]
    status: npt.NDArray[np.int8]
    scope: npt.NDArray[np.int8]
    ctype: npt.NDArray[np.int8]
    owner: npt.NDArray[np.int32]
    domain: npt.NDArray[np.int32]
    agent: npt.NDArray[np.int32]
    conf: npt.NDArray[np.float64]
    created: npt.NDArray[np.int64]
    updated: npt.NDArray[np.int64]
    decayed: npt.NDArray[np.int64]
    id_hi: npt.NDArray[np.uint64]
    id_lo: npt.NDArray[np.uint64]

    def __init__(self, dimension: int | None = None, capacity: int = 1024) -> None:
        self.capacity = max(1, capacity)
        self.n = 0
        self.dimension = dimension
        for name, dtype, fill in _COLUMNS:
            setattr(self, name, np.full(self.capacity, fill, dtype=dtype))
        self.matrix: npt.NDArray[np.float32] | None = (
            None if dimension is None else np.zeros((self.capacity, dimension), np.float32)
        )
        self.base: list[Entry | None] = []
        self.row_of: dict[UUID, int] = {}
        self.partitions: dict[tuple[str, int, int], list[int]] = {}
        self.tag_rows: dict[str, set[int]] = {}
        self.owners = Interner()
        self.domains = Interner()
        self.agents = Interner()
        self.evidence = EvidenceTable(self)
        self.relations = RelationTable(self)

    # ------------------------------------------------------------------ rows

    def _grow(self) -> None:
        capacity = self.capacity * 2
        for name, dtype, fill in _COLUMNS:
            column = np.full(capacity, fill, dtype=dtype)
            column[: self.n] = getattr(self, name)[: self.n]
            setattr(self, name, column)
        if self.matrix is not None:
            matrix = np.zeros((capacity, self.matrix.shape[1]), np.float32)
            matrix[: self.n] = self.matrix[: self.n]
            self.matrix = matrix
        self.capacity = capacity

    def _vector(self, embedding: Sequence[float]) -> npt.NDArray[np.float32]:
        vector = np.asarray(embedding, dtype=np.float64)
        if vector.ndim != 1 or vector.size == 0:
            raise PersistenceFailed("an embedding must be a non-empty vector")
        if self.dimension is None:
            self.dimension = int(vector.size)
        elif vector.size != self.dimension:
            raise PersistenceFailed(f"expected {self.dimension} dimensions, not {vector.size}")
        norm = float(np.sqrt(vector @ vector))
        if norm > 0.0:
            vector = vector / norm
        return vector.astype(np.float32)

    def _partition_key(self, entry: Entry) -> tuple[str, int, int]:
        """Dedup partition: (hash, scope, owner); every global entry shares one partition."""
        owner = (
            NO_OWNER
            if entry.owner_id is None or entry.access_scope is AccessScope.GLOBAL
            else self.owners.intern(entry.owner_id)
        )
        return (entry.content_hash, SCOPE_CODE[entry.access_scope], owner)

    def _active_in(self, key: tuple[str, int, int], but: int = -1) -> int | None:
        for row in self.partitions.get(key, ()):
            if row != but and self.alive[row] and self.status[row] != ARCHIVED:
                return row
        return None

    def _column_values(self, entry: Entry) -> tuple[int, int, int, int, int, float, int, int]:
        """The authoritative column values of ``entry``; validates before anything changes."""
        return (
            STATUS_CODE[entry.status],
            SCOPE_CODE[entry.access_scope],
            NO_OWNER if entry.owner_id is None else self.owners.intern(entry.owner_id),
            self.domains.intern(entry.knowledge_domain),
            self.agents.intern(entry.source.agent_id),
            float(entry.confidence),
            micros(entry.updated_at, "updated_at"),
            NO_TIME if entry.decayed_at is None else micros(entry.decayed_at, "decayed_at"),
        )

    def _write_columns(
        self, row: int, values: tuple[int, int, int, int, int, float, int, int]
    ) -> None:
        (
            self.status[row],
            self.scope[row],
            self.owner[row],
            self.domain[row],
            self.agent[row],
            self.conf[row],
            self.updated[row],
            self.decayed[row],
        ) = values
        self.stale[row] = False
        self.reason[row] = 0

    def entry(self, row: int) -> Entry:
        """The current entry of a row (rebuilt from the columns when they moved on)."""
        base = self.base[row]
        assert base is not None
        if not self.stale[row]:
            return base
        reason = REASONS[self.reason[row]]
        decayed = int(self.decayed[row])
        return attrs.evolve(
            base,
            confidence=float(self.conf[row]),
            status=STATUSES[self.status[row]],
            updated_at=from_micros(int(self.updated[row])),
            decayed_at=None if decayed == NO_TIME else from_micros(decayed),
            source_context=base.source_context
            if reason is None
            else {**base.source_context, "archive_reason": reason},
        )

    def _with_embedding(self, row: int, entry: Entry) -> Entry:
        if not self.has_emb[row] or self.matrix is None:
            return entry
        return attrs.evolve(entry, embedding=tuple(self.matrix[row].tolist()))

    def _ordered(self, rows: npt.NDArray[np.intp], newest_first: bool) -> npt.NDArray[np.intp]:
        """Rows by (created_at, id), ascending or descending."""
        order = np.lexsort((self.id_lo[rows], self.id_hi[rows], self.created[rows]))
        return rows[order[::-1] if newest_first else order]

    # ------------------------------------------------------------------ writes

    def add(self, entry: Entry, undo: Undo) -> None:
        if entry.id in self.row_of:
            raise Conflict(f"entry {entry.id} already exists")
        key = self._partition_key(entry)
        if entry.status is not Status.ARCHIVED and self._active_in(key) is not None:
            raise Conflict("an active entry with the same content exists in that partition")
        created = micros(entry.created_at, "created_at")
        values = self._column_values(entry)
        ctype = TYPE_CODE[entry.content_type]
        vector = None if entry.embedding is None else self._vector(entry.embedding)
        if self.n == self.capacity:
            self._grow()
        if vector is not None and self.matrix is None:
            assert self.dimension is not None
            self.matrix = np.zeros((self.capacity, self.dimension), np.float32)
        row = self.n
        self.n += 1
        base = attrs.evolve(entry, embedding=None, source_context=dict(entry.source_context))
        self.base.append(base)
        self.row_of[entry.id] = row
        self.partitions.setdefault(key, []).append(row)
        for tag in base.tags:
            self.tag_rows.setdefault(tag, set()).add(row)
        self._write_columns(row, values)
        self.alive[row] = True
        self.ctype[row] = ctype
        self.created[row] = created
        value = entry.id.int
        self.id_hi[row] = value >> 64
        self.id_lo[row] = value & _LOW64
        if vector is not None:
            assert self.matrix is not None
            self.matrix[row] = vector
            self.has_emb[row] = True
        undo.append(self._pop)

    def _pop(self) -> None:
        """Undo the last ``add``."""
        self.n -= 1
        row = self.n
        base = self.base.pop()
        assert base is not None
        del self.row_of[base.id]
        self.partitions[self._partition_key(base)].remove(row)
        for tag in base.tags:
            self.tag_rows[tag].discard(row)
        self.alive[row] = False
        if self.has_emb[row]:
            self.has_emb[row] = False
            assert self.matrix is not None
            self.matrix[row] = 0.0

    def _replace(self, row: int, new: Entry, undo: Undo | None) -> None:
        old = self.entry(row)
        values = self._column_values(new)
        old_key, new_key = self._partition_key(old), self._partition_key(new)
        if old_key != new_key:
            self.partitions[old_key].remove(row)
            self.partitions.setdefault(new_key, []).append(row)
        if old.tags != new.tags:
            for tag in old.tags:
                self.tag_rows[tag].discard(row)
            for tag in new.tags:
                self.tag_rows.setdefault(tag, set()).add(row)
        self.base[row] = new
        self._write_columns(row, values)
        if undo is not None:
            undo.append(lambda: self._replace(row, old, None))

    def update(self, entry: Entry, undo: Undo) -> None:
        row = self.row_of.get(entry.id)
        if row is None:
            raise NotFound(f"entry {entry.id} does not exist")
        new = attrs.evolve(
            self.entry(row),
            status=entry.status,
            confidence=entry.confidence,
            tags=tuple(entry.tags),
            knowledge_domain=entry.knowledge_domain,
            source=entry.source,
            owner_id=entry.owner_id,
            access_scope=entry.access_scope,
            source_context=dict(entry.source_context),
            confirmed_at=entry.confirmed_at,
            updated_at=entry.updated_at,
            decayed_at=entry.decayed_at,
        )
        key = self._partition_key(new)
        if new.status is not Status.ARCHIVED and self._active_in(key, but=row) is not None:
            raise Conflict("an active entry with the same content exists in that partition")
        self._replace(row, new, undo)

    def boost(
        self, ids: Sequence[UUID], amount: float, now: datetime, count_access: bool, undo: Undo
    ) -> dict[UUID, float]:
        micros(now, "now")
        result: dict[UUID, float] = {}
        for entry_id in dict.fromkeys(ids):
            row = self.row_of.get(entry_id)
            if row is None:
                continue
            old = self.entry(row)
            confidence = min(old.confidence + amount, 1.0)
            new = attrs.evolve(
                old,
                confidence=confidence,
                updated_at=now,
                access_count=old.access_count + 1 if count_access else old.access_count,
            )
            self._replace(row, new, undo)
            result[entry_id] = confidence
        return result

    def _save_rows(self, rows: npt.NDArray[np.intp], undo: Undo) -> None:
        """Push the undo of a set-based change of the authoritative columns of ``rows``."""
        saved = [
            (column, column[rows])
            for column in (self.conf, self.status, self.updated, self.decayed, self.reason)
        ]

        def restore() -> None:
            for column, values in saved:
                column[rows] = values
            self.stale[rows] = True

        undo.append(restore)

    def _active_rows(self) -> npt.NDArray[np.intp]:
        n = self.n
        return np.flatnonzero(self.alive[:n] & (self.status[:n] != ARCHIVED))

    def decay(
        self, now: datetime, factor_per_hour: float, archive_below: float, undo: Undo
    ) -> DecayOutcome:
        now_us = micros(now, "now")
        rows = self._active_rows()
        if rows.size == 0:
            return DecayOutcome(decayed=0, archived=0)
        self._save_rows(rows, undo)
        since = self.decayed[rows]
        since = np.where(since == NO_TIME, self.created[rows], since)
        hours = np.maximum(0.0, (now_us - since) / _US_PER_HOUR)
        confidence = self.conf[rows] * np.power(factor_per_hour, hours)
        self.conf[rows] = confidence
        self.decayed[rows] = now_us
        self.stale[rows] = True
        archived = rows[confidence < archive_below]
        self.status[archived] = ARCHIVED
        self.updated[archived] = now_us
        self.reason[archived] = DECAYED
        return DecayOutcome(decayed=int(rows.size), archived=int(archived.size))

    def scale_confidence(self, factor: float, undo: Undo) -> int:
        rows = self._active_rows()
        if rows.size:
            self._save_rows(rows, undo)
            self.conf[rows] *= factor
            self.stale[rows] = True
        return int(rows.size)

    def archive_stale(self, cutoff: datetime, now: datetime, undo: Undo) -> int:
        cutoff_us, now_us = micros(cutoff, "cutoff"), micros(now, "now")
        active = self._active_rows()
        rows = active[self.updated[active] < cutoff_us]
        if rows.size:
            self._save_rows(rows, undo)
            self.status[rows] = ARCHIVED
            self.updated[rows] = now_us
            self.reason[rows] = STALE
            self.stale[rows] = True
        return int(rows.size)

    def delete(self, ids: Collection[UUID], undo: Undo) -> int:
        count = 0
        for entry_id in dict.fromkeys(ids):
            row = self.row_of.pop(entry_id, None)
            if row is None:
                continue
            self.alive[row] = False
            undo.append(partial(self._revive, row, entry_id))
            self.evidence.drop(entry_id, undo)
            self.relations.drop(entry_id, undo)
            count += 1
        return count

    def _revive(self, row: int, entry_id: UUID) -> None:
        self.row_of[entry_id] = row
        self.alive[row] = True

    # ------------------------------------------------------------------ reads

    def get(self, entry_id: UUID, with_embedding: bool) -> Entry | None:
        row = self.row_of.get(entry_id)
        if row is None:
            return None
        entry = self.entry(row)
        return self._with_embedding(row, entry) if with_embedding else entry

    def get_many(self, ids: Iterable[UUID]) -> dict[UUID, Entry]:
        found: dict[UUID, Entry] = {}
        for entry_id in ids:
            row = self.row_of.get(entry_id)
            if row is not None:
                found[entry_id] = self.entry(row)
        return found

    def find_by_hash(
        self, content_hash: str, scope: AccessScope, owner_id: str | None
    ) -> Entry | None:
        if owner_id is None or scope is AccessScope.GLOBAL:
            owner = NO_OWNER
        else:
            code = self.owners.codes.get(owner_id)
            if code is None:
                return None
            owner = code
        row = self._active_in((content_hash, SCOPE_CODE[scope], owner))
        return None if row is None else self.entry(row)

    def visible(self, viewer: Viewer, rows: Rows | None = None) -> Mask:
        """Which rows the viewer may see (liveness not included): every row, or ``rows``."""
        scope = self.scope[: self.n] if rows is None else self.scope[rows]
        mask: Mask = scope == GLOBAL
        principal = viewer.principal_id
        if principal is None:
            return mask
        owner = self.owner[: self.n] if rows is None else self.owner[rows]
        code = self.owners.codes.get(principal)
        if code is not None:
            mask |= (scope != GLOBAL) & (owner == code)
        team = [
            self.owners.codes[o]
            for o in viewer.team_owners
            if o in self.owners.codes and o != principal
        ]
        if team:
            in_team = owner == team[0] if len(team) == 1 else np.isin(owner, team)
            mask |= (scope == TEAM) & in_team
        return mask

    def matching(self, flt: SearchFilter, *, embedded: bool) -> Mask | None:
        """The rows matching ``flt`` (visibility included), or None when none can match."""
        return self._mask(flt, embedded, None)

    def selected(self, flt: SearchFilter, *, embedded: bool) -> Rows | None:
        """The rows matching ``flt`` in row order, or None when none can match.

        A filter naming a few ``only_ids`` is evaluated on those rows alone, not the store."""
        if flt.only_ids is not None and len(flt.only_ids) * 8 < self.n:
            row_of = self.row_of
            found = [row for row in map(row_of.get, flt.only_ids) if row is not None]
            if not found:
                return None
            rows = np.sort(np.asarray(found, dtype=np.intp))
            mask = self._mask(flt, embedded, rows)
            return None if mask is None else rows[mask]
        mask = self._mask(flt, embedded, None)
        return None if mask is None else np.flatnonzero(mask)

    def _mask(self, flt: SearchFilter, embedded: bool, rows: Rows | None) -> Mask | None:
        """``flt`` over every row (``rows`` None) or over ``rows`` (which hold every
        ``only_ids`` row of the store)."""
        n = self.n
        codes = {STATUS_CODE[s] for s in flt.statuses}
        if not codes or n == 0:
            return None
        at: slice | Rows = slice(0, n) if rows is None else rows
        size = n if rows is None else rows.size
        mask = self.alive[at] & self.has_emb[at] if embedded else self.alive[at].copy()
        status = self.status[at]
        if len(codes) == 1:
            mask &= status == codes.pop()
        elif len(codes) == 2:
            first, second = codes
            mask &= (status == first) | (status == second)
        elif len(codes) == 3:
            (missing,) = set(range(len(STATUSES))) - codes
            mask &= status != missing
        if flt.access_scope is not None:
            mask &= self.scope[at] == SCOPE_CODE[flt.access_scope]
        if flt.partition is not None:
            scope, owner_id = flt.partition
            mask &= self.scope[at] == SCOPE_CODE[scope]
            if scope is not AccessScope.GLOBAL:
                if owner_id is None:
                    owner = NO_OWNER
                elif owner_id in self.owners.codes:
                    owner = self.owners.codes[owner_id]
                else:
                    return None
                mask &= self.owner[at] == owner
        if flt.knowledge_domain is not None:
            domain = self.domains.codes.get(flt.knowledge_domain)
            if domain is None:
                return None
            mask &= self.domain[at] == domain
        if flt.content_type is not None:
            mask &= self.ctype[at] == TYPE_CODE[flt.content_type]
        if flt.min_confidence is not None:
            mask &= self.conf[at] >= flt.min_confidence
        if flt.tags is not None:
            tagged: set[int] = set()
            for tag in flt.tags:
                tagged.update(self.tag_rows.get(tag, ()))
            if not tagged:
                return None
            mask &= self._member(tagged, rows, size)
        if flt.only_ids is not None and rows is None:  # ``rows`` already are those ids
            wanted = {self.row_of[i] for i in flt.only_ids if i in self.row_of}
            if not wanted:
                return None
            mask &= self._member(wanted, rows, size)
        excluded = {self.row_of[i] for i in flt.exclude_ids if i in self.row_of}
        if excluded:
            mask &= ~self._member(excluded, rows, size)
        mask &= self.visible(flt.viewer, rows)
        return mask

    def _member(self, members: set[int], rows: Rows | None, size: int) -> Mask:
        """Which of every row (``rows`` None) or of ``rows`` are in ``members``."""
        listed = np.fromiter(members, dtype=np.intp, count=len(members))
        if rows is not None:
            return np.isin(rows, listed)
        found = np.zeros(size, dtype=np.bool_)
        found[listed] = True
        return found

    def nearest(
        self, embedding: Sequence[float], flt: SearchFilter, limit: int
    ) -> list[ScoredEntry]:
        return self.nearest_many([embedding], flt, limit)[0]

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

    def browse(self, flt: SearchFilter, limit: int) -> list[Entry]:
        if limit <= 0:
            return []
        rows = self.selected(flt, embedded=False)
        if rows is None:
            return []
        if rows.size > limit:
            created = self.created[rows]
            threshold = np.partition(created, rows.size - limit)[rows.size - limit]
            rows = rows[created >= threshold]
        return [self.entry(int(row)) for row in self._ordered(rows, newest_first=True)[:limit]]

    def candidates(self, limit: int) -> list[Entry]:
        if limit <= 0:
            return []
        n = self.n
        rows = np.flatnonzero(self.alive[:n] & self.has_emb[:n] & (self.status[:n] == CANDIDATE))
        return [
            self._with_embedding(int(row), self.entry(int(row)))
            for row in self._ordered(rows, newest_first=False)[:limit]
        ]

    def by_agent(self, agent_id: str) -> list[Entry]:
        code = self.agents.codes.get(agent_id)
        if code is None:
            return []
        n = self.n
        rows = np.flatnonzero(self.alive[:n] & (self.agent[:n] == code))
        return [self.entry(int(row)) for row in self._ordered(rows, newest_first=False)]

    def agent_domain_stats(self) -> list[AgentDomainStats]:
        rows = self._active_rows()
        if rows.size == 0:
            return []
        width = np.int64(len(self.domains.names))
        keys = self.agent[rows].astype(np.int64) * width + self.domain[rows]
        unique, inverse = np.unique(keys, return_inverse=True)
        counts = np.bincount(inverse)
        sums = np.bincount(inverse, weights=self.conf[rows])
        latest = np.full(unique.size, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(latest, inverse, self.updated[rows])
        stats = [
            AgentDomainStats(
                agent_id=self.agents.names[int(key // width)],
                knowledge_domain=self.domains.names[int(key % width)],
                entry_count=int(count),
                average_confidence=float(total / count),
                last_active_at=from_micros(int(last)),
            )
            for key, count, total, last in zip(unique, counts, sums, latest, strict=True)
        ]
        stats.sort(key=lambda s: (s.agent_id, s.knowledge_domain))
        return stats

    def stats(self, viewer: Viewer, now: datetime) -> StoreStats:
        n = self.n
        seen = self.alive[:n] & self.visible(viewer)
        status = self.status[:n][seen]
        by_status = np.bincount(status, minlength=len(STATUSES))
        by_type = np.bincount(self.ctype[:n][seen], minlength=len(CONTENT_TYPES))
        active = status != ARCHIVED
        confidence = self.conf[:n][seen][active]
        since = micros(now, "now") - 24 * 3_600_000_000
        statuses = {s.value: int(by_status[code]) for s, code in STATUS_CODE.items()}
        statuses["active"] = int(by_status[:ARCHIVED].sum())
        return StoreStats(
            total=int(seen.sum()),
            last_24h=int(np.count_nonzero(self.created[:n][seen] >= since)),
            average_confidence=float(confidence.mean()) if confidence.size else 0.0,
            by_status=statuses,
            by_content_type={t.value: int(by_type[code]) for t, code in TYPE_CODE.items()},
            total_relations=self.relations.count_between(seen),
        )


class EvidenceTable:
    """Evidence per entry, in insertion order, one row per (agent, provider, channel)."""

    def __init__(self, entries: EntryTable) -> None:
        self._entries = entries
        self._rows: dict[UUID, list[Evidence]] = {}
        self._sources: dict[UUID, set[tuple[str, str, str | None]]] = {}

    def add(self, evidence: Evidence, undo: Undo) -> bool:
        entry_id = evidence.entry_id
        if entry_id not in self._entries.row_of:
            raise NotFound(f"entry {entry_id} does not exist")
        source = evidence.source
        key = (source.agent_id, source.provider, source.channel)
        sources = self._sources.setdefault(entry_id, set())
        if key in sources:
            return False
        rows = self._rows.setdefault(entry_id, [])
        sources.add(key)
        rows.append(evidence)

        def remove() -> None:
            rows.pop()
            sources.discard(key)

        undo.append(remove)
        return True

    def for_entry(self, entry_id: UUID) -> list[Evidence]:
        return list(self._rows.get(entry_id, ()))

    def forget_agent(self, agent_id: str, redacted: SourceRef, undo: Undo) -> int:
        touched = 0
        for entry_id, rows in list(self._rows.items()):
            if not any(e.source.agent_id == agent_id for e in rows):
                continue
            kept = [
                attrs.evolve(e, source=redacted) if e.source.agent_id == agent_id else e
                for e in rows
                if e.source.agent_id != agent_id or e.kind == "origin"
            ]
            touched += sum(e.source.agent_id == agent_id for e in rows)
            old_rows, old_sources = rows, self._sources[entry_id]
            self._rows[entry_id] = kept
            self._sources[entry_id] = {
                (e.source.agent_id, e.source.provider, e.source.channel) for e in kept
            }

            def restore(
                entry_id: UUID = entry_id,
                rows: list[Evidence] = old_rows,
                sources: set[tuple[str, str, str | None]] = old_sources,
            ) -> None:
                self._rows[entry_id] = rows
                self._sources[entry_id] = sources

            undo.append(restore)
        return touched

    def drop(self, entry_id: UUID, undo: Undo) -> None:
        rows = self._rows.pop(entry_id, None)
        sources = self._sources.pop(entry_id, None)
        if rows is not None and sources is not None:

            def restore() -> None:
                self._rows[entry_id] = rows
                self._sources[entry_id] = sources

            undo.append(restore)


RelationKey = tuple[UUID, UUID, RelationType]


class RelationTable:
    """Typed edges, each with an insertion sequence number that orders ``outgoing``."""

    def __init__(self, entries: EntryTable) -> None:
        self._entries = entries
        self._edges: dict[RelationKey, tuple[int, Relation]] = {}
        self._out: dict[UUID, set[RelationKey]] = {}
        self._in: dict[UUID, set[RelationKey]] = {}
        self._sequence = 0

    def _link(self, key: RelationKey, item: tuple[int, Relation]) -> None:
        self._edges[key] = item
        self._out.setdefault(key[0], set()).add(key)
        self._in.setdefault(key[1], set()).add(key)

    def _unlink(self, key: RelationKey) -> tuple[int, Relation]:
        self._out[key[0]].discard(key)
        self._in[key[1]].discard(key)
        return self._edges.pop(key)

    def add(self, relation: Relation, undo: Undo) -> bool:
        for endpoint in (relation.from_id, relation.to_id):
            if endpoint not in self._entries.row_of:
                raise NotFound(f"entry {endpoint} does not exist")
        key = (relation.from_id, relation.to_id, RelationType(relation.relation_type))
        if key in self._edges:
            return False
        self._sequence += 1
        self._link(key, (self._sequence, relation))
        undo.append(lambda: self._unlink(key))
        return True

    def outgoing(
        self, entry_ids: Collection[UUID], types: Collection[RelationType] | None
    ) -> list[Relation]:
        wanted = None if types is None else {RelationType(t) for t in types}
        found = [
            self._edges[key]
            for entry_id in set(entry_ids)
            for key in self._out.get(entry_id, ())
            if wanted is None or key[2] in wanted
        ]
        found.sort(key=lambda item: item[0])
        return [relation for _, relation in found]

    def exists(self, key: RelationKey) -> bool:
        return key in self._edges

    def count(self) -> int:
        return len(self._edges)

    def count_between(self, rows: Mask) -> int:
        row_of = self._entries.row_of
        return sum(
            1 for source, target, _ in self._edges if rows[row_of[source]] and rows[row_of[target]]
        )

    def drop(self, entry_id: UUID, undo: Undo) -> None:
        keys = self._out.get(entry_id, set()) | self._in.get(entry_id, set())
        if not keys:
            return
        removed = [(key, self._unlink(key)) for key in keys]

        def restore() -> None:
            for key, item in removed:
                self._link(key, item)

        undo.append(restore)
