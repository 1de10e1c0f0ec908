"""The contradiction scan, run from the transactional outbox: judge each new entry against its
older close neighbours and record the disputes found (docs/architecture.md, "The use cases"
and "Units of work and concurrency")."""

from __future__ import annotations

from uuid import UUID

from ..commands import ProcessOutbox
from ..lifecycle import dispute
from ..limits import MAX_OUTBOX_BATCH
from ..model import (
    AccessScope,
    Entry,
    Evidence,
    Principal,
    Relation,
    RelationType,
    SourceRef,
)
from ..ports import OutboxItem, ScoredEntry, SearchFilter, UnitOfWork
from ..results import ContradictionReport
from ..rules import independent
from ..secrets import redact
from .context import ACTIVE, Caller, Deps, bounded_int, first_application, resolve_viewer
from .ingest import CONTRADICTION_SCAN
from .sources import current_credibility

CONTRADICTION_NEIGHBOURS = 10
CONTRADICTION_WEIGHT = 0.8
WELL_ESTABLISHED_CONFIDENCE = 0.8
WELL_ESTABLISHED_EVIDENCE = 2
LOW_CREDIBILITY = 0.4
#: Outbox items one claim takes at most: their reads share a transaction, and those whose
#: judge found nothing are completed together.
OUTBOX_CLAIM = 16


def _independent_evidence_count(evidence: list[Evidence]) -> int:
    counted: list[SourceRef] = []
    for item in evidence:
        if all(independent(item.source, other) for other in counted):
            counted.append(item.source)
    return len(counted)


async def process_outbox(
    deps: Deps, caller: Caller, command: ProcessOutbox, idempotency_key: str | None = None
) -> ContradictionReport:
    """Run up to ``limit`` due outbox items, in batches of at most :data:`OUTBOX_CLAIM`,
    each batch in a few short units of work with the judge (possibly a slow LLM) called
    between them, outside any transaction (docs/architecture.md, "Units of work and concurrency"):

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
    bound = bounded_int("limit", command.limit, 1, MAX_OUTBOX_BATCH)
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
    new_credibility = await current_credibility(uow, entry.source.agent_id)
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
