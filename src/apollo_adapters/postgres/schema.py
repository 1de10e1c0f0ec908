"""Versioned schema migrations, applied under an advisory lock.

Migrations are the ``NNNN_name.sql`` files of the ``migrations`` package folder plus the
steps that must run in Python (:data:`PYTHON_STEPS`, e.g. re-hashing content with the
domain's own function), applied in version order and
recorded in ``apollo_schema_migrations``, all pending ones in ONE transaction: a migration
that fails leaves the database as it was, without even the bookkeeping table.
``{dimension}`` in a file is the embedding dimension, rendered with :mod:`psycopg.sql`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from importlib import resources
from typing import Any, Final

import psycopg
from attrs import frozen
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from apollo_domain.errors import ConfigurationError

from . import content_identity
from .errors import MissingPgvector, translated

# Any constant shared by every Apollo process; advisory locks are per database.
MIGRATION_LOCK_KEY = 0x41504F4C4C4F  # "APOLLO"
MAX_DIMENSION = 2000  # the largest vector an HNSW index accepts

_FILE_NAME = re.compile(r"^(\d{4})_(\w+)\.sql$")


Step = Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]]


@frozen
class Migration:
    """One version: SQL ``text``, or a Python ``step`` run on the migrating connection."""

    version: int
    name: str
    text: str = ""
    step: Step | None = None

    def render(self, dimension: int) -> sql.Composed:
        return sql.SQL(self.text).format(dimension=sql.Literal(dimension))

    async def apply(self, conn: psycopg.AsyncConnection[Any], dimension: int) -> None:
        if self.step is not None:
            await self.step(conn)
        else:
            await conn.execute(self.render(dimension))


PYTHON_STEPS: tuple[Migration, ...] = (
    Migration(3, "content_identity", step=content_identity.rehash_entries),
    # the hash now folds every default-ignorable code point (soft hyphen, CGJ, ...)
    Migration(15, "default_ignorable_identity", step=content_identity.rehash_entries),
)


def migrations() -> list[Migration]:
    """Every migration shipped with the package, in version order."""
    found = list(PYTHON_STEPS)
    for item in resources.files(__package__).joinpath("migrations").iterdir():
        match = _FILE_NAME.match(item.name)
        if match:
            found.append(Migration(int(match[1]), match[2], item.read_text(encoding="utf-8")))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise ConfigurationError("migrations", f"two migrations share a version: {versions}")
    return sorted(found, key=lambda m: m.version)


async def migrate(
    conninfo_or_pool: str | AsyncConnectionPool[Any],
    *,
    dimension: int,
    model_id: str,
    until: int | None = None,
) -> list[int]:
    """Apply the pending migrations (those up to version ``until`` when given); returns the
    versions applied by this call.

    Safe to run from several processes at once: they serialise on an advisory lock and
    the later ones find nothing left to do. The first run records ``model_id`` and
    ``dimension`` in ``apollo_store_meta``.
    """
    check_dimension(dimension)
    with translated():
        if isinstance(conninfo_or_pool, AsyncConnectionPool):
            async with conninfo_or_pool.connection() as conn:
                autocommit = conn.autocommit
                await conn.set_autocommit(True)
                try:
                    return await _migrate(conn, dimension, model_id, until)
                finally:
                    await conn.set_autocommit(autocommit)
        async with await psycopg.AsyncConnection.connect(conninfo_or_pool, autocommit=True) as conn:
            return await _migrate(conn, dimension, model_id, until)


def check_dimension(dimension: int) -> None:
    if not isinstance(dimension, int) or not 0 < dimension <= MAX_DIMENSION:
        raise ConfigurationError(
            "dimension", f"must be an integer between 1 and {MAX_DIMENSION}, got {dimension!r}"
        )


async def _migrate(
    conn: psycopg.AsyncConnection[Any], dimension: int, model_id: str, until: int | None
) -> list[int]:
    async with conn.transaction():
        # Held until this transaction ends, whether it commits or rolls back.
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        await _require_pgvector(conn)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS apollo_schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL)"
        )
        cur = await conn.execute("SELECT version FROM apollo_schema_migrations")
        done = {row[0] for row in await cur.fetchall()}
        applied = []
        for migration in migrations():
            if migration.version in done or (until is not None and migration.version > until):
                continue
            await migration.apply(conn, dimension)
            await conn.execute(
                "INSERT INTO apollo_schema_migrations (version, name, applied_at)"
                " VALUES (%s, %s, %s)",
                (migration.version, migration.name, datetime.now(UTC)),
            )
            applied.append(migration.version)
        await conn.execute(
            "INSERT INTO apollo_store_meta (id, embedding_model_id, embedding_dimension)"
            " VALUES (1, %s, %s) ON CONFLICT (id) DO NOTHING",
            (model_id, dimension),
        )
        return applied


#: The oldest pgvector Apollo runs on (its ``l2_normalize`` came in 0.7.0).
MIN_PGVECTOR: Final = (0, 7)


async def _require_pgvector(conn: psycopg.AsyncConnection[Any]) -> None:
    """:class:`MissingPgvector` unless the server has (or can create) the extension, at
    :data:`MIN_PGVECTOR` or newer (the one created, else the one it would create)."""
    cur = await conn.execute(
        "SELECT COALESCE(installed_version, default_version) FROM pg_available_extensions"
        " WHERE name = 'vector'"
    )
    row = await cur.fetchone()
    if row is None:
        raise MissingPgvector(
            "this PostgreSQL server has no pgvector: the 'vector' extension, which Apollo "
            "needs for embeddings, is not installed on it (see "
            "https://github.com/pgvector/pgvector#installation)"
        )
    if not pgvector_supported(str(row[0])):
        wanted = ".".join(map(str, MIN_PGVECTOR))
        raise MissingPgvector(
            f"this PostgreSQL server's pgvector is {row[0]}; Apollo needs {wanted} or newer"
            " (upgrade it, then ALTER EXTENSION vector UPDATE)"
        )


def pgvector_supported(version: str) -> bool:
    """Whether a pgvector version ("0.8.0") is :data:`MIN_PGVECTOR` or newer."""
    parts = []
    for part in version.split("."):
        digits = "".join(itertools.takewhile(str.isdigit, part))
        parts.append(int(digits) if digits else 0)
    return tuple(parts) >= MIN_PGVECTOR
