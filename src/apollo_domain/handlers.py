"""The command handler table: each command type → the use case that carries it out,
``use_case(deps, caller, command)`` (a mutation's also takes its idempotency key).

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

from . import commands as c
from . import services
from .actions import Access, action_of
from .disclosure import AGENT_VIEWS, hide_agents
from .errors import Forbidden
from .results import IngestResult
from .rules import check_agent_id
from .services import Caller, Deps

R = TypeVar("R")
#: A use case: ``(deps, caller, command)``, and the idempotency key after them for one
#: that mutates (:attr:`~apollo_domain.actions.Action.mutates`).
UseCase = Callable[..., Awaitable[Any]]

#: Every command type and the use case that carries it out.
COMMAND_HANDLERS: Final[Mapping[type[c.Command[Any]], UseCase]] = {
    c.StoreKnowledge: services.store_knowledge,
    c.StoreMany: services.store_many,
    c.StoreText: services.store_text,
    c.WritebackStore: services.store_writeback,
    c.WritebackVectorize: services.store_writeback,
    c.LinkEntries: services.link_entries,
    c.DeprecateEntry: services.deprecate_entry,
    c.ResolveDispute: services.resolve_dispute,
    c.ForceDecay: services.force_decay,
    c.ArchiveStale: services.archive_stale,
    c.EraseAgent: services.erase_agent,
    c.LabelSource: services.label_source,
    c.UnlabelSource: services.unlabel_source,
    c.GetSource: services.get_source,
    c.ProcessGasEvent: services.process_gas_event,
    c.QueryKnowledge: services.query,
    c.Retrieve: services.query,
    c.RelatedEntries: services.related_entries,
    c.GetEntry: services.get_entry,
    c.GetEpisode: services.get_episode,
    c.GetEvidence: services.get_evidence,
    c.GetRelations: services.get_relations,
    c.ListEntities: services.list_entities,
    c.GetEntity: services.get_entity,
    c.GetEntityHistory: services.entity_history,
    c.RelatedEntities: services.related_entities,
    c.GetExpertise: services.get_expertise,
    c.DomainsAtRisk: services.domains_at_risk,
    c.GetAgentProfile: services.agent_profile,
    c.Stats: services.stats,
    c.RunDecayCycle: services.run_decay_cycle,
    c.CheckCorroboration: services.check_corroboration,
    c.AggregateExpertise: services.aggregate_expertise,
    c.ProcessOutbox: services.process_outbox,
    c.TrimAccessLog: services.trim_access_log,
}


def handler_of(command: c.Command[Any] | type[c.Command[Any]]) -> UseCase:
    """The use case of a command (or command type); :class:`ValidationError` if none."""
    return COMMAND_HANDLERS[action_of(command).command]


def store_item(caller: Caller, command: c.StoreKnowledge, key: str | None) -> services.IngestItem:
    """A store command checked as :func:`handle` checks it (:func:`authorize`, then step 1:
    :class:`Forbidden` or :class:`ValidationError` naming the field), ready to be ingested
    with others by :func:`store_each`."""
    authorize(caller, command)
    return services.IngestItem(
        caller.acting_as(command.agent_id),
        services.prepare(caller, command),
        _scoped(caller, key),
    )


async def store_each(
    deps: Deps, items: Sequence[tuple[Caller, c.StoreKnowledge, str | None]]
) -> list[IngestResult]:
    """Store commands of possibly different callers, each with its idempotency key (a
    message id), in one unit of work (:func:`services.ingest_each`): the results each would
    get from :func:`handle` alone. Every command is checked first; one that fails its
    check raises before anything is written."""
    return await services.ingest_each(deps, [store_item(*item) for item in items])


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
    run = handler_of(command)
    if action_of(command).mutates:
        result: R = await run(deps, caller, command, _scoped(caller, idempotency_key))
    else:  # a read changes nothing: there is nothing to apply once
        result = await run(deps, caller, command)
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
    "refusal",
    "store_each",
    "store_item",
]
