"""GAS: turn an LLM audit event into knowledge (docs/architecture.md, "The use cases")."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from .. import bounds
from ..commands import ProcessGasEvent, StoreKnowledge
from ..errors import ApolloError, Forbidden, InvalidTransition, NotFound, ValidationError
from ..gas_rules import (
    FALLBACK_RELATION,
    FALLBACK_RELATION_CONFIDENCE,
    RELATION_CANDIDATES_PER_FACT,
    DepositCounts,
    FactDeposit,
    ProposedRelation,
    RelationDecision,
    RelationVerdict,
    coerce_facts,
    extract_entities,
    gate_relation,
    unambiguous_deposits,
)
from ..model import AccessScope, ContentType, Entry, Relation, RelationType
from ..normalize import bounded_text
from ..ports import SearchFilter
from ..results import GasResult, IngestResult
from ..rules import DISPUTE_RELATIONS, check_agent_id, dispute_refusal, is_visible
from ..validation import bounded_json, check_depth
from .context import ACTIVE, Caller, Deps, embed_readings, resolve_viewer, scoped_key
from .ingest import ingest, prepare


def _named_caller(value: object) -> str:
    """An agent id the event names: bounded like any agent id (naming ``caller``), and not
    one Apollo reserves (naming ``caller.agent_id``)."""
    named = bounded_text(str(value), bounds.AGENT_ID, "caller") or ""
    return check_agent_id("caller.agent_id", named)


def _depositor(event: Mapping[str, Any], caller: Caller) -> Caller:
    """Who the deposits are credited to. The event's ``caller`` (else ``<provider>-gas``
    from its routing, else ``gas``) is honoured only from a principal that speaks for
    other agents (a gateway, an admin, the embedding program); anyone else deposits as
    itself, whatever the event says (docs/security.md, "Security model"). A named agent
    Apollo reserves is refused (:class:`ValidationError` naming ``caller.agent_id``)."""
    if not caller.principal.role.speaks_for_others:
        return caller
    named = event.get("caller")
    if isinstance(named, Mapping):
        for key in ("agent_id", "id", "name"):
            if named.get(key):
                return caller.acting_as(_named_caller(named[key]))
    elif isinstance(named, str) and named.strip():
        return caller.acting_as(_named_caller(named))
    routing = event.get("routing")
    if isinstance(routing, Mapping) and routing.get("provider"):
        return caller.acting_as(f"{routing['provider']}-gas")
    return caller.acting_as("gas")


#: Deposit failures a retry cannot fix: the deposit is counted as failed and the request
#: may still be marked processed. Any other failure (the store or the embedder away, a
#: concurrent writer that won, a change not persisted) is transient: it propagates, the
#: request stays unmarked, and the bus redelivers the event.
PERMANENT_FAILURES: tuple[type[ApolloError], ...] = (
    ValidationError,
    Forbidden,
    NotFound,
    InvalidTransition,
)

#: The longest GAS request id: it keys the processed-requests record (an index).
MAX_REQUEST_ID_CHARS = bounds.REQUEST_ID.limit


def _request_id(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) >= 10**MAX_REQUEST_ID_CHARS:
            raise ValidationError("request_id", f"is longer than {MAX_REQUEST_ID_CHARS} digits")
        value = str(value)
    named = bounded_text(value, bounds.REQUEST_ID) if isinstance(value, str) else None
    if not named:
        raise ValidationError("request_id", "is required")
    return named


async def process_gas_event(
    deps: Deps,
    caller: Caller,
    command: ProcessGasEvent,
    idempotency_key: str | None = None,
    *,
    scope: str = "global",
) -> GasResult:
    """Comprehend → entities → deposit facts → relate → synthesize → anticipate.

    The event is idempotent by its own request id, whichever message carried it:
    ``idempotency_key`` (a message id) is not needed.

    ``caller.principal`` owns the deposits (resolved at the edge); the event's ``caller``
    only attributes them, and only when the principal speaks for others
    (:func:`_depositor`). A request id the same principal already processed changes
    nothing; another principal's request of the same id is another request.

    Idempotency (docs/architecture.md, "Units of work and concurrency"): each deposit is an
    ingest keyed by the request id and its content hash, recorded in the deposit's own
    transaction, so overlapping or repeated runs of one request deposit each fact (and
    synthesis) once, and a run after a partial failure deposits only what is missing. The
    request id itself is recorded at the end, only when every deposit succeeded or failed
    permanently (:data:`PERMANENT_FAILURES`); a transient deposit failure is raised with the
    request left unmarked, for the bus to redeliver. The early look at the request id only
    saves a finished request's LLM calls; the deposit keys are what make a rerun harmless."""
    event = command.event
    if not isinstance(event, Mapping):
        raise ValidationError("event", "must be a JSON object")
    check_depth("event", event)
    request_id = _request_id(event.get("request_id"))
    response = event.get("response_content")
    if not isinstance(response, str) or not response.strip():
        raise ValidationError("response_content", "must be a non-empty string")
    bounds.RESPONSE.check(len(response))
    messages = event.get("messages") or []
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        raise ValidationError("messages", "must be a list of messages")
    agent = _depositor(event, caller)
    routing = event.get("routing") if isinstance(event.get("routing"), Mapping) else {}
    gas_context = {
        "request_id": request_id,
        "routing": bounded_json("routing", routing or {}, bounds.ROUTING),
    }
    key = f"gas:{scoped_key(caller.principal, request_id)}"
    async with deps.store.unit_of_work() as uow:
        if await uow.processed.seen(key):
            return GasResult(request_id, (), 0, 0, 0, 0, 0, DepositCounts().as_dict(), True)

    phases: list[str] = []
    llm = deps.llm

    # 1. comprehend
    if llm is not None:
        facts = coerce_facts(await llm.comprehend(list(messages), response))
    else:
        facts = [(response.strip(), ContentType.OBSERVATION.value)]
    phases.append("comprehend")
    # 2. entities
    entities = extract_entities(f for f, _ in facts)
    phases.append("entities")
    # 3. deposit facts through normal ingest
    counts = DepositCounts()
    deposits: list[FactDeposit] = []
    for index, (content, content_type) in enumerate(facts):
        result = await _deposit(
            deps,
            agent,
            f"{key}:fact",
            content,
            content_type,
            scope,
            {"gas": {**gas_context, "fact_index": index, "entities": entities[:20]}},
        )
        counts.count_ingest(
            result.outcome if result else None, result.entry_id if result else None, synthesis=False
        )
        deposits.append(
            FactDeposit(
                index,
                result.outcome if result else None,
                result.entry_id if result else None,
                AccessScope(scope),
            )
        )
    phases.append("deposit")
    # 4. relate each fact to the top relevant visible entries
    proposals = await _propose_relations(deps, agent, facts, deposits)
    usable = unambiguous_deposits(deposits)
    seen: set[tuple[UUID, UUID, RelationType]] = set()
    async with deps.store.unit_of_work() as uow:
        targets = await uow.entries.get_many(
            {p.target_id for p in proposals} | {d.entry_id for d in usable.values() if d.entry_id}
        )
    viewer = await resolve_viewer(deps.store.directory, caller.principal)
    for proposal in proposals:
        target = targets.get(proposal.target_id)
        target_scope = target.access_scope if target and is_visible(target, viewer) else None
        decision = gate_relation(
            proposal,
            usable,
            target_scope,
            seen,
            confidence_gate=deps.policy.relation_confidence_gate,
        )
        verdict = decision.verdict
        if verdict is RelationVerdict.PERSIST and _disputes_others(
            caller, decision, proposal.target_id, targets
        ):
            verdict = RelationVerdict.SKIP  # a dispute only between the caller's own entries
        if verdict is RelationVerdict.PERSIST:
            assert decision.from_id is not None and decision.relation_type is not None
            try:
                async with deps.store.unit_of_work() as uow:
                    await uow.relations.add(
                        Relation(
                            decision.from_id,
                            proposal.target_id,
                            decision.relation_type,
                            proposal.confidence,
                            deps.clock.now(),
                            {"gas": {"request_id": request_id}},
                        )
                    )
                    await uow.commit()
            except ApolloError:
                verdict = RelationVerdict.FAIL
        counts.count_relation(verdict)
    phases.append("relate")
    # 5. synthesize
    synthesis_count = 0
    if llm is not None and len(facts) >= 2:
        items = await llm.synthesize([f for f, _ in facts])
        for item in items:
            text = item.get("content") if isinstance(item, Mapping) else None
            if not isinstance(text, str) or not text.strip():
                continue
            content = text
            synthesis_count += 1
            indices = [
                int(i)
                for i in (item.get("source_indices") or [])
                if isinstance(i, int) and 0 <= i < len(facts)
            ]
            source_ids = [str(deposits[i].entry_id) for i in indices if deposits[i].entry_id]
            confidences = await _confidences(deps, [deposits[i].entry_id for i in indices])
            result = await _deposit(
                deps,
                agent,
                f"{key}:synthesis",
                content,
                item.get("content_type"),
                scope,
                {
                    "gas": {
                        **gas_context,
                        "synthesis": True,
                        "source_indices": indices,
                        "source_entry_ids": source_ids,
                    }
                },
                initial_confidence=deps.policy.synthesis_confidence(confidences),
            )
            counts.count_ingest(
                result.outcome if result else None,
                result.entry_id if result else None,
                synthesis=True,
            )
        phases.append("synthesize")
    # 6. anticipate
    anticipations = 0
    if llm is not None:
        anticipations = len(await llm.anticipate([f for f, _ in facts]))
        phases.append("anticipate")

    async with deps.store.unit_of_work() as uow:
        await uow.processed.mark(key, deps.clock.now())
        await uow.commit()
    return GasResult(
        request_id,
        tuple(phases),
        len(facts),
        len(entities),
        len(proposals),
        synthesis_count,
        anticipations,
        counts.as_dict(),
    )


def _disputes_others(
    caller: Caller, decision: RelationDecision, target_id: UUID, entries: Mapping[UUID, Entry]
) -> bool:
    """Whether a proposed relation would make another's entry a party to a dispute
    (:func:`~apollo_domain.rules.dispute_refusal`, as for a manual link)."""
    assert decision.from_id is not None and decision.relation_type is not None
    source = entries.get(decision.from_id)
    target = entries.get(target_id)
    if source is None or target is None:
        return decision.relation_type in DISPUTE_RELATIONS
    return dispute_refusal(caller.principal, decision.relation_type, source, target) is not None


async def _deposit(
    deps: Deps,
    agent: Caller,
    key: str,
    content: str,
    content_type: str | None,
    scope: str,
    system_context: Mapping[str, Any],
    initial_confidence: float | None = None,
) -> IngestResult | None:
    """Ingest one deposit once per ``key`` and content hash; None when it failed for good
    (:data:`PERMANENT_FAILURES`). A transient failure propagates."""
    try:
        request = prepare(
            agent,
            StoreKnowledge(content=content, content_type=content_type, access_scope=scope),
            system_context=system_context,
            initial_confidence=initial_confidence,
            edge_submission=False,
        )
        return await ingest(deps, agent, request, idempotency_key=f"{key}:{request.content_hash}")
    except PERMANENT_FAILURES:
        return None


async def _confidences(deps: Deps, ids: list[Any]) -> list[float]:
    wanted = [i for i in ids if i is not None]
    if not wanted:
        return []
    async with deps.store.unit_of_work() as uow:
        found = await uow.entries.get_many(wanted)
    return [found[i].confidence for i in wanted if i in found]


async def _propose_relations(
    deps: Deps, agent: Caller, facts: list[tuple[str, str | None]], deposits: list[FactDeposit]
) -> list[ProposedRelation]:
    viewer = await resolve_viewer(deps.store.directory, agent.principal)
    proposals: list[ProposedRelation] = []
    for deposit, (content, _kind) in zip(deposits, facts, strict=True):
        if deposit.entry_id is None:
            continue
        (vector,) = await embed_readings(deps, [content])
        async with deps.store.unit_of_work() as uow:
            hits = await uow.entries.nearest(
                vector,
                SearchFilter(viewer, ACTIVE, exclude_ids=frozenset({deposit.entry_id})),
                RELATION_CANDIDATES_PER_FACT,
            )
        for hit in hits:
            if deps.llm is None:
                proposals.append(
                    ProposedRelation(
                        deposit.index,
                        hit.entry.id,
                        FALLBACK_RELATION.value,
                        FALLBACK_RELATION_CONFIDENCE,
                    )
                )
                continue
            for rel in await deps.llm.relate(content, hit.entry.content):
                if not isinstance(rel, Mapping):
                    continue
                try:
                    confidence = float(rel.get("confidence", 0.0))
                except (TypeError, ValueError, OverflowError):
                    confidence = math.nan  # not a number: the gate skips and counts it
                proposals.append(
                    ProposedRelation(
                        deposit.index, hit.entry.id, str(rel.get("relation_type", "")), confidence
                    )
                )
    return proposals
