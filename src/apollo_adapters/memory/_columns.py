"""Entry storage: numpy filter columns, a normalised float32 matrix and Python indexes.

Every entry owns one row. ``confidence``, ``status``, ``updated_at`` and ``decayed_at``
live authoritatively in numpy columns, so set-based maintenance (decay, scaling,
archiving) never touches Python objects; an entry whose row changed that way is marked
stale and rebuilt from the columns when it is read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import attrs
import numpy as np
import numpy.typing as npt

from apollo_domain.errors import PersistenceFailed, ValidationError
from apollo_domain.model import AccessScope, ContentType, Entry, Status

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
US_PER_HOUR = 3_600_000_000.0
LOW64 = (1 << 64) - 1


def micros(value: datetime, field: str = "timestamp") -> int:
    """Microseconds since the epoch of a timezone-aware datetime."""
    try:
        return (value - _EPOCH) // _MICRO
    except TypeError as exc:
        raise ValidationError(field, "must be a timezone-aware datetime") from exc


def unit_confidence(value: float) -> float:
    """``value`` as a stored confidence: within [0, 1], as PostgreSQL's column checks, else
    :class:`PersistenceFailed`."""
    confidence = float(value)
    if not 0.0 <= confidence <= 1.0:
        raise PersistenceFailed(f"a confidence must be within [0, 1], not {confidence}")
    return confidence


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
    ("principal", np.int32, NO_OWNER),
    ("domain", np.int32, 0),
    ("agent", np.int32, 0),
    ("conf", np.float64, 0.0),
    ("created", np.int64, 0),
    ("updated", np.int64, 0),
    ("decayed", np.int64, NO_TIME),
    ("checked", np.int64, NO_TIME),
    ("id_hi", np.uint64, 0),
    ("id_lo", np.uint64, 0),
)


#: status, scope, owner, principal, domain, agent, confidence, updated, decayed
_Values = tuple[int, int, int, int, int, int, float, int, int]


class EntryColumns:
    """Every entry of a store as one row of numpy columns, and how an entry is rebuilt."""

    alive: Mask
    has_emb: Mask
    stale: Mask
    reason: npt.NDArray[np.int8]
    status: npt.NDArray[np.int8]
    scope: npt.NDArray[np.int8]
    ctype: npt.NDArray[np.int8]
    owner: npt.NDArray[np.int32]
    #: the principal a fair page caps (its owner, else who submitted it), in ``owners``' codes
    principal: npt.NDArray[np.int32]
    domain: npt.NDArray[np.int32]
    agent: npt.NDArray[np.int32]
    conf: npt.NDArray[np.float64]
    created: npt.NDArray[np.int64]
    updated: npt.NDArray[np.int64]
    decayed: npt.NDArray[np.int64]
    checked: npt.NDArray[np.int64]  # the corroboration checker's last look; not an Entry field
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
        self.episode_rows: dict[UUID, list[int]] = {}  # an episode's rows, in row order
        self.owners = Interner()
        self.domains = Interner()
        self.agents = Interner()

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
        """The entry's :attr:`~apollo_domain.model.Entry.dedup_key`, its owner interned."""
        content_hash, scope, owner = entry.dedup_key
        code = NO_OWNER if owner is None else self.owners.intern(owner)
        return (content_hash, SCOPE_CODE[scope], code)

    def _active_in(self, key: tuple[str, int, int], but: int = -1) -> int | None:
        for row in self.partitions.get(key, ()):
            if row != but and self.alive[row] and self.status[row] != ARCHIVED:
                return row
        return None

    def _column_values(self, entry: Entry) -> _Values:
        """The authoritative column values of ``entry``; validates before anything changes."""
        principal = entry.owner_id or entry.source.submitted_by
        return (
            STATUS_CODE[entry.status],
            SCOPE_CODE[entry.access_scope],
            NO_OWNER if entry.owner_id is None else self.owners.intern(entry.owner_id),
            NO_OWNER if principal is None else self.owners.intern(principal),
            self.domains.intern(entry.knowledge_domain),
            self.agents.intern(entry.source.agent_id),
            unit_confidence(entry.confidence),
            micros(entry.updated_at, "updated_at"),
            NO_TIME if entry.decayed_at is None else micros(entry.decayed_at, "decayed_at"),
        )

    def _write_columns(self, row: int, values: _Values) -> None:
        (
            self.status[row],
            self.scope[row],
            self.owner[row],
            self.principal[row],
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

    def _active_rows(self) -> npt.NDArray[np.intp]:
        n = self.n
        return np.flatnonzero(self.alive[:n] & (self.status[:n] != ARCHIVED))
