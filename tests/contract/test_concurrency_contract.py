"""Concurrent use cases on one entry (or one source's credibility), on every store: the
same observable outcome.

Each test forces one interleaving with :class:`tests.support.Interleaving`: the first actor
is paused at a named point after its read; the second runs until it finishes or waits for a
lock the first holds; then the first is released. A store that reads and writes without a
lock lets the second finish and the first overwrite it (a lost update); a correct one makes
the second wait and see the first's commit (docs/architecture.md, "Units of work and
concurrency")."""

from __future__ import annotations

from datetime import timedelta

import pytest

from apollo_app import InvalidTransition, Outcome, Principal, Status, TransientConflict
from apollo_domain.lifecycle import confirm, dispute
from apollo_domain.model import EvidenceKind, Relation, RelationType
from tests.contract.stores import POOLED_STORE_KINDS, pooled_store_kind
from tests.support import KeyedEmbedder, at_cosine

#: Also through PgBouncer in transaction mode, with fewer server connections than callers.
store_kind = pytest.fixture(params=POOLED_STORE_KINDS)(pooled_store_kind)

ADMIN = Principal("ops", role="admin")
TARGET = "Postgres keeps row versions until vacuum removes them"


async def _disputed(apollo, content: str = "a contested claim"):
    return await _disputed_by(apollo, "claude-a", content)


async def _disputed_by(apollo, agent: str, content: str):
    r = await apollo.client(agent).store_knowledge(content=content)
    async with apollo.store.unit_of_work() as uow:
        entry = await uow.entries.get(r.entry_id)
        await uow.entries.update(dispute(entry, entry.updated_at))
        await uow.commit()
    return r.entry_id


async def _confirmed(apollo, content: str = TARGET, agent: str = "claude-a"):
    r = await apollo.client(agent).store_knowledge(content=content)
    async with apollo.store.unit_of_work() as uow:
        entry = await uow.entries.get(r.entry_id)
        await uow.entries.update(confirm(entry, entry.confidence, entry.updated_at))
        await uow.commit()
    return r.entry_id


def _restating(cosines: dict[str, float]) -> KeyedEmbedder:
    """``TARGET`` on axis 0, and each text at its cosine to it (each tilted toward an axis
    of its own)."""
    embedder = KeyedEmbedder(16)
    embedder.set(TARGET, embedder.basis(0))
    for axis, (text, cosine) in enumerate(cosines.items(), start=1):
        embedder.set(text, at_cosine(embedder.basis(0), cosine, axis))
    return embedder


async def _kinds(apollo, entry_id):
    return [(e.source.agent_id, e.kind) for e in await apollo.get_evidence(entry_id)]


async def test_deprecate_racing_resolve_keeps_both_or_refuses_one(make_apollo):
    """Deprecate has read the disputed entry; resolve(accept) runs meanwhile. Resolve
    must wait and then fail (the entry is archived, no longer disputed): the deprecation
    and its reason survive, and credibility is untouched."""
    apollo = await make_apollo(interleaved=True)
    points = apollo.deps.store
    entry_id = await _disputed(apollo)
    admin = apollo.client("moderator", ADMIN)

    gate = points.hold("deprecate", "entries.update")
    deprecating = points.run(
        "deprecate", admin.deprecate_entry(entry_id=entry_id, reason="superseded")
    )
    await points.reached("deprecate", "entries.update")
    resolving = points.run("resolve", admin.resolve_dispute(entry_id=entry_id, resolution="accept"))
    blocked = await points.blocked_or_done(resolving)
    gate.set()
    deprecated, resolved = await points.finish(deprecating, resolving)

    assert blocked, "resolve ran to completion while deprecate held its read"
    assert not isinstance(deprecated, BaseException)
    assert isinstance(resolved, InvalidTransition)
    entry = await apollo.get_entry(entry_id)
    assert Status.ARCHIVED == entry.status
    assert "superseded" == entry.source_context["deprecation_reason"]
    assert "dispute_resolution" not in entry.source_context
    async with apollo.store.unit_of_work() as uow:
        credibility = await uow.credibility.get("claude-a")
    assert (1.0, 1.0) == (credibility.alpha, credibility.beta)


async def test_concurrent_rejections_each_refute_the_source(make_apollo):
    """Two disputed entries of one source, both rejected at once: the first resolution has
    written its verdict and is held before commit while the second runs. β grows by one per
    rejection (an atomic increment, never a read-modify-write that loses one)."""
    apollo = await make_apollo(interleaved=True)
    points = apollo.deps.store
    first = await _disputed(apollo, "a first contested claim")
    second = await _disputed(apollo, "a second contested claim")
    admin = apollo.client("moderator", ADMIN)

    gate = points.hold("first", "access_log.record")
    resolving = points.run("first", admin.resolve_dispute(entry_id=first, resolution="reject"))
    await points.reached("first", "access_log.record")
    racing = points.run("second", admin.resolve_dispute(entry_id=second, resolution="reject"))
    await points.blocked_or_done(racing)
    gate.set()
    results = await points.finish(resolving, racing)

    assert [Status.ARCHIVED, Status.ARCHIVED] == [r.status for r in results]
    async with apollo.store.unit_of_work() as uow:
        credibility = await uow.credibility.get("claude-a")
    assert (1.0, 3.0, 0, 2) == (
        credibility.alpha,
        credibility.beta,
        credibility.validated,
        credibility.refuted,
    )


@pytest.mark.parametrize(
    ("cosine", "second_outcome", "second_reason"),
    [
        (0.92, Outcome.CREATED, None),  # novel enough: its own candidate
        (0.97, Outcome.REJECTED, "near_duplicate"),  # a source repeating itself
    ],
)
async def test_concurrent_corroborations_by_related_sources_boost_once(
    make_apollo, cosine, second_outcome, second_reason
):
    """openai-a and openai-b (one provider: not independent) restate a confirmed entry at
    once. The first is held after its decision, before recording its evidence; the second
    waits on the target, then sees openai-a's evidence: no second corroboration, no second
    boost. It goes on by the rules for a source already recorded."""
    first_text, second_text = "vacuum reclaims dead tuples", "dead tuples wait for vacuum"
    embedder = _restating({first_text: 0.92, second_text: cosine})
    apollo = await make_apollo(embedder=embedder, interleaved=True)
    points = apollo.deps.store
    target = await _confirmed(apollo)

    gate = points.hold("a", "evidence.add")
    corroborating = points.run("a", apollo.client("openai-a").store_knowledge(content=first_text))
    await points.reached("a", "evidence.add")
    racing = points.run("b", apollo.client("openai-b").store_knowledge(content=second_text))
    blocked = await points.blocked_or_done(racing)
    gate.set()
    first, second = await points.finish(corroborating, racing)

    assert blocked, "the second corroboration ran while the first held the target"
    assert (Outcome.CORROBORATED, target) == (first.outcome, first.entry_id)
    assert second_outcome == second.outcome
    if second_reason is not None:
        assert second.reason.startswith(second_reason)
    assert [
        ("claude-a", EvidenceKind.ORIGIN),
        ("openai-a", EvidenceKind.CORROBORATION),
    ] == await _kinds(apollo, target)
    entry = await apollo.get_entry(target)
    assert pytest.approx(0.8) == entry.confidence  # 0.5 + one boost of 0.3


@pytest.mark.parametrize(
    ("restated", "second_outcome", "second_reason", "second_kind"),
    [
        (False, Outcome.DEDUPLICATED, "exact duplicate", EvidenceKind.DUPLICATE),
        (True, Outcome.REJECTED, "near_duplicate", None),
    ],
)
async def test_concurrent_agreements_by_related_sources_record_one(
    make_apollo, restated, second_outcome, second_reason, second_kind
):
    """openai-a and openai-b (not independent of each other) repeat a candidate at once,
    as its exact text or a restatement at 0.97. The first is held before recording its
    agreement; the second waits on the candidate, then sees it: only one agreement is
    recorded, the second gets what a source already recorded gets."""
    restatement = "Postgres keeps old row versions until a vacuum"
    embedder = _restating({restatement: 0.97})
    apollo = await make_apollo(embedder=embedder, interleaved=True)
    points = apollo.deps.store
    candidate = (await apollo.client("claude-a").store_knowledge(content=TARGET)).entry_id
    text = restatement if restated else TARGET

    gate = points.hold("a", "evidence.add")
    agreeing = points.run("a", apollo.client("openai-a").store_knowledge(content=text))
    await points.reached("a", "evidence.add")
    racing = points.run("b", apollo.client("openai-b").store_knowledge(content=text))
    blocked = await points.blocked_or_done(racing)
    gate.set()
    first, second = await points.finish(agreeing, racing)

    assert blocked, "the second agreement ran while the first held the candidate"
    assert (Outcome.DEDUPLICATED, candidate, "agreement recorded") == (
        first.outcome,
        first.entry_id,
        first.reason,
    )
    assert second_outcome == second.outcome
    assert second.reason.startswith(second_reason)
    expected = [("claude-a", EvidenceKind.ORIGIN), ("openai-a", EvidenceKind.AGREEMENT)]
    if second_kind is not None:
        expected.append(("openai-b", second_kind))
    assert expected == await _kinds(apollo, candidate)


async def _archive(apollo, how: str, entry_id) -> None:
    admin = apollo.client("moderator", ADMIN)
    if how == "deprecate":
        await admin.deprecate_entry(entry_id=entry_id, reason="superseded")
    else:
        apollo.deps.clock.advance(days=2)
        await admin.archive_stale(days=1)


@pytest.mark.parametrize("how", ["deprecate", "archive_stale"])
async def test_duplicate_archived_between_lookup_and_write_makes_a_new_entry(make_apollo, how):
    """An exact repeat found its duplicate (so it skipped embedding) and is held before the
    unit of work that writes; the duplicate is archived meanwhile. The write finds no live
    duplicate and stores the text as a new candidate: never a failure."""
    apollo = await make_apollo(interleaved=True)
    points = apollo.deps.store
    original = (await apollo.client("claude-a").store_knowledge(content=TARGET)).entry_id

    looking = points.hold("ingest", "entries.find_by_hash")
    ingesting = points.run("ingest", apollo.client("claude-b").store_knowledge(content=TARGET))
    await points.reached("ingest", "entries.find_by_hash")
    writing = points.hold("ingest", "enter")  # the next unit of work: where it writes
    looking.set()
    await points.reached("ingest", "enter")
    await _archive(apollo, how, original)
    writing.set()
    (result,) = await points.finish(ingesting)

    assert not isinstance(result, BaseException), repr(result)
    assert (Outcome.CREATED, Status.CANDIDATE) == (result.outcome, result.status)
    assert original != result.entry_id
    assert Status.ARCHIVED == (await apollo.get_entry(original)).status
    assert [("claude-b", EvidenceKind.ORIGIN)] == await _kinds(apollo, result.entry_id)


async def test_duplicate_held_by_an_ingest_is_archived_after_it(make_apollo):
    """The ingest that found its duplicate under the row lock is held before reading its
    evidence; a deprecation waits, so the repeat is recorded against a live entry, and the
    deprecation then archives it with its reason."""
    apollo = await make_apollo(interleaved=True)
    points = apollo.deps.store
    original = (await apollo.client("claude-a").store_knowledge(content=TARGET)).entry_id
    admin = apollo.client("moderator", ADMIN)

    gate = points.hold("ingest", "evidence.for_entry")
    ingesting = points.run("ingest", apollo.client("claude-b").store_knowledge(content=TARGET))
    await points.reached("ingest", "evidence.for_entry")
    deprecating = points.run(
        "deprecate", admin.deprecate_entry(entry_id=original, reason="superseded")
    )
    blocked = await points.blocked_or_done(deprecating)
    gate.set()
    result, deprecated = await points.finish(ingesting, deprecating)

    assert blocked, "the deprecation ran while the ingest held the duplicate"
    assert (Outcome.DEDUPLICATED, original, Status.CANDIDATE, "exact duplicate") == (
        result.outcome,
        result.entry_id,
        result.status,
        result.reason,
    )
    assert deprecated.changed
    entry = await apollo.get_entry(original)
    assert (Status.ARCHIVED, "superseded") == (
        entry.status,
        entry.source_context["deprecation_reason"],
    )


async def test_identical_new_texts_at_once_make_one_entry(make_apollo):
    """Two independent sources send the same new text at once; the first is held after
    inserting it, before commit. The second cannot insert it too (the dedup rule): it
    waits, then records its agreement against the winner."""
    apollo = await make_apollo(interleaved=True)
    points = apollo.deps.store

    gate = points.hold("a", "commit")
    creating = points.run("a", apollo.client("claude-a").store_knowledge(content=TARGET))
    await points.reached("a", "commit")
    racing = points.run("b", apollo.client("gemini-b").store_knowledge(content=TARGET))
    blocked = await points.blocked_or_done(racing)
    gate.set()
    created, agreed = await points.finish(creating, racing)

    assert blocked, "the second insert did not wait for the first"
    assert Outcome.CREATED == created.outcome
    assert (Outcome.DEDUPLICATED, created.entry_id, "agreement recorded") == (
        agreed.outcome,
        agreed.entry_id,
        agreed.reason,
    )
    assert [
        ("claude-a", EvidenceKind.ORIGIN),
        ("gemini-b", EvidenceKind.AGREEMENT),
    ] == await _kinds(apollo, created.entry_id)
    assert 1 == (await apollo.stats()).by_status["candidate"]


async def _promotable(apollo, kind: str):
    """A candidate the checker confirms: ``corroboration``, gemini-b's text that a
    confirmed entry (claude-a) corroborates at 0.92; ``agreement``, claude-a's text that
    gemini-b repeated (two independent sources agree on it)."""
    target = (await apollo.client("claude-a").store_knowledge(content=TARGET)).entry_id
    apollo.deps.clock.advance(seconds=1)
    if kind == "agreement":
        agreed = await apollo.client("gemini-b").store_knowledge(content=TARGET)
        assert "agreement recorded" == agreed.reason
        return target
    candidate = await apollo.client("gemini-b").store_knowledge(content="dead tuples wait")
    assert Outcome.CREATED == candidate.outcome
    async with apollo.store.unit_of_work() as uow:
        entry = await uow.entries.get(target)
        await uow.entries.update(confirm(entry, entry.confidence, entry.updated_at))
        await uow.commit()
    return candidate.entry_id


@pytest.mark.parametrize("kind", ["corroboration", "agreement"])
@pytest.mark.parametrize("first", ["checker", "deprecate"])
async def test_checker_promotion_racing_deprecate_keeps_the_deprecation(make_apollo, first, kind):
    """The corroboration checker confirms a candidate (by a confirmed entry, or on its
    sources' agreement) while an admin deprecates it; either one is held after reading the
    candidate while the other runs. The deprecation survives: the candidate ends archived
    with its reason, never confirmed over it."""
    embedder = _restating({"dead tuples wait": 0.92})
    apollo = await make_apollo(embedder=embedder, interleaved=True)
    points = apollo.deps.store
    candidate = await _promotable(apollo, kind)
    admin = apollo.client("moderator", ADMIN)
    checking = apollo.check_corroboration()
    deprecating = admin.deprecate_entry(entry_id=candidate, reason="superseded")

    if first == "checker":  # held as it weighs the boost, about to write
        gate = points.hold("checker", "credibility.get")
        held = points.run("checker", checking)
        await points.reached("checker", "credibility.get")
        racing = points.run("deprecate", deprecating)
    else:
        gate = points.hold("deprecate", "entries.update")
        held = points.run("deprecate", deprecating)
        await points.reached("deprecate", "entries.update")
        racing = points.run("checker", checking)
    blocked = await points.blocked_or_done(racing)
    gate.set()
    results = await points.finish(held, racing)

    assert blocked, f"the other ran while the {first} held the candidate"
    assert not any(isinstance(r, BaseException) for r in results), results
    report, deprecated = results if first == "checker" else results[::-1]
    assert deprecated.changed
    assert (1 if first == "checker" else 0) == report.promoted + report.bootstrapped
    entry = await apollo.get_entry(candidate)
    assert (Status.ARCHIVED, "superseded") == (
        entry.status,
        entry.source_context["deprecation_reason"],
    )


async def test_erasure_racing_deprecate_keeps_the_deprecation(make_apollo):
    """Erasure of an agent redacts its confirmed entry while an admin deprecates that
    entry; the erasure is held before writing the redacted entry. The entry ends archived
    with its reason and redacted: neither write is lost."""
    apollo = await make_apollo(interleaved=True)
    points = apollo.deps.store
    entry_id = await _confirmed(apollo, agent="claude-x")
    admin = apollo.client("moderator", ADMIN)

    gate = points.hold("erase", "entries.update")
    erasing = points.run("erase", apollo.erase_agent("claude-x"))
    await points.reached("erase", "entries.update")
    deprecating = points.run(
        "deprecate", admin.deprecate_entry(entry_id=entry_id, reason="superseded")
    )
    blocked = await points.blocked_or_done(deprecating)
    gate.set()
    erased, deprecated = await points.finish(erasing, deprecating)

    assert blocked, "the deprecation ran while the erasure held the entry"
    assert 1 == erased.redacted
    assert deprecated.changed
    entry = await apollo.get_entry(entry_id)
    assert (Status.ARCHIVED, "superseded", "redacted") == (
        entry.status,
        entry.source_context["deprecation_reason"],
        entry.source.agent_id,
    )


async def test_accepting_both_sides_of_one_dispute_at_once_accepts_one(make_apollo):
    """Two admins accept the two sides of one dispute at once; the first is held after it
    has looked up the other side. One acceptance wins (its side confirmed, the other
    archived as ``lost_dispute``), the other finds its entry no longer disputed: never a
    deadlock, and credibility learns one verdict per side."""
    apollo = await make_apollo(interleaved=True)
    points = apollo.deps.store
    left = await _disputed(apollo, "the cache is warm after a restart")
    right = await _disputed_by(apollo, "gemini-b", "the cache is cold after a restart")
    async with apollo.store.unit_of_work() as uow:
        now = apollo.deps.clock.now()
        await uow.relations.add(Relation(right, left, RelationType.CONTRADICTS, 0.8, now))
        await uow.commit()
    admin = apollo.client("moderator", ADMIN)

    gate = points.hold("left", "relations.incoming")
    accepting = points.run("left", admin.resolve_dispute(entry_id=left, resolution="accept"))
    await points.reached("left", "relations.incoming")
    racing = points.run("right", admin.resolve_dispute(entry_id=right, resolution="accept"))
    await points.blocked_or_done(racing)
    gate.set()
    results = await points.finish(accepting, racing)

    failed = [r for r in results if isinstance(r, BaseException)]
    assert 1 == len(failed) and isinstance(failed[0], InvalidTransition), results
    (won,) = [r for r in results if not isinstance(r, BaseException)]
    winner, loser = (left, right) if won.entry_id == left else (right, left)
    assert Status.CONFIRMED == (await apollo.get_entry(winner)).status
    lost = await apollo.get_entry(loser)
    assert (Status.ARCHIVED, "lost_dispute") == (
        lost.status,
        lost.source_context["archive_reason"],
    )
    sources = {left: "claude-a", right: "gemini-b"}
    async with apollo.store.unit_of_work() as uow:
        validated = await uow.credibility.get(sources[winner])
        refuted = await uow.credibility.get(sources[loser])
    assert ((2.0, 1.0), (1.0, 2.0)) == (
        (validated.alpha, validated.beta),
        (refuted.alpha, refuted.beta),
    )


QUERY = "row versions and vacuum"


async def _boosting_and_corroborating(apollo, restatement: str, first: str) -> tuple:
    """A reader's query returning the target and openai-b's corroboration of it, ``first``
    held with the target's row locked (the query after its boost, before its access log;
    the corroboration before its commit) while the other runs into the lock."""
    points = apollo.deps.store
    reader = apollo.client("reader", Principal("reader"))
    actors = {
        "query": lambda: reader.query_knowledge(query=QUERY, mode="vector"),
        "ingest": lambda: apollo.client("openai-b").store_knowledge(content=restatement),
    }
    holding = {"query": "access_log.record", "ingest": "commit"}
    second = next(actor for actor in actors if actor != first)
    gate = points.hold(first, holding[first])
    running = points.run(first, actors[first]())
    await points.reached(first, holding[first])
    racing = points.run(second, actors[second]())
    blocked = await points.blocked_or_done(racing)
    gate.set()
    results = dict(zip((first, second), await points.finish(running, racing), strict=True))
    return blocked, results["query"], results["ingest"]


@pytest.mark.parametrize("first", ["query", "ingest"])
async def test_a_retrieval_boost_and_a_corroboration_of_one_entry_both_count(make_apollo, first):
    """A query's retrieval boost and an independent source's corroboration land on one
    confirmed entry in either order: the second waits for the first's row lock, then adds
    its boost to the first's (no lost update, no deadlock)."""
    restatement = "Postgres keeps old row versions until a vacuum removes them"
    embedder = _restating({restatement: 0.93, QUERY: 0.8})
    apollo = await make_apollo(embedder=embedder, interleaved=True)
    target = await _confirmed(apollo)

    blocked, queried, corroborated = await _boosting_and_corroborating(apollo, restatement, first)

    assert blocked, "the second ran while the first held the target"
    assert [target] == [e.id for e in queried.entries if e.id == target]
    assert (Outcome.CORROBORATED, target) == (corroborated.outcome, corroborated.entry_id)
    entry = await apollo.get_entry(target)
    assert pytest.approx(0.82) == entry.confidence  # 0.5 + 0.02 retrieval + 0.3 corroboration
    assert 1 == entry.access_count


async def test_two_readers_boosting_the_same_results_at_once_both_count(make_apollo):
    """Two principals run the same query; the first is held after its boost, its rows
    locked. The second waits, then boosts: each entry gains both readers' boosts."""
    embedder = _restating({"vacuum reclaims dead tuples": 0.8, QUERY: 0.85})
    apollo = await make_apollo(embedder=embedder, interleaved=True)
    points = apollo.deps.store
    target = await _confirmed(apollo)
    other = (
        await apollo.client("openai-b").store_knowledge(content="vacuum reclaims dead tuples")
    ).entry_id

    def reading(name: str):
        return apollo.client(name, Principal(name)).query_knowledge(query=QUERY, mode="vector")

    gate = points.hold("alice", "access_log.record")
    first = points.run("alice", reading("alice"))
    await points.reached("alice", "access_log.record")
    second = points.run("bob", reading("bob"))
    blocked = await points.blocked_or_done(second)
    gate.set()
    results = await points.finish(first, second)

    assert blocked, "bob's boost ran while alice's held the rows"
    assert all({target, other} <= {e.id for e in r.entries} for r in results)
    assert [pytest.approx(0.54)] * 2 == [
        (await apollo.get_entry(entry_id)).confidence for entry_id in (target, other)
    ]


# ------------------------------------------------------------ units of work broken apart


async def _kafka(apollo, embedder):
    embedder.set("query about kafka", embedder.basis(0))
    ids = []
    for i, text in enumerate(("kafka orders partitions", "kafka replicates logs")):
        embedder.set(text, at_cosine(embedder.basis(0), 0.9 - i / 10, i + 1))
        ids.append((await apollo.client(f"agent-{i}").store_knowledge(content=text)).entry_id)
    return ids


async def test_a_query_the_store_breaks_apart_runs_again_whole(make_apollo):
    """The store aborts a query's transaction for a concurrent one (a deadlock) after its
    boost: the query runs again whole and answers; each entry is boosted, counted and
    logged once, as if the first attempt never happened."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder, faulty=True)
    ids = await _kafka(apollo, embedder)
    apollo.deps.store.faults.fail_once("access_log.record", error=TransientConflict)

    result = await apollo.client("reader").query_knowledge(query="query about kafka")

    assert sorted(ids) == sorted(e.id for e in result.entries)
    for entry_id in ids:
        entry = await apollo.get_entry(entry_id)
        assert (0.52, 1) == (round(entry.confidence, 6), entry.access_count)
    async with apollo.store.unit_of_work() as uow:
        assert 2 == await uow.access_log.count("query")


async def test_a_query_broken_apart_three_times_fails_and_changes_nothing(make_apollo):
    """Runs again are bounded: the third abort reaches the caller (a busy store, 503 with
    Retry-After at the HTTP edge), and nothing of any attempt is kept."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder, faulty=True)
    ids = await _kafka(apollo, embedder)
    for call in (1, 2, 3):
        apollo.deps.store.faults.fail_once("entries.boost", call=call, error=TransientConflict)

    with pytest.raises(TransientConflict):
        await apollo.client("reader").query_knowledge(query="query about kafka")

    assert 3 == apollo.deps.store.faults.calls.count("entries.boost")
    for entry_id in ids:
        entry = await apollo.get_entry(entry_id)
        assert (0.5, 0) == (entry.confidence, entry.access_count)


async def test_an_ingest_the_store_breaks_apart_runs_again_whole(make_apollo):
    """The store aborts an ingest's transaction just before its commit: the ingest runs
    again whole; one entry, one origin, one expertise count, one queued scan."""
    apollo = await make_apollo(faulty=True)
    apollo.deps.store.faults.fail_once("commit", error=TransientConflict)

    result = await apollo.client("claude-a").store_knowledge(content=TARGET)

    assert (Outcome.CREATED, Status.CANDIDATE) == (result.outcome, result.status)
    assert [("claude-a", EvidenceKind.ORIGIN)] == await _kinds(apollo, result.entry_id)
    async with apollo.store.unit_of_work() as uow:
        assert [1] == [r.entry_count for r in await uow.expertise.for_agent("claude-a")]
        assert 1 == await uow.outbox.pending()


async def test_two_expertise_aggregations_at_once_both_succeed(make_apollo):
    """The first aggregation has rewritten the expertise rows and is held before its
    commit; a second (another process, or an admin's run) must wait for it, then rewrite
    them over its commit: both succeed, and the rows are those of one aggregation (never a
    unique-key failure on the rows the first inserted)."""
    apollo = await make_apollo(interleaved=True)
    points = apollo.deps.store
    for agent in ("claude-a", "openai-b", "gemini-c"):
        await apollo.client(agent).store_knowledge(content=f"{agent} knows about {TARGET}")
    gate = points.hold("first", "commit")
    first = points.run("first", apollo.aggregate_expertise())
    await points.reached("first", "commit")
    second = points.run("second", apollo.aggregate_expertise())
    blocked = await points.blocked_or_done(second)
    gate.set()
    results = await points.finish(first, second)

    assert blocked, "the second aggregation ran to its end beside the first's uncommitted rows"
    assert [3, 3] == [r.affected for r in results]
    async with apollo.store.unit_of_work() as uow:
        rows = await uow.expertise.all()
    assert ["claude-a", "gemini-c", "openai-b"] == sorted(r.agent_id for r in rows)


async def test_a_decay_with_an_earlier_clock_never_decays_an_hour_twice(make_apollo):
    """A decay whose clock reads earlier than the last decay's (another process's clock
    behind, or a run that read the time and then waited for the rows) changes nothing and
    leaves the entries' last decay where it was: a later decay counts the hours since the
    latest one, so three hours in all decay by 0.998^3, never more."""
    apollo = await make_apollo()
    clock = apollo.deps.clock
    entry_id = (await apollo.client("claude-a").store_knowledge(content=TARGET)).entry_id
    start = clock.now()
    for hours in (2, 1, 3):
        clock.set(start + timedelta(hours=hours))
        await apollo.run_decay_cycle()
    entry = await apollo.get_entry(entry_id)
    assert pytest.approx(0.5 * 0.998**3, rel=1e-12) == entry.confidence
