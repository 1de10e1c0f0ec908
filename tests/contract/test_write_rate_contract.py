"""Each principal's write rate on every store (DESIGN "Fair ranking in a shared store":
``APOLLO_WRITE_RATE``): a token bucket charged by the writes that come over an edge, one
token per entry; a write refused for its rate changes nothing and says how long to wait;
concurrent charges of one bucket lose none of each other; on PostgreSQL every process
that opens the database charges the same buckets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from apollo_adapters.clock import ManualClock
from apollo_adapters.memory.rates import InMemoryWriteBudget
from apollo_app import Apollo
from apollo_domain import commands as c
from apollo_domain.episodes import SentenceSplitter, Statement, Turn
from apollo_domain.errors import RateLimited
from apollo_domain.handlers import handle
from apollo_domain.model import Principal, Role
from apollo_domain.ports.rates import GRANTED, LIMITED
from apollo_domain.rates import WriteRate
from apollo_domain.services import Caller
from apollo_domain.services.write_rate import prepaid
from tests.contract.stores import EPOCH, open_store
from tests.support import KeyedEmbedder, footprint

#: Ten entries at once, then two a second.
RATE = WriteRate(per_second=2.0, burst=10.0)


class CountingSplitter:
    """The deterministic split, counting its calls (a language model's would cost)."""

    def __init__(self) -> None:
        self.calls = 0
        self._inner = SentenceSplitter()

    async def split(self, turns: Sequence[Turn]) -> list[Statement]:
        self.calls += 1
        return await self._inner.split(turns)


@pytest.fixture
async def rated(store_kind: str, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """``await rated()`` → an Apollo over a fresh store with :data:`RATE` and a manual
    clock (``apollo.deps.clock``); ``rated(store=...)`` another Apollo over that store."""
    opened: list[Any] = []

    async def factory(store: Any = None, clock: Any = None) -> Apollo:
        embedder = KeyedEmbedder(16)
        if store is None:
            store = await open_store(
                store_kind, request, dimension=embedder.dimension, model_id=embedder.model_id
            )
            opened.append(store)
        return Apollo.with_store(
            store, embedder=embedder, clock=clock or ManualClock(EPOCH), write_rate=RATE
        )

    yield factory
    for store in opened:
        await store.close()


def http_caller(name: str = "writer-a") -> Caller:
    return Caller.of(name, Principal(name, role=Role.WRITER), edge="http")


def fact(n: int) -> c.StoreKnowledge:
    return c.StoreKnowledge(content=f"service {n} listens on port {8000 + n}", tags=("ports",))


async def test_a_principal_writes_its_burst_then_waits_for_the_rate(rated):
    """Ten single writes pass, the eleventh is refused with the wait for one token (half a
    second at two a second) having written nothing; half a second later one more passes."""
    apollo = await rated()
    caller = http_caller()
    for n in range(10):
        result = await handle(apollo.deps, caller, fact(n))
        assert "created" == result.outcome
    before = await footprint(apollo)
    with pytest.raises(RateLimited) as refused:
        await handle(apollo.deps, caller, fact(10))
    assert refused.value.retry_after == pytest.approx(0.5)
    assert before == await footprint(apollo), "a refused write changed nothing"

    apollo.deps.clock.advance(seconds=0.5)
    assert "created" == (await handle(apollo.deps, caller, fact(10))).outcome
    with pytest.raises(RateLimited):
        await handle(apollo.deps, caller, fact(11))
    assert {GRANTED: 11, LIMITED: 2} == apollo.deps.write_budget.outcomes()


async def test_each_principal_has_its_own_bucket_and_the_program_itself_none(rated):
    """One principal's spent bucket refuses nobody else, and the embedding program's own
    calls (no edge) are never charged."""
    apollo = await rated()
    flood = c.StoreMany(items=tuple(fact(n) for n in range(10)))
    await handle(apollo.deps, http_caller("writer-a"), flood)
    with pytest.raises(RateLimited):
        await handle(apollo.deps, http_caller("writer-a"), fact(50))
    assert "created" == (await handle(apollo.deps, http_caller("writer-b"), fact(51))).outcome
    for n in range(60, 75):  # the library, as the embedding program: no limit
        assert "created" == (await apollo.client("local").store_knowledge(**_kw(fact(n)))).outcome


def _kw(command: c.StoreKnowledge) -> dict[str, Any]:
    return {"content": command.content, "tags": command.tags}


async def test_a_bulk_write_larger_than_the_bucket_passes_whole_then_the_debt_is_waited(rated):
    """``store_many`` of 25 items against a bucket of 10: granted whole (never refused for
    its size, never cut), then the principal waits until the bucket refills past one token:
    (1 - (10 - 25)) / 2 = 8 seconds."""
    apollo = await rated()
    caller = http_caller()
    bulk = c.StoreMany(items=tuple(fact(n) for n in range(25)))
    results = await handle(apollo.deps, caller, bulk)
    assert 25 == len(results)
    with pytest.raises(RateLimited) as refused:
        await handle(apollo.deps, caller, fact(99))
    assert refused.value.retry_after == pytest.approx(8.0)
    apollo.deps.clock.advance(seconds=7.9)
    with pytest.raises(RateLimited):
        await handle(apollo.deps, caller, fact(99))
    apollo.deps.clock.advance(seconds=0.1)
    assert "created" == (await handle(apollo.deps, caller, fact(99))).outcome


async def test_a_text_is_refused_before_its_split_and_charged_per_statement(rated):
    """A text on an empty bucket is refused before any splitter runs (a language model's
    call would be spent for nothing); a granted text costs one token per statement."""
    apollo = await rated()
    splitter = CountingSplitter()
    apollo.deps = _with_splitter(apollo.deps, splitter)
    caller = http_caller()
    text = c.StoreText(
        text=(
            {"speaker": "Ana", "text": "The cache runs on Redis."},
            {"speaker": "Ben", "text": "The queue runs on RabbitMQ. The search runs on Qdrant."},
        )
    )
    result = await handle(apollo.deps, caller, text)
    assert 3 == len(result.statements)
    assert 1 == splitter.calls
    for n in range(7):  # 10 - 3 = 7 tokens left
        await handle(apollo.deps, caller, fact(n))
    before = await footprint(apollo)
    with pytest.raises(RateLimited):
        await handle(apollo.deps, caller, c.StoreText(text="Postgres stores the entries."))
    assert 1 == splitter.calls, "the refused text reached no splitter"
    assert before == await footprint(apollo)


def _with_splitter(deps: Any, splitter: Any) -> Any:
    from attrs import evolve

    return evolve(deps, splitter=splitter)


async def test_writes_sent_in_parts_after_one_charge_are_not_charged_again(rated):
    """An edge that charged a whole write and sends it in parts (MCP's store_many, chunk by
    chunk) has none of the parts refused midway."""
    apollo = await rated()
    caller = http_caller()
    await apollo.deps.write_budget.take("writer-a", 30)
    with prepaid():
        for n in range(3):
            assert "created" == (await handle(apollo.deps, caller, fact(n))).outcome
    with pytest.raises(RateLimited):
        await handle(apollo.deps, caller, fact(3))


async def test_concurrent_charges_of_one_bucket_grant_exactly_its_tokens(rated):
    """Forty writers charge one bucket of ten at the same instant (on PostgreSQL each on a
    pooled connection of its own where the pool has one): exactly ten are granted, and the
    thirty refused each wait for one token. A read-then-write bucket grants more."""
    apollo = await rated()
    budget = apollo.deps.write_budget
    waits = await asyncio.gather(*(budget.take("writer-a", 1) for _ in range(40)))
    granted = [wait for wait in waits if wait == 0]
    assert 10 == len(granted)
    assert all(wait == pytest.approx(0.5) for wait in waits if wait > 0)
    assert await budget.take("writer-b", 1) == 0


@pytest.mark.parametrize("store_kind", [pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_every_process_on_one_database_charges_the_same_bucket(rated):
    """Two Apollos over one PostgreSQL database (two processes of a fleet): the burst spent
    through one is spent for the other; the rate holds across them."""
    first = await rated()
    second = await rated(store=first.deps.store, clock=first.deps.clock)
    assert first.deps.write_budget is not second.deps.write_budget
    assert 0 == await first.deps.write_budget.take("writer-a", 10)
    assert await second.deps.write_budget.take("writer-a", 1) == pytest.approx(0.5)
    first.deps.clock.advance(seconds=0.5)
    assert 0 == await second.deps.write_budget.take("writer-a", 1)
    assert await first.deps.write_budget.take("writer-a", 1) > 0


async def test_a_clock_that_goes_back_refills_nothing(rated):
    """A process whose clock is behind the bucket's last charge (two machines' clocks)
    neither refills nor corrupts it."""
    clock = ManualClock(EPOCH)
    apollo = await rated(clock=clock)
    budget = apollo.deps.write_budget
    assert 0 == await budget.take("writer-a", 10)
    clock.set(EPOCH.replace(year=2025))
    assert await budget.take("writer-a", 1) == pytest.approx(0.5)
    clock.set(EPOCH)
    assert await budget.take("writer-a", 1) == pytest.approx(0.5)


def test_the_in_memory_buckets_stay_within_their_capacity():
    """A hundred thousand principals write once each into a budget of a thousand buckets:
    it never holds more than that; full buckets go first, then the least recently charged,
    and a forgotten bucket was one that had refilled longest."""
    clock = ManualClock(EPOCH)
    budget = InMemoryWriteBudget(RATE, clock, capacity=1_000)
    spent = asyncio.run(_spend_many(budget, clock))
    assert len(budget) <= 1_000
    assert spent == 100_000


async def _spend_many(budget: InMemoryWriteBudget, clock: ManualClock) -> int:
    granted = 0
    for n in range(100_000):
        granted += await budget.take(f"agent-{n}", 10) == 0
        if n % 100 == 0:
            clock.advance(seconds=1)
    # the most recent principal's debt is still known: its next write waits
    assert await budget.take("agent-99999", 1) > 0
    return granted
