"""Migrations 3 and 15, in Python: content identity folds Unicode.

The content hash is computed by :func:`apollo_domain.normalize.content_hash`, which drops
default-ignorable code points (migration 3: the zero-width ones; migration 15: every one,
soft hyphens and variation selectors included) and applies NFKC; SQL cannot reproduce it
exactly (``lower`` depends on the database's locale), so every entry is re-hashed here.

Two active entries of one dedup partition that now hash alike are merged: the older
(created_at, then id) stays; the later one is archived with ``source_context``
``archive_reason = "merged_duplicate"`` and ``merged_into = <keeper id>``, and its
evidence is copied to the keeper as duplicate evidence (sources already there are
skipped), so a merge confirms nothing by itself. The unique dedup index is dropped for the
update and rebuilt afterwards, all in the migration's transaction.
"""

from __future__ import annotations

from typing import Any

import psycopg

from apollo_domain.normalize import content_hash

BATCH = 5_000

_DEDUP_INDEX = (
    "CREATE UNIQUE INDEX entries_dedup ON entries"
    " (content_hash, access_scope,"
    " (CASE WHEN access_scope = 'global' THEN '' ELSE COALESCE(owner_id, '') END))"
    " WHERE status <> 'archived'"
)


async def rehash_entries(conn: psycopg.AsyncConnection[Any]) -> None:
    """Re-hash every entry; merge the active entries that collide (module docstring)."""
    changed: list[tuple[Any, str]] = []
    async with conn.cursor(name="apollo_rehash") as reading:
        await reading.execute("SELECT id, content, content_hash FROM entries")
        while rows := await reading.fetchmany(BATCH):
            changed.extend(
                (entry_id, new)
                for entry_id, content, old in rows
                if (new := content_hash(content)) != old
            )
    if not changed:
        return
    await conn.execute(
        "CREATE TEMP TABLE apollo_rehash (id uuid PRIMARY KEY, content_hash text NOT NULL)"
        " ON COMMIT DROP"
    )
    copying = "COPY apollo_rehash (id, content_hash) FROM STDIN"
    async with conn.cursor() as cursor, cursor.copy(copying) as copy:
        for row in changed:
            await copy.write_row(row)
    await conn.execute("DROP INDEX entries_dedup")
    await conn.execute(
        "UPDATE entries e SET content_hash = r.content_hash FROM apollo_rehash r WHERE e.id = r.id"
    )
    await conn.execute(
        "CREATE TEMP TABLE apollo_merged ON COMMIT DROP AS"
        " SELECT id, keeper FROM ("
        "  SELECT id, first_value(id) OVER w AS keeper, row_number() OVER w AS n"
        "  FROM entries"
        "  WHERE status <> 'archived'"
        "  AND content_hash IN (SELECT content_hash FROM apollo_rehash)"
        "  WINDOW w AS (PARTITION BY content_hash, access_scope,"
        "   CASE WHEN access_scope = 'global' THEN '' ELSE COALESCE(owner_id, '') END"
        "   ORDER BY created_at, id)"
        " ) ranked WHERE n > 1"
    )
    await conn.execute(
        "INSERT INTO evidence (entry_id, agent_id, provider, channel, submitted_by,"
        " submitted_from, similarity, kind, created_at, credibility)"
        " SELECT m.keeper, e.agent_id, e.provider, e.channel, e.submitted_by,"
        " e.submitted_from, 1.0, 'deduplication', e.created_at, e.credibility"
        " FROM evidence e JOIN apollo_merged m ON e.entry_id = m.id ORDER BY e.id"
        " ON CONFLICT (entry_id, agent_id, provider, (COALESCE(channel, ''))) DO NOTHING"
    )
    await conn.execute(
        "UPDATE entries e SET status = 'archived', updated_at = now(),"
        " source_context = e.source_context || jsonb_build_object("
        "  'archive_reason', 'merged_duplicate', 'merged_into', m.keeper::text)"
        " FROM apollo_merged m WHERE e.id = m.id"
    )
    await conn.execute(_DEDUP_INDEX)
