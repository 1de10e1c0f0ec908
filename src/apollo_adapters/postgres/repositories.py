"""The small repositories of a unit of work, and the identity directory."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import UUID

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from apollo_domain.episodes import Episode, turn_from_json
from apollo_domain.errors import NotFound
from apollo_domain.model import AccessScope, Evidence, Relation, RelationType, SourceRef
from apollo_domain.ports import AccessLogRecord, CredibilityRecord, ExpertiseRecord, OutboxItem
from apollo_domain.redaction import redact_context

from .errors import translated
from .filters import Where
from .rows import (
    EVIDENCE_COLUMNS,
    EXPERTISE_SELECT,
    MENTIONS,
    evidence_from_row,
    expertise_from_row,
    relation_from_row,
)
from .session import Row, Session


class _Connections(Protocol):
    """What the identity directory uses of the store: pooled connections."""

    def connection(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]: ...


class PostgresRelationRepository:
    def __init__(self, session: Session) -> None:
        self._s = session

    async def add(self, relation: Relation) -> bool:
        inserted = await self._s.rows(
            "INSERT INTO relations (from_id, to_id, relation_type, weight, source_context,"
            " created_at) SELECT %(from)s, %(to)s, %(type)s, %(weight)s, %(context)s, %(at)s"
            " WHERE EXISTS (SELECT 1 FROM entries WHERE id = %(from)s)"
            " AND EXISTS (SELECT 1 FROM entries WHERE id = %(to)s)"
            " ON CONFLICT (from_id, to_id, relation_type) DO NOTHING RETURNING id",
            {
                "from": relation.from_id,
                "to": relation.to_id,
                "type": relation.relation_type.value,
                "weight": relation.weight,
                "context": Jsonb(dict(relation.source_context)),
                "at": relation.created_at,
            },
        )
        if inserted:
            return True
        found = await self._s.value(
            "SELECT count(*) FROM entries WHERE id = ANY(%s)",
            ([relation.from_id, relation.to_id],),
        )
        if found < len({relation.from_id, relation.to_id}):
            raise NotFound(f"relation endpoint missing: {relation.from_id} -> {relation.to_id}")
        return False

    async def outgoing(
        self, entry_ids: Collection[UUID], types: Collection[RelationType] | None = None
    ) -> list[Relation]:
        return await self._edges("from_id", entry_ids, types)

    async def incoming(
        self, entry_ids: Collection[UUID], types: Collection[RelationType] | None = None
    ) -> list[Relation]:
        return await self._edges("to_id", entry_ids, types)

    async def _edges(
        self, end: str, entry_ids: Collection[UUID], types: Collection[RelationType] | None
    ) -> list[Relation]:
        if not entry_ids:
            return []
        where = Where()
        where.add("{end} = ANY({})", list(entry_ids), end=end)
        if types is not None:
            where.add("relation_type = ANY({})", [t.value for t in types])
        rows = await self._s.rows(
            sql.SQL(
                "SELECT from_id, to_id, relation_type, weight, source_context, created_at"
                " FROM relations WHERE {} ORDER BY id"
            ).format(where.sql()),
            where.params,
        )
        return [relation_from_row(row) for row in rows]

    async def exists(self, from_id: UUID, to_id: UUID, relation_type: RelationType) -> bool:
        return bool(
            await self._s.value(
                "SELECT EXISTS (SELECT 1 FROM relations WHERE from_id = %s AND to_id = %s"
                " AND relation_type = %s)",
                (from_id, to_id, relation_type.value),
            )
        )

    async def count(self) -> int:
        return int(await self._s.value("SELECT count(*) FROM relations"))

    async def redact_context(self, agent_id: str, replacement: str) -> int:
        rows = await self._s.rows(
            "SELECT id, source_context FROM relations WHERE "
            + MENTIONS
            + " ORDER BY id FOR UPDATE",
            (agent_id,),
        )
        changes = [
            (Jsonb(context), row["id"])
            for row in rows
            if (context := redact_context(row["source_context"], agent_id, replacement)) is not None
        ]
        await self._s.executemany("UPDATE relations SET source_context = %s WHERE id = %s", changes)
        return len(changes)


class PostgresEvidenceRepository:
    def __init__(self, session: Session) -> None:
        self._s = session

    async def add(self, evidence: Evidence) -> bool:
        (added,) = await self.add_many([evidence])
        return added

    async def add_many(self, evidence: Sequence[Evidence]) -> list[bool]:
        if not evidence:
            return []
        rows = await self._s.rows(
            "INSERT INTO evidence (" + EVIDENCE_COLUMNS + ")"
            " SELECT entry_id, agent_id, provider, channel, submitted_by, submitted_from,"
            " similarity, kind, created_at, credibility FROM unnest(%s::uuid[], %s::text[],"
            " %s::text[], %s::text[], %s::text[], %s::text[], %s::float8[], %s::text[],"
            " %s::timestamptz[], %s::float8[]) WITH ORDINALITY AS v(entry_id, agent_id,"
            " provider, channel, submitted_by, submitted_from, similarity, kind, created_at,"
            " credibility, i)"
            " WHERE EXISTS (SELECT 1 FROM entries e WHERE e.id = v.entry_id) ORDER BY i"
            " ON CONFLICT (entry_id, agent_id, provider, (COALESCE(channel, '')))"
            " DO NOTHING RETURNING entry_id, agent_id, provider, COALESCE(channel, '') AS channel",
            [
                [e.entry_id for e in evidence],
                [e.source.agent_id for e in evidence],
                [e.source.provider for e in evidence],
                [e.source.channel for e in evidence],
                [e.source.submitted_by for e in evidence],
                [e.source.submitted_from for e in evidence],
                [e.similarity for e in evidence],
                [e.kind.value for e in evidence],
                [e.created_at for e in evidence],
                [e.credibility for e in evidence],
            ],
        )
        fresh = {(r["entry_id"], r["agent_id"], r["provider"], r["channel"]) for r in rows}
        added = []
        for e in evidence:  # the first item of each key was the one inserted
            key = (e.entry_id, e.source.agent_id, e.source.provider, e.source.channel or "")
            added.append(key in fresh)
            fresh.discard(key)
        if not all(added):
            wanted = list({e.entry_id for e, ok in zip(evidence, added, strict=True) if not ok})
            present = await self._s.rows("SELECT id FROM entries WHERE id = ANY(%s)", (wanted,))
            missing = set(wanted) - {row["id"] for row in present}
            if missing:
                raise NotFound(f"entry {min(missing)} does not exist")
        return added

    async def add_origin(self, evidence: Evidence) -> None:
        # Deferred: a missing entry fails the foreign key at the next statement or COMMIT.
        self._s.defer(
            "INSERT INTO evidence (" + EVIDENCE_COLUMNS + ")"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                evidence.entry_id,
                evidence.source.agent_id,
                evidence.source.provider,
                evidence.source.channel,
                evidence.source.submitted_by,
                evidence.source.submitted_from,
                evidence.similarity,
                evidence.kind.value,
                evidence.created_at,
                evidence.credibility,
            ),
        )

    async def for_entry(self, entry_id: UUID) -> list[Evidence]:
        return (await self.for_entries([entry_id])).get(entry_id, [])

    async def for_entries(self, entry_ids: Collection[UUID]) -> dict[UUID, list[Evidence]]:
        if not entry_ids:
            return {}
        rows = await self._s.rows(
            "SELECT " + EVIDENCE_COLUMNS + " FROM evidence WHERE entry_id = ANY(%s) ORDER BY id",
            (list(entry_ids),),
        )
        found: dict[UUID, list[Evidence]] = {}
        for row in rows:
            found.setdefault(row["entry_id"], []).append(evidence_from_row(row))
        return found

    async def forget_agent(self, agent_id: str, redacted: SourceRef) -> int:
        deleted = await self._s.execute(
            "DELETE FROM evidence WHERE agent_id = %s AND kind <> 'origin'", (agent_id,)
        )
        updated = await self._s.execute(
            "UPDATE evidence SET agent_id = %s, provider = %s, channel = %s,"
            " submitted_by = %s, submitted_from = %s WHERE agent_id = %s",
            (
                redacted.agent_id,
                redacted.provider,
                redacted.channel,
                redacted.submitted_by,
                redacted.submitted_from,
                agent_id,
            ),
        )
        return deleted + updated


class PostgresExpertiseRepository:
    def __init__(self, session: Session) -> None:
        self._s = session

    async def record_activity(self, agent_id: str, domain: str, now: datetime) -> None:
        self._s.defer(
            "INSERT INTO expertise (agent_id, knowledge_domain, entry_count, proficiency,"
            " last_active_at) VALUES (%s, %s, 1, 0, %s)"
            " ON CONFLICT (agent_id, knowledge_domain) DO UPDATE SET"
            " entry_count = expertise.entry_count + 1, last_active_at = EXCLUDED.last_active_at",
            (agent_id, domain, now),
        )

    async def record_activities(self, activities: Sequence[tuple[str, str, datetime]]) -> None:
        totals: dict[tuple[str, str], tuple[int, datetime]] = {}
        for agent_id, domain, now in activities:  # the latest call sets last_active_at
            count = totals.get((agent_id, domain), (0, now))[0]
            totals[(agent_id, domain)] = (count + 1, now)
        if not totals:
            return
        keys = sorted(totals)  # one lock order for every writer
        self._s.defer(
            "INSERT INTO expertise (agent_id, knowledge_domain, entry_count, proficiency,"
            " last_active_at) SELECT a, d, n, 0, t FROM unnest(%s::text[], %s::text[],"
            " %s::int[], %s::timestamptz[]) AS v(a, d, n, t)"
            " ON CONFLICT (agent_id, knowledge_domain) DO UPDATE SET"
            " entry_count = expertise.entry_count + EXCLUDED.entry_count,"
            " last_active_at = EXCLUDED.last_active_at",
            (
                [k[0] for k in keys],
                [k[1] for k in keys],
                [totals[k][0] for k in keys],
                [totals[k][1] for k in keys],
            ),
        )

    async def replace_all(self, records: Sequence[ExpertiseRecord]) -> None:
        # Rewriters take turns: a second one waits for the first's commit, then its DELETE
        # sees (and removes) the rows the first inserted, instead of inserting beside them.
        await self._s.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("apollo-expertise",)
        )
        await self._s.execute("DELETE FROM expertise")
        await self._s.executemany(
            "INSERT INTO expertise (agent_id, knowledge_domain, entry_count, proficiency,"
            " last_active_at) VALUES (%s, %s, %s, %s, %s)",
            [
                (r.agent_id, r.knowledge_domain, r.entry_count, r.proficiency, r.last_active_at)
                for r in records
            ],
        )

    async def for_domain(self, domain: str, min_proficiency: float) -> list[ExpertiseRecord]:
        rows = await self._s.rows(
            EXPERTISE_SELECT + " WHERE knowledge_domain = %s AND proficiency >= %s"
            " ORDER BY proficiency DESC, agent_id",
            (domain, min_proficiency),
        )
        return [expertise_from_row(row) for row in rows]

    async def all(self) -> list[ExpertiseRecord]:
        rows = await self._s.rows(EXPERTISE_SELECT + " ORDER BY agent_id, knowledge_domain")
        return [expertise_from_row(row) for row in rows]

    async def for_agent(self, agent_id: str) -> list[ExpertiseRecord]:
        rows = await self._s.rows(
            EXPERTISE_SELECT + " WHERE agent_id = %s ORDER BY knowledge_domain", (agent_id,)
        )
        return [expertise_from_row(row) for row in rows]

    async def forget_agent(self, agent_id: str) -> int:
        return await self._s.execute("DELETE FROM expertise WHERE agent_id = %s", (agent_id,))


class PostgresAccessLog:
    def __init__(self, session: Session) -> None:
        self._s = session

    async def record(self, records: Sequence[AccessLogRecord]) -> None:
        if not records:
            return
        self._s.defer(
            "INSERT INTO access_log (action, agent_id, entry_id, detail, created_at)"
            " SELECT action, agent_id, entry_id, detail, created_at FROM unnest(%s::text[],"
            " %s::text[], %s::uuid[], %s::jsonb[], %s::timestamptz[]) WITH ORDINALITY"
            " AS v(action, agent_id, entry_id, detail, created_at, i) ORDER BY i",
            (
                [r.action for r in records],
                [r.agent_id for r in records],
                [r.entry_id for r in records],
                [Jsonb(dict(r.detail)) for r in records],
                [r.created_at for r in records],
            ),
        )

    async def count(self, action: str | None = None) -> int:
        if action is None:
            return int(await self._s.value("SELECT count(*) FROM access_log"))
        return int(
            await self._s.value("SELECT count(*) FROM access_log WHERE action = %s", (action,))
        )

    async def for_agent(self, agent_id: str) -> list[AccessLogRecord]:
        rows = await self._s.rows(
            "SELECT action, agent_id, entry_id, created_at, detail FROM access_log"
            " WHERE agent_id = %s ORDER BY id",
            (agent_id,),
        )
        return [
            AccessLogRecord(
                row["action"],
                row["agent_id"],
                row["entry_id"],
                row["created_at"].astimezone(UTC),
                row["detail"],
            )
            for row in rows
        ]

    async def redact_agent(self, agent_id: str, replacement: str) -> int:
        return await self._s.execute(
            "UPDATE access_log SET agent_id = %s WHERE agent_id = %s", (replacement, agent_id)
        )

    async def trim(self, cutoff: datetime, limit: int) -> int:
        return await self._s.execute(
            "DELETE FROM access_log WHERE id IN (SELECT id FROM access_log"
            " WHERE created_at < %s ORDER BY created_at, id LIMIT %s)",
            (cutoff, limit),
        )


class PostgresCredibilityRegistry:
    def __init__(self, session: Session) -> None:
        self._s = session

    async def get(self, agent_id: str) -> CredibilityRecord:
        row = await self._s.row(
            "SELECT " + _CREDIBILITY_COLUMNS + " FROM source_credibility WHERE agent_id = %s",
            (agent_id,),
        )
        return CredibilityRecord(agent_id) if row is None else _credibility(row)

    async def get_many(self, agent_ids: Collection[str]) -> dict[str, CredibilityRecord]:
        wanted = list(dict.fromkeys(agent_ids))
        if not wanted:
            return {}
        rows = await self._s.rows(
            "SELECT " + _CREDIBILITY_COLUMNS + " FROM source_credibility WHERE agent_id = ANY(%s)",
            (wanted,),
        )
        found = {row["agent_id"]: _credibility(row) for row in rows}
        return {agent: found.get(agent) or CredibilityRecord(agent) for agent in wanted}

    async def save(self, record: CredibilityRecord) -> None:
        await self._s.execute(
            "INSERT INTO source_credibility (" + _CREDIBILITY_COLUMNS + ")"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (agent_id) DO UPDATE SET"
            " alpha = EXCLUDED.alpha, beta = EXCLUDED.beta, label = EXCLUDED.label,"
            " validated = EXCLUDED.validated, refuted = EXCLUDED.refuted",
            (
                record.agent_id,
                record.alpha,
                record.beta,
                record.label,
                record.validated,
                record.refuted,
            ),
        )

    async def forget(self, agent_id: str) -> bool:
        deleted = await self._s.execute(
            "DELETE FROM source_credibility WHERE agent_id = %s", (agent_id,)
        )
        return deleted > 0

    async def add(self, agent_id: str, alpha_delta: float, beta_delta: float) -> CredibilityRecord:
        row = await self._s.one(
            "INSERT INTO source_credibility AS c (" + _CREDIBILITY_COLUMNS + ")"
            " VALUES (%(agent)s, 1 + %(alpha)s, 1 + %(beta)s, NULL, %(validated)s, %(refuted)s)"
            " ON CONFLICT (agent_id) DO UPDATE SET alpha = c.alpha + %(alpha)s,"
            " beta = c.beta + %(beta)s, validated = c.validated + %(validated)s,"
            " refuted = c.refuted + %(refuted)s RETURNING " + _CREDIBILITY_COLUMNS,
            {
                "agent": agent_id,
                "alpha": alpha_delta,
                "beta": beta_delta,
                "validated": int(alpha_delta > 0),
                "refuted": int(beta_delta > 0),
            },
        )
        return _credibility(row)

    async def set_label(self, agent_id: str, label: str | None) -> CredibilityRecord:
        row = await self._s.one(
            "INSERT INTO source_credibility (agent_id, alpha, beta, label) VALUES (%s, 1, 1, %s)"
            " ON CONFLICT (agent_id) DO UPDATE SET label = EXCLUDED.label"
            " RETURNING " + _CREDIBILITY_COLUMNS,
            (agent_id, label),
        )
        return _credibility(row)


_CREDIBILITY_COLUMNS = "agent_id, alpha, beta, label, validated, refuted"


def _credibility(row: Row) -> CredibilityRecord:
    return CredibilityRecord(
        row["agent_id"], row["alpha"], row["beta"], row["label"], row["validated"], row["refuted"]
    )


class PostgresOutbox:
    def __init__(self, session: Session) -> None:
        self._s = session

    async def enqueue(self, kind: str, payload: Mapping[str, Any], now: datetime) -> None:
        await self.enqueue_many([(kind, payload, now)])

    async def enqueue_many(self, items: Sequence[tuple[str, Mapping[str, Any], datetime]]) -> None:
        if not items:
            return
        self._s.defer(
            "INSERT INTO outbox (kind, payload, created_at) SELECT kind, payload, created_at"
            " FROM unnest(%s::text[], %s::jsonb[], %s::timestamptz[]) WITH ORDINALITY"
            " AS v(kind, payload, created_at, i) ORDER BY i",
            (
                [kind for kind, _, _ in items],
                [Jsonb(dict(payload)) for _, payload, _ in items],
                [now for _, _, now in items],
            ),
        )

    async def claim(self, limit: int, now: datetime, *, lease_until: datetime) -> list[OutboxItem]:
        rows = await self._s.rows(
            "WITH picked AS (SELECT id FROM outbox WHERE status = 'pending'"
            " AND (next_attempt_at IS NULL OR next_attempt_at <= %(now)s)"
            " AND (leased_until IS NULL OR leased_until <= %(now)s)"
            " ORDER BY id LIMIT %(limit)s FOR UPDATE SKIP LOCKED)"
            " UPDATE outbox o SET claimed_at = %(now)s, leased_until = %(lease)s"
            " FROM picked WHERE o.id = picked.id"
            " RETURNING o.id, o.kind, o.payload, o.attempts, o.created_at",
            {"now": now, "limit": max(limit, 0), "lease": lease_until},
        )
        rows.sort(key=lambda row: row["id"])
        return [
            OutboxItem(
                id=row["id"],
                kind=row["kind"],
                payload=row["payload"],
                attempts=row["attempts"],
                created_at=row["created_at"].astimezone(UTC),
            )
            for row in rows
        ]

    async def complete(self, item_id: int) -> None:
        await self._s.execute(
            "UPDATE outbox SET status = 'done', leased_until = NULL"
            " WHERE id = %s AND status = 'pending'",
            (item_id,),
        )

    async def fail(self, item_id: int, error: str, *, retry_at: datetime | None) -> None:
        await self._s.execute(
            "UPDATE outbox SET attempts = attempts + 1, last_error = %s, leased_until = NULL,"
            " next_attempt_at = %s,"
            " status = CASE WHEN %s::timestamptz IS NULL THEN 'dead' ELSE status END"
            " WHERE id = %s AND status = 'pending'",
            (error, retry_at, retry_at, item_id),
        )

    async def pending(self) -> int:
        return int(await self._s.value("SELECT count(*) FROM outbox WHERE status = 'pending'"))


class PostgresProcessedKeys:
    def __init__(self, session: Session) -> None:
        self._s = session

    async def mark(self, key: str, now: datetime) -> bool:
        inserted = await self._s.rows(
            "INSERT INTO processed_keys (key, created_at) VALUES (%s, %s)"
            " ON CONFLICT (key) DO NOTHING RETURNING key",
            (key, now),
        )
        return bool(inserted)

    async def mark_many(self, keys: Sequence[str], now: datetime) -> list[bool]:
        if not keys:
            return []
        inserted = await self._s.rows(
            "INSERT INTO processed_keys (key, created_at)"
            " SELECT key, %s FROM unnest(%s::text[]) AS k(key) ORDER BY key"
            " ON CONFLICT (key) DO NOTHING RETURNING key",
            (now, list(keys)),
        )
        new = {row["key"] for row in inserted}
        return [key in new for key in keys]

    async def forget_many(self, keys: Sequence[str]) -> None:
        if keys:
            self._s.defer("DELETE FROM processed_keys WHERE key = ANY(%s)", (list(keys),))

    async def seen(self, key: str) -> bool:
        return bool(
            await self._s.value(
                "SELECT EXISTS (SELECT 1 FROM processed_keys WHERE key = %s)", (key,)
            )
        )


class PostgresEpisodeRepository:
    def __init__(self, session: Session) -> None:
        self._s = session

    async def add(self, episode: Episode) -> bool:
        inserted = await self._s.rows(
            "INSERT INTO episodes (id, agent_id, access_scope, owner_id, created_at,"
            " conversation, turns, statements) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (id) DO NOTHING RETURNING id",
            (
                episode.id,
                episode.agent_id,
                episode.access_scope.value,
                episode.owner_id,
                episode.created_at,
                episode.conversation,
                Jsonb([turn.as_json() for turn in episode.turns]),
                episode.statements,
            ),
        )
        return bool(inserted)

    async def get(self, episode_id: UUID) -> Episode | None:
        row = await self._s.row(
            "SELECT id, agent_id, access_scope, owner_id, created_at, conversation, turns,"
            " statements FROM episodes WHERE id = %s",
            (episode_id,),
        )
        if row is None:
            return None
        return Episode(
            id=row["id"],
            agent_id=row["agent_id"],
            access_scope=AccessScope(row["access_scope"]),
            owner_id=row["owner_id"],
            created_at=row["created_at"].astimezone(UTC),
            turns=tuple(turn_from_json(turn) for turn in row["turns"]),
            statements=row["statements"],
            conversation=row["conversation"],
        )

    async def forget_agent(self, agent_id: str) -> int:
        return await self._s.execute("DELETE FROM episodes WHERE agent_id = %s", (agent_id,))


class PostgresIdentityDirectory:
    """Group memberships; each call is its own transaction."""

    def __init__(self, store: _Connections) -> None:
        self._store = store

    async def _rows(self, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        async with self._store.connection() as conn:
            with translated():
                cur = await conn.execute(query, params)
                return await cur.fetchall() if cur.description else []

    async def add_membership(self, principal_id: str, group: str) -> None:
        await self._rows(
            "INSERT INTO identity_memberships (principal_id, group_name) VALUES (%s, %s)"
            " ON CONFLICT DO NOTHING",
            (principal_id, group),
        )

    async def remove_membership(self, principal_id: str, group: str) -> None:
        await self._rows(
            "DELETE FROM identity_memberships WHERE principal_id = %s AND group_name = %s",
            (principal_id, group),
        )

    async def groups_of(self, principal_id: str) -> frozenset[str]:
        rows = await self._rows(
            "SELECT group_name FROM identity_memberships WHERE principal_id = %s",
            (principal_id,),
        )
        return frozenset(row[0] for row in rows)

    async def members_of(self, groups: Collection[str]) -> frozenset[str]:
        if not groups:
            return frozenset()
        rows = await self._rows(
            "SELECT DISTINCT principal_id FROM identity_memberships WHERE group_name = ANY(%s)",
            (list(groups),),
        )
        return frozenset(row[0] for row in rows)
