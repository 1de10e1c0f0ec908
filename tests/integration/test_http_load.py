"""The HTTP API under load on PostgreSQL: 200 concurrent mixed callers, no server error.

A real server (``serve_http``, as ``apollo serve`` runs it, with bearer tokens and
admission sized from the pool) on the embedded PostgreSQL. Three in four requests are
queries by a reader with ``limit: 100``, one in four ingests by a writer: every query's
boost locks up to 100 entries while ingests lock the entries they corroborate, and 200
requests share ten pooled connections. None may fail with a 5xx (a deadlock, a pool
timeout taken for an outage, a closed pool), and every ingest the server acknowledged
must be readable afterwards."""

from __future__ import annotations

import httpx
import pytest
from benchmarks._common import TextGenerator
from benchmarks.load_bench import WRITER, mixed_load, requests_of, seed, serving

from tests.postgres_support import PostgresTestServer

pytestmark = pytest.mark.postgres

CONCURRENCY = 200
REQUESTS = 400


async def test_two_hundred_concurrent_readers_and_writers_get_no_server_error(
    postgres_server: PostgresTestServer,
) -> None:
    database = await postgres_server.create_database(dimension=384)
    texts = TextGenerator(seed=11)
    async with serving(postgres_server.conninfo(database), pool=10) as (apollo, url):
        await seed(apollo, texts, 300)
        run = await mixed_load(url, requests_of(texts, REQUESTS, "load"), CONCURRENCY)
        async with httpx.AsyncClient(base_url=url, headers=WRITER) as http:
            read = [
                (await http.get(f"/api/apollo/entries/{entry_id}")).status_code
                for entry_id in run.created
            ]

    assert [] == run.failures[:3], f"{run.errors} of {REQUESTS} failed"
    assert REQUESTS == sum(run.statuses.values())
    assert set(run.statuses) <= {200, 201, 422}, run.statuses  # 422: an ingest rejected
    assert len(run.created) > REQUESTS // 8, run.statuses  # most ingests made an entry
    assert [200] * len(run.created) == read
