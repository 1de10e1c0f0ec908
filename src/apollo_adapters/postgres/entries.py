"""The entry repository: entries, nearest-neighbour search over pgvector, maintenance."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from pgvector import Vector
from psycopg import sql
from psycopg.adapt import PyFormat
from psycopg.types.json import Jsonb

from apollo_domain.errors import Conflict, NotFound
from apollo_domain.lexical import STOPWORDS
from apollo_domain.model import AccessScope, ContentType, Entry, Status, Viewer, dedup_key
from apollo_domain.ports import (
    AgentDomainStats,
    BatchNeighbours,
    DecayOutcome,
    ScoredEntry,
    SearchFilter,
    StoreStats,
)
from apollo_domain.ports.entries import SOURCE_SCAN
from apollo_domain.redaction import redact_context
from apollo_domain.rules import AGREEING_KINDS

from .filters import Where
from .rows import (
    ENTRY_COLUMN_NAMES,
    ENTRY_COLUMNS,
    ENTRY_COLUMNS_WITH_EMBEDDING,
    MENTIONS,
    as_utc,
    as_vector,
    entry_from_row,
)
from .session import Params, Row, Session

EXACT_ONLY_IDS = 1_000  # ``nearest`` restricted to at most this many ids skips the index
#: rows an approximate scan fetches beyond ``limit``, so that entries tied at the cut stay
#: in play for the id rule (a tie longer than that falls back to the exact scan); it also
#: leaves the index's candidate list (``ef_search``) room for rows the scan skips (deleted
#: or updated since the last vacuum) before pgvector's iterative scan must go on
TIE_MARGIN = 10
_SCAN_SETTINGS = (
    "SELECT set_config('hnsw.ef_search', %s, true),"
    " set_config('hnsw.iterative_scan', 'relaxed_order', true),"
    " set_config('hnsw.max_scan_tuples', %s, true), set_config('enable_sort', 'off', true)"
)
_ID_COLUMN = sql.SQL("id")  # the id-only searches read no more
_SORTING_BACK = "SET LOCAL enable_sort TO DEFAULT"  # not a scan of pg_settings: ~0.5 ms


def _best(rows: list[Row], limit: int) -> list[Row]:
    """The best ``limit`` rows by similarity (1 - ``distance``), ties broken by id."""
    return sorted(rows, key=lambda row: (row["distance"] - 1.0, str(row["id"])))[:limit]


def _settled(rows: list[Row], limit: int, fetch: int) -> bool:
    """Whether an approximate scan asked for ``fetch`` rows settled the best ``limit``: it
    found that many, and when it returned all it was asked for, the row at the cut is not
    tied with the last one (a tie reaching the end may go on past what was fetched, and
    the id rule must see all of it)."""
    if len(rows) < limit:
        return False
    if len(rows) < fetch:
        return True
    distances = sorted(row["distance"] for row in rows)
    return bool(distances[limit - 1] < distances[-1])


def _scored_ids(rows: list[Row], limit: int) -> list[tuple[UUID, float]]:
    """:func:`_scored` as ``(id, similarity)`` pairs, of rows holding only those."""
    return [(row["id"], 1.0 - row["distance"]) for row in _best(rows, limit)]


def _scored(rows: list[Row], limit: int) -> list[ScoredEntry]:
    """The best ``limit`` rows as scored entries, ties broken by id."""
    return [ScoredEntry(entry_from_row(row), 1.0 - row["distance"]) for row in _best(rows, limit)]


def _decayed(factor: str, now: str) -> str:
    return (
        f"confidence * power({factor}::float8, GREATEST(0, extract(epoch FROM"
        f" ({now}::timestamptz - COALESCE(decayed_at, created_at)))::float8 / 3600.0))"
    )


_DECAY = sql.SQL(
    "WITH locked AS ("
    " SELECT id FROM entries WHERE status <> 'archived' ORDER BY id FOR UPDATE),"
    " changed AS ("
    " UPDATE entries SET"
    "  confidence = {decayed},"
    "  decayed_at = GREATEST(COALESCE(decayed_at, created_at), %(now)s),"
    "  status = CASE WHEN {decayed} < %(below)s THEN 'archived' ELSE status END,"
    "  updated_at = CASE WHEN {decayed} < %(below)s THEN %(now)s ELSE updated_at END,"
    "  source_context = CASE WHEN {decayed} < %(below)s"
    "   THEN source_context || jsonb_build_object('archive_reason', 'decayed')"
    "   ELSE source_context END"
    " WHERE id IN (SELECT id FROM locked)"
    " RETURNING status)"
    " SELECT count(*) AS decayed, count(*) FILTER (WHERE status = 'archived') AS archived"
    " FROM changed"
).format(decayed=sql.SQL(_decayed("%(factor)s", "%(now)s")))


# Every statement that locks several entries locks them in id order (two units of work
# locking overlapping sets then wait for each other instead of deadlocking): the non-archived
# entries of ``%(ids)s``, locked, as ``locked``.
_LOCKED_IN_ID_ORDER = (
    "WITH locked AS (SELECT id FROM entries WHERE id = ANY(%(ids)s) AND status <> 'archived'"
    " ORDER BY id FOR UPDATE)"
)
_BOOST = (
    _LOCKED_IN_ID_ORDER
    + " UPDATE entries e SET confidence = LEAST(e.confidence + %(amount)s, 1.0),"
    " access_count = e.access_count + %(count)s, updated_at = %(now)s"
    " FROM locked WHERE e.id = locked.id RETURNING e.id, e.confidence"
)
# A retrieval boost: earned on an entry when the earner's last one there is at least the
# window old (or there is none), recorded in the same statement (the earner's rows locked
# in id order too, after the entries').
_EARNED_BOOST = (
    _LOCKED_IN_ID_ORDER
    + ", earned AS (INSERT INTO retrieval_boosts AS r (entry_id, earner, boosted_at)"
    " SELECT id, %(earner)s, %(now)s FROM locked ORDER BY id"
    " ON CONFLICT (entry_id, earner) DO UPDATE SET boosted_at = excluded.boosted_at"
    " WHERE r.boosted_at + %(window)s <= excluded.boosted_at RETURNING entry_id)"
    " UPDATE entries e SET confidence = CASE WHEN e.id IN (SELECT entry_id FROM earned)"
    " THEN LEAST(e.confidence + %(amount)s, 1.0) ELSE e.confidence END,"
    " access_count = e.access_count + %(count)s, updated_at = %(now)s"
    " FROM locked WHERE e.id = locked.id RETURNING e.id, e.confidence"
)

# The OR of the query's lexemes under the ``simple`` configuration, stop words dropped, each
# lexeme quoted for the tsquery syntax (backslashes and quotes doubled); NULL when nothing is
# left to match.
LEXICAL_TERMS = (
    r"SELECT string_agg(DISTINCT '''' || replace(replace(lexeme, '\', '\\'), '''', '''''')"
    " || '''', ' | ')::tsquery AS terms"
    " FROM unnest(to_tsvector('simple'::regconfig, {text})) WHERE lexeme <> ALL({stop})"
)
LEXICAL_STOPWORDS = sorted(STOPWORDS)


_ENTRY_INSERT_COLUMNS = (
    "id, content, content_hash, content_type, knowledge_domain, tags, confidence, status,"
    " source_agent, source_provider, source_channel, submitted_by, submitted_from,"
    " access_scope, owner_id, source_context, embedding, access_count, created_at,"
    " updated_at, confirmed_at, decayed_at, episode_id, episode_position"
)
_ENTRY_ROW = "(" + ", ".join(["%s"] * 24) + ")"
# The deduplication rule (:func:`apollo_domain.model.dedup_key`) is kept by the unique index
# ``entries_dedup`` (content_hash, access_scope, and the owner, '' for every global entry)
# over active entries; an insert names the index, a look-up states the key's partition.
_INSERT_ENTRIES = (
    "INSERT INTO entries (" + _ENTRY_INSERT_COLUMNS + ") VALUES {values}"
    " ON CONFLICT (content_hash, access_scope,"
    " (CASE WHEN access_scope = 'global' THEN '' ELSE COALESCE(owner_id, '') END))"
    " WHERE status <> 'archived' DO NOTHING RETURNING id"
)
_IN_KEYS_PARTITION = (
    "content_hash = {hash} AND access_scope = {scope}"
    " AND (access_scope = 'global' OR owner_id IS NOT DISTINCT FROM {owner})"
    " AND status <> 'archived'"
)
_ROWS_PER_INSERT = 1_000  # 24 parameters a row: far below the protocol's 65,535


def _entry_values(entry: Entry) -> tuple[Any, ...]:
    return (
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
        entry.episode_id,
        entry.position,
    )


class PostgresEntryRepository:
    def __init__(
        self, session: Session, ef_search: int, max_scan_tuples: int, ingest_ef_search: int
    ) -> None:
        self._s = session
        self._ef_search = ef_search
        self._ingest_ef_search = ingest_ef_search
        self._max_scan_tuples = max_scan_tuples
        #: entries this unit of work inserted (told to the store when it commits)
        self.added = 0

    async def add(self, entry: Entry) -> None:
        inserted = await self.add_many([entry])
        if not inserted:
            raise Conflict(
                f"an active entry with hash {entry.content_hash} already exists in"
                f" ({entry.access_scope.value}, {entry.owner_id})"
            )

    async def add_many(self, entries: Sequence[Entry]) -> set[UUID]:
        inserted: set[UUID] = set()
        for start in range(0, len(entries), _ROWS_PER_INSERT):
            batch = entries[start : start + _ROWS_PER_INSERT]
            rows = await self._s.rows(
                sql.SQL(_INSERT_ENTRIES).format(
                    values=sql.SQL(", ").join(sql.SQL(_ENTRY_ROW) for _ in batch)
                ),
                [value for entry in batch for value in _entry_values(entry)],
            )
            inserted.update(row["id"] for row in rows)
        self.added += len(inserted)
        return inserted

    async def get(self, entry_id: UUID, *, with_embedding: bool = False) -> Entry | None:
        columns = ENTRY_COLUMNS_WITH_EMBEDDING if with_embedding else ENTRY_COLUMNS
        row = await self._s.row(
            sql.SQL("SELECT {} FROM entries WHERE id = %s").format(columns), (entry_id,)
        )
        return None if row is None else entry_from_row(row)

    async def lock_many(self, entry_ids: Collection[UUID]) -> dict[UUID, Entry]:
        if not entry_ids:
            return {}
        rows = await self._s.rows(
            sql.SQL("SELECT {} FROM entries WHERE id = ANY(%s) ORDER BY id FOR UPDATE").format(
                ENTRY_COLUMNS
            ),
            (sorted(set(entry_ids)),),
        )
        return {row["id"]: entry_from_row(row) for row in rows}

    async def lock(self, entry_id: UUID) -> Entry | None:
        row = await self._s.row(
            sql.SQL("SELECT {} FROM entries WHERE id = %s FOR UPDATE").format(ENTRY_COLUMNS),
            (entry_id,),
        )
        return None if row is None else entry_from_row(row)

    async def get_many(
        self, entry_ids: Collection[UUID], *, with_embedding: bool = False
    ) -> dict[UUID, Entry]:
        if not entry_ids:
            return {}
        columns = ENTRY_COLUMNS_WITH_EMBEDDING if with_embedding else ENTRY_COLUMNS
        rows = await self._s.rows(
            sql.SQL("SELECT {} FROM entries WHERE id = ANY(%s)").format(columns),
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
        key_hash, scope, owner = dedup_key(content_hash, access_scope, owner_id)
        partition = _IN_KEYS_PARTITION.format(hash="%s", scope="%s", owner="%s")
        row = await self._s.row(
            sql.SQL("SELECT {} FROM entries WHERE " + partition + "{}").format(
                ENTRY_COLUMNS, sql.SQL(" FOR UPDATE" if lock else "")
            ),
            (key_hash, scope.value, owner),
        )
        return None if row is None else entry_from_row(row)

    async def find_by_hashes(
        self, keys: Sequence[tuple[str, AccessScope, str | None]]
    ) -> list[Entry | None]:
        if not keys:
            return []
        partition = _IN_KEYS_PARTITION.format(hash="k.hash", scope="k.scope", owner="k.owner")
        normalized = [dedup_key(*key) for key in keys]
        rows = await self._s.rows(
            sql.SQL(
                "SELECT k.i AS key_index, {} FROM unnest(%s::text[], %s::text[], %s::text[])"
                " WITH ORDINALITY AS k(hash, scope, owner, i) JOIN entries ON " + partition
            ).format(ENTRY_COLUMNS),
            (
                [k[0] for k in normalized],
                [k[1].value for k in normalized],
                [k[2] for k in normalized],
            ),
        )
        found: list[Entry | None] = [None] * len(keys)
        for row in rows:
            found[row["key_index"] - 1] = entry_from_row(row)
        return found

    async def nearest(
        self, embedding: Sequence[float], flt: SearchFilter, limit: int, *, ingest: bool = False
    ) -> list[ScoredEntry]:
        rows = await self._nearest_candidates(embedding, flt, limit, ENTRY_COLUMNS, ingest)
        return _scored(rows, limit)

    async def nearest_ids(
        self,
        embedding: Sequence[float],
        flt: SearchFilter,
        limit: int,
        *,
        per_source: int | None = None,
    ) -> list[tuple[UUID, float]]:
        if per_source is not None:
            return await self._nearest_per_source(embedding, flt, limit, per_source)
        rows = await self._nearest_candidates(embedding, flt, limit, _ID_COLUMN, False)
        return _scored_ids(rows, limit)

    async def _nearest_per_source(
        self, embedding: Sequence[float], flt: SearchFilter, limit: int, per_source: int
    ) -> list[tuple[UUID, float]]:
        """The nearest ``SOURCE_SCAN`` rows (the HNSW index's, else an exact scan's when the
        index gave fewer than ``limit``), each source's first ``per_source`` of them kept,
        best ``limit`` of those: one statement."""
        if limit <= 0:
            return []
        where, q = _vector_search(flt, embedding)

        def statement(exact: bool) -> sql.Composed:
            order = "(embedding <=> {q}) + 0, id" if exact else "embedding <=> {q}"
            return sql.SQL(
                "SELECT id, distance FROM (SELECT id, distance,"
                " row_number() OVER (PARTITION BY source_agent ORDER BY distance, id) AS by_agent,"
                " CASE WHEN principal IS NULL THEN 0 ELSE row_number() OVER"
                "  (PARTITION BY principal ORDER BY distance, id) END AS by_principal"
                " FROM (SELECT id, source_agent, COALESCE(owner_id, submitted_by) AS principal,"
                "  embedding <=> {q} AS distance"
                "  FROM entries WHERE {where} ORDER BY " + order + " LIMIT {scan}) n) m"
                " WHERE by_agent <= {cap} AND by_principal <= {cap}"
                " ORDER BY distance, id LIMIT {limit}"
            ).format(
                q=q,
                where=where.sql(),
                scan=sql.Literal(SOURCE_SCAN),
                cap=sql.Literal(per_source),
                limit=sql.Literal(limit),
            )

        rows = await self._approximate(
            statement(exact=False), where.params, SOURCE_SCAN, self._breadth(False)
        )
        if len(rows) < limit:
            rows = await self._s.rows(statement(exact=True), where.params)
        return [(row["id"], 1.0 - row["distance"]) for row in rows]

    async def _nearest_candidates(
        self,
        embedding: Sequence[float],
        flt: SearchFilter,
        limit: int,
        columns: sql.Composable,
        ingest: bool,
    ) -> list[Row]:
        """The rows (``columns`` and ``distance``) :meth:`nearest` ranks: ``limit`` and a
        margin for ties at the cut."""
        if limit <= 0:
            return []
        where, query_vector = _vector_search(flt, embedding)
        fetch = limit + TIE_MARGIN
        # A few named entries are cheaper to sort exactly than to hunt for in the graph.
        rows: list[Row] = []
        if flt.only_ids is None or len(flt.only_ids) > EXACT_ONLY_IDS:
            rows = await self._nearest_rows(
                where, query_vector, fetch, columns, exact=False, ef_search=self._breadth(ingest)
            )
        if not _settled(rows, limit, fetch):
            # The approximate scan gave up early (scan budget), was not worth starting, or
            # ended in a tie at the cut: an exact scan (ties in id order) is the answer.
            rows = await self._nearest_rows(
                where, query_vector, fetch, columns, exact=True, ef_search=0
            )
        return rows

    async def nearest_many(
        self,
        embeddings: Sequence[Sequence[float]],
        flt: SearchFilter,
        limit: int,
        *,
        ingest: bool = False,
    ) -> list[list[ScoredEntry]]:
        if limit <= 0 or not embeddings:
            return [[] for _ in embeddings]
        where = Where()
        where.matching(flt)
        where.add("embedding IS NOT NULL")
        vectors = [as_vector(e) for e in embeddings]
        fetch = limit + TIE_MARGIN
        found: dict[int, list[Row]] = {i: [] for i in range(len(vectors))}
        if flt.only_ids is None or len(flt.only_ids) > EXACT_ONLY_IDS:
            approximate = await self._nearest_batch_rows(
                where, vectors, fetch, exact=False, ef_search=self._breadth(ingest)
            )
            for row in approximate:
                found[row["query_index"] - 1].append(row)
        short = [i for i, rows in found.items() if not _settled(rows, limit, fetch)]
        if short:  # as in :meth:`_nearest_candidates`
            exact = await self._nearest_batch_rows(
                where, [vectors[i] for i in short], fetch, exact=True, ef_search=0
            )
            for i in short:
                found[i] = []
            for row in exact:
                found[short[row["query_index"] - 1]].append(row)
        return [_scored(found[i], limit) for i in range(len(vectors))]

    async def nearest_batch(
        self, embeddings: Sequence[Sequence[float]], flt: SearchFilter, limit: int
    ) -> list[BatchNeighbours]:
        stored = await self.nearest_many(embeddings, flt, limit, ingest=True)
        floors = [
            found[-1].similarity if limit > 0 and len(found) >= limit else -math.inf
            for found in stored
        ]
        earlier: list[list[tuple[int, float]]] = [[] for _ in embeddings]
        if len(embeddings) > 1:
            # ``nearest`` scores a stored entry as ``1 - (embedding <=> query)``: the same
            # operands, in the same order, give the same float.
            rows = await self._s.rows(
                "WITH q AS (SELECT v, i, floor FROM unnest(%b::vector[], %s::float8[])"
                " WITH ORDINALITY AS q(v, floor, i))"
                " SELECT a.i, b.i AS j, b.v <=> a.v AS distance FROM q a JOIN q b ON b.i < a.i"
                " WHERE 1 - (b.v <=> a.v) >= a.floor",
                ([as_vector(e) for e in embeddings], floors),
            )
            for row in rows:
                earlier[row["i"] - 1].append((row["j"] - 1, 1.0 - row["distance"]))
        return [
            BatchNeighbours(found, sorted(pairs, key=lambda p: (-p[1], p[0])))
            for found, pairs in zip(stored, earlier, strict=True)
        ]

    def _breadth(self, ingest: bool) -> int:
        """The HNSW search breadth (``hnsw.ef_search``) of a query's or an ingest's search."""
        return self._ingest_ef_search if ingest else self._ef_search

    async def _approximate(
        self, query: sql.Composable, params: Params, fetch: int, ef_search: int
    ) -> list[Row]:
        """The rows of an approximate nearest-neighbour ``query``, run through the HNSW index
        at ``ef_search`` (raised to ``fetch``, at most 1,000).

        Planned with sorting off: an ordered scan of the index is then the only plan left,
        where the planner would otherwise sort an exact scan of a table of a few thousand
        rows, which it estimates cheaper (the distance operator is costed as one addition)
        though it takes several times longer. The setting is restored right after, in the
        same round trip. ``hnsw.iterative_scan`` keeps a filtered scan going until ``fetch``
        rows match (or the scan budget is spent)."""
        breadth = min(max(ef_search, fetch), 1000)
        return await self._s.rows_between(
            (_SCAN_SETTINGS, (str(breadth), str(self._max_scan_tuples))),
            query,
            params,
            (_SORTING_BACK, None),
        )

    async def _nearest_batch_rows(
        self, where: Where, vectors: list[Vector], fetch: int, *, exact: bool, ef_search: int
    ) -> list[Row]:
        """Each vector's nearest rows in one statement: a top-``fetch`` search per vector,
        run once per ``unnest`` row (a nested loop over the HNSW index when not ``exact``)."""
        order = "(embedding <=> q.v) + 0, id" if exact else "embedding <=> q.v"
        query = sql.SQL(
            "SELECT q.i AS query_index, n.* FROM unnest({vectors}::vector[])"
            " WITH ORDINALITY AS q(v, i) CROSS JOIN LATERAL ("
            " SELECT {columns}, embedding <=> q.v AS distance FROM entries"
            " WHERE {where} ORDER BY " + order + " LIMIT {fetch}) n"
        ).format(
            # binary: an array of vectors would otherwise go as text, ~0.3 ms a vector
            vectors=sql.Placeholder("vectors", PyFormat.BINARY),
            columns=ENTRY_COLUMNS,
            where=where.sql(),
            fetch=sql.Literal(fetch),
        )
        params = {**where.params, "vectors": vectors}
        if exact:
            return await self._s.rows(query, params)
        return await self._approximate(query, params, fetch, ef_search)

    async def _nearest_rows(
        self,
        where: Where,
        query_vector: sql.Placeholder,
        fetch: int,
        columns: sql.Composable,
        *,
        exact: bool,
        ef_search: int,
    ) -> list[Row]:
        # ``+ 0`` hides the ordering from the HNSW index, so the planner sorts exactly.
        order = "(embedding <=> {q}) + 0, id" if exact else "embedding <=> {q}"
        query = sql.SQL(
            "SELECT {columns}, embedding <=> {q} AS distance FROM entries"
            " WHERE {where} ORDER BY " + order + " LIMIT {fetch}"
        ).format(columns=columns, q=query_vector, where=where.sql(), fetch=sql.Literal(fetch))
        if exact:
            return await self._s.rows(query, where.params)
        return await self._approximate(query, where.params, fetch, ef_search)

    async def lexical_search(self, query: str, flt: SearchFilter, limit: int) -> list[ScoredEntry]:
        rows = await self._lexical_rows(query, flt, limit, ENTRY_COLUMNS)
        return [ScoredEntry(entry_from_row(row), float(row["score"])) for row in rows]

    async def lexical_search_ids(
        self, query: str, flt: SearchFilter, limit: int, *, per_source: int | None = None
    ) -> list[tuple[UUID, float]]:
        rows = await self._lexical_rows(query, flt, limit, _ID_COLUMN, per_source)
        return [(row["id"], float(row["score"])) for row in rows]

    async def _lexical_rows(
        self,
        query: str,
        flt: SearchFilter,
        limit: int,
        columns: sql.Composable,
        per_source: int | None = None,
    ) -> list[Row]:
        """The rows (``columns`` and ``score``) :meth:`lexical_search` returns; with
        ``per_source``, at most that many of one agent and of one principal."""
        if limit <= 0:
            return []
        where = Where()
        where.matching(flt)
        terms = sql.SQL(LEXICAL_TERMS).format(
            text=where.param(query), stop=where.param(LEXICAL_STOPWORDS)
        )
        if per_source is not None:
            # Every match is scored anyway (no index orders by ts_rank): number each
            # source's matches best first and keep the first ``per_source`` of each.
            statement = sql.SQL(
                "WITH q AS ({terms}), m AS (SELECT {columns}, ts_rank(lexical, q.terms) AS score,"
                " row_number() OVER (PARTITION BY source_agent"
                "  ORDER BY ts_rank(lexical, q.terms) DESC, id) AS by_agent,"
                " CASE WHEN COALESCE(owner_id, submitted_by) IS NULL THEN 0 ELSE row_number() OVER"
                "  (PARTITION BY COALESCE(owner_id, submitted_by)"
                "   ORDER BY ts_rank(lexical, q.terms) DESC, id) END AS by_principal"
                " FROM entries, q WHERE q.terms IS NOT NULL AND lexical @@ q.terms AND {where})"
                " SELECT * FROM m WHERE by_agent <= {cap} AND by_principal <= {cap}"
                " ORDER BY score DESC, id LIMIT {limit}"
            ).format(
                terms=terms,
                columns=columns,
                where=where.sql(),
                cap=where.param(per_source),
                limit=where.param(limit),
            )
            return await self._s.rows(statement, where.params)
        statement = sql.SQL(
            "WITH q AS ({terms}) SELECT {columns}, ts_rank(lexical, q.terms) AS score"
            " FROM entries, q WHERE q.terms IS NOT NULL AND lexical @@ q.terms AND {where}"
            " ORDER BY score DESC, id LIMIT {limit}"
        ).format(terms=terms, columns=columns, where=where.sql(), limit=where.param(limit))
        return await self._s.rows(statement, where.params)

    async def near_pairs(
        self, entry_ids: Collection[UUID], similarity: float
    ) -> set[tuple[UUID, UUID]]:
        ids = sorted(set(entry_ids))
        if len(ids) < 2:
            return set()
        # Each candidate's vector read out of its TOASTed column once, as a new unit vector
        # (the cosine is the same), then the pairs compared: comparing the stored columns
        # detoasted both vectors for every pair (7 ms for 72 candidates against 2 ms).
        rows = await self._s.rows(
            "WITH c AS MATERIALIZED (SELECT id, l2_normalize(embedding) AS unit FROM entries"
            " WHERE id = ANY(%(ids)s) AND embedding IS NOT NULL)"
            " SELECT a.id AS a, b.id AS b FROM c a JOIN c b ON a.id < b.id"
            " WHERE (a.unit <=> b.unit) <= %(distance)s",
            {"ids": ids, "distance": 1.0 - similarity},
        )
        return {(row["a"], row["b"]) for row in rows}

    async def in_episodes(
        self, spans: Sequence[tuple[UUID, int, int]], viewer: Viewer | None
    ) -> list[Entry]:
        if not spans:
            return []
        where = Where()
        if viewer is not None:
            where.visible_to(viewer, "e")
        where.add("e.status <> 'archived'")
        episodes = where.param([span[0] for span in spans])
        query = sql.SQL(
            "SELECT {} FROM entries e WHERE e.episode_id = ANY({episodes}::uuid[]) AND EXISTS ("
            "SELECT 1 FROM unnest({episodes}::uuid[], {first}::int[], {last}::int[])"
            " AS s(episode, f, l)"
            " WHERE s.episode = e.episode_id AND e.episode_position BETWEEN s.f AND s.l)"
            " AND {} ORDER BY e.episode_id, e.episode_position"
        ).format(
            sql.SQL(", ").join(
                sql.Identifier("e", name.strip()) for name in ENTRY_COLUMN_NAMES.split(",")
            ),
            where.sql(),
            episodes=episodes,
            first=where.param([span[1] for span in spans]),
            last=where.param([span[2] for span in spans]),
        )
        return [entry_from_row(row) for row in await self._s.rows(query, where.params)]

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
        self,
        entry_ids: Sequence[UUID],
        amount: float,
        now: datetime,
        *,
        count_access: bool,
        earner: str | None = None,
        window: timedelta = timedelta(0),
    ) -> dict[UUID, float]:
        if not entry_ids:
            return {}
        params = {
            "ids": list(entry_ids),
            "amount": amount,
            "count": 1 if count_access else 0,
            "now": now,
            "earner": earner,
            "window": window,
        }
        rows = await self._s.rows(_BOOST if earner is None else _EARNED_BOOST, params)
        return {row["id"]: row["confidence"] for row in rows}

    async def forget_earner(self, earner: str) -> int:
        return await self._s.execute("DELETE FROM retrieval_boosts WHERE earner = %s", (earner,))

    async def forget_boosts_before(self, cutoff: datetime) -> int:
        return await self._s.execute(
            "DELETE FROM retrieval_boosts WHERE boosted_at <= %s", (cutoff,)
        )

    async def boost_each(self, boosts: Sequence[tuple[UUID, float, datetime]]) -> dict[UUID, float]:
        rounds: list[dict[UUID, tuple[float, datetime]]] = []  # round k: each entry's k-th
        for entry_id, amount, now in boosts:
            k = next((k for k, r in enumerate(rounds) if entry_id not in r), len(rounds))
            if k == len(rounds):
                rounds.append({})
            rounds[k][entry_id] = (amount, now)
        final: dict[UUID, float] = {}
        for boosted in rounds:
            rows = await self._s.rows(
                _LOCKED_IN_ID_ORDER
                + " UPDATE entries e SET confidence = LEAST(e.confidence + b.amount, 1.0),"
                " updated_at = b.now FROM unnest(%(ids)s::uuid[], %(amounts)s::float8[],"
                " %(nows)s::timestamptz[]) AS b(id, amount, now), locked"
                " WHERE e.id = b.id AND e.id = locked.id RETURNING e.id, e.confidence",
                {
                    "ids": list(boosted),
                    "amounts": [amount for amount, _ in boosted.values()],
                    "nows": [now for _, now in boosted.values()],
                },
            )
            final.update({row["id"]: row["confidence"] for row in rows})
        return final

    async def decay(
        self, now: datetime, factor_per_hour: float, archive_below: float
    ) -> DecayOutcome:
        row = await self._s.one(
            _DECAY, {"now": now, "factor": factor_per_hour, "below": archive_below}
        )
        return DecayOutcome(decayed=row["decayed"], archived=row["archived"])

    async def scale_confidence(self, factor: float, now: datetime) -> int:
        return await self._s.execute(
            "WITH locked AS (SELECT id FROM entries WHERE status <> 'archived'"
            " ORDER BY id FOR UPDATE)"
            " UPDATE entries SET confidence = confidence * %s WHERE id IN (SELECT id FROM locked)",
            (factor,),
        )

    async def archive_stale(self, cutoff: datetime, now: datetime) -> int:
        return await self._s.execute(
            "WITH locked AS (SELECT id FROM entries WHERE status <> 'archived'"
            " AND COALESCE(updated_at, created_at) < %s ORDER BY id FOR UPDATE)"
            " UPDATE entries SET status = 'archived', updated_at = %s,"
            " source_context = source_context || jsonb_build_object('archive_reason', 'stale')"
            " WHERE id IN (SELECT id FROM locked)",
            (cutoff, now),
        )

    async def candidates(self, limit: int, now: datetime) -> list[Entry]:
        # The chosen rows locked in id order, as they are now (FOR UPDATE waits, then
        # re-checks the filter), stamped in the same statement, in the order they were
        # chosen.
        rows = await self._s.rows(
            sql.SQL(
                "WITH chosen AS (SELECT id FROM entries"
                "  WHERE status = 'candidate' AND embedding IS NOT NULL"
                "  ORDER BY last_checked_at NULLS FIRST, created_at, id LIMIT %s),"
                " picked AS (SELECT {columns}, last_checked_at AS previous FROM entries"
                "  WHERE id IN (SELECT id FROM chosen) AND status = 'candidate'"
                "  AND embedding IS NOT NULL ORDER BY id FOR UPDATE),"
                " stamped AS (UPDATE entries SET last_checked_at = %s"
                "  WHERE id IN (SELECT id FROM picked))"
                " SELECT {columns} FROM picked ORDER BY previous NULLS FIRST, created_at, id"
            ).format(columns=ENTRY_COLUMNS_WITH_EMBEDDING),
            (max(limit, 0), now),
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
                " avg(confidence) AS average, max(updated_at) AS last_active_at,"
                " count(*) FILTER (WHERE status = 'confirmed') AS confirmed"
                " FROM entries WHERE {} GROUP BY source_agent, knowledge_domain"
                " ORDER BY source_agent, knowledge_domain"
            ).format(where.sql()),
            where.params,
        )
        earned = Where()
        earned.add("e.status <> 'archived'")
        earned.add("v.kind = ANY({})", sorted(kind.value for kind in AGREEING_KINDS))
        if viewer is not None:
            earned.visible_to(viewer, "e")
        if domain is not None:
            earned.add("e.knowledge_domain = {}", domain)
        if agent_id is not None:
            earned.add("v.agent_id = {}", agent_id)
        corroborations = {
            (row["agent_id"], row["knowledge_domain"]): row["n"]
            for row in await self._s.rows(
                sql.SQL(
                    "SELECT v.agent_id, e.knowledge_domain, count(*) AS n"
                    " FROM evidence v JOIN entries e ON e.id = v.entry_id WHERE {}"
                    " GROUP BY v.agent_id, e.knowledge_domain"
                ).format(earned.sql()),
                earned.params,
            )
        }
        return [
            AgentDomainStats(
                agent_id=row["source_agent"],
                knowledge_domain=row["knowledge_domain"],
                entry_count=row["n"],
                average_confidence=row["average"],
                last_active_at=as_utc(row["last_active_at"]),
                confirmed_count=row["confirmed"],
                corroboration_count=corroborations.get(
                    (row["source_agent"], row["knowledge_domain"]), 0
                ),
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
            "SELECT id, source_context FROM entries WHERE " + MENTIONS + " ORDER BY id FOR UPDATE",
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


def _vector_search(flt: SearchFilter, embedding: Sequence[float]) -> tuple[Where, sql.Placeholder]:
    """The filter of a vector search (``flt``, entries with a vector) and the query vector's
    placeholder in it."""
    where = Where()
    where.matching(flt)
    where.add("embedding IS NOT NULL")
    return where, where.param(as_vector(embedding))
