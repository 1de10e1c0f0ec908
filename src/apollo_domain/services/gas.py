"""GAS: turn an LLM audit event into knowledge (DESIGN §4 "GAS")."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from ..errors import ApolloError, Forbidden, InvalidTransition, NotFound, ValidationError
from ..gas_rules import (
    FALLBACK_RELATION,
    FALLBACK_RELATION_CONFIDENCE,
    RELATION_CANDIDATES_PER_FACT,
    DepositCounts,
    FactDeposit,
    ProposedRelation,
    RelationVerdict,
    coerce_facts,
    extract_entities,
    gate_relation,
    unambiguous_deposits,
)
from ..model import AccessScope, ContentType, Relation, RelationType
from ..ports import SearchFilter
from ..results import GasResult, IngestResult
from ..rules import is_visible
from ..validation import check_depth
from .context import ACTIVE, Caller, Deps, embed_readings, resolve_viewer
from .ingest import ingest, prepare


def _caller_agent(event: Mapping[str, Any]) -> str:
    caller = event.get("caller")
    if isinstance(caller, Mapping):
        for key in ("agent_id", "id", "name"):
            if caller.get(key):
                return str(caller[key])
    elif isinstance(caller, str) and caller.strip():
        return caller
    routing = event.get("routing")
    if isinstance(routing, Mapping) and routing.get("provider"):
        return f"{routing['provider']}-gas"
    return "gas"


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
MAX_REQUEST_ID_CHARS = 255


def _request_id(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) >= 10**MAX_REQUEST_ID_CHARS:
            raise ValidationError("request_id", f"is longer than {MAX_REQUEST_ID_CHARS} digits")
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ValidationError("request_id", "is required")
    text = value.strip()
    if len(text) > MAX_REQUEST_ID_CHARS:
        raise ValidationError(
            "request_id", f"is {len(text)} characters; at most {MAX_REQUEST_ID_CHARS} are allowed"
        )
    return text


async def process_gas_event(
    deps: Deps, event: Mapping[str, Any], caller: Caller, *, scope: str = "global"
) -> GasResult:
    """Comprehend → entities → deposit facts → relate → synthesize → anticipate.

    ``caller.principal`` owns the deposits (resolved at the edge); the event's ``caller``
    only attributes them. A request id already processed changes nothing.

    Idempotency (DESIGN §4 "Concurrency"): each deposit is an ingest keyed by the request
    id and its content hash, recorded in the deposit's own transaction, so overlapping or
    repeated runs of one request deposit each fact (and synthesis) once, and a run after a
    partial failure deposits only what is missing. The request id itself is recorded at
    the end, only when every deposit succeeded or failed permanently
    (:data:`PERMANENT_FAILURES`); a transient deposit failure is raised with the request
    left unmarked, for the bus to redeliver. The early look at the request id only saves a
    finished request's LLM calls; the deposit keys are what make a rerun harmless.
    """
    if not isinstance(event, Mapping):
        raise ValidationError("event", "must be a JSON object")
    check_depth("event", event)
    request_id = _request_id(event.get("request_id"))
    response = event.get("response_content")
    if not isinstance(response, str) or not response.strip():
        raise ValidationError("response_content", "must be a non-empty string")
    messages = event.get("messages") or []
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        raise ValidationError("messages", "must be a list of messages")
    key = f"gas:{request_id}"
    async with deps.store.unit_of_work() as uow:
        if await uow.processed.seen(key):
            return GasResult(request_id, (), 0, 0, 0, 0, 0, DepositCounts().as_dict(), True)

    agent = Caller.of(_caller_agent(event), caller.principal)
    routing = event.get("routing") if isinstance(event.get("routing"), Mapping) else {}
    gas_context = {"request_id": request_id, "routing": dict(routing or {})}
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
        targets = await uow.entries.get_many({p.target_id for p in proposals})
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


async def _deposit(
    deps: Deps,
    agent: Caller,
    key: str,
    content: str,
    content_type: object,
    scope: str,
    system_context: Mapping[str, Any],
    initial_confidence: float | None = None,
) -> IngestResult | None:
    """Ingest one deposit once per ``key`` and content hash; None when it failed for good
    (:data:`PERMANENT_FAILURES`). A transient failure propagates."""
    try:
        request = prepare(
            agent,
            content=content,
            content_type=content_type,
            access_scope=scope,
            system_context=system_context,
            initial_confidence=initial_confidence,
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
