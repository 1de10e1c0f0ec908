"""Migration 0012: idempotency keys recorded before keys were scoped by their sender.

Such a key names no sender and cannot be given one, so the migration sets it aside: no
key recorded from now on can match it, not even one a message id was crafted to forge.
"""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg

from apollo_adapters.postgres import migrate
from apollo_domain.model import Principal
from apollo_domain.services import scoped_key
from tests.postgres_support import PostgresTestServer

NOW = datetime(2026, 1, 1, tzinfo=UTC)


async def test_keys_recorded_before_scoping_are_set_aside(postgres_server: PostgresTestServer):
    database = await postgres_server.create_database()
    conninfo = postgres_server.conninfo(database)
    await migrate(conninfo, dimension=8, model_id="m", until=11)
    forged = f"ingest:{scoped_key(Principal('victim'), 'm-2')}"  # a crafted message id
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        for key in ("ingest:m-1", forged):
            await conn.execute(
                "INSERT INTO processed_keys (key, created_at) VALUES (%s, %s)", (key, NOW)
            )

    assert 12 in await migrate(conninfo, dimension=8, model_id="m")

    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        cur = await conn.execute("SELECT key FROM processed_keys ORDER BY key")
        keys = [row[0] for row in await cur.fetchall()]
    assert sorted(["legacy:ingest:m-1", f"legacy:{forged}"]) == keys
