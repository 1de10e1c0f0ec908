"""Moving a PostgreSQL store to another embedder in place.

The new vectors go into a column of their own (``embedding_next``), batch by batch, each
batch its own transaction: a run killed at any point resumes where its last batch
committed. Their HNSW index is built (concurrently) before the switch; the switch is one
transaction that embeds what was ingested meanwhile, drops the old column and its index,
puts the new ones in their place and records the new model. Until it commits, queries
answer from the old vectors and ingests go on (each blocked only for the switch itself).

The run holds a session advisory lock: a second ``apollo reembed`` against the same
database waits for it (up to :data:`LOCK_WAIT_SECONDS`, then is refused), and a killed
run's lock goes with its server session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from uuid import UUID

import psycopg
from pgvector.psycopg import register_vector_async

from apollo_domain.errors import Conflict

from .errors import translated
from .schema import check_dimension

#: The advisory lock of a running move (the migrations' lock key + 1).
REEMBED_LOCK_KEY = 0x41504F4C4C4F + 1
#: How long a run waits for another (or a killed one's session) to let the lock go.
LOCK_WAIT_SECONDS = 10
NEXT_COLUMN = "embedding_next"
NEXT_INDEX = "entries_embedding_next_hnsw"

Embed = Callable[[Sequence[str]], Awaitable[list[Sequence[float]]]]


class PostgresReembedding:
    """One move of the store at ``conninfo`` (the primary itself, never a transaction
    pooler: the move holds a session lock and runs DDL) to ``model_id``/``dimension``."""

    def __init__(self, conninfo: str, model_id: str, dimension: int) -> None:
        check_dimension(dimension)
        self._conninfo = conninfo
        self.model_id = model_id
        self.dimension = dimension
        self._conn: psycopg.AsyncConnection[Any] | None = None
        #: the model the store held when the move started
        self.stored_model = ""
        self.resumed = False

    async def __aenter__(self) -> PostgresReembedding:
        with translated():
            conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
            try:
                await register_vector_async(conn)
                # A run killed while its server session waits (on a lock, a long statement)
                # leaves that session, and this lock, for a second at most.
                await conn.execute("SET client_connection_check_interval = '1s'")
                await conn.execute(f"SET lock_timeout = '{LOCK_WAIT_SECONDS}s'")
                try:
                    await conn.execute("SELECT pg_advisory_lock(%s)", (REEMBED_LOCK_KEY,))
                except psycopg.errors.LockNotAvailable:
                    raise Conflict("another reembed of this store is running") from None
                await conn.execute("SET lock_timeout = 0")
            except BaseException:
                await conn.close()
                raise
        self._conn = conn
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._conn is not None:
            await self._conn.close()  # the advisory lock goes with the session
            self._conn = None

    @property
    def conn(self) -> psycopg.AsyncConnection[Any]:
        assert self._conn is not None, "use PostgresReembedding as an async context manager"
        return self._conn

    async def start(self) -> tuple[int, int]:
        """Prepare (or resume) the move; (entries with a new vector, entries to move).
        A move toward another target left by an earlier run is discarded first; a store
        already on the target model has nothing to move."""
        with translated():
            async with self.conn.transaction():
                cur = await self.conn.execute(
                    "SELECT embedding_model_id, embedding_dimension FROM apollo_store_meta"
                    " FOR UPDATE"
                )
                meta = await cur.fetchone()
                if meta is None:
                    raise Conflict("the database has no Apollo store to move")
                self.stored_model = str(meta[0])
                cur = await self.conn.execute(
                    "SELECT model_id, dimension FROM apollo_reembed WHERE id = 1"
                )
                state = await cur.fetchone()
                if state is not None and tuple(state) != (self.model_id, self.dimension):
                    await self._discard()
                    state = None
                if (self.stored_model, int(meta[1])) == (self.model_id, self.dimension):
                    if state is not None:
                        await self._discard()
                    return 0, 0
                self.resumed = state is not None
                if state is None:
                    await self.conn.execute(
                        f"ALTER TABLE entries ADD COLUMN {NEXT_COLUMN} vector(%s)"
                        % int(self.dimension)
                    )
                    await self.conn.execute(
                        "INSERT INTO apollo_reembed (id, model_id, dimension, started_at)"
                        " VALUES (1, %s, %s, now())",
                        (self.model_id, self.dimension),
                    )
            cur = await self.conn.execute(
                f"SELECT count({NEXT_COLUMN}), count(*) FROM entries WHERE embedding IS NOT NULL"
            )
            done, total = await cur.fetchone() or (0, 0)
        return int(done), int(total)

    async def _discard(self) -> None:
        await self.conn.execute(f"DROP INDEX IF EXISTS {NEXT_INDEX}")
        await self.conn.execute(f"ALTER TABLE entries DROP COLUMN IF EXISTS {NEXT_COLUMN}")
        await self.conn.execute("DELETE FROM apollo_reembed")

    async def pending(self, after: UUID | None, limit: int) -> list[tuple[UUID, str]]:
        """Up to ``limit`` entries past ``after`` (in id order) still without a new vector."""
        with translated():
            cur = await self.conn.execute(
                f"SELECT id, content FROM entries WHERE {NEXT_COLUMN} IS NULL"
                " AND embedding IS NOT NULL AND id > %s ORDER BY id LIMIT %s",
                (after or UUID(int=0), limit),
            )
            return [(row[0], row[1]) for row in await cur.fetchall()]

    async def put(self, vectors: Sequence[tuple[UUID, Sequence[float]]]) -> None:
        """Store one batch of new vectors (one transaction)."""
        with translated():
            await self._put(vectors)

    async def _put(self, vectors: Sequence[tuple[UUID, Sequence[float]]]) -> None:
        if not vectors:
            return
        await self.conn.execute(
            f"UPDATE entries SET {NEXT_COLUMN} = v.e::vector"
            " FROM unnest(%s::uuid[], %s::text[]) AS v(id, e) WHERE entries.id = v.id",
            ([i for i, _ in vectors], [_literal(e) for _, e in vectors]),
        )

    async def index(self) -> None:
        """Build the new vectors' HNSW index (concurrently: writes go on); an index a
        killed run left half built is dropped and built again."""
        with translated():
            cur = await self.conn.execute(
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                " WHERE c.relname = %s",
                (NEXT_INDEX,),
            )
            row = await cur.fetchone()
            if row is not None and not row[0]:
                await self.conn.execute(f"DROP INDEX CONCURRENTLY {NEXT_INDEX}")
            await self.conn.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {NEXT_INDEX} ON entries"
                f" USING hnsw ({NEXT_COLUMN} vector_cosine_ops) WHERE status <> 'archived'"
            )

    async def switch(self, embed: Embed) -> int:
        """One transaction: writes wait, the entries stored since their batch ran get
        their new vector, the new column and index take the old ones' names, the store
        records the new model. Returns how many entries were embedded here."""
        with translated():
            async with self.conn.transaction():
                await self.conn.execute("LOCK TABLE entries IN SHARE ROW EXCLUSIVE MODE")
                cur = await self.conn.execute(
                    f"SELECT id, content FROM entries WHERE {NEXT_COLUMN} IS NULL"
                    " AND embedding IS NOT NULL ORDER BY id"
                )
                late = [(row[0], row[1]) for row in await cur.fetchall()]
                if late:
                    vectors = await embed([content for _, content in late])
                    await self._put([(i, v) for (i, _), v in zip(late, vectors, strict=True)])
                await self.conn.execute("DROP INDEX entries_embedding_hnsw")
                await self.conn.execute("ALTER TABLE entries DROP COLUMN embedding")
                await self.conn.execute(
                    f"ALTER TABLE entries RENAME COLUMN {NEXT_COLUMN} TO embedding"
                )
                await self.conn.execute(
                    f"ALTER INDEX {NEXT_INDEX} RENAME TO entries_embedding_hnsw"
                )
                await self.conn.execute(
                    "UPDATE apollo_store_meta SET embedding_model_id = %s,"
                    " embedding_dimension = %s",
                    (self.model_id, self.dimension),
                )
                await self.conn.execute("DELETE FROM apollo_reembed")
        return len(late)


def _literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


__all__ = ["NEXT_COLUMN", "NEXT_INDEX", "REEMBED_LOCK_KEY", "PostgresReembedding"]
