"""Periodic work: the corroboration checker, the contradiction scan and the access log's
retention (DESIGN §4)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from ..contradiction import flips_negation
from ..credibility import SourceCredibility
from ..lifecycle import confirm, dispute
from ..model import (
    AccessScope,
    Entry,
    Evidence,
    EvidenceKind,
    Principal,
    Relation,
    RelationType,
    SourceRef,
    Status,
)
from ..policy import ConfidencePolicy
from ..ports import OutboxItem, ScoredEntry, SearchFilter, UnitOfWork
from ..results import ContradictionReport, CorroborationReport, MaintenanceResult
from ..rules import Corroborator, agreeing_sources, independent, may_corroborate
from ..secrets import redact
from .context import ACTIVE, Deps, bounded_int, first_application, resolve_viewer
from .ingest import CONTRADICTION_SCAN

CHECKER_NEIGHBOURS = 5
CONTRADICTION_NEIGHBOURS = 10
CONTRADICTION_WEIGHT = 0.8
WELL_ESTABLISHED_CONFIDENCE = 0.8
WELL_ESTABLISHED_EVIDENCE = 2
LOW_CREDIBILITY = 0.4
#: Outbox items one claim takes at most: their reads share a transaction, and those whose
#: judge found nothing are completed together.
OUTBOX_CLAIM = 16
#: Access-log rows one retention transaction deletes at most: a large backlog goes in
#: several short transactions instead of one that holds the table for long.
ACCESS_LOG_TRIM_BATCH = 5_000
MAX_RETENTION_DAYS = 36_500


def _as_corroborator(entry: Entry) -> Corroborator:
    return Corroborator(
        entry.knowledge_domain, entry.content_type, entry.access_scope, entry.owner_id, entry.source
    )


async def _credibility(uow: UnitOfWork, agent_id: str) -> float:
    r = await uow.credibility.get(agent_id)
    return SourceCredibility(r.agent_id, r.alpha, r.beta, r.label).credibility


def allowed(
    a: Entry,
    b: Entry,
    similarity: float,
    evidence: dict[UUID, list[Evidence]],
    sharing: frozenset[str],
    policy: ConfidencePolicy,
) -> bool:
    """``a`` may corroborate ``b``: every rule of DESIGN §2, with ``a``'s own evidence
    sources independent of ``b``'s source too, and neither saying the opposite of the
    other (:func:`flips_negation`)."""
    a_sources = [e.source for e in evidence.get(a.id, ())] or [a.source]
    b_sources = [e.source for e in evidence.get(b.id, ())] or [b.source]
    return (
        may_corroborate(
            _as_corroborator(a),
            b,
            similarity,
            b_sources,
            min_similarity=policy.corroboration_similarity,
            owners_sharing_group=sharing,
        )
        and all(independent(s, b.source) for s in a_sources)
        and not flips_negation(a.content, b.content)
    )


def _paired_with(entry: Entry) -> str | None:
    bootstrap = entry.source_context.get("bootstrap")
    if isinstance(bootstrap, dict):
        partner = bootstrap.get("paired_with")
        return str(partner) if partner is not None else None
    return None


async def check_corroboration(
    deps: Deps, limit: object = 100, *, idempotency_key: str | None = None
) -> CorroborationReport:
    """Confirm, for at most ``limit`` candidates per run: a candidate on which two mutually
    independent sources agree (a bootstrap pair on its own, DESIGN §2 "Agreement"); else a
    candidate that a confirmed entry corroborates; else bootstrap ONE confirmation from a
    mutually corroborating, independently sourced candidate pair (the older of the two).
    A promotion by another entry commits only together with its persisted ``similar_to``
    relation. Agreement and pair confirmations are both counted as ``bootstrapped``.
    A redelivery of ``idempotency_key`` changes nothing and reports zeros."""
    bound = bounded_int("limit", limit, 1, 100_000)
    policy = deps.policy
    promoted = bootstrapped = 0
    async with deps.store.unit_of_work() as uow:
        if not await first_application(uow, "corroboration", idempotency_key, deps.clock.now()):
            return CorroborationReport(0, 0, 0)
        candidates = await uow.entries.candidates(bound, deps.clock.now())
        recorded = await uow.evidence.for_entries([c.id for c in candidates])
        changed: set[UUID] = set()
        for candidate in candidates:
            if candidate.id in changed or candidate.embedding is None:
                continue
            agreeing = agreeing_sources(candidate, recorded.get(candidate.id, ()))
            if len(agreeing) >= 2:
                if await _confirm_agreement(deps, uow, candidate):
                    bootstrapped += 1
                    changed.add(candidate.id)
                continue
            viewer = await resolve_viewer(deps.store.directory, Principal(candidate.owner_id))
            neighbours = await uow.entries.nearest(
                candidate.embedding,
                SearchFilter(
                    viewer,
                    frozenset({Status.CONFIRMED, Status.CANDIDATE}),
                    access_scope=candidate.access_scope,
                    exclude_ids=frozenset({candidate.id}),
                ),
                CHECKER_NEIGHBOURS,
            )
            neighbours = [n for n in neighbours if policy.corroborates(n.similarity)]
            if not neighbours:
                continue
            evidence = await uow.evidence.for_entries(
                [candidate.id, *(n.entry.id for n in neighbours)]
            )
            sharing = viewer.team_owners

            match = next(
                (
                    n
                    for n in neighbours
                    if n.entry.status is Status.CONFIRMED
                    and _paired_with(n.entry) != str(candidate.id)
                    and allowed(n.entry, candidate, n.similarity, evidence, sharing, policy)
                ),
                None,
            )
            if match is not None:
                if await _promote(deps, uow, candidate, match.entry, match.similarity, None):
                    promoted += 1
                    changed.add(candidate.id)
                continue
            pair = next(
                (
                    n
                    for n in neighbours
                    if n.entry.status is Status.CANDIDATE
                    and n.entry.id not in changed
                    and allowed(n.entry, candidate, n.similarity, evidence, sharing, policy)
                    and allowed(candidate, n.entry, n.similarity, evidence, sharing, policy)
                ),
                None,
            )
            if pair is None:
                continue
            older, partner = sorted(
                (candidate, pair.entry), key=lambda e: (e.created_at, str(e.id))
            )
            if await _promote(deps, uow, older, partner, pair.similarity, partner.id):
                bootstrapped += 1
                changed.update({older.id, partner.id})
        await uow.commit()
    return CorroborationReport(len(candidates), promoted, bootstrapped)


async def _confirm_agreement(deps: Deps, uow: UnitOfWork, candidate: Entry) -> bool:
    """Confirm ``candidate`` on the agreement of its own independent sources: status,
    confirmed_at, the corroboration boost weighted by the agreeing source's credibility,
    ``bootstrap = {agreement: [agent ids]}``; no other entry is involved. Decided again on
    the candidate and its evidence as they are under its row lock."""
    locked = await uow.entries.lock(candidate.id)
    if locked is None or locked.status is not Status.CANDIDATE:
        return False  # a concurrent run, a deprecation or an erasure got there first
    agreeing = agreeing_sources(locked, await uow.evidence.for_entry(locked.id))
    if len(agreeing) < 2:
        return False
    credibility = await _credibility(uow, agreeing[1].agent_id)
    boosted = deps.policy.after_corroboration(locked.confidence, credibility)
    sources = [s.agent_id for s in agreeing]
    await uow.entries.update(
        confirm(locked, boosted, deps.clock.now(), bootstrap={"agreement": sources})
    )
    return True


async def _promote(
    deps: Deps,
    uow: UnitOfWork,
    candidate: Entry,
    by: Entry,
    similarity: float,
    bootstrap_partner: UUID | None,
) -> bool:
    """Confirm ``candidate`` on the strength of ``by``: status, confirmed_at, boost, evidence
    and the ``similar_to`` relation, all or nothing (savepoint). The candidate is written
    as it is under its row lock, and only while it is still a candidate and ``by`` still
    has the status it was chosen for (confirmed, or a candidate for a bootstrap pair)."""
    locked = await uow.entries.lock(candidate.id)
    if locked is None or locked.status is not Status.CANDIDATE:
        return False  # deprecated, disputed, promoted or erased since it was read
    strength = await uow.entries.get(by.id)
    if strength is None or strength.status is not by.status:
        return False
    candidate = locked
    now = deps.clock.now()
    credibility = await _credibility(uow, by.source.agent_id)
    boosted = deps.policy.after_corroboration(candidate.confidence, credibility)
    context: dict[str, Any] = {}
    if bootstrap_partner is not None:
        context["bootstrap"] = {"paired_with": str(bootstrap_partner)}
    promoted = confirm(candidate, boosted, now, **context)
    try:
        async with uow.savepoint():
            created = await uow.relations.add(
                Relation(
                    candidate.id,
                    by.id,
                    RelationType.SIMILAR_TO,
                    similarity,
                    now,
                    {"corroboration": "bootstrap" if bootstrap_partner else "confirmed"},
                )
            )
            if not created and not await uow.relations.exists(
                candidate.id, by.id, RelationType.SIMILAR_TO
            ):
                raise RuntimeError("similar_to relation was not persisted")
            await uow.entries.update(promoted)
            await uow.evidence.add(
                Evidence(
                    candidate.id,
                    by.source,
                    similarity,
                    now,
                    EvidenceKind.CORROBORATION,
                    credibility,
                )
            )
    except Exception:
        return False
    return True


def _independent_evidence_count(evidence: list[Evidence]) -> int:
    counted: list[SourceRef] = []
    for item in evidence:
        if all(independent(item.source, other) for other in counted):
            counted.append(item.source)
    return len(counted)


async def process_outbox(
    deps: Deps, limit: object = 50, *, idempotency_key: str | None = None
) -> ContradictionReport:
    """Run up to ``limit`` due outbox items, in batches of at most :data:`OUTBOX_CLAIM`,
    each batch in a few short units of work with the judge (possibly a slow LLM) called
    between them, outside any transaction (DESIGN §4 "Concurrency"):

    1. claim the batch under a lease (committed at once: no other claimer sees it);
    2. read, in one unit of work that writes nothing, each new entry and its active
       visible neighbours above the contradiction similarity in the same scope;
    3. judge each pair with no unit of work open;
    4. for an item whose judge found contradictions: under row locks, re-read the entries
       and write what still holds — a contradiction writes ``contradicts`` (new →
       existing, weight 0.8) and disputes both, unless the existing entry is well
       established (confidence ≥ 0.8, ≥ 2 independent evidence) and the new source's
       credibility is below 0.4: then only the new entry is disputed; an entry archived
       meanwhile is left as it is, and no pair with it is recorded — then complete the
       item in the same transaction; the items that found nothing are completed together
       in one transaction.

    A failure (the judge's included) counts an attempt for the items it concerns (the
    read of step 2 concerns the whole batch, a judge call or a write only its item) and
    schedules their next attempt with capped exponential backoff
    (:class:`~apollo_domain.retry.OutboxRetry`); an item is dead once its attempts are
    spent. ``idempotency_key`` is recorded with the first claim: a redelivery of it
    changes nothing and reports zeros."""
    bound = bounded_int("limit", limit, 1, 10_000)
    retry = deps.outbox_retry
    processed = contradictions = failed = 0
    key = idempotency_key
    while processed + failed < bound:
        now = deps.clock.now()
        async with deps.store.unit_of_work() as uow:
            if not await first_application(uow, "outbox", key, now):
                return ContradictionReport(0, 0, 0)
            key = None  # recorded with this first claim
            wanted = min(OUTBOX_CLAIM, bound - processed - failed)
            claimed = await uow.outbox.claim(wanted, now, lease_until=retry.lease_until(now))
            await uow.commit()
        if not claimed:
            break
        done, found, errors = await _run_batch(deps, claimed)
        processed += done
        contradictions += found
        if errors:
            failed += len(errors)
            async with deps.store.unit_of_work() as uow:
                for item, exc in errors:
                    error = redact(f"{type(exc).__name__}: {exc}")
                    retry_at = retry.retry_at(item.attempts, deps.clock.now())
                    await uow.outbox.fail(item.id, error, retry_at=retry_at)
                await uow.commit()
    return ContradictionReport(processed, contradictions, failed)


async def _run_batch(
    deps: Deps, items: list[OutboxItem]
) -> tuple[int, int, list[tuple[OutboxItem, Exception]]]:
    """Do claimed items: how many were done, the contradictions they recorded, and the
    items that failed with their errors."""
    errors: list[tuple[OutboxItem, Exception]] = []
    scans: list[OutboxItem] = []
    entry_ids: list[UUID] = []
    for item in items:
        if item.kind != CONTRADICTION_SCAN:
            continue
        try:
            entry_ids.append(UUID(str(item.payload["entry_id"])))
        except (KeyError, ValueError) as exc:
            errors.append((item, exc))
        else:
            scans.append(item)
    try:
        reads = await _neighbours(deps, entry_ids)
    except Exception as exc:
        return 0, 0, [*errors, *((item, exc) for item in scans)]
    judged: list[tuple[OutboxItem, UUID, list[ScoredEntry]]] = []
    for item, (entry_id, content, neighbours) in zip(scans, reads, strict=True):
        try:
            verdicts = [
                scored
                for scored in neighbours
                if await deps.judge.contradicts(content, scored.entry.content)
            ]
        except Exception as exc:
            errors.append((item, exc))
        else:
            judged.append((item, entry_id, verdicts))
    done = found = 0
    for item, entry_id, verdicts in judged:
        if not verdicts:
            continue
        try:
            async with deps.store.unit_of_work() as uow:
                recorded = await _record(deps, uow, entry_id, verdicts)
                await uow.outbox.complete(item.id)
                await uow.commit()
        except Exception as exc:
            errors.append((item, exc))
        else:
            done += 1
            found += recorded
    quiet = [item for item in items if item.kind != CONTRADICTION_SCAN]
    quiet.extend(item for item, _, verdicts in judged if not verdicts)
    if quiet:
        try:
            async with deps.store.unit_of_work() as uow:
                for item in quiet:
                    await uow.outbox.complete(item.id)
                await uow.commit()
        except Exception as exc:
            errors.extend((item, exc) for item in quiet)
        else:
            done += len(quiet)
    return done, found, errors


async def _neighbours(
    deps: Deps, entry_ids: list[UUID]
) -> list[tuple[UUID, str, list[ScoredEntry]]]:
    """Per entry: its id, content and the older active neighbours its scan judges (none
    when the entry is gone, archived or without an embedding), all read in one unit of
    work that writes nothing: the entries in one read, and the neighbours of the entries
    that share a search filter (owner and scope) in one search."""
    groups: dict[tuple[str | None, AccessScope], list[Entry]] = {}
    neighbours: dict[UUID, list[ScoredEntry]] = {}
    async with deps.store.unit_of_work() as uow:
        entries = await uow.entries.get_many(entry_ids, with_embedding=True)
        for entry in entries.values():
            if entry.is_active and entry.embedding is not None:
                groups.setdefault((entry.owner_id, entry.access_scope), []).append(entry)
        for (owner_id, scope), members in groups.items():
            viewer = await resolve_viewer(deps.store.directory, Principal(owner_id))
            found = await uow.entries.nearest_many(
                [member.embedding for member in members if member.embedding is not None],
                SearchFilter(viewer, ACTIVE, access_scope=scope),
                CONTRADICTION_NEIGHBOURS + 1,  # the entry itself is among them
            )
            for member, nearest in zip(members, found, strict=True):
                others = [n for n in nearest if n.entry.id != member.id]
                neighbours[member.id] = _older_close(
                    deps, member, others[:CONTRADICTION_NEIGHBOURS]
                )
    return [
        (entry_id, entries[entry_id].content, neighbours[entry_id])
        if entry_id in neighbours
        else (entry_id, "", [])
        for entry_id in entry_ids
    ]


def _older_close(deps: Deps, entry: Entry, nearest: list[ScoredEntry]) -> list[ScoredEntry]:
    """The neighbours above the contradiction similarity that are older than ``entry`` (a
    newer entry judges this one in its own scan)."""
    neighbours = []
    for scored in nearest:
        if scored.similarity <= deps.policy.contradiction_similarity:
            break
        existing = scored.entry
        if (existing.created_at, str(existing.id)) > (entry.created_at, str(entry.id)):
            continue
        neighbours.append(scored)
    return neighbours


async def _record(deps: Deps, uow: UnitOfWork, entry_id: UUID, verdicts: list[ScoredEntry]) -> int:
    """Write the contradictions the judge found, on the entries as they are now: each one
    re-read under its row lock (in id order), a pair with an entry archived or erased
    meanwhile skipped, the protection rule applied to current confidence and evidence."""
    locked = await uow.entries.lock_many({entry_id, *(v.entry.id for v in verdicts)})
    entry = locked.get(entry_id)
    if entry is None or not entry.is_active:
        return 0
    new_credibility = await _credibility(uow, entry.source.agent_id)
    evidence = await uow.evidence.for_entries([v.entry.id for v in verdicts])
    found = 0
    now = deps.clock.now()
    for scored in verdicts:
        existing = locked.get(scored.entry.id)
        if existing is None or not existing.is_active:
            continue
        found += 1
        await uow.relations.add(
            Relation(
                entry.id,
                existing.id,
                RelationType.CONTRADICTS,
                CONTRADICTION_WEIGHT,
                now,
                {"similarity": scored.similarity},
            )
        )
        protected = (
            existing.confidence >= WELL_ESTABLISHED_CONFIDENCE
            and _independent_evidence_count(evidence.get(existing.id, []))
            >= WELL_ESTABLISHED_EVIDENCE
            and new_credibility < LOW_CREDIBILITY
        )
        disputed = dispute(existing, now)
        if not protected and disputed is not existing:
            await uow.entries.update(disputed)
        entry = dispute(entry, now)
    if entry is not locked[entry_id]:
        await uow.entries.update(entry)
    return found


async def trim_access_log(
    deps: Deps, days: object, *, idempotency_key: str | None = None
) -> MaintenanceResult:
    """Retention: delete the access-log rows older than ``days`` days (an integer, 1 to
    36,500), oldest first, in transactions of at most :data:`ACCESS_LOG_TRIM_BATCH` rows
    until none is left before the cutoff, which is fixed when the run starts. Rows written
    meanwhile are newer than the cutoff and stay. ``idempotency_key`` is recorded with the
    first batch: a redelivery of it changes nothing and reports 0."""
    kept = bounded_int("days", days, 1, MAX_RETENTION_DAYS)
    cutoff = deps.clock.now() - timedelta(days=kept)
    deleted = 0
    key = idempotency_key
    while True:
        async with deps.store.unit_of_work() as uow:
            if not await first_application(uow, "trim_access_log", key, deps.clock.now()):
                return MaintenanceResult("trim_access_log", 0)
            key = None  # recorded with the first batch
            batch = await uow.access_log.trim(cutoff, ACCESS_LOG_TRIM_BATCH)
            await uow.commit()
        deleted += batch
        if batch < ACCESS_LOG_TRIM_BATCH:
            return MaintenanceResult("trim_access_log", deleted)
