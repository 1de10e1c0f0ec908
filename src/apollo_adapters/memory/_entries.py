"""The entry table: entries written with undo, set-based maintenance, reads and statistics.

Every mutation pushes its inverse onto the unit of work's undo log.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime, timedelta
from functools import partial
from uuid import UUID

import attrs
import numpy as np
import numpy.typing as npt

from apollo_domain.errors import Conflict, NotFound
from apollo_domain.lexical import query_terms
from apollo_domain.model import AccessScope, Entry, Status, Viewer, dedup_key
from apollo_domain.ports import (
    AgentDomainStats,
    DecayOutcome,
    ScoredEntry,
    SearchFilter,
    StoreStats,
)
from apollo_domain.redaction import redact_context

from ._boosts import BoostLedger
from ._columns import (
    ARCHIVED,
    CANDIDATE,
    CONTENT_TYPES,
    DECAYED,
    LOW64,
    NO_OWNER,
    NO_TIME,
    SCOPE_CODE,
    STALE,
    STATUS_CODE,
    STATUSES,
    TYPE_CODE,
    US_PER_HOUR,
    Rows,
    Undo,
    from_micros,
    micros,
    unit_confidence,
)
from ._evidence import EvidenceTable
from ._graph import GraphTable
from ._lexical import LexicalIndex
from ._relations import RelationTable
from ._vectors import VectorSearch, _live


class EntryTable(VectorSearch):
    """All entries of a store, plus their evidence and relations (deleted together)."""

    def __init__(self, dimension: int | None = None, capacity: int = 1024) -> None:
        super().__init__(dimension, capacity)
        self.evidence = EvidenceTable(self)
        self.relations = RelationTable(self)
        self.lexical = LexicalIndex()
        self.graph = GraphTable(self)
        self.boosts = BoostLedger()

    # ------------------------------------------------------------------ writes

    def add(self, entry: Entry, undo: Undo, terms: dict[str, int] | None = None) -> None:
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
        if base.episode_id is not None:
            self.episode_rows.setdefault(base.episode_id, []).append(row)
        self._write_columns(row, values)
        self.alive[row] = True
        self.ctype[row] = ctype
        self.created[row] = created
        self.checked[row] = NO_TIME
        value = entry.id.int
        self.id_hi[row] = value >> 64
        self.id_lo[row] = value & LOW64
        if vector is not None:
            assert self.matrix is not None
            self.matrix[row] = vector
            self.has_emb[row] = True
        undo.append(self._pop)
        self.lexical.add(row, entry.content, undo, terms)

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
        if base.episode_id is not None:
            self.episode_rows[base.episode_id].remove(row)
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
        self,
        ids: Sequence[UUID],
        amount: float,
        now: datetime,
        count_access: bool,
        undo: Undo,
        earner: str | None = None,
        window: timedelta = timedelta(0),
    ) -> dict[UUID, float]:
        now_us = micros(now, "now")
        result: dict[UUID, float] = {}
        for entry_id in sorted(dict.fromkeys(ids)):
            row = self.row_of.get(entry_id)
            if row is None:
                continue
            old = self.entry(row)
            if old.status is Status.ARCHIVED:
                continue
            earned = earner is None or self.boosts.earn(entry_id, earner, now, window, undo)
            confidence = min(old.confidence + amount, 1.0) if earned else old.confidence
            new = attrs.evolve(
                old,
                confidence=confidence,
                updated_at=now,
                access_count=old.access_count + 1 if count_access else old.access_count,
            )
            # Only the confidence, the time and the count move: the row keeps its
            # partition, tags and every other column (those of a rebuilt entry are the
            # columns it was rebuilt from).
            self.base[row] = new
            self.conf[row] = unit_confidence(confidence)
            self.updated[row] = now_us
            self.stale[row] = False
            self.reason[row] = 0
            undo.append(partial(self._replace, row, old, None))
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
        hours = np.maximum(0.0, (now_us - since) / US_PER_HOUR)
        confidence = self.conf[rows] * np.power(factor_per_hour, hours)
        self.conf[rows] = confidence
        self.decayed[rows] = np.maximum(since, now_us)  # an earlier clock moves nothing back
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
            self.lexical.remove(row, undo)
            self.graph.drop(entry_id, undo)
            self.boosts.drop(entry_id, undo)
            count += 1
        return count

    def redact_context(self, agent_id: str, replacement: str, now: datetime, undo: Undo) -> int:
        micros(now, "now")
        changed = 0
        for row in np.flatnonzero(self.alive[: self.n]).tolist():
            entry = self.entry(row)
            context = redact_context(entry.source_context, agent_id, replacement)
            if context is not None:
                changed += 1
                new = attrs.evolve(entry, source_context=context, updated_at=now)
                self._replace(row, new, undo)
        return changed

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

    def get_many(self, ids: Iterable[UUID], with_embedding: bool = False) -> dict[UUID, Entry]:
        found: dict[UUID, Entry] = {}
        for entry_id in ids:
            row = self.row_of.get(entry_id)
            if row is not None:
                entry = self.entry(row)
                found[entry_id] = self._with_embedding(row, entry) if with_embedding else entry
        return found

    def in_episodes(
        self, spans: Sequence[tuple[UUID, int, int]], viewer: Viewer | None
    ) -> list[Entry]:
        """The live, unarchived entries the viewer may see (None: all) placed within one of
        ``spans`` (episode, first position, last position), by episode and position."""
        found: dict[UUID, Entry] = {}
        for episode, first, last in spans:
            rows = np.array(self.episode_rows.get(episode, ()), dtype=np.intp)
            if not rows.size:
                continue
            keep = self.alive[rows] & (self.status[rows] != ARCHIVED)
            if viewer is not None:
                keep &= self.visible(viewer, rows)
            for row in rows[keep].tolist():
                entry = self.entry(row)
                if entry.position is not None and first <= entry.position <= last:
                    found[entry.id] = entry
        return sorted(found.values(), key=lambda e: (str(e.episode_id), e.position or 0))

    def find_by_hash(
        self, content_hash: str, scope: AccessScope, owner_id: str | None
    ) -> Entry | None:
        content_hash, scope, owner = dedup_key(content_hash, scope, owner_id)
        code = NO_OWNER if owner is None else self.owners.codes.get(owner)
        if code is None:
            return None  # an owner never interned owns nothing
        row = self._active_in((content_hash, SCOPE_CODE[scope], code))
        return None if row is None else self.entry(row)

    # ------------------------------------------------------------------ queries

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

    def lexical_search(self, query: str, flt: SearchFilter, limit: int) -> list[ScoredEntry]:
        ranked = self._lexical_ranked(query, flt) if limit > 0 else None
        if ranked is None:
            return []
        rows, values = ranked
        return [
            ScoredEntry(entry=self.entry(int(row)), similarity=float(value))
            for row, value in zip(rows[:limit].tolist(), values[:limit].tolist(), strict=True)
        ]

    def lexical_capped(
        self, query: str, flt: SearchFilter, limit: int, per_source: int
    ) -> list[tuple[UUID, float]]:
        """The ids and scores of the first ``limit`` lexical matches (best first, ties by
        id) whose place among their agent's matches and among their principal's is within
        ``per_source``, as PostgreSQL numbers them: every match ranked and numbered within
        its sources by array operations, only the kept ones' ids read."""
        ranked = self._lexical_ranked(query, flt) if limit > 0 else None
        if ranked is None:
            return []
        rows, values = ranked
        kept = np.flatnonzero(self._within(rows, per_source))[:limit]
        base = self.base
        return [
            (_live(base[row]).id, value)
            for row, value in zip(rows[kept].tolist(), values[kept].tolist(), strict=True)
        ]

    def _lexical_ranked(
        self, query: str, flt: SearchFilter
    ) -> tuple[Rows, npt.NDArray[np.float64]] | None:
        """Every row matching ``flt`` that holds a term of ``query``, best first (ties by
        id), with its score; None when there is none."""
        wanted = query_terms(query)
        if not wanted:
            return None
        allowed = self.matching(flt, embedded=False)
        if allowed is None:
            return None
        scores = self.lexical.scores(wanted, allowed)
        if not scores:
            return None
        rows = np.fromiter(scores, dtype=np.intp, count=len(scores))
        values = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
        order = np.lexsort((self.id_lo[rows], self.id_hi[rows], -values))
        return rows[order], values[order]

    def candidates(self, limit: int, now: datetime, undo: Undo) -> list[Entry]:
        """Least recently checked first (never checked first, then created_at, id); each
        returned row is stamped checked at ``now``."""
        now_us = micros(now, "now")
        if limit <= 0:
            return []
        n = self.n
        rows = np.flatnonzero(self.alive[:n] & self.has_emb[:n] & (self.status[:n] == CANDIDATE))
        order = np.lexsort(
            (self.id_lo[rows], self.id_hi[rows], self.created[rows], self.checked[rows])
        )
        picked = rows[order[:limit]]
        previous = self.checked[picked].copy()
        self.checked[picked] = now_us
        undo.append(partial(self._restore_checked, picked, previous))
        return [self._with_embedding(int(row), self.entry(int(row))) for row in picked]

    def _restore_checked(self, rows: Rows, previous: npt.NDArray[np.int64]) -> None:
        self.checked[rows] = previous

    def by_agent(self, agent_id: str) -> list[Entry]:
        code = self.agents.codes.get(agent_id)
        if code is None:
            return []
        n = self.n
        rows = np.flatnonzero(self.alive[:n] & (self.agent[:n] == code))
        return [self.entry(int(row)) for row in self._ordered(rows, newest_first=False)]

    def agent_domain_stats(
        self,
        viewer: Viewer | None = None,
        *,
        domain: str | None = None,
        agent_id: str | None = None,
    ) -> list[AgentDomainStats]:
        rows = self._active_rows()
        if viewer is not None:
            rows = rows[self.visible(viewer, rows)]
        if domain is not None:
            code = self.domains.codes.get(domain)
            rows = rows[self.domain[rows] == code] if code is not None else rows[:0]
        supported = rows  # the entries whose evidence an agent may have earned
        if agent_id is not None:
            code = self.agents.codes.get(agent_id)
            rows = rows[self.agent[rows] == code] if code is not None else rows[:0]
        if rows.size == 0:
            return []
        width = np.int64(len(self.domains.names))
        keys = self.agent[rows].astype(np.int64) * width + self.domain[rows]
        unique, inverse = np.unique(keys, return_inverse=True)
        counts = np.bincount(inverse)
        sums = np.bincount(inverse, weights=self.conf[rows])
        confirmed = np.bincount(inverse, weights=self.status[rows] == STATUS_CODE[Status.CONFIRMED])
        latest = np.full(unique.size, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(latest, inverse, self.updated[rows])
        earned = self._earned(supported, width)
        stats = [
            AgentDomainStats(
                agent_id=self.agents.names[int(key // width)],
                knowledge_domain=self.domains.names[int(key % width)],
                entry_count=int(count),
                average_confidence=float(total / count),
                last_active_at=from_micros(int(last)),
                confirmed_count=int(sure),
                corroboration_count=earned.get(int(key), 0),
            )
            for key, count, total, sure, last in zip(
                unique, counts, sums, confirmed, latest, strict=True
            )
        ]
        stats.sort(key=lambda s: (s.agent_id, s.knowledge_domain))
        return stats

    def _earned(self, rows: Rows, width: np.int64) -> dict[int, int]:
        """(agent code · width + domain code) → the corroborations and agreements the agent
        holds on ``rows`` (the active entries the viewer may see, of the domain asked for)."""
        considered = set(rows.tolist())
        earned: dict[int, int] = {}
        for entry_id, agent in self.evidence.agreeing():
            row = self.row_of.get(entry_id)
            code = self.agents.codes.get(agent)
            if row is None or code is None or row not in considered:
                continue
            key = int(code) * int(width) + int(self.domain[row])
            earned[key] = earned.get(key, 0) + 1
        return earned

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
