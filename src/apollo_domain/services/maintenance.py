"""Periodic work: the corroboration checker and the contradiction scan (DESIGN §4)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ..contradiction import flips_negation
from ..credibility import SourceCredibility
from ..lifecycle import confirm, dispute
from ..model import (
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
from ..results import ContradictionReport, CorroborationReport
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
    """Run up to ``limit`` due outbox items, one at a time, each in three short units of
    work with the judge (possibly a slow LLM) called between them, outside any
    transaction (DESIGN §4 "Concurrency"):

    1. claim the item under a lease (committed at once: no other claimer sees it);
    2. read the new entry and its active visible neighbours above the contradiction
       similarity in the same scope;
    3. judge each pair with no unit of work open;
    4. under row locks, re-read the entries and write what still holds — a contradiction
       writes ``contradicts`` (new → existing, weight 0.8) and disputes both, unless the
       existing entry is well established (confidence ≥ 0.8, ≥ 2 independent evidence)
       and the new source's credibility is below 0.4: then only the new entry is
       disputed; an entry archived meanwhile is left as it is, and no pair with it is
       recorded — then complete the item in the same transaction.

    A failure (the judge's included) counts an attempt and schedules the next one with
    capped exponential backoff (:class:`~apollo_domain.retry.OutboxRetry`); the item is
    dead once its attempts are spent. ``idempotency_key`` is recorded with the first
    claim: a redelivery of it changes nothing and reports zeros."""
    bound = bounded_int("limit", limit, 1, 10_000)
    retry = deps.outbox_retry
    processed = contradictions = failed = 0
    key = idempotency_key
    for _ in range(bound):
        now = deps.clock.now()
        async with deps.store.unit_of_work() as uow:
            if not await first_application(uow, "outbox", key, now):
                return ContradictionReport(0, 0, 0)
            key = None  # recorded with this first claim
            claimed = await uow.outbox.claim(1, now, lease_until=retry.lease_until(now))
            await uow.commit()
        if not claimed:
            break
        item = claimed[0]
        try:
            contradictions += await _run(deps, item)
            processed += 1
        except Exception as exc:
            failed += 1
            error = redact(f"{type(exc).__name__}: {exc}")
            async with deps.store.unit_of_work() as uow:
                retry_at = retry.retry_at(item.attempts, deps.clock.now())
                await uow.outbox.fail(item.id, error, retry_at=retry_at)
                await uow.commit()
    return ContradictionReport(processed, contradictions, failed)


async def _run(deps: Deps, item: OutboxItem) -> int:
    """Do one claimed item; the contradictions it recorded."""
    if item.kind != CONTRADICTION_SCAN:
        async with deps.store.unit_of_work() as uow:
            await uow.outbox.complete(item.id)
            await uow.commit()
        return 0
    entry_id = UUID(str(item.payload["entry_id"]))
    content, neighbours = await _neighbours(deps, entry_id)
    verdicts: list[ScoredEntry] = []
    for scored in neighbours:
        if await deps.judge.contradicts(content, scored.entry.content):
            verdicts.append(scored)
    async with deps.store.unit_of_work() as uow:
        found = await _record(deps, uow, entry_id, verdicts) if verdicts else 0
        await uow.outbox.complete(item.id)
        await uow.commit()
    return found


async def _neighbours(deps: Deps, entry_id: UUID) -> tuple[str, list[ScoredEntry]]:
    """The entry's content and the older active neighbours its scan judges (none when the
    entry is gone, archived or without an embedding), read in a unit of work that writes
    nothing."""
    async with deps.store.unit_of_work() as uow:
        entry = await uow.entries.get(entry_id, with_embedding=True)
        if entry is None or not entry.is_active or entry.embedding is None:
            return "", []
        viewer = await resolve_viewer(deps.store.directory, Principal(entry.owner_id))
        found = await uow.entries.nearest(
            entry.embedding,
            SearchFilter(
                viewer, ACTIVE, access_scope=entry.access_scope, exclude_ids=frozenset({entry.id})
            ),
            CONTRADICTION_NEIGHBOURS,
        )
    neighbours = []
    for scored in found:
        if scored.similarity <= deps.policy.contradiction_similarity:
            break
        existing = scored.entry
        if (existing.created_at, str(existing.id)) > (entry.created_at, str(entry.id)):
            continue  # a newer entry judges this one in its own scan
        neighbours.append(scored)
    return entry.content, neighbours


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
