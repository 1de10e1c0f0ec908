"""Where a read goes when the store has a read replica, decided per caller by its causal
token (:mod:`apollo_domain.causal`), against a replica whose replay position the test
sets: the "replica" is the primary's own database, asked how far it has replayed through a
probe the test controls, so every decision is shown without a real standby (the real one
is in ``test_replica.py``). Where a read ran shows in the store's counts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import httpx
import psycopg
import pytest
from attrs import define, field

from apollo_adapters.clock import ManualClock
from apollo_adapters.postgres.session import Session
from apollo_adapters.postgres.store import NO_REPLICA, REPLICA_ERROR, WAIT_TIMED_OUT
from apollo_app import Apollo
from apollo_app.entrypoints.http import create_app
from apollo_app.entrypoints.http.app import CAUSAL_TOKEN_HEADER
from apollo_app.metrics import Metrics
from apollo_domain.causal import CausalToken, causal_scope, parse_token
from apollo_domain.errors import StoreBusy, StoreUnavailable
from apollo_domain.model import Entry
from apollo_domain.ports import Reads
from apollo_domain.testing import make_entry
from tests.postgres_support import DisposablePostgresStore, PostgresTestServer, fresh_store
from tests.support import KeyedEmbedder

pytestmark = pytest.mark.postgres

DIMENSION = 16
T0 = datetime(2026, 1, 1, tzinfo=UTC)
#: Long enough never to run out on a loaded machine: a test that needs it to, sets less.
PATIENT = 30.0
#: Short: the wait a test runs out on purpose.
IMPATIENT = 0.05


@define
class Lag:
    """A replica that has replayed as far as the test says; each question is counted and
    announced (``asked``), and ``failure`` is raised instead of answering."""

    replayed: CausalToken | None = None
    failure: Exception | None = None
    questions: int = 0
    asked: asyncio.Event = field(factory=asyncio.Event)

    async def __call__(self, session: Session) -> CausalToken | None:
        self.questions += 1
        self.asked.set()
        if self.failure is not None:
            raise self.failure
        return self.replayed


@pytest.fixture
async def store(postgres_server: PostgresTestServer) -> AsyncIterator[DisposablePostgresStore]:
    opened = await fresh_store(postgres_server, dimension=DIMENSION)
    try:
        yield opened
    finally:
        await opened.close()


async def _lagging(store: DisposablePostgresStore, wait: float, **options: Any) -> Lag:
    lag = Lag()
    await store.with_replica(store.conninfo, wait=wait, probe=lag, **options)
    return lag


def _entry(content: str) -> Entry:
    return make_entry(content, embedding=[1.0] + [0.0] * (DIMENSION - 1), created_at=T0)


async def _write(store: DisposablePostgresStore, content: str) -> Entry:
    entry = _entry(content)
    async with store.unit_of_work() as uow:
        await uow.entries.add(entry)
        await uow.commit()
    return entry


async def _seen(store: DisposablePostgresStore, entry_id: UUID) -> bool:
    async def read(reads: Reads) -> bool:
        return await reads.entries.get(entry_id) is not None

    async with store.unit_of_work() as uow:
        (found,) = await uow.read_concurrently([read])
    return found


def _where(store: DisposablePostgresStore) -> tuple[int, dict[str, int]]:
    fallbacks = {cause: n for cause, n in store.replica_fallback_causes.items() if n}
    return store.replica_reads, fallbacks


async def _token_of_a_write(store: DisposablePostgresStore, content: str) -> CausalToken:
    with causal_scope() as scope:
        await _write(store, content)
    assert scope.seen is not None
    return scope.seen


async def test_a_read_without_a_token_goes_to_the_replica_at_once(
    store: DisposablePostgresStore,
) -> None:
    """Writes of this process (another caller's) do not hold a read that presents none,
    even with a replica that has replayed nothing at all."""
    lag = await _lagging(store, PATIENT)
    await _token_of_a_write(store, "written by another caller of this process")
    with causal_scope():
        entry = await _write(store, "written outside the read's scope")
    with causal_scope():
        assert await _seen(store, entry.id)
    assert 0 == lag.questions
    assert (1, {}) == _where(store)


async def test_a_read_runs_on_the_replica_once_it_has_replayed_the_token(
    store: DisposablePostgresStore,
) -> None:
    """The read asks, finds the replica behind, and waits; the replica then replays the
    token (the test moves it while the read is waiting), and the read runs there."""
    lag = await _lagging(store, PATIENT)
    token = await _token_of_a_write(store, "the caller's write")
    lag.replayed = CausalToken(token.position - 1)
    entry = _entry("unused")
    with causal_scope(token):
        read = asyncio.create_task(_seen(store, entry.id))
        await lag.asked.wait()
        assert not read.done()
        lag.replayed = token
        assert not await read
    assert lag.questions >= 2
    assert (1, {}) == _where(store)


async def test_a_token_the_replica_has_not_replayed_in_time_runs_on_the_primary_only(
    store: DisposablePostgresStore,
) -> None:
    """Past the wait the read runs on the primary and sees the write; the replica is not
    skipped for it: the next read presenting no token goes there at once."""
    lag = await _lagging(store, IMPATIENT)
    with causal_scope() as scope:
        entry = await _write(store, "not replayed yet")
        assert await _seen(store, entry.id)
    assert scope.seen is not None
    assert (0, {WAIT_TIMED_OUT: 1}) == _where(store)
    with causal_scope():
        assert await _seen(store, entry.id)
    assert (1, {WAIT_TIMED_OUT: 1}) == _where(store)
    assert lag.questions >= 1


async def test_a_forged_token_far_ahead_costs_a_read_only_the_bounded_wait(
    store: DisposablePostgresStore,
) -> None:
    lag = await _lagging(store, IMPATIENT)
    lag.replayed = await _token_of_a_write(store, "readable whatever the caller sends")
    entry = _entry("absent")
    started = time.monotonic()
    with causal_scope("c1.ffffffffffffffff"):
        assert not await _seen(store, entry.id)
    assert time.monotonic() - started < IMPATIENT + 10.0  # the wait, plus a loaded machine
    assert (0, {WAIT_TIMED_OUT: 1}) == _where(store)


async def test_outside_any_scope_a_read_waits_for_the_whole_process_writes(
    store: DisposablePostgresStore,
) -> None:
    """Process-wide work (periodic jobs, the bus consumer) keeps the old rule."""
    lag = await _lagging(store, IMPATIENT)
    entry = await _write(store, "written by process-wide work")
    assert await _seen(store, entry.id)
    assert (0, {WAIT_TIMED_OUT: 1}) == _where(store)
    with causal_scope() as scope:
        await _write(store, "a caller's write moves the process position too")
    lag.replayed = scope.seen
    assert await _seen(store, entry.id)
    assert (1, {WAIT_TIMED_OUT: 1}) == _where(store)


async def test_a_replica_that_fails_is_left_alone_and_never_fails_the_read(
    store: DisposablePostgresStore,
) -> None:
    lag = await _lagging(store, PATIENT, retry=3600)
    token = await _token_of_a_write(store, "readable while the replica fails")
    lag.failure = StoreBusy("recovery conflict")  # one read's failure: not skipped
    with causal_scope(token):
        assert not await _seen(store, UUID(int=1))
    assert (0, {REPLICA_ERROR: 1}) == _where(store)
    lag.failure = StoreUnavailable("the replica went away")  # down: skipped for a while
    with causal_scope(token):
        assert not await _seen(store, UUID(int=1))
    asked = lag.questions
    with causal_scope():
        assert not await _seen(store, UUID(int=1))
    assert asked == lag.questions
    assert (0, {REPLICA_ERROR: 2, NO_REPLICA: 1}) == _where(store)


async def test_a_replica_nobody_answers_at_never_fails_a_read(
    store: DisposablePostgresStore,
    server_folder,  # type: ignore[no-untyped-def]
) -> None:
    from tests.processes import free_port

    nowhere = psycopg.conninfo.make_conninfo(
        store.conninfo, host=str(server_folder), port=str(free_port())
    )
    await store.with_replica(nowhere, wait=PATIENT, retry=3600)
    entry = await _write(store, "readable with no replica")
    with causal_scope():
        assert await _seen(store, entry.id)
        async with store.reading() as uow:
            assert await uow.entries.get(entry.id) is not None
    assert (0, {NO_REPLICA: 2}) == _where(store)


async def test_a_reading_unit_of_work_is_routed_by_the_token_too(
    store: DisposablePostgresStore,
) -> None:
    lag = await _lagging(store, IMPATIENT)
    token = await _token_of_a_write(store, "a caller's write")
    with causal_scope():
        async with store.reading() as uow:
            assert await uow.entries.get(UUID(int=1)) is None
    with causal_scope(token):
        async with store.reading() as uow:
            await uow.entries.get(UUID(int=1))
    assert (1, {WAIT_TIMED_OUT: 1}) == _where(store)
    assert lag.questions >= 1
    metrics = Metrics()
    metrics.watch_replica(store)
    exposed = metrics.render()[0].decode()
    assert 'apollo_replica_reads_total{served_by="replica"} 1.0' in exposed
    assert 'apollo_replica_reads_total{served_by="primary"} 1.0' in exposed
    assert 'apollo_replica_fallbacks_total{cause="wait_timed_out"} 1.0' in exposed
    assert 'apollo_replica_fallbacks_total{cause="no_replica"} 0.0' in exposed


async def test_over_http_a_caller_waits_for_its_own_token_and_no_other(
    store: DisposablePostgresStore,
) -> None:
    """A write's response carries its token; a query presenting it waits for the replica
    to replay it, and one presenting none does not wait at all."""
    lag = await _lagging(store, PATIENT)
    apollo = Apollo.with_store(store, embedder=KeyedEmbedder(DIMENSION), clock=ManualClock(T0))
    transport = httpx.ASGITransport(app=create_app(apollo))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        stored = await http.post(
            "/api/apollo/ingest", json={"content": "HSRP elects an active router per group"}
        )
        token = parse_token(stored.headers[CAUSAL_TOKEN_HEADER])
        assert token is not None
        answered = await http.post("/api/apollo/query", json={"query": "HSRP active router"})
        assert 200 == answered.status_code
        assert 0 == lag.questions
        assert (1, {}) == _where(store)
        query = http.post(
            "/api/apollo/query",
            json={"query": "HSRP active router"},
            headers={CAUSAL_TOKEN_HEADER: str(token)},
        )
        waiting = asyncio.create_task(query)
        await lag.asked.wait()
        lag.replayed = token
        answered = await waiting
    assert 200 == answered.status_code
    assert stored.json()["entry_id"] in [e["id"] for e in answered.json()["entries"]]
    assert (2, {}) == _where(store)
