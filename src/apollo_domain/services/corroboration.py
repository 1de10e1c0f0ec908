"""The corroboration checker: promote candidates that a confirmed entry, an independent
partner or their own agreeing sources corroborate (docs/concepts.md, "The rules in one page")."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from ..commands import CheckCorroboration
from ..contradiction import flips_negation
from ..lifecycle import confirm
from ..limits import MAX_CORROBORATION_BATCH
from ..model import (
    Entry,
    Evidence,
    EvidenceKind,
    Principal,
    Relation,
    RelationType,
    Status,
)
from ..policy import ConfidencePolicy
from ..ports import SearchFilter, UnitOfWork
from ..results import CorroborationReport
from ..rules import Corroborator, agreeing_sources, independent, may_corroborate
from .context import Caller, Deps, bounded_int, first_application, resolve_viewer
from .sources import current_credibility

CHECKER_NEIGHBOURS = 5


def _as_corroborator(entry: Entry) -> Corroborator:
    return Corroborator(
        entry.knowledge_domain, entry.content_type, entry.access_scope, entry.owner_id, entry.source
    )


def allowed(
    a: Entry,
    b: Entry,
    similarity: float,
    evidence: dict[UUID, list[Evidence]],
    sharing: frozenset[str],
    policy: ConfidencePolicy,
) -> bool:
    """``a`` may corroborate ``b``: every corroboration rule (:func:`may_corroborate`), with
    ``a``'s own evidence
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
    deps: Deps, caller: Caller, command: CheckCorroboration, idempotency_key: str | None = None
) -> CorroborationReport:
    """Confirm, for at most ``limit`` candidates per run: a candidate on which two mutually
    independent sources agree (a bootstrap pair on its own: docs/concepts.md, "The rules in one
    page"); else a
    candidate that a confirmed entry corroborates; else bootstrap ONE confirmation from a
    mutually corroborating, independently sourced candidate pair (the older of the two).
    A promotion by another entry commits only together with its persisted ``similar_to``
    relation. Agreement and pair confirmations are both counted as ``bootstrapped``.
    A redelivery of ``idempotency_key`` changes nothing and reports zeros."""
    bound = bounded_int("limit", command.limit, 1, MAX_CORROBORATION_BATCH)
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
    credibility = await current_credibility(uow, agreeing[1].agent_id)
    now = deps.clock.now()
    boosted = await corroboration_boost(deps, uow, locked, credibility, now)
    sources = [s.agent_id for s in agreeing]
    await uow.entries.update(confirm(locked, boosted, now, bootstrap={"agreement": sources}))
    return True


async def corroboration_boost(
    deps: Deps, uow: UnitOfWork, entry: Entry, credibility: float, now: datetime
) -> float:
    """Raise ``entry``'s confidence for a corroborating source of ``credibility``, as the
    policy says (:meth:`~apollo_domain.policy.ConfidencePolicy.after_corroboration`),
    through the store's atomic boost; returns the confidence after it (the entry's own
    when the store skipped it: archived meanwhile). Ingest and the checker both boost here."""
    amount = deps.policy.corroboration_amount(credibility)
    boosted = await uow.entries.boost([entry.id], amount, now, count_access=False)
    return boosted.get(entry.id, entry.confidence)


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
    credibility = await current_credibility(uow, by.source.agent_id)
    context: dict[str, Any] = {}
    if bootstrap_partner is not None:
        context["bootstrap"] = {"paired_with": str(bootstrap_partner)}
    try:
        async with uow.savepoint():
            boosted = await corroboration_boost(deps, uow, candidate, credibility, now)
            promoted = confirm(candidate, boosted, now, **context)
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
