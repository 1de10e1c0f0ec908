"""Periodic work with three service processes has the effect of one (docs/fleet.md, "Running a
fleet"): no job multiplies with the number of processes, and none is starved.

Each test builds three service runtimes, each an :class:`ApolloService` over an Apollo and
a store of its own on ONE database (its own connection pool, as a process has; one shared
in-memory store for the memory kind), and drives the entry points their actors call:
:meth:`ApolloService.run_periodic` (decay with its archiving, expertise aggregation, the
corroboration checker, the access log's retention) and :meth:`ApolloService.drain_outbox`
(the outbox drainer's run). The interleaving is forced with
:class:`tests.support.Interleaving`: the first process is held before it commits while the
second runs into it; the third comes after. The outcome is compared with ONE runtime
running the job once on a store seeded alike: the same entries (status, confidence),
relations, expertise rows, access-log rows and outbox.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from attrs import define, evolve

from apollo_adapters.clock import ManualClock
from apollo_adapters.heuristics import HeuristicContradictionJudge
from apollo_adapters.inprocess import InProcessBus
from apollo_app import Apollo, Settings
from apollo_app.entrypoints.service import ApolloService
from apollo_domain.ports import AccessLogRecord
from apollo_domain.results import ContradictionReport, CorroborationReport, MaintenanceResult
from apollo_domain.services.outbox import OUTBOX_CLAIM
from tests.contract.stores import POOLED_STORE_KINDS, open_store, pooled_store_kind
from tests.support import Interleaving, KeyedEmbedder, at_cosine

store_kind = pytest.fixture(params=POOLED_STORE_KINDS)(pooled_store_kind)

DIMENSION = 48
#: Inside an hour: the processes' clocks below stay in one period of each interval.
START = datetime(2026, 3, 1, 0, 10, tzinfo=UTC)
PAIRS = 3  # candidate pairs the corroboration checker can bootstrap
CONTRADICTIONS = 7  # statement and negation pairs: with the pairs, more scans than one claim
BATCH = 2  # candidates one corroboration run examines


def _texts() -> tuple[KeyedEmbedder, list[tuple[str, str]], list[tuple[str, str]]]:
    """The embedder, the candidate pairs (cosine 0.92, independent sources) and the
    contradicting pairs (cosine 0.8), each pair on axes of its own."""
    embedder = KeyedEmbedder(DIMENSION)
    pairs = []
    for k in range(PAIRS):
        first, second = f"replication slot {k} retains WAL", f"slot {k} keeps WAL segments"
        embedder.set(first, embedder.basis(2 * k))
        embedder.set(second, at_cosine(embedder.basis(2 * k), 0.92, 2 * k + 1))
        pairs.append((first, second))
    contradicting = []
    for k in range(CONTRADICTIONS):
        axis = 2 * (PAIRS + k)
        said, denied = f"the cache at site {k} is enabled", f"the cache at site {k} is not enabled"
        embedder.set(said, embedder.basis(axis))
        embedder.set(denied, at_cosine(embedder.basis(axis), 0.8, axis + 1))
        contradicting.append((said, denied))
    return embedder, pairs, contradicting


@define
class Runtime:
    """One service process: its Apollo, service, clock and interleaving points."""

    apollo: Apollo
    service: ApolloService
    clock: ManualClock
    points: Interleaving


async def _seed(runtime: Runtime) -> dict[str, UUID]:
    """Entries from several sources (two of them near the archive threshold), old and new
    access-log rows; returns each text's entry id."""
    _, pairs, contradicting = _texts()
    ids: dict[str, UUID] = {}
    writes = [
        *((f"claude-{k}", first, f"gemini-{k}", second) for k, (first, second) in enumerate(pairs)),
        *(
            (f"openai-{k}", said, f"human-{k}", denied)
            for k, (said, denied) in enumerate(contradicting)
        ),
    ]
    for one, text, other, answer in writes:
        for agent, content in ((one, text), (other, answer)):
            runtime.clock.advance(seconds=1)  # created in this order
            ids[content] = (
                await runtime.apollo.client(agent).store_knowledge(content=content)
            ).entry_id
    fading = [contradicting[0][0], contradicting[1][0]]
    async with runtime.apollo.store.unit_of_work() as uow:
        for text, confidence in zip(fading, (0.1005, 0.2), strict=True):
            entry = await uow.entries.get(ids[text])
            assert entry is not None
            await uow.entries.update(evolve(entry, confidence=confidence))
        await uow.access_log.record(
            [
                AccessLogRecord("query", f"old-{i}", None, START - timedelta(days=9))
                for i in range(5)
            ]
        )
        await uow.commit()
    return ids


async def _state(apollo: Apollo, ids: dict[str, UUID]) -> dict[str, Any]:
    """What a job may change, by text (entry ids differ between two stores)."""
    text_of = {entry_id: text for text, entry_id in ids.items()}
    async with apollo.store.unit_of_work() as uow:
        entries = {}
        for text, entry_id in ids.items():
            entry = await uow.entries.get(entry_id)
            assert entry is not None
            entries[text] = (
                entry.status.value,
                round(entry.confidence, 12),
                sorted(entry.source_context),
            )
        relations = sorted(
            (text_of[r.from_id], text_of[r.to_id], r.relation_type.value)
            for r in await uow.relations.outgoing(list(ids.values()))
        )
        expertise = sorted(
            (r.agent_id, r.knowledge_domain, r.entry_count, round(r.proficiency, 12))
            for r in await uow.expertise.all()
        )
        log_rows = await uow.access_log.count()
        pending = await uow.outbox.pending()
    return {
        "entries": entries,
        "relations": relations,
        "expertise": expertise,
        "access_log": log_rows,
        "outbox": pending,
    }


Fleet = Callable[[int], Awaitable[list[Runtime]]]


def _move(runtimes: list[Runtime], **delta: float) -> None:
    """Every clock to the seeding's end (the first runtime's clock) plus ``delta``."""
    now = runtimes[0].clock.now() + timedelta(**delta)
    for runtime in runtimes:
        runtime.clock.set(now)


@pytest.fixture
async def make_fleet(store_kind: str, request: pytest.FixtureRequest) -> AsyncIterator[Fleet]:
    """``await make_fleet(n)``: n runtimes on one new, empty store of the kind."""
    fleets: list[list[Interleaving]] = []

    async def fleet(count: int) -> list[Runtime]:
        embedder = _texts()[0]
        first = await open_store(
            store_kind, request, dimension=DIMENSION, model_id=embedder.model_id
        )
        points = [Interleaving(first)]
        fleets.append(points)
        for _ in range(count - 1):
            points.append(Interleaving(await _another(store_kind, first, request)))
        runtimes = []
        for interleaving in points:
            clock = ManualClock(START)
            apollo = Apollo.with_store(
                interleaving,
                embedder=embedder,
                clock=clock,
                judge=interleaving.wrap(HeuristicContradictionJudge(), "judge"),
            )
            settings = Settings(
                embedder="hashing", corroboration_batch=BATCH, access_log_retention_days=7
            )
            service = ApolloService(apollo, InProcessBus(), settings)
            runtimes.append(Runtime(apollo, service, clock, interleaving))
        return runtimes

    yield fleet
    for points in fleets:
        for interleaving in reversed(points):  # the first store (its database) last
            await interleaving.close()


async def _another(kind: str, first: Any, request: pytest.FixtureRequest) -> Any:
    """Another process's store on ``first``'s database, with a pool of its own (the
    in-memory store: itself)."""
    if kind == "memory":
        return first
    from apollo_adapters.postgres import PostgresStore

    model_id = _texts()[0].model_id

    if kind == "pgbouncer":
        bouncer = request.getfixturevalue("pgbouncer")
        return await PostgresStore.open(
            bouncer.conninfo(first.database),
            embedder_model_id=model_id,
            dimension=DIMENSION,
            migrate=False,
            transaction_pooler=True,
            migration_conninfo=first.conninfo,
        )
    return await PostgresStore.open(
        first.conninfo, embedder_model_id=model_id, dimension=DIMENSION, migrate=False
    )


Job = Callable[[Runtime], Awaitable[Any]]


async def _three_in_one_period(runtimes: list[Runtime], job: Job) -> tuple[list[Any], bool]:
    """The first process runs ``job`` and is held before its commit; the second runs into
    it (and waits, or finishes); the first commits; then the third runs. Returns the
    three results and whether the second was seen waiting."""
    a, b, c = runtimes
    gate = a.points.hold("a", "commit")
    first = a.points.run("a", job(a))
    await a.points.reached("a", "commit")
    second = b.points.run("b", job(b))
    waited = await b.points.blocked_or_done(second)
    gate.set()
    results = await a.points.finish(first, second)
    results.append(await c.points.run("c", job(c)))
    return results, waited


async def _one_and_three(make_fleet: Fleet, job: Job, *, at: timedelta) -> tuple[Any, Any]:
    """Seed a lone process's store and a fleet's alike, move every clock by ``at``, run
    ``job`` once on the one and in one period on the three; returns (single's result and
    state, the fleet's results and state)."""
    (single,) = await make_fleet(1)
    single_ids = await _seed(single)
    _move([single], seconds=at.total_seconds())
    single_result = await job(single)
    runtimes = await make_fleet(3)
    ids = await _seed(runtimes[0])
    _move(runtimes, seconds=at.total_seconds())
    results, waited = await _three_in_one_period(runtimes, job)
    assert waited, "the second process neither waited for the first nor finished"
    failed = [r for r in results if isinstance(r, BaseException)]
    assert [] == failed
    return (
        (single_result, await _state(single.apollo, single_ids)),
        (results, await _state(runtimes[0].apollo, ids)),
    )


def _periodic(name: str) -> Job:
    return lambda runtime: runtime.service.run_periodic(name)


async def test_a_decay_period_decays_once_whichever_processes_tick(make_fleet: Fleet) -> None:
    """Five hours on: one process decays every entry by 0.998^5 and archives the one that
    falls under 0.1. Three processes ticking in that period leave exactly that: the first
    decays, the others change nothing."""
    (single, alone), (results, together) = await _one_and_three(
        make_fleet, _periodic("decay"), at=timedelta(hours=5)
    )
    assert MaintenanceResult("decay", 2 * (PAIRS + CONTRADICTIONS), archived=1) == single
    assert [single, MaintenanceResult("decay", 0), MaintenanceResult("decay", 0)] == results
    assert alone == together
    assert "archived" == together["entries"]["the cache at site 0 is enabled"][0]


async def test_expertise_is_aggregated_once_per_period(make_fleet: Fleet) -> None:
    """Three processes aggregating in one period: one recomputes the rows, the others
    wait for it and leave them; no run fails on the rows the first wrote."""
    (single, alone), (results, together) = await _one_and_three(
        make_fleet, _periodic("expertise"), at=timedelta(minutes=1)
    )
    agents = 2 * (PAIRS + CONTRADICTIONS)
    assert MaintenanceResult("aggregate_expertise", agents) == single
    zero = MaintenanceResult("aggregate_expertise", 0)
    assert [single, zero, zero] == results
    assert alone == together and agents == len(together["expertise"])


async def test_the_corroboration_checker_examines_one_batch_per_period(
    make_fleet: Fleet,
) -> None:
    """With a batch of two candidates, one run examines the oldest pair and bootstraps its
    older entry. Three processes in one period do the same: not three batches, which would
    confirm three pairs, and the later ones report nothing."""
    (single, alone), (results, together) = await _one_and_three(
        make_fleet, _periodic("corroboration"), at=timedelta(minutes=1)
    )
    assert CorroborationReport(BATCH, 0, 1) == single
    assert [single, CorroborationReport(0, 0, 0), CorroborationReport(0, 0, 0)] == results
    assert alone == together
    confirmed = [
        text for text, (status, *_) in together["entries"].items() if status == "confirmed"
    ]
    assert ["replication slot 0 retains WAL"] == confirmed


async def test_the_access_log_is_trimmed_once_per_period(make_fleet: Fleet) -> None:
    """Rows nine days old go under a seven-day retention, once; the rows the seeding's
    ingests wrote stay."""
    (single, alone), (results, together) = await _one_and_three(
        make_fleet, _periodic("access-log retention"), at=timedelta(minutes=1)
    )
    assert MaintenanceResult("trim_access_log", 5) == single
    zero = MaintenanceResult("trim_access_log", 0)
    assert [single, zero, zero] == results
    assert alone == together


async def test_a_process_that_dies_mid_period_leaves_the_work_to_the_next(
    make_fleet: Fleet,
) -> None:
    """The first process to tick is killed before its decay commits (its task cancelled
    while held: the transaction rolls back, the period stays unclaimed); the second, which
    was waiting for it, does the work. Nothing is starved and nothing doubles."""
    (single,) = await make_fleet(1)
    single_ids = await _seed(single)
    _move([single], hours=5)
    await single.service.run_periodic("decay")
    a, b, c = await make_fleet(3)
    ids = await _seed(a)
    _move([a, b, c], hours=5)
    gate = a.points.hold("a", "commit")
    dying = a.points.run("a", a.service.run_periodic("decay"))
    await a.points.reached("a", "commit")
    taking_over = b.points.run("b", b.service.run_periodic("decay"))
    assert await b.points.blocked_or_done(taking_over)
    dying.cancel()
    died, took_over = await a.points.finish(dying, taking_over)
    gate.set()
    late = await c.service.run_periodic("decay")

    assert isinstance(died, BaseException)
    assert MaintenanceResult("decay", 2 * (PAIRS + CONTRADICTIONS), archived=1) == took_over
    assert MaintenanceResult("decay", 0) == late
    assert await _state(single.apollo, single_ids) == await _state(a.apollo, ids)


async def test_the_next_period_runs_again_with_clocks_apart(make_fleet: Fleet) -> None:
    """Processes whose clocks disagree by 30 s: the one behind ticks after the period's
    run and changes nothing; an hour later the next period decays by one more hour, not by
    the 30 s of the clock behind on top."""
    (single,) = await make_fleet(1)
    single_ids = await _seed(single)
    _move([single], hours=5)
    await single.service.run_periodic("decay")
    single.clock.advance(hours=1)
    await single.service.run_periodic("decay")
    a, b, c = await make_fleet(3)
    ids = await _seed(a)
    _move([a, b, c], hours=5)
    b.clock.set(a.clock.now() - timedelta(seconds=30))
    c.clock.advance(hours=1)
    await a.service.run_periodic("decay")
    assert MaintenanceResult("decay", 0) == await b.service.run_periodic("decay")
    assert 0 < (await c.service.run_periodic("decay")).affected
    assert await _state(single.apollo, single_ids) == await _state(a.apollo, ids)


async def test_three_outbox_drainers_scan_each_entry_once(make_fleet: Fleet) -> None:
    """The first drainer claims a batch and is held in the judge; the second drains the
    rest meanwhile (the first's items are leased to it) and the third finds nothing; the
    first then finishes its batch. Every scan ran once: as many processed as queued, and
    the contradictions, relations and disputes one drainer records alone."""
    (single,) = await make_fleet(1)
    single_ids = await _seed(single)
    alone = await single.service.drain_outbox()
    a, b, c = await make_fleet(3)
    ids = await _seed(a)
    gate = a.points.hold("a", "judge.contradicts")
    first = a.points.run("a", a.service.drain_outbox())
    assert await a.points.reached("a", "judge.contradicts")
    second = await b.points.run("b", b.service.drain_outbox())
    third = await c.points.run("c", c.service.drain_outbox())
    gate.set()
    (held,) = await a.points.finish(first)

    queued = 2 * (PAIRS + CONTRADICTIONS)
    assert queued > OUTBOX_CLAIM  # the first drainer's claim leaves work for the second
    assert ContradictionReport(queued, CONTRADICTIONS, 0) == alone
    assert ContradictionReport(0, 0, 0) == third
    assert 0 < held.processed and 0 < second.processed
    assert queued == held.processed + second.processed
    assert CONTRADICTIONS == held.contradictions + second.contradictions
    assert await _state(single.apollo, single_ids) == await _state(a.apollo, ids)
