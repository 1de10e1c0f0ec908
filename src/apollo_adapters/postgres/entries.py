"""The entry repository: entries, nearest-neighbour search over pgvector, maintenance."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from uuid import UUID

from psycopg import sql
from psycopg.types.json import Jsonb

from apollo_domain.errors import Conflict, NotFound
from apollo_domain.lexical import STOPWORDS
from apollo_domain.model import AccessScope, ContentType, Entry, Status, Viewer
from apollo_domain.ports import (
    AgentDomainStats,
    DecayOutcome,
    ScoredEntry,
    SearchFilter,
    StoreStats,
)
from apollo_domain.redaction import redact_context

from .filters import Where
from .rows import (
    ENTRY_COLUMNS,
    ENTRY_COLUMNS_WITH_EMBEDDING,
    MENTIONS,
    as_utc,
    as_vector,
    entry_from_row,
)
from .session import Row, Session

EXACT_ONLY_IDS = 1_000  # ``nearest`` restricted to at most this many ids skips the index


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


# The OR of the query's lexemes under the ``simple`` configuration, stop words dropped, each
# lexeme quoted for the tsquery syntax (backslashes and quotes doubled); NULL when nothing is
# left to match.
_LEXICAL_QUERY = (
    r"SELECT string_agg(DISTINCT '''' || replace(replace(lexeme, '\', '\\'), '''', '''''')"
    " || '''', ' | ')::tsquery AS terms"
    " FROM unnest(to_tsvector('simple'::regconfig, {text})) WHERE lexeme <> ALL({stop})"
)
_STOPWORDS = sorted(STOPWORDS)


class PostgresEntryRepository:
    def __init__(self, session: Session, ef_search: int, max_scan_tuples: int) -> None:
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
                None if entry.embedding is None else as_vector(entry.embedding),
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
        columns = ENTRY_COLUMNS_WITH_EMBEDDING if with_embedding else ENTRY_COLUMNS
        row = await self._s.row(
            sql.SQL("SELECT {} FROM entries WHERE id = %s").format(columns), (entry_id,)
        )
        return None if row is None else entry_from_row(row)

    async def lock(self, entry_id: UUID) -> Entry | None:
        row = await self._s.row(
            sql.SQL("SELECT {} FROM entries WHERE id = %s FOR UPDATE").format(ENTRY_COLUMNS),
            (entry_id,),
        )
        return None if row is None else entry_from_row(row)

    async def get_many(self, entry_ids: Collection[UUID]) -> dict[UUID, Entry]:
        if not entry_ids:
            return {}
        rows = await self._s.rows(
            sql.SQL("SELECT {} FROM entries WHERE id = ANY(%s)").format(ENTRY_COLUMNS),
            (list(entry_ids),),
        )
        return {row["id"]: entry_from_row(row) for row in rows}

    async def find_by_hash(
        self,
        content_hash: str,
        access_scope: AccessScope,
        owner_id: str | None,
        *,
        lock: bool = False,
    ) -> Entry | None:
        # FOR UPDATE waits for a concurrent writer, then rechecks the WHERE clause against
        # the row it committed: an entry archived meanwhile is not returned.
        row = await self._s.row(
            sql.SQL(
                "SELECT {} FROM entries WHERE content_hash = %s AND access_scope = %s"
                " AND (access_scope = 'global' OR owner_id IS NOT DISTINCT FROM %s)"
                " AND status <> 'archived'{}"
            ).format(ENTRY_COLUMNS, sql.SQL(" FOR UPDATE" if lock else "")),
            (content_hash, access_scope.value, owner_id),
        )
        return None if row is None else entry_from_row(row)

    async def nearest(
        self, embedding: Sequence[float], flt: SearchFilter, limit: int
    ) -> list[ScoredEntry]:
        if limit <= 0:
            return []
        where = Where()
        where.matching(flt)
        where.add("embedding IS NOT NULL")
        query_vector = where.param(as_vector(embedding))
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
            (ScoredEntry(entry_from_row(row), 1.0 - row["distance"]) for row in rows),
            key=lambda s: (-s.similarity, str(s.entry.id)),
        )
        return scored[:limit]

    async def nearest_many(
        self, embeddings: Sequence[Sequence[float]], flt: SearchFilter, limit: int
    ) -> list[list[ScoredEntry]]:
        # Each query uses the HNSW index on its own; one statement per embedding.
        return [await self.nearest(embedding, flt, limit) for embedding in embeddings]

    async def _nearest_rows(
        self, where: Where, query_vector: sql.Placeholder, fetch: int, *, exact: bool
    ) -> list[Row]:
        # ``+ 0`` hides the ordering from the HNSW index, so the planner sorts exactly.
        order = "(embedding <=> {q}) + 0, id" if exact else "embedding <=> {q}"
        query = sql.SQL(
            "SELECT {columns}, embedding <=> {q} AS distance FROM entries"
            " WHERE {where} ORDER BY " + order + " LIMIT {fetch}"
        ).format(columns=ENTRY_COLUMNS, q=query_vector, where=where.sql(), fetch=sql.Literal(fetch))
        return await self._s.rows(query, where.params)

    async def lexical_search(self, query: str, flt: SearchFilter, limit: int) -> list[ScoredEntry]:
        if limit <= 0:
            return []
        where = Where()
        where.matching(flt)
        terms = sql.SQL(_LEXICAL_QUERY).format(
            text=where.param(query), stop=where.param(_STOPWORDS)
        )
        statement = sql.SQL(
            "WITH q AS ({terms}) SELECT {columns}, ts_rank(lexical, q.terms) AS score"
            " FROM entries, q WHERE q.terms IS NOT NULL AND lexical @@ q.terms AND {where}"
            " ORDER BY score DESC, id LIMIT {limit}"
        ).format(terms=terms, columns=ENTRY_COLUMNS, where=where.sql(), limit=where.param(limit))
        rows = await self._s.rows(statement, where.params)
        return [ScoredEntry(entry_from_row(row), float(row["score"])) for row in rows]

    async def browse(self, flt: SearchFilter, limit: int) -> list[Entry]:
        if limit <= 0:
            return []
        where = Where()
        where.matching(flt)
        query = sql.SQL(
            "SELECT {} FROM entries WHERE {} ORDER BY created_at DESC, id DESC LIMIT {}"
        ).format(ENTRY_COLUMNS, where.sql(), where.param(limit))
        return [entry_from_row(row) for row in await self._s.rows(query, where.params)]

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
            " WHERE id = ANY(%s) AND status <> 'archived' RETURNING id, confidence",
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
            ).format(ENTRY_COLUMNS_WITH_EMBEDDING),
            (max(limit, 0),),
        )
        return [entry_from_row(row) for row in rows]

    async def agent_domain_stats(
        self,
        viewer: Viewer | None = None,
        *,
        domain: str | None = None,
        agent_id: str | None = None,
    ) -> list[AgentDomainStats]:
        where = Where()
        where.add("status <> 'archived'")
        if viewer is not None:
            where.visible_to(viewer)
        if domain is not None:
            where.add("knowledge_domain = {}", domain)
        if agent_id is not None:
            where.add("source_agent = {}", agent_id)
        rows = await self._s.rows(
            sql.SQL(
                "SELECT source_agent, knowledge_domain, count(*) AS n,"
                " avg(confidence) AS average, max(updated_at) AS last_active_at"
                " FROM entries WHERE {} GROUP BY source_agent, knowledge_domain"
                " ORDER BY source_agent, knowledge_domain"
            ).format(where.sql()),
            where.params,
        )
        return [
            AgentDomainStats(
                agent_id=row["source_agent"],
                knowledge_domain=row["knowledge_domain"],
                entry_count=row["n"],
                average_confidence=row["average"],
                last_active_at=as_utc(row["last_active_at"]),
            )
            for row in rows
        ]

    async def stats(self, viewer: Viewer, now: datetime) -> StoreStats:
        where = Where()
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
        both = Where()
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
            ).format(ENTRY_COLUMNS),
            (agent_id,),
        )
        return [entry_from_row(row) for row in rows]

    async def delete(self, entry_ids: Collection[UUID]) -> int:
        if not entry_ids:
            return 0
        return await self._s.execute("DELETE FROM entries WHERE id = ANY(%s)", (list(entry_ids),))

    async def redact_context(self, agent_id: str, replacement: str, now: datetime) -> int:
        rows = await self._s.rows(
            "SELECT id, source_context FROM entries WHERE " + MENTIONS + " FOR UPDATE",
            (agent_id,),
        )
        changes = [
            (Jsonb(context), now, row["id"])
            for row in rows
            if (context := redact_context(row["source_context"], agent_id, replacement)) is not None
        ]
        await self._s.executemany(
            "UPDATE entries SET source_context = %s, updated_at = %s WHERE id = %s", changes
        )
        return len(changes)
