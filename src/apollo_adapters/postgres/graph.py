"""The entity graph: entities, mentions, and edges with their supporting entries."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from uuid import UUID

from psycopg import sql

from apollo_domain.entities import (
    Entity,
    EntityEdge,
    EntityMention,
    co_occurring_pairs,
    normalize_entity_name,
)
from apollo_domain.model import Entry, Viewer
from apollo_domain.ports import GraphSurroundings, SearchFilter

from .entries import LEXICAL_STOPWORDS
from .filters import Where
from .rows import ENTRY_COLUMNS, as_utc, entry_from_row
from .session import Params, Row, Session

_ENTITY = "en.id, en.name, en.key, en.kind, en.created_at"
# A lexeme quoted for the tsquery syntax (backslashes and quotes doubled), as the lexical
# search quotes the query's terms.
_QUOTED_LEXEME = r"'''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || ''''"
#: A live typed edge (the partial indexes ``entity_edges_typed_src`` and ``_dst``).
_TYPED = "ed.valid_to IS NULL AND ed.relation <> 'co_occurs'"
_EDGE = "ed.id, ed.src_id, ed.dst_id, ed.relation, ed.valid_from, ed.valid_to, ed.superseded_by"


def _entity(row: Row) -> Entity:
    return Entity(
        row["id"], row["name"], row["key"], row["kind"], row["created_at"].astimezone(UTC)
    )


def _edge(row: Row) -> EntityEdge:
    return EntityEdge(
        id=row["id"],
        src_id=row["src_id"],
        dst_id=row["dst_id"],
        relation=row["relation"],
        entry_ids=tuple(row["entry_ids"]),
        valid_from=row["valid_from"].astimezone(UTC),
        valid_to=as_utc(row["valid_to"]),
        superseded_by=row["superseded_by"],
    )


def _visible(viewer: Viewer) -> Where:
    """Conditions on ``entries`` for an entry that makes what it mentions or supports
    visible to ``viewer``: a visible entry that is not archived."""
    where = Where()
    where.visible_to(viewer)
    where.add("entries.status <> 'archived'")
    return where


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


# One row per visible supporting entry of a live edge with one end among the ids and the
# other not; counted by that other end.
_NEIGHBOURS_TEXT = (
    "SELECT CASE WHEN ed.src_id = ANY({ids}) THEN ed.dst_id ELSE ed.src_id END AS id,"
    " count(*) AS support FROM entity_edges ed"
    " JOIN entity_edge_entries s ON s.edge_id = ed.id"
    " JOIN entries ON entries.id = s.entry_id"
    " WHERE (ed.src_id = ANY({ids}) OR ed.dst_id = ANY({ids}))"
    " AND NOT (ed.src_id = ANY({ids}) AND ed.dst_id = ANY({ids}))"
    " AND ed.valid_to IS NULL AND {visible}"
    " GROUP BY 1 ORDER BY support DESC, id LIMIT {limit}"
)
_NEIGHBOURS = sql.SQL(_NEIGHBOURS_TEXT)


def _hop_statement(
    entity_ids: Collection[UUID], text: str, flt: SearchFilter, limit: int, bridges: int
) -> tuple[sql.Composable, Params]:
    """The statement of :meth:`PostgresEntityGraph.hop_search` and its parameters."""
    where = Where()
    where.visible_to(flt.viewer, alias="stating")
    where.add("stating.status <> 'archived'")
    supported = where.sql()
    where.clauses = []
    where.matching(flt)
    ids = where.param(list(entity_ids))
    query = sql.SQL(
        "WITH words AS (SELECT DISTINCT " + _QUOTED_LEXEME + " AS quoted"
        " FROM unnest(to_tsvector('simple'::regconfig, {text})) WHERE lexeme <> ALL({stop})),"
        " q AS (SELECT string_agg(quoted, ' | ')::tsquery AS terms FROM words),"
        # The terms no entry about a seed holds: what only a hop can answer.
        " open AS (SELECT string_agg(quoted, ' | ')::tsquery AS terms FROM words"
        " WHERE NOT EXISTS (SELECT 1 FROM entity_mentions m"
        " JOIN entries ON entries.id = m.entry_id WHERE m.entity_id = ANY({ids})"
        " AND entries.lexical @@ words.quoted::tsquery AND {where})),"
        # The far ends of the visible live typed edges, the most supported first.
        " bridge AS (SELECT CASE WHEN ed.src_id = ANY({ids}) THEN ed.dst_id"
        " ELSE ed.src_id END AS id, array_agg(DISTINCT CASE WHEN ed.src_id = ANY({ids})"
        " THEN ed.src_id ELSE ed.dst_id END) AS seeds, count(*) AS support"
        " FROM entity_edges ed JOIN entity_edge_entries s ON s.edge_id = ed.id"
        " JOIN entries stating ON stating.id = s.entry_id"
        " WHERE (ed.src_id = ANY({ids}) OR ed.dst_id = ANY({ids}))"
        " AND NOT (ed.src_id = ANY({ids}) AND ed.dst_id = ANY({ids}))"
        " AND ed.valid_to IS NULL AND ed.relation <> 'co_occurs' AND {supported}"
        " GROUP BY 1 ORDER BY support DESC, id LIMIT {bridges}),"
        " reached AS (SELECT m.entry_id, array_agg(DISTINCT seed) AS seeds"
        " FROM bridge JOIN entity_mentions m ON m.entity_id = bridge.id"
        " CROSS JOIN LATERAL unnest(bridge.seeds) AS seed GROUP BY m.entry_id)"
        " SELECT entries.id, ts_rank(entries.lexical, q.terms) AS score, reached.seeds"
        " FROM reached JOIN entries ON entries.id = reached.entry_id CROSS JOIN q"
        " CROSS JOIN open WHERE open.terms IS NOT NULL AND entries.lexical @@ open.terms"
        " AND {where} ORDER BY score DESC, entries.id LIMIT {limit}"
    ).format(
        text=where.param(text),
        stop=where.param(LEXICAL_STOPWORDS),
        ids=ids,
        supported=supported,
        bridges=where.param(bridges),
        where=where.sql(),
        limit=where.param(limit),
    )
    return query, where.params


def _hops(rows: list[Row]) -> list[tuple[UUID, float, frozenset[UUID]]]:
    return [(row["id"], float(row["score"]), frozenset(row["seeds"])) for row in rows]


class PostgresEntityGraph:
    def __init__(self, session: Session) -> None:
        self._s = session
        #: The entities :meth:`find` last found that had no live typed edge: a hop search
        #: from them alone (:meth:`surroundings`) could reach nothing, and is not sent.
        self._untyped: set[UUID] = set()

    # ------------------------------------------------------------------ writes

    async def resolve(self, mentions: Sequence[EntityMention], now: datetime) -> list[Entity]:
        first: dict[str, EntityMention] = {}
        for mention in mentions:
            key = normalize_entity_name(mention.name)
            if key:
                first.setdefault(key, mention)
        if not first:
            return []
        keys = list(first)
        # Sorted inserts take the key locks in one order, so concurrent resolvers cannot
        # deadlock; a key another unit of work inserted first is left to it and re-read.
        await self._s.execute(
            "INSERT INTO entities (id, name, key, kind, created_at)"
            " SELECT id, name, key, kind, %s FROM unnest(%s::uuid[], %s::text[], %s::text[],"
            " %s::text[]) AS t(id, name, key, kind) ORDER BY key"
            " ON CONFLICT (key) DO NOTHING",
            (
                now,
                [uuid.uuid4() for _ in keys],
                [first[k].name.strip() for k in keys],
                keys,
                [first[k].kind for k in keys],
            ),
        )
        rows = await self._s.rows(
            "SELECT " + _ENTITY + " FROM entities en WHERE en.key = ANY(%s)", (keys,)
        )
        found = {row["key"]: _entity(row) for row in rows}
        return [found[k] for k in keys if k in found]

    async def index_many(
        self, entries: Sequence[tuple[UUID, Sequence[UUID], Sequence[UUID], datetime]]
    ) -> None:
        tagged: list[tuple[UUID, UUID, int]] = []
        supports: dict[tuple[UUID, UUID], list[UUID]] = {}
        since: dict[tuple[UUID, UUID], datetime] = {}  # the first supporting entry's time
        for entry_id, entity_ids, beside, now in entries:
            for position, entity_id in enumerate(dict.fromkeys(entity_ids), start=1):
                tagged.append((entry_id, entity_id, position))
            for pair in co_occurring_pairs(entity_ids, beside):
                supports.setdefault(pair, []).append(entry_id)
                since.setdefault(pair, now)
        if tagged:
            await self._s.execute(
                "INSERT INTO entity_mentions (entry_id, entity_id, position, entry_created_at)"
                " SELECT t.entry_id, t.entity_id, t.position, e.created_at"
                " FROM unnest(%s::uuid[], %s::uuid[], %s::int[]) AS t(entry_id, entity_id,"
                " position) JOIN entries e ON e.id = t.entry_id ON CONFLICT DO NOTHING",
                (
                    [t[0] for t in tagged],
                    [t[1] for t in tagged],
                    [t[2] for t in tagged],
                ),
            )
        if not supports:
            return
        pairs = sorted(supports)  # the edges' locks taken in one order
        await self._s.execute(
            "INSERT INTO entity_edges (id, src_id, dst_id, relation, valid_from)"
            " SELECT id, s, d, 'co_occurs', at"
            " FROM unnest(%s::uuid[], %s::uuid[], %s::uuid[], %s::timestamptz[])"
            " AS t(id, s, d, at) ORDER BY s, d"
            " ON CONFLICT (src_id, dst_id, relation) WHERE valid_to IS NULL DO NOTHING",
            (
                [uuid.uuid4() for _ in pairs],
                [p[0] for p in pairs],
                [p[1] for p in pairs],
                [since[p] for p in pairs],
            ),
        )
        links = [(pair, entry_id) for pair in pairs for entry_id in supports[pair]]
        await self._s.execute(
            "INSERT INTO entity_edge_entries (edge_id, entry_id)"
            " SELECT ed.id, t.entry_id FROM entity_edges ed"
            " JOIN unnest(%s::uuid[], %s::uuid[], %s::uuid[]) AS t(s, d, entry_id)"
            " ON ed.src_id = t.s AND ed.dst_id = t.d"
            " WHERE ed.relation = 'co_occurs' AND ed.valid_to IS NULL"
            " ORDER BY ed.id, t.entry_id ON CONFLICT DO NOTHING",
            (
                [link[0][0] for link in links],
                [link[0][1] for link in links],
                [link[1] for link in links],
            ),
        )

    async def relate(
        self, src_id: UUID, relation: str, dst_id: UUID, entry_id: UUID, now: datetime
    ) -> EntityEdge:
        # Writers of one (src, dst) pair take turns, so two new relations cannot both stay live.
        await self._s.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            (f"apollo-entity-edge:{src_id}:{dst_id}",),
        )
        edge_id = await self._s.value(
            "SELECT id FROM entity_edges WHERE src_id = %s AND dst_id = %s AND relation = %s"
            " AND valid_to IS NULL",
            (src_id, dst_id, relation),
        )
        if edge_id is None:
            edge_id = uuid.uuid4()
            await self._s.execute(
                "INSERT INTO entity_edges (id, src_id, dst_id, relation, valid_from)"
                " VALUES (%s, %s, %s, %s, %s)",
                (edge_id, src_id, dst_id, relation, now),
            )
            await self._s.execute(
                "UPDATE entity_edges SET valid_to = %s, superseded_by = %s"
                " WHERE src_id = %s AND dst_id = %s AND valid_to IS NULL"
                " AND relation <> 'co_occurs' AND relation <> %s",
                (now, edge_id, src_id, dst_id, relation),
            )
        await self._s.execute(
            "INSERT INTO entity_edge_entries (edge_id, entry_id) VALUES (%s, %s)"
            " ON CONFLICT DO NOTHING",
            (edge_id, entry_id),
        )
        row = await self._s.one(
            "SELECT " + _EDGE + ", ARRAY(SELECT s.entry_id FROM entity_edge_entries s"
            " WHERE s.edge_id = ed.id ORDER BY s.position) AS entry_ids"
            " FROM entity_edges ed WHERE ed.id = %s",
            (edge_id,),
        )
        return _edge(row)

    async def prune(self) -> int:
        edges = await self._s.execute(
            "DELETE FROM entity_edges ed WHERE NOT EXISTS"
            " (SELECT 1 FROM entity_edge_entries s WHERE s.edge_id = ed.id)"
        )
        entities = await self._s.execute(
            "DELETE FROM entities en"
            " WHERE NOT EXISTS (SELECT 1 FROM entity_mentions m WHERE m.entity_id = en.id)"
            " AND NOT EXISTS (SELECT 1 FROM entity_edges ed"
            " WHERE ed.src_id = en.id OR ed.dst_id = en.id)"
        )
        return edges + entities

    # ------------------------------------------------------------------ reads

    async def entities_of(self, entry_id: UUID) -> list[Entity]:
        rows = await self._s.rows(
            "SELECT " + _ENTITY + " FROM entity_mentions m JOIN entities en"
            " ON en.id = m.entity_id WHERE m.entry_id = %s ORDER BY m.position",
            (entry_id,),
        )
        return [_entity(row) for row in rows]

    async def find(self, keys: Collection[str], viewer: Viewer) -> list[Entity]:
        if not keys:
            return []
        where = _visible(viewer)
        query = sql.SQL(
            "SELECT " + _ENTITY + ", EXISTS (SELECT 1 FROM entity_edges ed"
            " WHERE ed.src_id = en.id AND " + _TYPED + ") OR EXISTS (SELECT 1 FROM entity_edges"
            " ed WHERE ed.dst_id = en.id AND " + _TYPED + ") AS typed"
            " FROM entities en WHERE en.key = ANY({keys}) AND EXISTS"
            " (SELECT 1 FROM entity_mentions m JOIN entries ON entries.id = m.entry_id"
            ' WHERE m.entity_id = en.id AND {visible}) ORDER BY en.key COLLATE "C"'
        ).format(keys=where.param(sorted(set(keys))), visible=where.sql())
        rows = await self._s.rows(query, where.params)
        self._untyped = {row["id"] for row in rows if not row["typed"]}
        return [_entity(row) for row in rows]

    async def counted(self, keys: Collection[str], viewer: Viewer) -> list[tuple[Entity, int]]:
        if not keys:
            return []
        where = _visible(viewer)
        key_set = where.param(sorted(set(keys)))
        return await self._counted(where, sql.SQL("en.key = ANY({})").format(key_set), None)

    async def with_prefix(
        self, prefix: str, viewer: Viewer, limit: int
    ) -> list[tuple[Entity, int]]:
        if limit <= 0:
            return []
        where = _visible(viewer)
        pattern = where.param(_like_prefix(normalize_entity_name(prefix)))
        match = sql.SQL('en.key COLLATE "C" LIKE {}').format(pattern)
        return await self._counted(where, match, limit)

    async def _counted(
        self, where: Where, match: sql.Composable, limit: int | None
    ) -> list[tuple[Entity, int]]:
        """The entities ``match`` selects, in key order, each with its count of visible
        mentions; those with none are skipped, and the walk stops after ``limit``."""
        query = sql.SQL(
            "SELECT " + _ENTITY + ", c.mentions FROM entities en CROSS JOIN LATERAL"
            " (SELECT count(*) AS mentions FROM entity_mentions m"
            " JOIN entries ON entries.id = m.entry_id"
            " WHERE m.entity_id = en.id AND {visible}) AS c"
            ' WHERE {match} AND c.mentions > 0 ORDER BY en.key COLLATE "C" {limit}'
        ).format(
            visible=where.sql(),
            match=match,
            limit=sql.SQL("") if limit is None else sql.SQL("LIMIT {}").format(where.param(limit)),
        )
        rows = await self._s.rows(query, where.params)
        return [(_entity(row), row["mentions"]) for row in rows]

    async def get_many(self, entity_ids: Collection[UUID]) -> dict[UUID, Entity]:
        if not entity_ids:
            return {}
        rows = await self._s.rows(
            "SELECT " + _ENTITY + " FROM entities en WHERE en.id = ANY(%s)", (list(entity_ids),)
        )
        return {row["id"]: _entity(row) for row in rows}

    async def edges(
        self,
        entity_ids: Collection[UUID],
        viewer: Viewer,
        *,
        as_of: datetime | None = None,
        history: bool = False,
        typed: bool | None = None,
        limit: int | None = None,
    ) -> list[EntityEdge]:
        if not entity_ids or (limit is not None and limit <= 0):
            return []
        where = _visible(viewer)
        ids = where.param(list(entity_ids))
        conditions: list[sql.Composable] = []
        if not history and as_of is None:
            conditions.append(sql.SQL("ed.valid_to IS NULL"))
        elif not history:
            conditions.append(
                sql.SQL(
                    "ed.valid_from <= {at} AND (ed.valid_to IS NULL OR {at} < ed.valid_to)"
                ).format(at=where.param(as_of))
            )
        if typed is not None:
            conditions.append(
                sql.SQL("ed.relation <> 'co_occurs'" if typed else "ed.relation = 'co_occurs'")
            )
        when = sql.SQL(" AND ").join(conditions) if conditions else sql.SQL("TRUE")
        query = sql.SQL(
            # The edges are picked (visible support exists, time, kind, order, limit)
            # before their supporting entries are listed, so a hub entity's thousands of
            # edges cost one index probe each, and only the kept ones are expanded.
            "SELECT ed.id, ed.src_id, ed.dst_id, ed.relation, ed.valid_from, ed.valid_to,"
            " CASE WHEN EXISTS (SELECT 1 FROM entity_edge_entries s"
            " JOIN entries ON entries.id = s.entry_id"
            " WHERE s.edge_id = ed.superseded_by AND {visible})"
            " THEN ed.superseded_by END AS superseded_by,"
            " ARRAY(SELECT s.entry_id FROM entity_edge_entries s"
            " JOIN entries ON entries.id = s.entry_id"
            " WHERE s.edge_id = ed.id AND {visible} ORDER BY s.position) AS entry_ids"
            " FROM (SELECT * FROM entity_edges ed"
            " WHERE (ed.src_id = ANY({ids}) OR ed.dst_id = ANY({ids})) AND {when}"
            " AND EXISTS (SELECT 1 FROM entity_edge_entries s"
            " JOIN entries ON entries.id = s.entry_id WHERE s.edge_id = ed.id AND {visible})"
            " ORDER BY ed.valid_from, ed.id {limit}) AS ed"
            " ORDER BY ed.valid_from, ed.id"
        ).format(
            visible=where.sql(),
            ids=ids,
            when=when,
            limit=sql.SQL("") if limit is None else sql.SQL("LIMIT {}").format(where.param(limit)),
        )
        return [_edge(row) for row in await self._s.rows(query, where.params)]

    async def neighbours(
        self, entity_ids: Collection[UUID], viewer: Viewer, limit: int
    ) -> list[tuple[UUID, int]]:
        if not entity_ids or limit <= 0:
            return []
        where = _visible(viewer)
        ids = where.param(list(entity_ids))
        query = _NEIGHBOURS.format(ids=ids, visible=where.sql(), limit=where.param(limit))
        return [(row["id"], row["support"]) for row in await self._s.rows(query, where.params)]

    async def hop_search(
        self,
        entity_ids: Collection[UUID],
        text: str,
        flt: SearchFilter,
        limit: int,
        *,
        bridges: int,
    ) -> list[tuple[UUID, float, frozenset[UUID]]]:
        if not entity_ids or limit <= 0 or bridges <= 0:
            return []
        return _hops(await self._s.rows(*_hop_statement(entity_ids, text, flt, limit, bridges)))

    async def surroundings(
        self,
        entity_ids: Collection[UUID],
        flt: SearchFilter,
        *,
        neighbours: int,
        scan: int,
        hop_text: str | None = None,
        hop_limit: int = 0,
        bridges: int = 0,
    ) -> GraphSurroundings:
        if not entity_ids:
            return GraphSurroundings([], [], [])
        where = _visible(flt.viewer)
        visible = where.sql()
        where.clauses = []
        where.matching(flt)
        ids = where.param(list(entity_ids))
        around = sql.SQL(
            # The neighbours, then the newest entries naming a seed or one of them (as
            # :meth:`neighbours` and :meth:`mentioning` read them), in one statement.
            "WITH nb AS (" + _NEIGHBOURS_TEXT + "),"
            " tagged AS (SELECT e.id, m.matched, m.created_at, m.entry_id FROM"
            " (SELECT entry_id, max(entry_created_at) AS created_at,"
            " array_agg(entity_id) AS matched FROM entity_mentions"
            " WHERE entity_id = ANY({ids}::uuid[] || ARRAY(SELECT id FROM nb))"
            " GROUP BY entry_id ORDER BY created_at DESC, entry_id DESC) AS m"
            " CROSS JOIN LATERAL (SELECT id FROM entries"
            " WHERE entries.id = m.entry_id AND {where} LIMIT 1) AS e"
            " ORDER BY m.created_at DESC, m.entry_id DESC LIMIT {scan})"
            " SELECT 0 AS part, id, support, NULL::uuid[] AS matched,"
            " row_number() OVER (ORDER BY support DESC, id) AS place FROM nb"
            " UNION ALL SELECT 1, id, NULL, matched,"
            " row_number() OVER (ORDER BY created_at DESC, entry_id DESC) FROM tagged"
            " ORDER BY part, place"
        ).format(
            ids=ids,
            visible=visible,
            limit=where.param(max(neighbours, 0)),
            where=where.sql(),
            scan=where.param(max(scan, 0)),
        )
        statements: list[tuple[sql.Composable, Params]] = [(around, where.params)]
        # A seed's typed edge made after find() is crossed from the next query on.
        typed = not self._untyped.issuperset(entity_ids)
        if hop_text is not None and hop_limit > 0 and bridges > 0 and typed:
            statements.append(_hop_statement(entity_ids, hop_text, flt, hop_limit, bridges))
        found = await self._s.rows_together(statements)
        rows = found[0]
        return GraphSurroundings(
            [(row["id"], row["support"]) for row in rows if row["part"] == 0],
            [(row["id"], frozenset(row["matched"])) for row in rows if row["part"] == 1],
            _hops(found[1]) if len(found) > 1 else [],
        )

    async def entries_mentioning(
        self, entity_ids: Collection[UUID], flt: SearchFilter, limit: int
    ) -> list[tuple[Entry, frozenset[UUID]]]:
        rows = await self._mentioning(entity_ids, flt, limit, ENTRY_COLUMNS)
        return [(entry_from_row(row), frozenset(row["matched"])) for row in rows]

    async def mentioning(
        self, entity_ids: Collection[UUID], flt: SearchFilter, limit: int
    ) -> list[tuple[UUID, frozenset[UUID]]]:
        rows = await self._mentioning(entity_ids, flt, limit, sql.SQL("id"))
        return [(row["id"], frozenset(row["matched"])) for row in rows]

    async def _mentioning(
        self, entity_ids: Collection[UUID], flt: SearchFilter, limit: int, columns: sql.SQL
    ) -> list[Row]:
        if not entity_ids or limit <= 0:
            return []
        where = Where()
        where.matching(flt)
        query = sql.SQL(
            # The mentions, with their entries' creation time, come from their index alone,
            # newest first; the entries are then read through their primary key in that
            # order (LIMIT 1 keeps the planner from turning that into a scan of every
            # entry) until ``limit`` of them have passed the filter.
            "SELECT e.*, m.matched FROM (SELECT entry_id, max(entry_created_at) AS created_at,"
            " array_agg(entity_id) AS matched FROM entity_mentions"
            " WHERE entity_id = ANY({ids}) GROUP BY entry_id"
            " ORDER BY created_at DESC, entry_id DESC) AS m"
            " CROSS JOIN LATERAL (SELECT {columns} FROM entries"
            " WHERE entries.id = m.entry_id AND {where} LIMIT 1) AS e"
            " ORDER BY m.created_at DESC, m.entry_id DESC LIMIT {limit}"
        ).format(
            columns=columns,
            ids=where.param(list(entity_ids)),
            where=where.sql(),
            limit=where.param(limit),
        )
        return await self._s.rows(query, where.params)
