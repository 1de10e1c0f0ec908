"""The contradiction-scan outbox and the corroboration checker under outages and concurrency,
on every store (docs/architecture.md, "The use cases" and "Units of work and concurrency").

The judge (possibly a slow LLM) runs with no unit of work open, so a use case on the same
entries never waits for it, and the scan writes only what still holds when it re-reads
them under row locks. Failed scans back off exponentially (capped) instead of dying after
a few quick retries; claims are leases, so two claimers never judge one item and a
claimer that dies mid-scan leaves the item to the next one. Interleavings are forced with
:class:`tests.support.Interleaving`; time moves only on the manual clock.
"""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

import pytest
from attrs import evolve

from apollo_app import Principal, RelationType, Status
from apollo_domain.retry import OutboxRetry
from tests.support import KeyedEmbedder, at_cosine

ADMIN = Principal("ops", role="admin")
LEASE = timedelta(minutes=5)


async def _conflict(apollo, embedder, axis=0, old_agent="claude-a", new_agent="openai-b"):
    """An entry, then a newer one contradicting it (cosine 0.85); the two scans queued."""
    base = embedder.basis(axis)
    old_text = f"Feature {axis} is enabled by default in version 5"
    new_text = f"Feature {axis} is disabled by default in version 5"
    embedder.set(old_text, base)
    embedder.set(new_text, at_cosine(base, 0.85, axis + 1))
    old = await apollo.client(old_agent).store_knowledge(content=old_text)
    apollo.deps.clock.advance(seconds=1)
    new = await apollo.client(new_agent).store_knowledge(content=new_text)
    return old.entry_id, new.entry_id


async def _contradictions(apollo, *entry_ids):
    async with apollo.store.unit_of_work() as uow:
        edges = await uow.relations.outgoing(list(entry_ids), [RelationType.CONTRADICTS])
    return sorted((e.from_id, e.to_id) for e in edges)


async def _pending(apollo) -> int:
    async with apollo.store.unit_of_work() as uow:
        return await uow.outbox.pending()


class AlwaysContradicts:
    """A judge that finds every pair contradictory; it counts its calls per pair and,
    until ``down_until``, raises as an unreachable LLM does."""

    def __init__(self, clock, down_until=None):
        self.clock = clock
        self.down_until = down_until
        self.calls: list[tuple[object, str]] = []

    async def contradicts(self, new: str, existing: str) -> bool:
        self.calls.append((self.clock.now(), new))
        if self.down_until is not None and self.clock.now() < self.down_until:
            raise ConnectionError("judge unreachable")
        return True


# ------------------------------------------------------------------- judge ∥ lifecycle


@pytest.mark.parametrize("deprecated", ["existing", "new"])
async def test_an_entry_deprecated_while_the_judge_runs_stays_archived(make_apollo, deprecated):
    """The scan is paused inside the judge; the entry is deprecated meanwhile. Deprecation
    must not wait (no transaction is open during the judge), and when the judge says
    "contradiction" the scan re-reads the entry under its lock: it stays archived with
    its reason, nothing is disputed and no ``contradicts`` is recorded."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder, interleaved=True)
    points = apollo.deps.store
    judge = AlwaysContradicts(apollo.deps.clock)
    apollo.deps = evolve(apollo.deps, judge=points.wrap(judge, "judge"))
    old, new = await _conflict(apollo, embedder)
    target, other = (old, new) if deprecated == "existing" else (new, old)

    gate = points.hold("scan", "judge.contradicts")
    scanning = points.run("scan", apollo.process_outbox())
    await points.reached("scan", "judge.contradicts")
    deprecating = points.run(
        "deprecate",
        apollo.client("moderator", ADMIN).deprecate_entry(entry_id=target, reason="superseded"),
    )
    blocked = await points.blocked_or_done(deprecating)
    gate.set()
    deprecation, report = await points.finish(deprecating, scanning)

    assert not blocked, "deprecate waited for the scan's transaction around the judge"
    assert not isinstance(deprecation, BaseException)
    assert (2, 0, 0) == (report.processed, report.contradictions, report.failed)
    archived = await apollo.get_entry(target)
    assert Status.ARCHIVED == archived.status
    assert "superseded" == archived.source_context["deprecation_reason"]
    assert Status.CANDIDATE == (await apollo.get_entry(other)).status
    assert [] == await _contradictions(apollo, old, new)
    assert 0 == await _pending(apollo)
    assert 1 == len(judge.calls)


async def test_the_judge_runs_with_no_unit_of_work_open(make_apollo):
    """While the judge runs, another use case commits on the same entries at once: here a
    query boosts both (an atomic write) without waiting; the scan then disputes both from
    their current rows, keeping the boost."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder, interleaved=True)
    points = apollo.deps.store
    apollo.deps = evolve(
        apollo.deps, judge=points.wrap(AlwaysContradicts(apollo.deps.clock), "judge")
    )
    old, new = await _conflict(apollo, embedder)

    gate = points.hold("scan", "judge.contradicts")
    scanning = points.run("scan", apollo.process_outbox())
    await points.reached("scan", "judge.contradicts")
    querying = points.run(
        "query", apollo.client("reader").query_knowledge(query="Feature 0 default version 5")
    )
    blocked = await points.blocked_or_done(querying)
    gate.set()
    found, report = await points.finish(querying, scanning)

    assert not blocked, "a query waited for the scan's transaction around the judge"
    assert {old, new} <= {view.id for view in found.entries}
    assert 1 == report.contradictions
    for entry_id in (old, new):
        entry = await apollo.get_entry(entry_id)
        assert (Status.DISPUTED, pytest.approx(0.52)) == (entry.status, entry.confidence)


# ------------------------------------------------------------------- outage and backoff

#: The waits after each failure with the default backoff (5 s doubling, capped at 10 min):
#: the judge is down for an hour, far longer than five quick retries would have lasted.
EXPECTED_WAITS = [5, 10, 20, 40, 80, 160, 320, 600, 600, 600, 600, 600]


async def test_a_judge_outage_is_survived_with_capped_exponential_backoff(make_apollo):
    """The judge is unreachable for an hour. Each failed scan runs again only when its
    backoff has passed — never a second earlier — with waits doubling from 5 s up to the
    10-minute cap; when the judge is back, every pair is judged and every item done."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    clock = apollo.deps.clock
    judge = AlwaysContradicts(clock)
    apollo.deps = evolve(apollo.deps, judge=judge)
    assert OutboxRetry() == apollo.deps.outbox_retry
    pairs = [await _conflict(apollo, embedder, axis=axis) for axis in (0, 2)]
    start = clock.now()
    judge.down_until = start + timedelta(hours=1)

    first = await apollo.process_outbox()
    assert (2, 2) == (first.processed, first.failed)  # the older entries judge nothing
    for wait in EXPECTED_WAITS:
        clock.advance(seconds=wait - 1)
        early = await apollo.process_outbox()
        assert (0, 0) == (early.processed, early.failed), f"retried before its {wait} s wait"
        clock.advance(seconds=1)
        due = await apollo.process_outbox()
        assert 2 == due.processed + due.failed

    assert (2, 2, 0) == (due.processed, due.contradictions, due.failed)
    assert clock.now() - start == timedelta(seconds=sum(EXPECTED_WAITS)) > timedelta(hours=1)
    times = sorted({at for at, _ in judge.calls})
    assert EXPECTED_WAITS == [(b - a).total_seconds() for a, b in pairwise(times)]
    assert 2 * (len(EXPECTED_WAITS) + 1) == len(judge.calls)
    for old, new in pairs:
        assert [(new, old)] == await _contradictions(apollo, new)
        assert Status.DISPUTED == (await apollo.get_entry(old)).status
    assert 0 == await _pending(apollo)


async def test_an_item_is_dead_once_its_attempts_are_spent(make_apollo):
    """With three attempts, the third failure buries the item: it is no longer pending
    and never judged again, however long one waits."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    clock = apollo.deps.clock
    judge = AlwaysContradicts(clock, down_until=clock.now() + timedelta(days=30))
    retry = OutboxRetry(base_seconds=1, max_seconds=2, max_attempts=3)
    apollo.deps = evolve(apollo.deps, judge=judge, outbox_retry=retry)
    _, new = await _conflict(apollo, embedder)

    failures = []
    for _ in range(5):
        failures.append((await apollo.process_outbox()).failed)
        clock.advance(seconds=2)
    assert [1, 1, 1, 0, 0] == failures
    assert 3 == len(judge.calls)
    assert 0 == await _pending(apollo)
    assert [] == await _contradictions(apollo, new)


# ------------------------------------------------------------------- leases


async def test_two_claimers_never_judge_one_item(make_apollo):
    """The first run (a batch of two items) is paused in the judge after its claim; the
    second run meanwhile neither waits nor takes the leased items: it does the rest. Each
    pair is judged once and each item done once."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder, interleaved=True)
    points = apollo.deps.store
    judge = AlwaysContradicts(apollo.deps.clock)
    apollo.deps = evolve(apollo.deps, judge=points.wrap(judge, "judge"))
    first_pair = await _conflict(apollo, embedder, axis=0)
    second_pair = await _conflict(apollo, embedder, axis=2)

    gate = points.hold("first", "judge.contradicts")
    first = points.run("first", apollo.process_outbox(limit=2))
    await points.reached("first", "judge.contradicts")
    second = points.run("second", apollo.process_outbox())
    blocked = await points.blocked_or_done(second)
    gate.set()
    first_report, second_report = await points.finish(first, second)

    assert not blocked, "the second claimer waited for the first one's scan"
    assert (2, 2) == (first_report.processed, second_report.processed)
    judged = [actor for actor, point in points.trace if point == "judge.contradicts"]
    assert ["first", "second"] == judged
    assert sorted(new for _, new in judge.calls) == sorted(
        [
            "Feature 0 is disabled by default in version 5",
            "Feature 2 is disabled by default in version 5",
        ]
    )
    for old, new in (first_pair, second_pair):
        assert [(new, old)] == await _contradictions(apollo, new)
    assert 0 == await _pending(apollo)


async def test_an_abandoned_claim_is_taken_again_when_its_lease_ends(make_apollo):
    """A run that dies inside the judge (cancelled) leaves the items of its batch leased:
    nobody takes them before the lease ends; then the next run judges them and records the
    contradiction."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder, interleaved=True)
    points = apollo.deps.store
    clock = apollo.deps.clock
    judge = AlwaysContradicts(clock)
    apollo.deps = evolve(apollo.deps, judge=points.wrap(judge, "judge"))
    old, new = await _conflict(apollo, embedder)
    lease = timedelta(seconds=apollo.deps.outbox_retry.lease_seconds)

    points.hold("doomed", "judge.contradicts")
    doomed = points.run("doomed", apollo.process_outbox())
    await points.reached("doomed", "judge.contradicts")
    doomed.cancel()
    (outcome,) = await points.finish(doomed)
    assert isinstance(outcome, BaseException)

    clock.advance(seconds=lease.total_seconds() - 1)
    assert (0, 0) == ((r := await apollo.process_outbox()).processed, r.failed)
    clock.advance(seconds=1)
    assert (2, 1) == ((r := await apollo.process_outbox()).processed, r.contradictions)
    assert [(new, old)] == await _contradictions(apollo, new)
    assert 0 == await _pending(apollo)


class FailsOn(AlwaysContradicts):
    """A judge that cannot judge texts containing ``poison`` (and finds the rest contradictory)."""

    def __init__(self, clock, poison):
        super().__init__(clock)
        self.poison = poison

    async def contradicts(self, new: str, existing: str) -> bool:
        self.calls.append((self.clock.now(), new))
        if self.poison in new:
            raise ValueError("the judge choked")
        return True


async def test_a_judge_failure_fails_only_its_item_of_the_batch(make_apollo):
    """Three pairs are claimed in one batch; the judge fails on the second pair's new
    entry: that item alone waits for its retry, the other two contradictions are recorded
    and their items (and the three older entries' items) are done."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    clock = apollo.deps.clock
    apollo.deps = evolve(apollo.deps, judge=FailsOn(clock, "Feature 4"))
    pairs = [await _conflict(apollo, embedder, axis=axis) for axis in (0, 4, 8)]

    report = await apollo.process_outbox()

    assert (5, 2, 1) == (report.processed, report.contradictions, report.failed)
    assert 1 == await _pending(apollo)
    for (old, new), recorded in zip(pairs, (True, False, True), strict=True):
        assert ([(new, old)] if recorded else []) == await _contradictions(apollo, new)
        expected = Status.DISPUTED if recorded else Status.CANDIDATE
        assert expected == (await apollo.get_entry(old)).status


async def test_a_malformed_item_fails_alone_and_the_rest_of_its_batch_is_done(make_apollo):
    """A scan whose payload names no entry is counted as failed (it waits for its retry,
    then dies); the pair claimed with it is judged and recorded."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    apollo.deps = evolve(apollo.deps, judge=AlwaysContradicts(apollo.deps.clock))
    async with apollo.store.unit_of_work() as uow:
        await uow.outbox.enqueue("contradiction_scan", {"entry": "?"}, apollo.deps.clock.now())
        await uow.commit()
    old, new = await _conflict(apollo, embedder)

    report = await apollo.process_outbox()

    assert (2, 1, 1) == (report.processed, report.contradictions, report.failed)
    assert [(new, old)] == await _contradictions(apollo, new)
    assert 1 == await _pending(apollo)


# ------------------------------------------------------------------- checker fairness


async def test_successive_checker_runs_reach_every_candidate(make_apollo):
    """Four lonely candidates, then a newer pair that bootstraps when checked. With two
    candidates a run, taking the oldest each time would never reach the pair; taking the
    least recently checked reaches it on the third run, and the fourth starts over."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    clock = apollo.deps.clock
    for i in range(4):
        await apollo.client(f"lonely-{i}").store_knowledge(content=f"lonely note number {i}")
        clock.advance(seconds=1)
    base = embedder.basis(0)
    embedder.set("pair text one", base)
    embedder.set("pair text two", at_cosine(base, 0.92, 1))
    older = await apollo.client("claude-a").store_knowledge(content="pair text one")
    clock.advance(seconds=1)
    await apollo.client("openai-b").store_knowledge(content="pair text two")

    reports = []
    for _ in range(4):
        clock.advance(minutes=15)
        reports.append(await apollo.check_corroboration(limit=2))
    assert [(2, 0), (2, 0), (2, 1), (2, 0)] == [(r.scanned, r.bootstrapped) for r in reports]
    assert Status.CONFIRMED == (await apollo.get_entry(older.entry_id)).status


async def test_a_checker_run_that_rolls_back_leaves_no_stamp(make_apollo):
    """A candidate counts as checked only when the run commits: a run that fails leaves
    the order as it was, so the next run takes the same candidates."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder, faulty=True)
    for i in range(3):
        await apollo.client(f"lonely-{i}").store_knowledge(content=f"lonely note number {i}")
        apollo.deps.clock.advance(seconds=1)
    store = apollo.deps.store
    store.faults.failing.add("commit")
    with pytest.raises(Exception, match="injected failure in commit"):
        await apollo.check_corroboration(limit=2)
    store.faults.failing.clear()
    async with store.unit_of_work() as uow:
        taken = await uow.entries.candidates(2, apollo.deps.clock.now())
    assert ["lonely note number 0", "lonely note number 1"] == [e.content for e in taken]
