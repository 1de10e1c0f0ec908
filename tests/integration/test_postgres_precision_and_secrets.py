"""PostgreSQL specifics behind two contract promises: every confidence-like column is double
precision (a value round-trips exactly), and a failed outbox item never stores a secret."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from apollo_adapters.clock import ManualClock
from apollo_adapters.llm import OpenAIChatModel
from apollo_adapters.postgres import PostgresStore
from apollo_app import Apollo
from tests.contract.stores import EPOCH
from tests.postgres_support import PostgresTestServer, fresh_store
from tests.support import KeyedEmbedder, at_cosine

pytestmark = pytest.mark.postgres

SECRET = "hunter2pass"
API_KEY = "sk-outbox-secret"


@pytest.fixture
async def store(postgres_server: PostgresTestServer) -> AsyncIterator[PostgresStore]:
    embedder = KeyedEmbedder(16)
    opened = await fresh_store(postgres_server, dimension=16, model_id=embedder.model_id)
    yield opened
    await opened.close()


async def rows(conninfo: str, query: str) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        cursor = await conn.execute(query)
        return await cursor.fetchall()


async def test_no_column_is_single_precision(store: PostgresStore) -> None:
    """Confidences, weights, similarities, proficiencies and credibility counts are all
    ``double precision``: nothing is stored as a 4-byte ``real``."""
    found = await rows(
        store.conninfo,  # type: ignore[attr-defined]
        "SELECT table_name || '.' || column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = current_schema()"
        " AND data_type IN ('real', 'double precision') ORDER BY 1",
    )
    assert [] == [name for name, kind in found if kind == "real"]
    doubles = {name for name, _ in found}
    assert {"entries.confidence", "relations.weight", "expertise.proficiency"} <= doubles


def _refused_port() -> int:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    sock.close()  # nothing listens there: every connection is refused
    return port


async def test_a_failed_contradiction_scan_stores_no_credentials(store: PostgresStore) -> None:
    """The judge's URL carries ``user:password@`` and an API key; the outbox row's
    last_error names the endpoint with both masked."""
    embedder = KeyedEmbedder(16)
    base = embedder.basis(0)
    embedder.set("the link is up", base)
    embedder.set("the link is down", at_cosine(base, 0.8, 1))
    judge = OpenAIChatModel(
        f"http://bob:{SECRET}@127.0.0.1:{_refused_port()}/v1", "judge", api_key=API_KEY
    )
    apollo = Apollo.with_store(store, embedder=embedder, clock=ManualClock(EPOCH), judge=judge)
    await apollo.client("claude-a").store_knowledge(content="the link is up")
    await apollo.client("openai-b").store_knowledge(content="the link is down")
    try:
        report = await apollo.process_outbox()
    finally:
        await judge.aclose()
    assert report.failed >= 1
    errors = [
        row[0]
        for row in await rows(
            store.conninfo,  # type: ignore[attr-defined]
            "SELECT last_error FROM outbox WHERE last_error IS NOT NULL",
        )
    ]
    assert report.failed == len(errors)
    for error in errors:
        assert SECRET not in error and API_KEY not in error
        assert "http://127.0.0.1:" in error and "TransportError" in error
