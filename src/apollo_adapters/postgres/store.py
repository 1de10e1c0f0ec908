"""The PostgreSQL + pgvector store: one pooled connection and one transaction per unit of work."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AsyncExitStack,
    asynccontextmanager,
    suppress,
)
from datetime import UTC, datetime, timedelta
from typing import Any, Self
from uuid import UUID

import psycopg
from pgvector import Vector
from pgvector.psycopg import register_vector_async
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from apollo_domain.errors import (
    ConfigurationError,
    Conflict,
    NotFound,
    PersistenceFailed,
    StoreUnavailable,
    ValidationError,
)
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
    AccessLogRecord,
    AgentDomainStats,
    CredibilityRecord,
    DecayOutcome,
    ExpertiseRecord,
    OutboxItem,
    ScoredEntry,
    SearchFilter,
    StoreStats,
)

from . import schema
from .errors import translated

Row = dict[str, Any]
Params = Mapping[str, Any] | Sequence[Any] | None

PART_TABLES: Mapping[str, str] = {
    "entries": "entries",
    "evidence": "evidence",
    "expertise": "expertise",
    "access_log": "access_log",
    "relations": "relations",
    "outbox": "outbox",
    "processed": "processed_keys",
    "credibility": "source_credibility",
}

_ENTRY_COLUMNS = (
    "id, content, content_hash, content_type, knowledge_domain, tags, confidence, status,"
    " source_agent, source_provider, source_channel, submitted_by, submitted_from,"
    " access_scope, owner_id, source_context, access_count, created_at, updated_at,"
    " confirmed_at, decayed_at"
)
_COLUMNS = sql.SQL(_ENTRY_COLUMNS)
_COLUMNS_WITH_EMBEDDING = sql.SQL(_ENTRY_COLUMNS + ", embedding")
_ARCHIVED = Status.ARCHIVED.value
EXACT_ONLY_IDS = 1_000  # ``nearest`` restricted to at most this many ids skips the index


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def _entry(row: Row) -> Entry:
    embedding = row.get("embedding")
    return Entry(
        id=row["id"],
        content=row["content"],
        content_hash=row["content_hash"],
        content_type=ContentType(row["content_type"]),
        knowledge_domain=row["knowledge_domain"],
        tags=tuple(row["tags"]),
        confidence=row["confidence"],
        status=Status(row["status"]),
        source=SourceRef(
            agent_id=row["source_agent"],
            provider=row["source_provider"],
            channel=row["source_channel"],
            submitted_by=row["submitted_by"],
            submitted_from=row["submitted_from"],
        ),
        access_scope=AccessScope(row["access_scope"]),
        owner_id=row["owner_id"],
        created_at=row["created_at"].astimezone(UTC),
        updated_at=row["updated_at"].astimezone(UTC),
        source_context=row["source_context"],
        embedding=None if embedding is None else tuple(embedding.to_list()),
        access_count=row["access_count"],
        confirmed_at=_utc(row["confirmed_at"]),
        decayed_at=_utc(row["decayed_at"]),
    )


def _vector(embedding: Sequence[float]) -> Vector:
    return Vector([float(x) for x in embedding])


class _Session:
    """The unit of work's connection; every statement passes through here, translated."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn
        self.open = True

    def check_open(self) -> None:
        if not self.open:
            raise PersistenceFailed("this unit of work has ended; start a new one")

    async def execute(self, query: sql.Composable | str, params: Params = None) -> int:
        self.check_open()
        with translated():
            cur = await self.conn.execute(query, params)  # type: ignore[arg-type]
            return cur.rowcount

    async def executemany(self, query: str, params: Sequence[Sequence[Any]]) -> None:
        self.check_open()
        if not params:
            return
        with translated():
            async with self.conn.cursor() as cur:
                await cur.executemany(query, params)

    async def rows(self, query: sql.Composable | str, params: Params = None) -> list[Row]:
        self.check_open()
        with translated():
            async with self.conn.cursor(row_factory=dict_row) as cur:
                await cur.execute(query, params)  # type: ignore[arg-type]
                return await cur.fetchall()

    async def row(self, query: sql.Composable | str, params: Params = None) -> Row | None:
        rows = await self.rows(query, params)
        return rows[0] if rows else None

    async def value(self, query: sql.Composable | str, params: Params = None) -> Any:
        row = await self.row(query, params)
        return None if row is None else next(iter(row.values()))


class _Where:
    """A conjunction of SQL conditions with named parameters."""

    def __init__(self) -> None:
        self.clauses: list[sql.Composable] = []
        self.params: dict[str, Any] = {}

    def param(self, value: Any) -> sql.Placeholder:
        name = f"p{len(self.params)}"
        self.params[name] = value
        return sql.Placeholder(name)

    def add(self, template: str, *values: Any, **columns: str | tuple[str, str]) -> None:
        placeholders = [self.param(v) for v in values]
        identifiers = {
            key: sql.Identifier(*col) if isinstance(col, tuple) else sql.Identifier(col)
            for key, col in columns.items()
        }
        self.clauses.append(sql.SQL(template).format(*placeholders, **identifiers))

    def visible_to(self, viewer: Viewer, alias: str | None = None) -> None:
        def col(name: str) -> str | tuple[str, str]:
            return (alias, name) if alias else name

        if viewer.principal_id is None:
            self.add("{scope} = 'global'", scope=col("access_scope"))
            return
        self.add(
            "({scope} = 'global'"
            " OR ({scope} = 'private' AND {owner} = {})"
            " OR ({scope} = 'team' AND {owner} = ANY({})))",
            viewer.principal_id,
            sorted(viewer.team_owners | {viewer.principal_id}),
            scope=col("access_scope"),
            owner=col("owner_id"),
        )

    def matching(self, flt: SearchFilter) -> None:
        self.visible_to(flt.viewer)
        self.add("status = ANY({})", sorted(s.value for s in flt.statuses))
        if Status.ARCHIVED not in flt.statuses:
            # Lets the planner use the indexes that are partial on active entries.
            self.add("status <> 'archived'")
        if flt.min_confidence is not None:
            self.add("confidence >= {}", flt.min_confidence)
        if flt.tags is not None:
            self.add("tags && {}::text[]", list(flt.tags))
        if flt.knowledge_domain is not None:
            self.add("knowledge_domain = {}", flt.knowledge_domain)
        if flt.content_type is not None:
            self.add("content_type = {}", flt.content_type.value)
        if flt.access_scope is not None:
            self.add("access_scope = {}", flt.access_scope.value)
            self.owned_by_viewer(flt.access_scope, flt.viewer)
        if flt.partition is not None:
            scope, owner = flt.partition
            self.add("access_scope = {}", scope.value)
            if scope is not AccessScope.GLOBAL:  # every global entry shares one partition
                self.add("owner_id IS NOT DISTINCT FROM {}", owner)
        if flt.exclude_ids:
            self.add("id <> ALL({}::uuid[])", list(flt.exclude_ids))
        if flt.only_ids is not None:
            self.add("id = ANY({}::uuid[])", list(flt.only_ids))

    def owned_by_viewer(self, scope: AccessScope, viewer: Viewer) -> None:
        """What visibility implies within one non-global scope, stated so that the planner
        can use the owner index (a selective scope is then sorted exactly, not hunted for
        through the HNSW graph)."""
        if viewer.principal_id is None or scope is AccessScope.GLOBAL:
            return
        if scope is AccessScope.PRIVATE:
            self.add("owner_id = {}", viewer.principal_id)
        else:
            self.add("owner_id = ANY({})", sorted(viewer.team_owners | {viewer.principal_id}))

    def sql(self) -> sql.Composable:
        if not self.clauses:
            return sql.SQL("TRUE")
        return sql.SQL(" AND ").join(self.clauses)


def _decayed(factor: str, now: str) -> str:
    return (
        f"confidence * power({factor}::float8, GREATEST(0, extract(epoch FROM"
        f" ({now}::timestamptz - COALESCE(decayed_at, created_at)))::float8 / 3600.0))"
    )


_DECAY = sql.SQL(
    "WITH changed AS ("
    " UPDATE entries SET"
    "  confidence = {decayed},"
    "  decayed_at = %(now)s,"
    "  status = CASE WHEN {decayed} < %(below)s THEN 'archived' ELSE status END,"
    "  updated_at = CASE WHEN {decayed} < %(below)s THEN %(now)s ELSE updated_at END,"
    "  source_context = CASE WHEN {decayed} < %(below)s"
    "   THEN source_context || jsonb_build_object('archive_reason', 'decayed')"
    "   ELSE source_context END"
    " WHERE status <> 'archived'"
    " RETURNING status)"
    " SELECT count(*) AS decayed, count(*) FILTER (WHERE status = 'archived') AS archived"
    " FROM changed"
).format(decayed=sql.SQL(_decayed("%(factor)s", "%(now)s")))


class PostgresEntryRepository:
    def __init__(self, session: _Session, ef_search: int, max_scan_tuples: int) -> None:
        self._s = session
        self._ef_search = ef_search
        self._max_scan_tuples = max_scan_tuples

    async def add(self, entry: Entry) -> None:
        inserted = await self._s.rows(
            "INSERT INTO entries (id, content, content_hash, content_type, knowledge_domain,"
            " tags, confidence, status, source_agent, source_provider, source_channel,"
            " submitted_by, submitted_from, access_scope, owner_id, source_context, embedding,"
            " access_count, created_at, updated_at, confirmed_at, decayed_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
            " %s, %s, %s, %s, %s)"
            " ON CONFLICT (content_hash, access_scope,"
            " (CASE WHEN access_scope = 'global' THEN '' ELSE COALESCE(owner_id, '') END))"
            " WHERE status <> 'archived' DO NOTHING RETURNING id",
            (
                entry.id,
                entry.content,
                entry.content_hash,
                entry.content_type.value,
                entry.knowledge_domain,
                list(entry.tags),
                entry.confidence,
                entry.status.value,
                entry.source.agent_id,
                entry.source.provider,
                entry.source.channel,
                entry.source.submitted_by,
                entry.source.submitted_from,
                entry.access_scope.value,
                entry.owner_id,
                Jsonb(dict(entry.source_context)),
                None if entry.embedding is None else _vector(entry.embedding),
                entry.access_count,
                entry.created_at,
                entry.updated_at,
                entry.confirmed_at,
                entry.decayed_at,
            ),
        )
        if not inserted:
            raise Conflict(
                f"an active entry with hash {entry.content_hash} already exists in"
                f" ({entry.access_scope.value}, {entry.owner_id})"
            )

    async def get(self, entry_id: UUID, *, with_embedding: bool = False) -> Entry | None:
        columns = _COLUMNS_WITH_EMBEDDING if with_embedding else _COLUMNS
        row = await self._s.row(
            sql.SQL("SELECT {} FROM entries WHERE id = %s").format(columns), (entry_id,)
        )
        return None if row is None else _entry(row)

    async def get_many(self, entry_ids: Collection[UUID]) -> dict[UUID, Entry]:
        if not entry_ids:
            return {}
        rows = await self._s.rows(
            sql.SQL("SELECT {} FROM entries WHERE id = ANY(%s)").format(_COLUMNS),
            (list(entry_ids),),
        )
        return {row["id"]: _entry(row) for row in rows}

    async def find_by_hash(
        self, content_hash: str, access_scope: AccessScope, owner_id: str | None
    ) -> Entry | None:
        row = await self._s.row(
            sql.SQL(
                "SELECT {} FROM entries WHERE content_hash = %s AND access_scope = %s"
                " AND (access_scope = 'global' OR owner_id IS NOT DISTINCT FROM %s)"
                " AND status <> 'archived'"
            ).format(_COLUMNS),
            (content_hash, access_scope.value, owner_id),
        )
        return None if row is None else _entry(row)

    async def nearest(
        self, embedding: Sequence[float], flt: SearchFilter, limit: int
    ) -> list[ScoredEntry]:
        if limit <= 0:
            return []
        where = _Where()
        where.matching(flt)
        where.add("embedding IS NOT NULL")
        query_vector = where.param(_vector(embedding))
        # A margin beyond ``limit`` keeps entries tied at the cut in play for the id rule.
        fetch = limit + max(10, limit)
        # A few named entries are cheaper to sort exactly than to hunt for in the graph.
        rows: list[Row] = []
        if flt.only_ids is None or len(flt.only_ids) > EXACT_ONLY_IDS:
            ef_search = min(max(self._ef_search, fetch), 1000)
            await self._s.execute(
                "SELECT set_config('hnsw.ef_search', %s, true),"
                " set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                " set_config('hnsw.max_scan_tuples', %s, true)",
                (str(ef_search), str(self._max_scan_tuples)),
            )
            rows = await self._nearest_rows(where, query_vector, fetch, exact=False)
        if len(rows) < limit:
            # The approximate scan gave up early (scan budget), or was not worth starting:
            # an exact scan is the answer.
            rows = await self._nearest_rows(where, query_vector, fetch, exact=True)
        scored = sorted(
            (ScoredEntry(_entry(row), 1.0 - row["distance"]) for row in rows),
            key=lambda s: (-s.similarity, str(s.entry.id)),
        )
        return scored[:limit]

    async def nearest_many(
        self, embeddings: Sequence[Sequence[float]], flt: SearchFilter, limit: int
    ) -> list[list[ScoredEntry]]:
        # Each query uses the HNSW index on its own; one statement per embedding.
        return [await self.nearest(embedding, flt, limit) for embedding in embeddings]

    async def _nearest_rows(
        self, where: _Where, query_vector: sql.Placeholder, fetch: int, *, exact: bool
    ) -> list[Row]:
        # ``+ 0`` hides the ordering from the HNSW index, so the planner sorts exactly.
        order = "(embedding <=> {q}) + 0, id" if exact else "embedding <=> {q}"
        query = sql.SQL(
            "SELECT {columns}, embedding <=> {q} AS distance FROM entries"
            " WHERE {where} ORDER BY " + order + " LIMIT {fetch}"
        ).format(columns=_COLUMNS, q=query_vector, where=where.sql(), fetch=sql.Literal(fetch))
        return await self._s.rows(query, where.params)

    async def browse(self, flt: SearchFilter, limit: int) -> list[Entry]:
        if limit <= 0:
            return []
        where = _Where()
        where.matching(flt)
        query = sql.SQL(
            "SELECT {} FROM entries WHERE {} ORDER BY created_at DESC, id DESC LIMIT {}"
        ).format(_COLUMNS, where.sql(), where.param(limit))
        return [_entry(row) for row in await self._s.rows(query, where.params)]

    async def update(self, entry: Entry) -> None:
        count = await self._s.execute(
            "UPDATE entries SET status = %s, confidence = %s, tags = %s, knowledge_domain = %s,"
            " source_agent = %s, source_provider = %s, source_channel = %s, submitted_by = %s,"
            " submitted_from = %s, owner_id = %s, access_scope = %s, source_context = %s,"
            " confirmed_at = %s, updated_at = %s, decayed_at = %s WHERE id = %s",
            (
                entry.status.value,
                entry.confidence,
                list(entry.tags),
                entry.knowledge_domain,
                entry.source.agent_id,
                entry.source.provider,
                entry.source.channel,
                entry.source.submitted_by,
                entry.source.submitted_from,
                entry.owner_id,
                entry.access_scope.value,
                Jsonb(dict(entry.source_context)),
                entry.confirmed_at,
                entry.updated_at,
                entry.decayed_at,
                entry.id,
            ),
        )
        if count == 0:
            raise NotFound(f"entry {entry.id} does not exist")

    async def boost(
        self, entry_ids: Sequence[UUID], amount: float, now: datetime, *, count_access: bool
    ) -> dict[UUID, float]:
        if not entry_ids:
            return {}
        rows = await self._s.rows(
            "UPDATE entries SET confidence = LEAST(confidence + %s, 1.0),"
            " access_count = access_count + %s, updated_at = %s"
            " WHERE id = ANY(%s) RETURNING id, confidence",
            (amount, 1 if count_access else 0, now, list(entry_ids)),
        )
        return {row["id"]: row["confidence"] for row in rows}

    async def decay(
        self, now: datetime, factor_per_hour: float, archive_below: float
    ) -> DecayOutcome:
        row = await self._s.row(
            _DECAY, {"now": now, "factor": factor_per_hour, "below": archive_below}
        )
        assert row is not None
        return DecayOutcome(decayed=row["decayed"], archived=row["archived"])

    async def scale_confidence(self, factor: float, now: datetime) -> int:
        return await self._s.execute(
            "UPDATE entries SET confidence = confidence * %s WHERE status <> 'archived'",
            (factor,),
        )

    async def archive_stale(self, cutoff: datetime, now: datetime) -> int:
        return await self._s.execute(
            "UPDATE entries SET status = 'archived', updated_at = %s,"
            " source_context = source_context || jsonb_build_object('archive_reason', 'stale')"
            " WHERE status <> 'archived' AND COALESCE(updated_at, created_at) < %s",
            (now, cutoff),
        )

    async def candidates(self, limit: int) -> list[Entry]:
        rows = await self._s.rows(
            sql.SQL(
                "SELECT {} FROM entries WHERE status = 'candidate' AND embedding IS NOT NULL"
                " ORDER BY created_at, id LIMIT %s"
            ).format(_COLUMNS_WITH_EMBEDDING),
            (max(limit, 0),),
        )
        return [_entry(row) for row in rows]

    async def agent_domain_stats(self) -> list[AgentDomainStats]:
        rows = await self._s.rows(
            "SELECT source_agent, knowledge_domain, count(*) AS n, avg(confidence) AS average,"
            " max(updated_at) AS last_active_at FROM entries WHERE status <> 'archived'"
            " GROUP BY source_agent, knowledge_domain ORDER BY source_agent, knowledge_domain"
        )
        return [
            AgentDomainStats(
                agent_id=row["source_agent"],
                knowledge_domain=row["knowledge_domain"],
                entry_count=row["n"],
                average_confidence=row["average"],
                last_active_at=_utc(row["last_active_at"]),
            )
            for row in rows
        ]

    async def stats(self, viewer: Viewer, now: datetime) -> StoreStats:
        where = _Where()
        where.visible_to(viewer)
        since = where.param(now - timedelta(hours=24))
        groups = await self._s.rows(
            sql.SQL(
                "SELECT status, content_type, count(*) AS n,"
                " count(*) FILTER (WHERE created_at >= {}) AS recent"
                " FROM entries WHERE {} GROUP BY status, content_type"
            ).format(since, where.sql()),
            where.params,
        )
        average = await self._s.value(
            sql.SQL("SELECT avg(confidence) FROM entries WHERE status <> 'archived' AND {}").format(
                where.sql()
            ),
            where.params,
        )
        both = _Where()
        both.visible_to(viewer, "a")
        both.visible_to(viewer, "b")
        relations = await self._s.value(
            sql.SQL(
                "SELECT count(*) FROM relations r JOIN entries a ON a.id = r.from_id"
                " JOIN entries b ON b.id = r.to_id WHERE {}"
            ).format(both.sql()),
            both.params,
        )
        by_status = dict.fromkeys((s.value for s in Status), 0)
        by_type = dict.fromkeys((t.value for t in ContentType), 0)
        for group in groups:
            by_status[group["status"]] += group["n"]
            by_type[group["content_type"]] += group["n"]
        by_status["active"] = sum(by_status[s.value] for s in Status if s.is_active)
        return StoreStats(
            total=sum(g["n"] for g in groups),
            last_24h=sum(g["recent"] for g in groups),
            average_confidence=0.0 if average is None else average,
            by_status=by_status,
            by_content_type=by_type,
            total_relations=relations,
        )

    async def by_agent(self, agent_id: str) -> list[Entry]:
        rows = await self._s.rows(
            sql.SQL(
                "SELECT {} FROM entries WHERE source_agent = %s ORDER BY created_at, id"
            ).format(_COLUMNS),
            (agent_id,),
        )
        return [_entry(row) for row in rows]

    async def delete(self, entry_ids: Collection[UUID]) -> int:
        if not entry_ids:
            return 0
        return await self._s.execute("DELETE FROM entries WHERE id = ANY(%s)", (list(entry_ids),))


def _relation(row: Row) -> Relation:
    return Relation(
        from_id=row["from_id"],
        to_id=row["to_id"],
        relation_type=RelationType(row["relation_type"]),
        weight=row["weight"],
        created_at=_utc(row["created_at"]),
        source_context=row["source_context"],
    )


class PostgresRelationRepository:
    def __init__(self, session: _Session) -> None:
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
        if not entry_ids:
            return []
        where = _Where()
        where.add("from_id = ANY({})", list(entry_ids))
        if types is not None:
            where.add("relation_type = ANY({})", [t.value for t in types])
        rows = await self._s.rows(
            sql.SQL(
                "SELECT from_id, to_id, relation_type, weight, source_context, created_at"
                " FROM relations WHERE {} ORDER BY id"
            ).format(where.sql()),
            where.params,
        )
        return [_relation(row) for row in rows]

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


def _evidence(row: Row) -> Evidence:
    return Evidence(
        entry_id=row["entry_id"],
        source=SourceRef(
            agent_id=row["agent_id"],
            provider=row["provider"],
            channel=row["channel"],
            submitted_by=row["submitted_by"],
            submitted_from=row["submitted_from"],
        ),
        similarity=row["similarity"],
        created_at=row["created_at"].astimezone(UTC),
        kind=row["kind"],
    )


_EVIDENCE_COLUMNS = (
    "entry_id, agent_id, provider, channel, submitted_by, submitted_from, similarity, kind,"
    " created_at"
)


class PostgresEvidenceRepository:
    def __init__(self, session: _Session) -> None:
        self._s = session

    async def add(self, evidence: Evidence) -> bool:
        source = evidence.source
        inserted = await self._s.rows(
            "INSERT INTO evidence (" + _EVIDENCE_COLUMNS + ")"
            " SELECT %(entry)s, %(agent)s, %(provider)s, %(channel)s, %(by)s, %(from)s,"
            " %(similarity)s, %(kind)s, %(at)s"
            " WHERE EXISTS (SELECT 1 FROM entries WHERE id = %(entry)s)"
            " ON CONFLICT (entry_id, agent_id, provider, (COALESCE(channel, '')))"
            " DO NOTHING RETURNING id",
            {
                "entry": evidence.entry_id,
                "agent": source.agent_id,
                "provider": source.provider,
                "channel": source.channel,
                "by": source.submitted_by,
                "from": source.submitted_from,
                "similarity": evidence.similarity,
                "kind": evidence.kind,
                "at": evidence.created_at,
            },
        )
        if inserted:
            return True
        if not await self._s.value(
            "SELECT EXISTS (SELECT 1 FROM entries WHERE id = %s)", (evidence.entry_id,)
        ):
            raise NotFound(f"entry {evidence.entry_id} does not exist")
        return False

    async def for_entry(self, entry_id: UUID) -> list[Evidence]:
        return (await self.for_entries([entry_id])).get(entry_id, [])

    async def for_entries(self, entry_ids: Collection[UUID]) -> dict[UUID, list[Evidence]]:
        if not entry_ids:
            return {}
        rows = await self._s.rows(
            "SELECT " + _EVIDENCE_COLUMNS + " FROM evidence WHERE entry_id = ANY(%s) ORDER BY id",
            (list(entry_ids),),
        )
        found: dict[UUID, list[Evidence]] = {}
        for row in rows:
            found.setdefault(row["entry_id"], []).append(_evidence(row))
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


def _expertise(row: Row) -> ExpertiseRecord:
    return ExpertiseRecord(
        agent_id=row["agent_id"],
        knowledge_domain=row["knowledge_domain"],
        entry_count=row["entry_count"],
        proficiency=row["proficiency"],
        last_active_at=_utc(row["last_active_at"]),
    )


_EXPERTISE_SELECT = (
    "SELECT agent_id, knowledge_domain, entry_count, proficiency, last_active_at FROM expertise"
)


class PostgresExpertiseRepository:
    def __init__(self, session: _Session) -> None:
        self._s = session

    async def record_activity(self, agent_id: str, domain: str, now: datetime) -> None:
        await self._s.execute(
            "INSERT INTO expertise (agent_id, knowledge_domain, entry_count, proficiency,"
            " last_active_at) VALUES (%s, %s, 1, 0, %s)"
            " ON CONFLICT (agent_id, knowledge_domain) DO UPDATE SET"
            " entry_count = expertise.entry_count + 1, last_active_at = EXCLUDED.last_active_at",
            (agent_id, domain, now),
        )

    async def replace_all(self, records: Sequence[ExpertiseRecord]) -> None:
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
            _EXPERTISE_SELECT + " WHERE knowledge_domain = %s AND proficiency >= %s"
            " ORDER BY proficiency DESC, agent_id",
            (domain, min_proficiency),
        )
        return [_expertise(row) for row in rows]

    async def all(self) -> list[ExpertiseRecord]:
        rows = await self._s.rows(_EXPERTISE_SELECT + " ORDER BY agent_id, knowledge_domain")
        return [_expertise(row) for row in rows]

    async def for_agent(self, agent_id: str) -> list[ExpertiseRecord]:
        rows = await self._s.rows(
            _EXPERTISE_SELECT + " WHERE agent_id = %s ORDER BY knowledge_domain", (agent_id,)
        )
        return [_expertise(row) for row in rows]

    async def forget_agent(self, agent_id: str) -> None:
        await self._s.execute("DELETE FROM expertise WHERE agent_id = %s", (agent_id,))


class PostgresAccessLog:
    def __init__(self, session: _Session) -> None:
        self._s = session

    async def record(self, records: Sequence[AccessLogRecord]) -> None:
        await self._s.executemany(
            "INSERT INTO access_log (action, agent_id, entry_id, detail, created_at)"
            " VALUES (%s, %s, %s, %s, %s)",
            [
                (r.action, r.agent_id, r.entry_id, Jsonb(dict(r.detail)), r.created_at)
                for r in records
            ],
        )

    async def count(self, action: str | None = None) -> int:
        if action is None:
            return int(await self._s.value("SELECT count(*) FROM access_log"))
        return int(
            await self._s.value("SELECT count(*) FROM access_log WHERE action = %s", (action,))
        )


class PostgresCredibilityRegistry:
    def __init__(self, session: _Session) -> None:
        self._s = session

    async def get(self, agent_id: str) -> CredibilityRecord:
        row = await self._s.row(
            "SELECT alpha, beta, label FROM source_credibility WHERE agent_id = %s", (agent_id,)
        )
        if row is None:
            return CredibilityRecord(agent_id)
        return CredibilityRecord(agent_id, row["alpha"], row["beta"], row["label"])

    async def save(self, record: CredibilityRecord) -> None:
        await self._s.execute(
            "INSERT INTO source_credibility (agent_id, alpha, beta, label)"
            " VALUES (%s, %s, %s, %s) ON CONFLICT (agent_id) DO UPDATE SET"
            " alpha = EXCLUDED.alpha, beta = EXCLUDED.beta, label = EXCLUDED.label",
            (record.agent_id, record.alpha, record.beta, record.label),
        )


class PostgresOutbox:
    def __init__(self, session: _Session) -> None:
        self._s = session
        self._claimed: set[int] = set()

    async def enqueue(self, kind: str, payload: Mapping[str, Any], now: datetime) -> None:
        await self._s.execute(
            "INSERT INTO outbox (kind, payload, created_at) VALUES (%s, %s, %s)",
            (kind, Jsonb(dict(payload)), now),
        )

    async def claim(self, limit: int, now: datetime) -> list[OutboxItem]:
        rows = await self._s.rows(
            "WITH picked AS (SELECT id FROM outbox WHERE status = 'pending'"
            " AND id <> ALL(%s::bigint[]) ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED)"
            " UPDATE outbox o SET claimed_at = %s FROM picked WHERE o.id = picked.id"
            " RETURNING o.id, o.kind, o.payload, o.attempts, o.created_at",
            (sorted(self._claimed), max(limit, 0), now),
        )
        rows.sort(key=lambda row: row["id"])
        self._claimed.update(row["id"] for row in rows)
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
        await self._s.execute("UPDATE outbox SET status = 'done' WHERE id = %s", (item_id,))

    async def fail(self, item_id: int, error: str, *, give_up: bool) -> None:
        await self._s.execute(
            "UPDATE outbox SET attempts = attempts + 1, last_error = %s,"
            " status = CASE WHEN %s THEN 'dead' ELSE status END WHERE id = %s",
            (error, give_up, item_id),
        )

    async def pending(self) -> int:
        return int(await self._s.value("SELECT count(*) FROM outbox WHERE status = 'pending'"))


class PostgresProcessedKeys:
    def __init__(self, session: _Session) -> None:
        self._s = session

    async def mark(self, key: str, now: datetime) -> bool:
        inserted = await self._s.rows(
            "INSERT INTO processed_keys (key, created_at) VALUES (%s, %s)"
            " ON CONFLICT (key) DO NOTHING RETURNING key",
            (key, now),
        )
        return bool(inserted)

    async def seen(self, key: str) -> bool:
        return bool(
            await self._s.value(
                "SELECT EXISTS (SELECT 1 FROM processed_keys WHERE key = %s)", (key,)
            )
        )


class PostgresUnitOfWork:
    """One pooled connection, one transaction; rolled back unless :meth:`commit` ran."""

    entries: PostgresEntryRepository
    relations: PostgresRelationRepository
    evidence: PostgresEvidenceRepository
    expertise: PostgresExpertiseRepository
    access_log: PostgresAccessLog
    credibility: PostgresCredibilityRegistry
    outbox: PostgresOutbox
    processed: PostgresProcessedKeys

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._stack: AsyncExitStack | None = None
        self._tx: AbstractAsyncContextManager[psycopg.AsyncTransaction] | None = None
        self._transaction: psycopg.AsyncTransaction | None = None
        self._session: _Session | None = None

    async def __aenter__(self) -> PostgresUnitOfWork:
        if self._stack is not None:
            raise PersistenceFailed("a unit of work can be entered only once")
        self._stack = AsyncExitStack()
        try:
            conn = await self._stack.enter_async_context(self._store.connection())
            tx = conn.transaction()
            with translated():
                self._transaction = await tx.__aenter__()
        except BaseException:
            await self._stack.aclose()
            raise
        self._tx = tx
        session = self._session = _Session(conn)
        store = self._store
        self.entries = PostgresEntryRepository(session, store.ef_search, store.max_scan_tuples)
        self.relations = PostgresRelationRepository(session)
        self.evidence = PostgresEvidenceRepository(session)
        self.expertise = PostgresExpertiseRepository(session)
        self.access_log = PostgresAccessLog(session)
        self.credibility = PostgresCredibilityRegistry(session)
        self.outbox = PostgresOutbox(session)
        self.processed = PostgresProcessedKeys(session)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._stack is not None
        try:
            if self._tx is not None:
                tx, self._tx = self._tx, None
                assert self._transaction is not None
                self._transaction.force_rollback = True
                # A failed rollback means the connection is gone, and the transaction with it.
                with suppress(psycopg.Error):
                    await tx.__aexit__(None, None, None)
        finally:
            if self._session is not None:
                self._session.open = False
            await self._stack.aclose()

    async def commit(self) -> None:
        if self._session is None or self._tx is None:
            raise PersistenceFailed("commit outside an open unit of work")
        self._session.check_open()
        tx, self._tx = self._tx, None
        self._session.open = False
        with translated():
            await tx.__aexit__(None, None, None)

    @asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        if self._session is None:
            raise PersistenceFailed("savepoint outside an open unit of work")
        self._session.check_open()
        with translated():
            async with self._session.conn.transaction():
                yield


class PostgresIdentityDirectory:
    """Group memberships; each call is its own transaction."""

    def __init__(self, store: PostgresStore) -> None:
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


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    await register_vector_async(conn)
    await conn.execute("SET TIME ZONE 'UTC'")


class PostgresStore:
    """Apollo's durable store. Open it with :meth:`open`; close it with :meth:`close`.

    Connections are checked before use, so a restarted server costs nothing but a
    reconnect. When the pool has backed off from a server that was down and is up
    again, the pool is replaced instead of making callers wait out the back-off.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        pool_min: int,
        pool_max: int,
        ef_search: int,
        max_scan_tuples: int,
        pool_timeout: float,
    ) -> None:
        self._conninfo = conninfo
        self._pool_min = pool_min
        self._pool_max = max(pool_max, pool_min)
        self._pool_timeout = pool_timeout
        self._pool = self._new_pool()
        self._recovering = asyncio.Lock()
        self.ef_search = ef_search
        self.max_scan_tuples = max_scan_tuples
        self.directory = PostgresIdentityDirectory(self)

    @classmethod
    async def open(
        cls,
        conninfo: str,
        *,
        embedder_model_id: str,
        dimension: int,
        pool_min: int = 1,
        pool_max: int = 10,
        ef_search: int = 100,
        max_scan_tuples: int = 1_000_000,
        pool_timeout: float = 10.0,
        migrate: bool = True,
    ) -> Self:
        """Connect, migrate (unless ``migrate=False``) and check the embedder matches.

        Raises :class:`ConfigurationError` when the database was created for another
        embedding model or dimension, :class:`StoreUnavailable` when it cannot be reached
        or its schema is missing.
        """
        schema.check_dimension(dimension)
        if migrate:
            await schema.migrate(conninfo, dimension=dimension, model_id=embedder_model_id)
        await _check_embedder(conninfo, embedder_model_id, dimension)
        store = cls(
            conninfo,
            pool_min=pool_min,
            pool_max=pool_max,
            ef_search=ef_search,
            max_scan_tuples=max_scan_tuples,
            pool_timeout=pool_timeout,
        )
        try:
            with translated():
                await store._pool.open(wait=True, timeout=pool_timeout)
        except BaseException:
            await store._pool.close()
            raise
        return store

    def _new_pool(self) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
        return AsyncConnectionPool(
            self._conninfo,
            min_size=self._pool_min,
            max_size=self._pool_max,
            kwargs={"autocommit": True},
            configure=_configure,
            check=AsyncConnectionPool.check_connection,
            timeout=self._pool_timeout,
            name="apollo",
            open=False,
        )

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled, checked connection (autocommit, vectors registered, UTC)."""
        with translated():
            pool = self._pool
            try:
                conn = await pool.getconn(timeout=self._pool_timeout)
            except PoolTimeout:
                pool = await self._recover(pool)
                conn = await pool.getconn(timeout=self._pool_timeout)
            try:
                yield conn
            finally:
                await pool.putconn(conn)

    async def _recover(
        self, stale: AsyncConnectionPool[psycopg.AsyncConnection[Any]]
    ) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
        """A working pool when the server answers again; raises when it still does not."""
        async with self._recovering:
            if self._pool is not stale:
                return self._pool
            probe = await psycopg.AsyncConnection.connect(
                self._conninfo, connect_timeout=max(1, round(self._pool_timeout))
            )
            await probe.close()
            fresh = self._new_pool()
            await fresh.open(wait=True, timeout=self._pool_timeout)
            self._pool = fresh
        await stale.close()
        return fresh

    def unit_of_work(self) -> PostgresUnitOfWork:
        return PostgresUnitOfWork(self)

    async def preflight(self, parts: Collection[str]) -> None:
        unknown = sorted(set(parts) - PART_TABLES.keys())
        if unknown:
            raise ValidationError("parts", f"unknown store parts: {', '.join(unknown)}")
        tables = [PART_TABLES[p] for p in parts]
        async with self.connection() as conn:
            with translated():
                cur = await conn.execute(
                    "SELECT current_setting('transaction_read_only') = 'on',"
                    " ARRAY(SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NULL"
                    " OR NOT has_table_privilege(to_regclass(t), 'INSERT'))",
                    (tables,),
                )
                row = await cur.fetchone()
        assert row is not None
        read_only, missing = row
        if read_only:
            raise StoreUnavailable(f"store is read-only; cannot write {', '.join(parts)}")
        if missing:
            names = sorted(p for p in parts if PART_TABLES[p] in missing)
            raise StoreUnavailable(
                f"store part(s) unavailable: {', '.join(names)} (missing or not writable)"
            )

    async def close(self) -> None:
        await self._pool.close()


async def _check_embedder(conninfo: str, model_id: str, dimension: int) -> None:
    with translated():
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
            cur = await conn.execute(
                "SELECT to_regclass('apollo_store_meta') IS NOT NULL"
                " AND to_regclass('entries') IS NOT NULL"
            )
            ready = await cur.fetchone()
            if not ready or not ready[0]:
                raise StoreUnavailable("the Apollo schema is missing; run the migrations")
            cur = await conn.execute(
                "SELECT embedding_model_id, embedding_dimension FROM apollo_store_meta"
            )
            stored = await cur.fetchone()
    if stored is None:
        raise StoreUnavailable("the Apollo schema has no embedding model recorded")
    stored_model, stored_dimension = stored
    if (stored_model, stored_dimension) != (model_id, dimension):
        raise ConfigurationError(
            "embedder",
            f"the store holds vectors of model {stored_model!r} (dimension"
            f" {stored_dimension}) but the configured embedder is {model_id!r} (dimension"
            f" {dimension}); configure the original embedder or use a new database",
        )
