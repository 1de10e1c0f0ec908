"""Tables of the smaller repositories: expertise, access log, credibility, outbox, keys."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any
from uuid import UUID

from attrs import evolve, frozen

from apollo_domain.episodes import Episode
from apollo_domain.ports import (
    AccessLogRecord,
    CredibilityRecord,
    ExpertiseRecord,
    OutboxItem,
)

from ._columns import NO_TIME, Undo, micros


class ExpertiseTable:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], ExpertiseRecord] = {}

    def _put(self, key: tuple[str, str], record: ExpertiseRecord, undo: Undo) -> None:
        old = self.rows.get(key)
        self.rows[key] = record
        if old is None:
            undo.append(lambda: self.rows.pop(key))
        else:
            undo.append(lambda: self.rows.__setitem__(key, old))

    def record_activity(self, agent_id: str, domain: str, now: datetime, undo: Undo) -> None:
        key = (agent_id, domain)
        old = self.rows.get(key)
        if old is None:
            record = ExpertiseRecord(agent_id, domain, 1, 0.0, now)
        else:
            record = evolve(old, entry_count=old.entry_count + 1, last_active_at=now)
        self._put(key, record, undo)

    def replace_all(self, records: Sequence[ExpertiseRecord], undo: Undo) -> None:
        old = self.rows
        self.rows = {(r.agent_id, r.knowledge_domain): r for r in records}
        undo.append(lambda: setattr(self, "rows", old))

    def forget_agent(self, agent_id: str, undo: Undo) -> int:
        keys = [key for key in self.rows if key[0] == agent_id]
        for key in keys:
            record = self.rows.pop(key)
            undo.append(partial(self.rows.__setitem__, key, record))
        return len(keys)

    def ordered(
        self, predicate: Callable[[ExpertiseRecord], bool] | None = None
    ) -> list[ExpertiseRecord]:
        records = [r for r in self.rows.values() if predicate is None or predicate(r)]
        records.sort(key=lambda r: (r.agent_id, r.knowledge_domain))
        return records


class AccessLogTable:
    def __init__(self) -> None:
        self.rows: list[AccessLogRecord] = []
        self.counts: Counter[str] = Counter()

    def record(self, records: Sequence[AccessLogRecord], undo: Undo) -> None:
        records = list(records)
        if not records:
            return
        for record in records:
            micros(record.created_at, "created_at")
        self.rows.extend(records)
        actions = Counter(record.action for record in records)
        self.counts.update(actions)

        def remove() -> None:
            del self.rows[-len(records) :]
            self.counts.subtract(actions)

        undo.append(remove)

    def count(self, action: str | None) -> int:
        return len(self.rows) if action is None else self.counts[action]

    def for_agent(self, agent_id: str) -> list[AccessLogRecord]:
        return [record for record in self.rows if record.agent_id == agent_id]

    def redact_agent(self, agent_id: str, replacement: str, undo: Undo) -> int:
        rows = [i for i, record in enumerate(self.rows) if record.agent_id == agent_id]
        for i in rows:
            old = self.rows[i]
            self.rows[i] = evolve(old, agent_id=replacement)
            undo.append(partial(self.rows.__setitem__, i, old))
        return len(rows)

    def trim(self, cutoff: datetime, limit: int, undo: Undo) -> int:
        old = [i for i, record in enumerate(self.rows) if record.created_at < cutoff]
        old.sort(key=lambda i: self.rows[i].created_at)
        doomed = set(old[:limit])
        if not doomed:
            return 0
        before, counts = self.rows, self.counts.copy()
        self.rows = [record for i, record in enumerate(before) if i not in doomed]
        self.counts.subtract(before[i].action for i in doomed)

        def restore() -> None:
            self.rows, self.counts = before, counts

        undo.append(restore)
        return len(doomed)


class CredibilityTable:
    def __init__(self) -> None:
        self.rows: dict[str, CredibilityRecord] = {}

    def get(self, agent_id: str) -> CredibilityRecord:
        return self.rows.get(agent_id) or CredibilityRecord(agent_id)

    def forget(self, agent_id: str, undo: Undo) -> bool:
        record = self.rows.pop(agent_id, None)
        if record is None:
            return False
        undo.append(partial(self.rows.__setitem__, agent_id, record))
        return True

    def save(self, record: CredibilityRecord, undo: Undo) -> None:
        old = self.rows.get(record.agent_id)
        self.rows[record.agent_id] = record
        if old is None:
            undo.append(lambda: self.rows.pop(record.agent_id))
        else:
            undo.append(lambda: self.rows.__setitem__(record.agent_id, old))

    def add(
        self, agent_id: str, alpha_delta: float, beta_delta: float, undo: Undo
    ) -> CredibilityRecord:
        old = self.get(agent_id)
        record = evolve(
            old,
            alpha=old.alpha + alpha_delta,
            beta=old.beta + beta_delta,
            validated=old.validated + (alpha_delta > 0),
            refuted=old.refuted + (beta_delta > 0),
        )
        self.save(record, undo)
        return record

    def set_label(self, agent_id: str, label: str | None, undo: Undo) -> CredibilityRecord:
        record = evolve(self.get(agent_id), label=label)
        self.save(record, undo)
        return record


@frozen
class _Queued:
    kind: str
    payload: Mapping[str, Any]
    created_at: datetime
    created_us: int
    attempts: int = 0
    dead: bool = False
    error: str | None = None
    due_us: int = NO_TIME  # the next attempt; NO_TIME: never failed, due at once
    leased_us: int = NO_TIME  # the end of the current lease; NO_TIME: not leased

    def due(self, now_us: int) -> bool:
        return not self.dead and self.due_us <= now_us and self.leased_us <= now_us


class OutboxTable:
    """Queued work. Item ids come from a sequence that, like a database sequence, never
    rolls back. A claim writes each item's lease (undone if the unit of work rolls back);
    a completed item is removed."""

    def __init__(self) -> None:
        self.items: dict[int, _Queued] = {}
        self._sequence = 0

    def _set(self, item_id: int, item: _Queued | None, undo: Undo) -> None:
        old = self.items.get(item_id)
        if item is None:
            del self.items[item_id]
        else:
            self.items[item_id] = item

        def restore() -> None:
            if old is None:
                self.items.pop(item_id, None)
            else:
                self.items[item_id] = old

        undo.append(restore)

    def enqueue(self, kind: str, payload: Mapping[str, Any], now: datetime, undo: Undo) -> None:
        created_us = micros(now, "now")
        self._sequence += 1
        self._set(self._sequence, _Queued(kind, dict(payload), now, created_us), undo)

    def claim(
        self, limit: int, now: datetime, lease_until: datetime, undo: Undo
    ) -> list[OutboxItem]:
        now_us = micros(now, "now")
        lease_us = micros(lease_until, "lease_until")
        if limit <= 0:
            return []
        oldest = heapq.nsmallest(
            limit, (item_id for item_id, item in self.items.items() if item.due(now_us))
        )
        claimed = []
        for item_id in oldest:
            item = self.items[item_id]
            self._set(item_id, evolve(item, leased_us=lease_us), undo)
            claimed.append(
                OutboxItem(
                    id=item_id,
                    kind=item.kind,
                    payload=item.payload,
                    attempts=item.attempts,
                    created_at=item.created_at,
                )
            )
        return claimed

    def complete(self, item_id: int, undo: Undo) -> None:
        """Remove a finished item; an unknown id changes nothing."""
        if item_id in self.items:
            self._set(item_id, None, undo)

    def fail(self, item_id: int, error: str, retry_at: datetime | None, undo: Undo) -> None:
        """Count a failed attempt, due again at ``retry_at`` (dead when None); an unknown or
        dead id changes nothing."""
        due_us = NO_TIME if retry_at is None else micros(retry_at, "retry_at")
        item = self.items.get(item_id)
        if item is None or item.dead:
            return
        failed = evolve(
            item,
            attempts=item.attempts + 1,
            error=error,
            dead=retry_at is None,
            due_us=due_us,
            leased_us=NO_TIME,
        )
        self._set(item_id, failed, undo)

    def pending(self) -> int:
        return sum(1 for item in self.items.values() if not item.dead)


class ProcessedTable:
    def __init__(self) -> None:
        self.keys: dict[str, datetime] = {}

    def mark(self, key: str, now: datetime, undo: Undo) -> bool:
        if key in self.keys:
            return False
        micros(now, "now")
        self.keys[key] = now
        undo.append(lambda: self.keys.pop(key))
        return True

    def forget(self, key: str, undo: Undo) -> None:
        if key in self.keys:
            recorded = self.keys.pop(key)
            undo.append(lambda: self.keys.__setitem__(key, recorded))


class EpisodeTable:
    def __init__(self) -> None:
        self.episodes: dict[UUID, Episode] = {}

    def add(self, episode: Episode, undo: Undo) -> bool:
        if episode.id in self.episodes:
            return False
        micros(episode.created_at, "created_at")
        self.episodes[episode.id] = episode
        undo.append(lambda: self.episodes.pop(episode.id))
        return True

    def forget_agent(self, agent_id: str, undo: Undo) -> int:
        doomed = [e for e in self.episodes.values() if e.agent_id == agent_id]
        for episode in doomed:
            del self.episodes[episode.id]
            undo.append(partial(self.episodes.__setitem__, episode.id, episode))
        return len(doomed)
