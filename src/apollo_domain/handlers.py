"""The command handler table: each command type → the use case that carries it out.

Who may run a command is its action's record (:mod:`apollo_domain.actions`), checked here
by :func:`authorize` for every edge.

``await handle(deps, caller, command)`` is the one entry point of every edge (library
client, HTTP, bus consumer, CLI). It runs the use case with the caller's identity and
returns the use case's result value; what an edge does with it (a JSON body, an RPC reply,
an acknowledgement) is the edge's business.

``idempotency_key`` (a bus message id) makes a redelivered mutation change nothing the
second time: every mutating use case records ``<kind>:<key>`` in the same transaction as
its effects and, finding it already recorded, returns its "already applied" result (the
same shape: ``changed``/``created`` False, zero counts, or the entry or source as it is
now; an ingest reports the entry it made, outcome ``deduplicated``). A GAS event is
idempotent by its own request id. Both are the caller's principal's keys
(:func:`~apollo_domain.services.context.scoped_key`): the same message id or request id
from another principal is another command.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from attrs import evolve

from . import commands as c
from . import services
from .actions import Access, action_of
from .bounds import STORE_MANY, SUBMITTED_BY, SUBMITTED_FROM
from .disclosure import AGENT_VIEWS, hide_agents
from .errors import Forbidden, NotFound, ValidationError
from .expertise import DomainCoverage
from .model import Entry, Evidence
from .normalize import bounded_text
from .ports import ExpertiseRecord, StoreStats
from .results import (
    AgentProfile,
    ContradictionReport,
    CorroborationReport,
    EntityDetail,
    EntityHistory,
    EntitySummary,
    ErasureResult,
    GasResult,
    IngestResult,
    LifecycleResult,
    LinkedEntry,
    LinkResult,
    MaintenanceResult,
    QueryResult,
    RelatedEntity,
    RelatedEntry,
    SourceReport,
)
from .rules import check_agent_id, is_visible
from .services import Caller, Deps
from .services.graph import parse_id
from .writeback import writeback_arguments

R = TypeVar("R")
Run = Callable[[Deps, Caller, Any, str | None], Awaitable[Any]]


def _submission(caller: Caller, submitted_by: object, submitted_from: object) -> dict[str, Any]:
    """The submission metadata an ingest records: an edge's own (the principal, the edge),
    the embedding program's as given. What a payload says is ignored over an edge, but it
    is held to the same bounds as everywhere (over-limit is refused naming the field)."""
    if caller.edge is not None:
        bounded_text(submitted_by, SUBMITTED_BY)
        bounded_text(submitted_from, SUBMITTED_FROM)
        return {"submitted_by": caller.principal.id, "submitted_from": caller.edge}
    return {"submitted_by": submitted_by, "submitted_from": submitted_from}


def ingest_request(caller: Caller, command: c.StoreKnowledge) -> services.IngestRequest:
    """Step 1 of ingest for a store command: validated and normalized (the field named on
    failure), as the caller or the agent the command credits."""
    return services.prepare(
        caller.acting_as(command.agent_id),
        content=command.content,
        content_type=command.content_type,
        tags=command.tags,
        context=command.context,
        source_provider=command.source_provider,
        source_channel=command.source_channel,
        knowledge_domain=command.knowledge_domain,
        access_scope=command.access_scope,
        **_submission(caller, command.submitted_by, command.submitted_from),
    )


async def _store(
    deps: Deps, caller: Caller, command: c.StoreKnowledge, key: str | None
) -> IngestResult:
    acting = caller.acting_as(command.agent_id)
    return await services.ingest(deps, acting, ingest_request(caller, command), idempotency_key=key)


async def _store_many(
    deps: Deps, caller: Caller, command: c.StoreMany, key: str | None
) -> list[IngestResult]:
    acting = caller.acting_as(command.agent_id)
    STORE_MANY.check(len(command.items))
    requests = []
    for index, item in enumerate(command.items):
        try:
            requests.append(ingest_request(acting, item))
        except ValidationError as exc:
            raise ValidationError(f"items[{index}].{exc.field}", exc.message) from None
    return await services.ingest_many(deps, acting, requests, idempotency_key=key)


def store_item(caller: Caller, command: c.StoreKnowledge, key: str | None) -> services.IngestItem:
    """A store command checked as :func:`handle` checks it (:func:`authorize`, then step 1:
    :class:`Forbidden` or :class:`ValidationError` naming the field), ready to be ingested
    with others by :func:`store_each`."""
    authorize(caller, command)
    return services.IngestItem(
        caller.acting_as(command.agent_id), ingest_request(caller, command), _scoped(caller, key)
    )


async def store_each(
    deps: Deps, items: Sequence[tuple[Caller, c.StoreKnowledge, str | None]]
) -> list[IngestResult]:
    """Store commands of possibly different callers, each with its idempotency key (a
    message id), in one unit of work (:func:`services.ingest_each`): the results each would
    get from :func:`handle` alone. Every command is checked first; one that fails its
    check raises before anything is written."""
    return await services.ingest_each(deps, [store_item(*item) for item in items])


async def _writeback(
    deps: Deps, caller: Caller, command: c.WritebackStore | c.WritebackVectorize, key: str | None
) -> IngestResult:
    if isinstance(command, c.WritebackStore) and len(command.embedding) != deps.embedder.dimension:
        raise ValidationError(
            "embedding",
            f"has {len(command.embedding)} dimensions; this store uses {deps.embedder.dimension}",
        )
    acting = caller.acting_as(command.agent_id)
    arguments = writeback_arguments(command.metadata)
    arguments.update(
        _submission(caller, arguments.get("submitted_by"), arguments.get("submitted_from"))
    )
    request = services.prepare(acting, content=command.content, **arguments)
    return await services.ingest(deps, acting, request, idempotency_key=key)


async def _query(
    deps: Deps, caller: Caller, command: c.QueryKnowledge, key: str | None
) -> QueryResult:
    return await services.query(
        deps,
        caller.acting_as(command.agent_id),
        command.query,
        min_confidence=command.min_confidence,
        limit=command.limit,
        status=command.status,
        tags=command.tags,
        knowledge_domain=command.knowledge_domain,
        min_similarity=command.min_similarity,
        mode=command.mode,
    )


async def _retrieve(
    deps: Deps, caller: Caller, command: c.Retrieve, key: str | None
) -> QueryResult:
    return await services.query(
        deps,
        caller.acting_as(command.agent_id),
        command.query,
        min_confidence=command.min_confidence,
        limit=command.limit,
        tags=command.tags,
        knowledge_domain=command.knowledge_domain,
        count_access=False,
        min_similarity=command.min_similarity,
        mode=command.mode,
    )


async def _traverse(
    deps: Deps, caller: Caller, command: c.RelatedEntries, key: str | None
) -> list[RelatedEntry]:
    return await services.related_entries(
        deps,
        caller.acting_as(command.agent_id),
        command.entry_id,
        depth=command.depth,
        relation_types=command.relation_types,
    )


async def _link(deps: Deps, caller: Caller, command: c.LinkEntries, key: str | None) -> LinkResult:
    return await services.link_entries(
        deps,
        caller.acting_as(command.agent_id),
        command.from_entry_id,
        command.to_entry_id,
        command.relation_type,
        command.weight,
        idempotency_key=key,
    )


async def _deprecate(
    deps: Deps, caller: Caller, command: c.DeprecateEntry, key: str | None
) -> LifecycleResult:
    return await services.deprecate_entry(
        deps,
        caller.acting_as(command.agent_id),
        command.entry_id,
        command.reason,
        idempotency_key=key,
    )


async def _resolve(
    deps: Deps, caller: Caller, command: c.ResolveDispute, key: str | None
) -> LifecycleResult:
    return await services.resolve_dispute(
        deps,
        caller.acting_as(command.agent_id),
        command.entry_id,
        command.resolution,
        idempotency_key=key,
    )


async def _force_decay(
    deps: Deps, caller: Caller, command: c.ForceDecay, key: str | None
) -> MaintenanceResult:
    return await services.force_decay(deps, command.factor, idempotency_key=key)


async def _archive_stale(
    deps: Deps, caller: Caller, command: c.ArchiveStale, key: str | None
) -> MaintenanceResult:
    return await services.archive_stale(deps, command.days, idempotency_key=key)


async def _label(
    deps: Deps, caller: Caller, command: c.LabelSource, key: str | None
) -> SourceReport:
    return await services.label_source(
        deps, caller, command.target_agent_id, command.label, idempotency_key=key
    )


async def _unlabel(
    deps: Deps, caller: Caller, command: c.UnlabelSource, key: str | None
) -> SourceReport:
    return await services.unlabel_source(deps, caller, command.target_agent_id, idempotency_key=key)


async def _source(
    deps: Deps, caller: Caller, command: c.GetSource, key: str | None
) -> SourceReport:
    return await services.get_source(deps, command.target_agent_id)


async def _erase(
    deps: Deps, caller: Caller, command: c.EraseAgent, key: str | None
) -> ErasureResult:
    return await services.erase_agent(deps, command.target_agent_id, idempotency_key=key)


async def _gas(
    deps: Deps, caller: Caller, command: c.ProcessGasEvent, key: str | None
) -> GasResult:
    # idempotent by the event's request id (the caller's), whichever message carried it
    return await services.process_gas_event(deps, command.event, caller)


async def _get_entry(deps: Deps, caller: Caller, command: c.GetEntry, key: str | None) -> Entry:
    target = parse_id("entry_id", command.entry_id)
    async with deps.store.unit_of_work() as uow:
        entry = await uow.entries.get(target)
    if entry is None:
        raise NotFound(f"entry {target} not found")
    if caller.trusted:
        return entry
    viewer = await services.resolve_viewer(deps.store.directory, caller.principal)
    if not is_visible(entry, viewer):
        raise NotFound(f"entry {target} not found")
    if caller.principal.id is None:  # who wrote it is not for anonymous eyes
        entry = evolve(entry, owner_id=None, source=evolve(entry.source, submitted_by=None))
    return entry


async def _get_evidence(
    deps: Deps, caller: Caller, command: c.GetEvidence, key: str | None
) -> list[Evidence]:
    await _get_entry(deps, caller, c.GetEntry(entry_id=command.entry_id), key)
    async with deps.store.unit_of_work() as uow:
        return await uow.evidence.for_entry(parse_id("entry_id", command.entry_id))


async def _relations(
    deps: Deps, caller: Caller, command: c.GetRelations, key: str | None
) -> list[LinkedEntry]:
    return await services.entry_relations(deps, caller, command.entry_id)


async def _expertise(
    deps: Deps, caller: Caller, command: c.GetExpertise, key: str | None
) -> list[ExpertiseRecord]:
    return await services.get_expertise(deps, caller, command.domain, command.min_proficiency)


async def _at_risk(
    deps: Deps, caller: Caller, command: c.DomainsAtRisk, key: str | None
) -> list[DomainCoverage]:
    return await services.domains_at_risk(deps, caller, command.min_agents)


async def _profile(
    deps: Deps, caller: Caller, command: c.GetAgentProfile, key: str | None
) -> AgentProfile:
    return await services.agent_profile(deps, caller, command.target_agent_id)


async def _stats(deps: Deps, caller: Caller, command: c.Stats, key: str | None) -> StoreStats:
    viewer = await services.resolve_viewer(deps.store.directory, caller.principal)
    async with deps.store.unit_of_work() as uow:
        return await uow.entries.stats(viewer, deps.clock.now())


async def _decay_cycle(
    deps: Deps, caller: Caller, command: c.RunDecayCycle, key: str | None
) -> MaintenanceResult:
    return await services.run_decay_cycle(deps, idempotency_key=key)


async def _corroboration(
    deps: Deps, caller: Caller, command: c.CheckCorroboration, key: str | None
) -> CorroborationReport:
    return await services.check_corroboration(deps, command.limit, idempotency_key=key)


async def _aggregate(
    deps: Deps, caller: Caller, command: c.AggregateExpertise, key: str | None
) -> MaintenanceResult:
    return await services.aggregate_expertise(deps, idempotency_key=key)


async def _outbox(
    deps: Deps, caller: Caller, command: c.ProcessOutbox, key: str | None
) -> ContradictionReport:
    return await services.process_outbox(deps, command.limit, idempotency_key=key)


async def _trim_access_log(
    deps: Deps, caller: Caller, command: c.TrimAccessLog, key: str | None
) -> MaintenanceResult:
    return await services.trim_access_log(deps, command.days, idempotency_key=key)


# ---------------------------------------------------------------- entity graph reads


async def _entities(
    deps: Deps, caller: Caller, command: c.ListEntities, key: str | None
) -> list[EntitySummary]:
    return await services.list_entities(deps, caller, command.query, command.prefix, command.limit)


async def _entity(
    deps: Deps, caller: Caller, command: c.GetEntity, key: str | None
) -> EntityDetail:
    return await services.get_entity(deps, caller, command.name)


async def _entity_history(
    deps: Deps, caller: Caller, command: c.GetEntityHistory, key: str | None
) -> EntityHistory:
    return await services.entity_history(deps, caller, command.name, command.as_of)


async def _related_entities(
    deps: Deps, caller: Caller, command: c.RelatedEntities, key: str | None
) -> list[RelatedEntity]:
    return await services.related_entities(deps, caller, command.name, command.depth)


#: Every command type and the use case that carries it out.
COMMAND_HANDLERS: Final[Mapping[type[c.Command[Any]], Run]] = {
    c.StoreKnowledge: _store,
    c.StoreMany: _store_many,
    c.WritebackStore: _writeback,
    c.WritebackVectorize: _writeback,
    c.LinkEntries: _link,
    c.DeprecateEntry: _deprecate,
    c.ResolveDispute: _resolve,
    c.ForceDecay: _force_decay,
    c.ArchiveStale: _archive_stale,
    c.EraseAgent: _erase,
    c.LabelSource: _label,
    c.UnlabelSource: _unlabel,
    c.GetSource: _source,
    c.ProcessGasEvent: _gas,
    c.QueryKnowledge: _query,
    c.Retrieve: _retrieve,
    c.RelatedEntries: _traverse,
    c.GetEntry: _get_entry,
    c.GetEvidence: _get_evidence,
    c.GetRelations: _relations,
    c.ListEntities: _entities,
    c.GetEntity: _entity,
    c.GetEntityHistory: _entity_history,
    c.RelatedEntities: _related_entities,
    c.GetExpertise: _expertise,
    c.DomainsAtRisk: _at_risk,
    c.GetAgentProfile: _profile,
    c.Stats: _stats,
    c.RunDecayCycle: _decay_cycle,
    c.CheckCorroboration: _corroboration,
    c.AggregateExpertise: _aggregate,
    c.ProcessOutbox: _outbox,
    c.TrimAccessLog: _trim_access_log,
}


def handler_of(command: c.Command[Any] | type[c.Command[Any]]) -> Run:
    """The use case of a command (or command type); :class:`ValidationError` if none."""
    return COMMAND_HANDLERS[action_of(command).command]


def _attributed(command: c.Command[Any]) -> list[str]:
    """The agent ids a command asks to be credited to (its items' included)."""
    named = [command.agent_id]
    if isinstance(command, c.StoreMany):
        named.extend(item.agent_id for item in command.items)
    return [agent for agent in named if agent is not None and agent.strip()]


def refusal(caller: Caller, kind: type[c.Command[Any]]) -> str | None:
    """Why ``caller`` may run no command of type ``kind`` at all, whatever its fields say
    (None: it may, as far as its role goes): the first checks of :func:`authorize`, and
    what an edge asks to list the actions a caller may run (MCP's ``tools/list``)."""
    access = action_of(kind).access
    role = caller.principal.role
    name = kind.__name__
    if access is Access.ADMIN and not role.administers:
        return f"{name} needs the admin role; the caller is a {role.value}"
    if access is Access.WRITE and not role.writes:
        return f"{name} needs a role that writes; the caller is a {role.value}"
    if kind in AGENT_VIEWS and _anonymous(caller):
        return f"{name} names agents; an anonymous caller sees no agent names"
    return None


def authorize(caller: Caller, command: c.Command[Any]) -> None:
    """Refuse (:class:`Forbidden`, nothing changed) what the caller's role does not allow:
    writes to readers, administration to non-admins, and crediting work to another agent
    to anyone but gateways and admins (so one caller cannot pose as several independent
    sources). An agent id Apollo reserves for itself is refused to everyone
    (:class:`ValidationError` naming ``agent_id``)."""
    record = action_of(command)
    role = caller.principal.role
    refused = refusal(caller, type(command))
    if refused is not None:
        raise Forbidden(refused)
    attributed = _attributed(command)
    if record.mutates:
        for agent in attributed:
            check_agent_id("agent_id", agent)
    if role.speaks_for_others:
        return
    for agent in attributed:
        if Caller.of(agent, caller.principal).agent_id != caller.agent_id:
            raise Forbidden(
                f"a {role.value} acts as its own agent {caller.agent_id!r}; only gateways "
                f"and admins credit work to another agent ({agent!r})",
                field="agent_id",
            )


async def handle(
    deps: Deps, caller: Caller, command: c.Command[R], *, idempotency_key: str | None = None
) -> R:
    """Carry out ``command`` for ``caller`` once :func:`authorize` allows it; returns the
    use case's result."""
    authorize(caller, command)
    key = _scoped(caller, idempotency_key)
    result: R = await handler_of(command)(deps, caller, command, key)
    if _anonymous(caller):
        hidden: R = hide_agents(result)
        return hidden
    return result


def _anonymous(caller: Caller) -> bool:
    """An edge's caller without an identity: it sees no agent names
    (:mod:`apollo_domain.disclosure`)."""
    return caller.edge is not None and caller.principal.id is None


def _scoped(caller: Caller, key: str | None) -> str | None:
    return None if key is None else services.scoped_key(caller.principal, key)


__all__ = [
    "COMMAND_HANDLERS",
    "authorize",
    "handle",
    "handler_of",
    "ingest_request",
    "refusal",
    "store_each",
    "store_item",
]
