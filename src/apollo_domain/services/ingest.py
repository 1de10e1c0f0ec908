"""Ingest (``store_knowledge``): the eight steps of docs/architecture.md, "The use cases"."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from attrs import frozen

from .. import admission
from ..bounds import CONTEXT_BYTES, SUBMITTED_BY, SUBMITTED_FROM
from ..commands import StoreKnowledge, WritebackStore, WritebackVectorize
from ..contradiction import flips_negation
from ..credibility import SourceCredibility
from ..entities import Extraction
from ..episodes import EPISODE_CONTEXT, Episode
from ..errors import Conflict, ValidationError
from ..model import (
    AccessScope,
    ContentType,
    DedupKey,
    Entry,
    Evidence,
    EvidenceKind,
    Outcome,
    SourceRef,
    Status,
    Viewer,
    dedup_key,
)
from ..normalize import (
    bounded_text,
    clean_content,
    content_hash,
    make_source,
    normalize_content_type,
    normalize_domain,
    normalize_scope,
    normalize_tags,
)
from ..policy import ConfidencePolicy
from ..ports import AccessLogRecord, CredibilityRecord, ScoredEntry, SearchFilter, UnitOfWork
from ..results import IngestResult
from ..rules import Corroborator, independent_of_all, may_corroborate
from ..validation import bounded_json, check_depth
from ..writeback import writeback_arguments
from .context import (
    ACTIVE,
    INGEST_PARTS,
    Caller,
    Deps,
    as_floats,
    embed_readings,
    first_application,
    in_unit_of_work,
    resolve_viewer,
    unit_float,
)
from .corroboration import corroboration_boost
from .entities import extract, index_entry
from .write_rate import charge_write

NEIGHBOURS = 5
CONTRADICTION_SCAN = "contradiction_scan"
AGREEMENT_RECORDED = "agreement recorded"
_RESERVED_CONTEXT_KEYS = frozenset(
    {
        "deprecation_reason",
        "dispute_resolution",
        "bootstrap",
        "gas",
        "archive_reason",
        EPISODE_CONTEXT,
    }
)


@frozen
class IngestRequest:
    """A validated, normalized submission."""

    content: str
    content_hash: str
    content_type: ContentType
    knowledge_domain: str
    tags: tuple[str, ...]
    access_scope: AccessScope
    source: SourceRef
    owner_id: str | None
    context: Mapping[str, Any]
    initial_confidence: float | None = None
    #: the episode (``store_text``) and place there of the statement it stores, if any
    episode: tuple[uuid.UUID, int] | None = None

    @property
    def dedup_key(self) -> DedupKey:
        """The request's content in its deduplication partition (:func:`dedup_key`)."""
        return dedup_key(self.content_hash, self.access_scope, self.owner_id)

    @property
    def corroborator(self) -> Corroborator:
        return Corroborator(
            self.knowledge_domain, self.content_type, self.access_scope, self.owner_id, self.source
        )


def prepare(
    caller: Caller,
    command: StoreKnowledge,
    *,
    initial_confidence: float | None = None,
    system_context: Mapping[str, Any] | None = None,
    edge_submission: bool = True,
) -> IngestRequest:
    """Step 1: the command validated and normalized (:class:`ValidationError` names the
    field), as the agent it credits (``caller`` when none). Over an edge the submission
    metadata is the edge's own (the principal, the edge) and what the command says of it
    is only held to its bounds; ``edge_submission`` false keeps the command's (a GAS
    deposit: Apollo's own work on an event, whichever edge carried it)."""
    acting = caller.acting_as(command.agent_id)
    text = clean_content(command.content)
    tags = command.tags
    if tags is not None and not isinstance(tags, Sequence):
        raise ValidationError("tags", "must be a list of strings")
    normalized_tags = normalize_tags(tags)
    scope = normalize_scope(command.access_scope)
    if scope is not AccessScope.GLOBAL and acting.principal.id is None:
        raise ValidationError(
            "access_scope", f"{scope.value} entries need a resolved principal to own them"
        )
    submitted_by: object = command.submitted_by
    submitted_from: object = command.submitted_from
    if edge_submission and acting.edge is not None:
        bounded_text(submitted_by, SUBMITTED_BY)
        bounded_text(submitted_from, SUBMITTED_FROM)
        submitted_by, submitted_from = acting.principal.id, acting.edge
    return IngestRequest(
        content=text,
        content_hash=content_hash(text),
        content_type=normalize_content_type(command.content_type),
        knowledge_domain=normalize_domain(command.knowledge_domain, normalized_tags),
        tags=normalized_tags,
        access_scope=scope,
        source=make_source(
            acting.agent_id,
            command.source_provider,
            command.source_channel,
            submitted_by,
            submitted_from,
        ),
        owner_id=acting.principal.id,
        context={**clean_context(command.context), **(system_context or {})},
        initial_confidence=(
            None
            if initial_confidence is None
            else unit_float("initial_confidence", initial_confidence)
        ),
    )


async def store_knowledge(
    deps: Deps, caller: Caller, command: StoreKnowledge, idempotency_key: str | None = None
) -> IngestResult:
    """The ``store_knowledge`` use case: :func:`prepare`, then :func:`ingest`, as the agent
    the command credits; over an edge, charged to the caller's write rate once the command
    is found valid."""
    request = prepare(caller, command)
    await charge_write(deps, caller, 1)
    acting = caller.acting_as(command.agent_id)
    return await ingest(deps, acting, request, idempotency_key=idempotency_key)


async def store_writeback(
    deps: Deps,
    caller: Caller,
    command: WritebackStore | WritebackVectorize,
    idempotency_key: str | None = None,
) -> IngestResult:
    """A qualifying LLM response, ingested like any knowledge: its ``metadata`` gives the
    ingest's arguments and context (:func:`~apollo_domain.writeback.writeback_arguments`).
    A response that carries its embedding must have the store's dimension (the store's own
    embedder still produces the stored vector, so one store keeps one model)."""
    if isinstance(command, WritebackStore) and len(command.embedding) != deps.embedder.dimension:
        raise ValidationError(
            "embedding",
            f"has {len(command.embedding)} dimensions; this store uses {deps.embedder.dimension}",
        )
    stored = StoreKnowledge(
        content=command.content,
        agent_id=command.agent_id,
        **writeback_arguments(command.metadata),
    )
    return await store_knowledge(deps, caller, stored, idempotency_key)


def clean_context(context: object) -> dict[str, Any]:
    """Caller context: a JSON object within the ``JSON_DEPTH`` and ``CONTEXT_BYTES``
    bounds; Apollo's own keys may not be set by callers."""
    if context is None:
        return {}
    if not isinstance(context, Mapping):
        raise ValidationError("context", "must be a JSON object")
    check_depth("context", context)
    cleaned = {str(k): v for k, v in context.items() if str(k) not in _RESERVED_CONTEXT_KEYS}
    return bounded_json("context", cleaned, CONTEXT_BYTES)


async def ingest(
    deps: Deps, caller: Caller, request: IngestRequest, *, idempotency_key: str | None = None
) -> IngestResult:
    """Steps 2-8 of an ingest (docs/architecture.md, "The use cases"); nothing is written
    unless the whole ingest commits.

    A first, read-only look finds an exact duplicate, so a repeat is not embedded. Steps
    4-8 then run in one unit of work that decides again: the duplicate under its row lock
    (an entry archived since the look is no longer one, and the text is embedded then).
    When the look found none, the search comes first: a duplicate committed since is met
    there (a neighbour holding this very content) or by the insert's conflict, and is
    recorded under its row lock then, as when the look had found it.

    ``idempotency_key`` (a message id) is recorded in the same transaction: a redelivered
    message with the same key writes nothing and reports the entry it created before.
    """
    store = deps.store
    await store.preflight(INGEST_PARTS)  # step 2
    viewer = await resolve_viewer(store.directory, caller.principal)

    async with store.unit_of_work() as uow:  # read-only look: credibility and exact duplicate
        credibility = await uow.credibility.get(request.source.agent_id)
        duplicate = await _find_duplicate(uow, request)
    cred = _credibility(credibility.alpha, credibility.beta, credibility.label)
    floor = admission.check_credibility(deps.policy, cred)  # step 3
    if not floor.admitted:
        return IngestResult(Outcome.REJECTED, reason=f"{floor.reason}: {floor.detail}")

    embedding: tuple[float, ...] | None = None
    extraction = Extraction()
    if duplicate is None:  # step 5, outside the transaction: embedding may be slow
        embedding, extraction = await _embed(deps, request)

    async def write(uow: UnitOfWork) -> IngestResult:
        now = deps.clock.now()
        if not await first_application(uow, "ingest", idempotency_key, now):
            return _replayed(await _find_duplicate(uow, request))
        live = duplicate
        if live is not None:  # still live? (under its row lock)
            live = await _find_duplicate(uow, request, lock=True)
        if live is not None:  # step 4
            result = await _record_duplicate(deps, uow, viewer, request, live, cred, now)
        else:
            vector, entities = embedding, extraction
            if vector is None:  # the duplicate of the first look was archived since
                vector, entities = await _embed(deps, request)
            result = await _place(deps, uow, viewer, request, vector, cred, now)
            if result.outcome is Outcome.CREATED and result.entry_id is not None:
                await index_entry(uow, result.entry_id, entities, now)
        if result.outcome is not Outcome.REJECTED:
            await _bookkeep(uow, request, result, now)
            await uow.commit()
        return result

    # Run whole again when the store broke it apart for a concurrent unit of work.
    return await in_unit_of_work(store, write)


async def _embed(deps: Deps, request: IngestRequest) -> tuple[tuple[float, ...], Extraction]:
    """Step 5's embedding of the text, and the entities it mentions."""
    (vector,) = await embed_readings(deps, [request.content])
    return as_floats(vector), await extract(deps.extractor, request.content)


async def _bookkeep(
    uow: UnitOfWork, request: IngestRequest, result: IngestResult, now: Any
) -> None:
    """Expertise (agent × domain) and the ``ingest`` access-log row, in the ingest's
    transaction."""
    await uow.expertise.record_activity(request.source.agent_id, request.knowledge_domain, now)
    await uow.access_log.record([ingest_log_record(request, result, now)])


def ingest_log_record(request: IngestRequest, result: IngestResult, now: Any) -> AccessLogRecord:
    """The ``ingest`` access-log row of one request's outcome."""
    return AccessLogRecord(
        "ingest", request.source.agent_id, result.entry_id, now, {"outcome": result.outcome.value}
    )


def _replayed(entry: Entry | None) -> IngestResult:
    if entry is None:
        return IngestResult(Outcome.DEDUPLICATED, reason="already processed")
    return IngestResult(
        Outcome.DEDUPLICATED, entry.id, entry.status, entry.confidence, "already processed"
    )


def _credibility(alpha: float, beta: float, label: str | None) -> float:
    return SourceCredibility("", alpha, beta, label).credibility


async def _find_duplicate(
    uow: UnitOfWork, request: IngestRequest, *, lock: bool = False
) -> Entry | None:
    """The live entry holding this content in its partition; ``lock``: under its row lock,
    as the entry a duplicate is recorded against must be."""
    return await uow.entries.find_by_hash(*request.dedup_key, lock=lock)


def supports(
    policy: ConfidencePolicy,
    viewer: Viewer,
    request: IngestRequest,
    target: Entry,
    similarity: float,
    recorded: Sequence[Evidence],
    kind: EvidenceKind,
) -> bool:
    """``request`` may add ``kind`` evidence to ``target``: every corroboration rule
    (:func:`may_corroborate`), against a confirmed target at the corroboration similarity,
    or against a candidate it restates (near-duplicate similarity) for an agreement; and it
    does not say the opposite (:func:`flips_negation`: a negated restatement is a
    contradiction candidate, however close it embeds)."""
    if kind is EvidenceKind.CORROBORATION:
        status, threshold = Status.CONFIRMED, policy.corroboration_similarity
    else:
        status, threshold = Status.CANDIDATE, policy.near_duplicate_similarity
    return (
        target.status is status
        and may_corroborate(
            request.corroborator,
            target,
            similarity,
            [e.source for e in recorded],
            min_similarity=threshold,
            owners_sharing_group=viewer.team_owners,
        )
        and not flips_negation(request.content, target.content)
    )


def evidence_matters(
    policy: ConfidencePolicy, viewer: Viewer, request: IngestRequest, neighbour: ScoredEntry
) -> bool:
    """Whether ``neighbour``'s evidence can change how ``request`` is placed: it is close
    enough for the repeat rule (step 6), or ``request`` may support it whatever evidence it
    holds (the independence rule can only say no). Any other neighbour's is not read."""
    return policy.is_near_duplicate(neighbour.similarity) or any(
        supports(policy, viewer, request, neighbour.entry, neighbour.similarity, (), kind)
        for kind in (EvidenceKind.CORROBORATION, EvidenceKind.AGREEMENT)
    )


async def _record_duplicate(
    deps: Deps,
    uow: UnitOfWork,
    viewer: Viewer,
    request: IngestRequest,
    existing: Entry,
    credibility: float,
    now: Any,
) -> IngestResult:
    """Step 4: record a source's exact repeat against the existing entry, which the caller
    found live under its row lock (:func:`_find_duplicate` with ``lock``). An independent
    source's evidence corroborates a confirmed entry (boost, once per source); a source
    that corroboration allows agrees with a candidate; anything else is a duplicate."""
    recorded = await uow.evidence.for_entry(existing.id)
    kind = duplicate_kind(deps.policy, viewer, request, existing, recorded)
    added = await uow.evidence.add(
        Evidence(existing.id, request.source, 1.0, now, kind, credibility)
    )
    confidence = existing.confidence
    if added and kind is EvidenceKind.CORROBORATION:
        confidence = await corroboration_boost(deps, uow, existing, credibility, now)
    return duplicate_outcome(existing, kind, added, confidence)


def duplicate_kind(
    policy: ConfidencePolicy,
    viewer: Viewer,
    request: IngestRequest,
    existing: Entry,
    recorded: Sequence[Evidence],
) -> EvidenceKind:
    """Step 4's evidence for an exact repeat of ``existing`` (with ``recorded`` evidence):
    an independent source corroborates a confirmed entry; a source that corroboration
    allows agrees with a candidate; anything else is a duplicate."""
    if existing.status is Status.CONFIRMED and independent_of_all(
        request.source, [e.source for e in recorded]
    ):
        return EvidenceKind.CORROBORATION
    if supports(policy, viewer, request, existing, 1.0, recorded, EvidenceKind.AGREEMENT):
        return EvidenceKind.AGREEMENT
    return EvidenceKind.DUPLICATE


def duplicate_outcome(
    existing: Entry, kind: EvidenceKind, added: bool, confidence: float
) -> IngestResult:
    """The result of recording ``kind`` evidence (``added``: it was new for this source)
    against ``existing``, whose confidence is now ``confidence``."""
    reason = "exact duplicate"
    if added and kind is EvidenceKind.CORROBORATION:
        reason = "corroborated by an independent source"
    elif added and kind is EvidenceKind.AGREEMENT:
        reason = AGREEMENT_RECORDED
    return IngestResult(Outcome.DEDUPLICATED, existing.id, existing.status, confidence, reason)


async def _place(
    deps: Deps,
    uow: UnitOfWork,
    viewer: Viewer,
    request: IngestRequest,
    embedding: tuple[float, ...],
    credibility: float,
    now: Any,
    neighbours: list[ScoredEntry] | None = None,
) -> IngestResult:
    policy = deps.policy
    if neighbours is None:
        neighbours = await uow.entries.nearest(
            embedding,
            SearchFilter(viewer, ACTIVE, access_scope=request.access_scope),
            NEIGHBOURS,
            ingest=True,
        )
    if any(n.entry.dedup_key == request.dedup_key for n in neighbours):
        # a concurrent writer committed this very content meanwhile
        same = await _find_duplicate(uow, request, lock=True)
        if same is not None:
            return await _record_duplicate(deps, uow, viewer, request, same, credibility, now)
        neighbours = [n for n in neighbours if n.entry.dedup_key != request.dedup_key]
    evidence = await uow.evidence.for_entries(
        [n.entry.id for n in neighbours if evidence_matters(policy, viewer, request, n)]
    )

    # step 6: corroborate the best confirmed neighbour the rules allow; failing that,
    # record agreement on the best candidate this text restates (docs/concepts.md, "The rules in
    # one page").
    # The possible targets are locked together, in id order (locking them one by one in
    # similarity order could deadlock with a writer locking in id order), and each is
    # decided again on its state and evidence as of then.
    kinds = (EvidenceKind.CORROBORATION, EvidenceKind.AGREEMENT)
    possible = [
        scored
        for scored in neighbours
        if any(
            supports(
                policy,
                viewer,
                request,
                scored.entry,
                scored.similarity,
                evidence.get(scored.entry.id, []),
                kind,
            )
            for kind in kinds
        )
    ]
    if possible:
        locked = await uow.entries.lock_many([scored.entry.id for scored in possible])
        recorded = await uow.evidence.for_entries(list(locked))
        for kind in kinds:
            for scored in possible:
                target = locked.get(scored.entry.id)
                if target is None:  # erased meanwhile
                    continue
                evidence[target.id] = recorded.get(target.id, [])
                if supports(
                    policy, viewer, request, target, scored.similarity, evidence[target.id], kind
                ):
                    return await _support(
                        deps, uow, request, target, scored.similarity, kind, credibility, now
                    )

    decision = admit_new(policy, request, credibility, neighbours, evidence)
    if not decision.admitted:
        return IngestResult(Outcome.REJECTED, reason=f"{decision.reason}: {decision.detail}")
    entry = new_entry(policy, request, embedding, now)  # step 8
    try:
        await uow.entries.add(entry)  # a conflict writes nothing: no savepoint needed
    except Conflict:
        # a concurrent writer committed the same content first: record against the winner
        winner = await _find_duplicate(uow, request, lock=True)
        if winner is None:
            raise Conflict(
                "content-hash conflict, but the winning entry could not be read"
            ) from None
        return await _record_duplicate(deps, uow, viewer, request, winner, credibility, now)
    await uow.evidence.add_origin(
        Evidence(entry.id, request.source, 1.0, now, EvidenceKind.ORIGIN, credibility)
    )
    await uow.outbox.enqueue(CONTRADICTION_SCAN, {"entry_id": str(entry.id)}, now)
    return IngestResult(Outcome.CREATED, entry.id, entry.status, entry.confidence, None)


async def _support(
    deps: Deps,
    uow: UnitOfWork,
    request: IngestRequest,
    target: Entry,
    similarity: float,
    kind: EvidenceKind,
    credibility: float,
    now: Any,
) -> IngestResult:
    """Record the source's corroboration of a confirmed entry (boosted once per source) or
    its agreement with a candidate."""
    added = await uow.evidence.add(
        Evidence(target.id, request.source, similarity, now, kind, credibility)
    )
    confidence = target.confidence
    if added and kind is EvidenceKind.CORROBORATION:
        confidence = await corroboration_boost(deps, uow, target, credibility, now)
    return support_outcome(target, similarity, kind, confidence)


def support_outcome(
    target: Entry, similarity: float, kind: EvidenceKind, confidence: float
) -> IngestResult:
    """The result of recording ``kind`` evidence at ``similarity`` on ``target`` (step 6),
    whose confidence is now ``confidence``."""
    if kind is EvidenceKind.AGREEMENT:
        return IngestResult(
            Outcome.DEDUPLICATED, target.id, target.status, target.confidence, AGREEMENT_RECORDED
        )
    return IngestResult(
        Outcome.CORROBORATED,
        target.id,
        target.status,
        confidence,
        f"similarity {similarity:.3f} to a confirmed entry",
    )


def admit_new(
    policy: ConfidencePolicy,
    request: IngestRequest,
    credibility: float,
    neighbours: Sequence[ScoredEntry],
    evidence: Mapping[uuid.UUID, Sequence[Evidence]],
) -> admission.AdmissionDecision:
    """Steps 6 (a source repeating itself) and 7 (novelty) for a text with these nearest
    neighbours (highest similarity first) and their evidence. A neighbour the text
    contradicts by negation (:func:`flips_negation`) is no repeat and takes nothing from
    its novelty: the text is a new claim, for the contradiction scan to judge. Only close
    neighbours (at the corroboration similarity) are tested, which bounds the work: a
    farther one is no repeat, and leaves a source above credibility 0.2 enough novelty."""
    neighbours = [
        n
        for n in neighbours
        if not (
            policy.corroborates(n.similarity) and flips_negation(request.content, n.entry.content)
        )
    ]
    max_similarity = neighbours[0].similarity if neighbours else None
    repeats_own_source = any(
        policy.is_near_duplicate(n.similarity)
        and not independent_of_all(request.source, [e.source for e in evidence.get(n.entry.id, ())])
        for n in neighbours
    )
    return admission.admit(
        policy, credibility, max_similarity, repeats_own_source=repeats_own_source
    )


def new_entry(
    policy: ConfidencePolicy, request: IngestRequest, embedding: tuple[float, ...], now: Any
) -> Entry:
    """Step 8: the candidate a request creates."""
    return Entry(
        id=uuid.uuid4(),
        content=request.content,
        content_hash=request.content_hash,
        content_type=request.content_type,
        knowledge_domain=request.knowledge_domain,
        tags=request.tags,
        confidence=(
            policy.initial_confidence
            if request.initial_confidence is None
            else request.initial_confidence
        ),
        status=Status.CANDIDATE,
        source=request.source,
        access_scope=request.access_scope,
        owner_id=request.owner_id,
        created_at=now,
        updated_at=now,
        source_context=dict(request.context),
        embedding=embedding,
        episode_id=None if request.episode is None else request.episode[0],
        position=None if request.episode is None else request.episode[1],
    )


async def ingest_chunk_in_order(
    deps: Deps,
    caller: Caller,
    requests: Sequence[IngestRequest],
    embeddings: Sequence[tuple[float, ...]],
    extractions: Sequence[Extraction],
    idempotency_key: str | None,
    episode: Episode | None = None,
    kind: str = "store_many",
) -> list[IngestResult]:
    """The requests ingested one after the other, as :func:`ingest` would, but in ONE unit
    of work (all or nothing) that records ``idempotency_key`` as ``<kind>:<key>`` (and
    ``episode``, whose
    statements the requests are): each sees what the earlier ones wrote. The reference the
    set-based bulk ingest must agree with, and its path when a concurrent writer gets in
    its way."""
    store = deps.store
    viewer = await resolve_viewer(store.directory, caller.principal)

    async def in_order(uow: UnitOfWork) -> list[IngestResult]:
        results: list[IngestResult] = []
        if not await first_application(uow, "store_many", idempotency_key, deps.clock.now()) or (
            episode is not None and not await uow.episodes.add(episode)
        ):
            return [_replayed(await _find_duplicate(uow, r)) for r in requests]
        credibility: dict[str, float] = {}
        for agent in dict.fromkeys(r.source.agent_id for r in requests):
            record = await uow.credibility.get(agent)
            credibility[agent] = _credibility(record.alpha, record.beta, record.label)
        for request, embedding, extraction in zip(requests, embeddings, extractions, strict=True):
            now = deps.clock.now()
            cred = credibility[request.source.agent_id]
            floor = admission.check_credibility(deps.policy, cred)
            if not floor.admitted:
                results.append(
                    IngestResult(Outcome.REJECTED, reason=f"{floor.reason}: {floor.detail}")
                )
                continue
            duplicate = await _find_duplicate(uow, request, lock=True)
            if duplicate is not None:
                result = await _record_duplicate(deps, uow, viewer, request, duplicate, cred, now)
            else:
                result = await _place(deps, uow, viewer, request, embedding, cred, now)
                if result.outcome is Outcome.CREATED and result.entry_id is not None:
                    await index_entry(uow, result.entry_id, extraction, now)
            if result.outcome is not Outcome.REJECTED:
                await _bookkeep(uow, request, result, now)
            results.append(result)
        await uow.commit()
        return results

    # Run whole again when the store broke it apart for a concurrent unit of work.
    return await in_unit_of_work(store, in_order)


def replayed(entries: Sequence[Entry | None]) -> list[IngestResult]:
    """The results of a redelivered chunk, from the live entry holding each request's text."""
    return [_replayed(entry) for entry in entries]


def credibility_of(record: CredibilityRecord) -> float:
    """The credibility a source's record gives it (labels override)."""
    return _credibility(record.alpha, record.beta, record.label)
