"""The runner methods of an agent: one :class:`KnowledgeClient` protocol, and the in-process
:class:`Client` that carries each call out as a command through the handler table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar
from uuid import UUID

import attrs

from apollo_domain import commands as c
from apollo_domain.bounds import STORE_MANY
from apollo_domain.errors import ValidationError
from apollo_domain.expertise import DomainCoverage
from apollo_domain.handlers import handle
from apollo_domain.model import Principal
from apollo_domain.ports import ExpertiseRecord
from apollo_domain.results import (
    AgentProfile,
    Dispatch,
    EntityDetail,
    EntityHistory,
    EntitySummary,
    IngestResult,
    LifecycleResult,
    LinkResult,
    MaintenanceResult,
    QueryResult,
    RelatedEntity,
    RelatedEntry,
)
from apollo_domain.services import Caller, Deps

R = TypeVar("R")


class KnowledgeClient(Protocol):
    """What every client offers, in process or over the bus. A mutation returns its result
    in process, or the :class:`Dispatch` envelope of the published command over the bus;
    reads return the same values everywhere."""

    @property
    def agent_id(self) -> str: ...

    @property
    def principal(self) -> Principal: ...

    async def store_knowledge(
        self,
        content: str,
        content_type: str | None = "observation",
        tags: Sequence[str] | None = None,
        context: Mapping[str, Any] | None = None,
        source_provider: str | None = None,
        source_channel: str | None = None,
        knowledge_domain: str | None = None,
        access_scope: str = "global",
        submitted_by: str | None = None,
        submitted_from: str | None = None,
    ) -> IngestResult | Dispatch: ...

    async def store_many(
        self, items: Sequence[Mapping[str, Any]]
    ) -> Sequence[IngestResult | Dispatch]: ...

    async def query_knowledge(
        self,
        query: str,
        min_confidence: float = 0.3,
        limit: int = 10,
        status: Sequence[str] | str | None = None,
        tags: Sequence[str] | None = None,
        knowledge_domain: str | None = None,
        min_similarity: float = 0.0,
        mode: str = "hybrid",
    ) -> QueryResult: ...

    async def retrieve(
        self,
        query: str,
        limit: int = 5,
        min_confidence: float = 0.3,
        tags: Sequence[str] | None = None,
        knowledge_domain: str | None = None,
        min_similarity: float = 0.0,
        mode: str = "hybrid",
    ) -> QueryResult: ...

    async def related_entries(
        self, entry_id: UUID | str, depth: int = 2, relation_types: Sequence[str] | None = None
    ) -> list[RelatedEntry]: ...

    async def link_entries(
        self,
        from_entry_id: UUID | str,
        to_entry_id: UUID | str,
        relation_type: str,
        weight: float = 1.0,
    ) -> LinkResult | Dispatch: ...

    async def deprecate_entry(
        self, entry_id: UUID | str, reason: str
    ) -> LifecycleResult | Dispatch: ...

    async def resolve_dispute(
        self, entry_id: UUID | str, resolution: str
    ) -> LifecycleResult | Dispatch: ...

    async def force_decay(self, factor: float) -> MaintenanceResult | Dispatch: ...

    async def archive_stale(self, days: float) -> MaintenanceResult | Dispatch: ...

    async def get_expertise(
        self, domain: str, min_proficiency: float = 0.0
    ) -> list[ExpertiseRecord]: ...

    async def domains_at_risk(self, min_agents: int = 2) -> list[DomainCoverage]: ...

    async def agent_profile(self, agent_id: str) -> AgentProfile: ...

    async def entities(
        self, query: str | None = None, prefix: str | None = None, limit: int = 20
    ) -> list[EntitySummary]: ...

    async def entity(self, name: str) -> EntityDetail: ...

    async def entity_history(
        self, name: str, as_of: datetime | str | None = None
    ) -> EntityHistory: ...

    async def related_entities(self, name: str, depth: int = 1) -> list[RelatedEntity]: ...


def as_tuple(values: Any) -> Any:
    """A list or tuple argument as the tuple a command holds; anything else as given, for
    the use case to refuse with a clear error."""
    return tuple(values) if isinstance(values, list | tuple) else values


def arguments_of(local_names: Mapping[str, Any]) -> dict[str, Any]:
    """A method's keyword arguments, from its ``locals()`` taken first thing (``self``
    dropped): the method's signature is the one place its fields are listed."""
    return {name: value for name, value in local_names.items() if name != "self"}


def store_command(**arguments: Any) -> c.StoreKnowledge:
    """A :class:`StoreKnowledge` from ``store_knowledge`` keyword arguments (unknown names
    raise :class:`TypeError`, like a call would)."""
    if "tags" in arguments:
        arguments["tags"] = as_tuple(arguments["tags"])
    if isinstance(arguments.get("context"), Mapping):
        arguments["context"] = dict(arguments["context"])
    return c.StoreKnowledge(**arguments)


def store_many_command(items: Sequence[Mapping[str, Any]]) -> c.StoreMany:
    """A :class:`StoreMany` of ``store_knowledge`` keyword mappings; a bad item raises
    :class:`ValidationError` naming its index and field; more items than the
    ``STORE_MANY`` bound are refused naming ``items``."""
    STORE_MANY.check(len(items))
    known = {a.name for a in attrs.fields(c.StoreKnowledge)} - {"agent_id"}
    built = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ValidationError(f"items[{index}]", "must be a mapping of store_knowledge fields")
        unknown = set(item) - known
        if unknown:
            raise ValidationError(f"items[{index}]", f"unknown fields {sorted(unknown)}")
        built.append(store_command(**item))
    return c.StoreMany(items=tuple(built))


class Client:
    """The runner methods of one agent acting as one principal, in this process."""

    def __init__(self, deps: Deps, caller: Caller) -> None:
        self._deps = deps
        self.caller = caller

    @property
    def agent_id(self) -> str:
        return self.caller.agent_id

    @property
    def principal(self) -> Principal:
        return self.caller.principal

    async def run(self, command: c.Command[R]) -> R:
        """Carry out any command as this client's caller."""
        return await handle(self._deps, self.caller, command)

    async def store_knowledge(
        self,
        content: str,
        content_type: str | None = "observation",
        tags: Sequence[str] | None = None,
        context: Mapping[str, Any] | None = None,
        source_provider: str | None = None,
        source_channel: str | None = None,
        knowledge_domain: str | None = None,
        access_scope: str = "global",
        submitted_by: str | None = None,
        submitted_from: str | None = None,
    ) -> IngestResult:
        return await self.run(store_command(**arguments_of(locals())))

    async def store_many(self, items: Sequence[Mapping[str, Any]]) -> list[IngestResult]:
        """Bulk ``store_knowledge``: each item holds its keyword arguments. Same rules and
        outcomes as storing the items one by one in order, much faster (one embedding call
        and one search pass per chunk of 256). Every item is validated before anything is
        written; a :class:`ValidationError` names the item index and field."""
        return await self.run(store_many_command(items))

    async def query_knowledge(
        self,
        query: str,
        min_confidence: float = 0.3,
        limit: int = 10,
        status: Sequence[str] | str | None = None,
        tags: Sequence[str] | None = None,
        knowledge_domain: str | None = None,
        min_similarity: float = 0.0,
        mode: str = "hybrid",
    ) -> QueryResult:
        """Semantic search (or newest-first browse under three characters). Entries at or
        below ``min_similarity`` are not matches; returned entries get the retrieval boost."""
        return await self.run(
            c.QueryKnowledge(
                query=query,
                min_confidence=min_confidence,
                limit=limit,
                status=as_tuple(status),
                tags=as_tuple(tags),
                knowledge_domain=knowledge_domain,
                min_similarity=min_similarity,
                mode=mode,
            )
        )

    async def retrieve(
        self,
        query: str,
        limit: int = 5,
        min_confidence: float = 0.3,
        tags: Sequence[str] | None = None,
        knowledge_domain: str | None = None,
        min_similarity: float = 0.0,
        mode: str = "hybrid",
    ) -> QueryResult:
        """Like ``query_knowledge`` (the retrieval boost included) but without access counts
        or access-log rows."""
        return await self.run(
            c.Retrieve(
                query=query,
                limit=limit,
                min_confidence=min_confidence,
                tags=as_tuple(tags),
                knowledge_domain=knowledge_domain,
                min_similarity=min_similarity,
                mode=mode,
            )
        )

    async def related_entries(
        self, entry_id: UUID | str, depth: int = 2, relation_types: Sequence[str] | None = None
    ) -> list[RelatedEntry]:
        return await self.run(
            c.RelatedEntries(
                entry_id=_id(entry_id), depth=depth, relation_types=as_tuple(relation_types)
            )
        )

    async def link_entries(
        self,
        from_entry_id: UUID | str,
        to_entry_id: UUID | str,
        relation_type: str,
        weight: float = 1.0,
    ) -> LinkResult:
        return await self.run(
            c.LinkEntries(
                from_entry_id=_id(from_entry_id),
                to_entry_id=_id(to_entry_id),
                relation_type=relation_type,
                weight=weight,
            )
        )

    async def deprecate_entry(self, entry_id: UUID | str, reason: str) -> LifecycleResult:
        return await self.run(c.DeprecateEntry(entry_id=_id(entry_id), reason=reason))

    async def resolve_dispute(self, entry_id: UUID | str, resolution: str) -> LifecycleResult:
        return await self.run(c.ResolveDispute(entry_id=_id(entry_id), resolution=resolution))

    async def force_decay(self, factor: float) -> MaintenanceResult:
        return await self.run(c.ForceDecay(factor=factor))

    async def archive_stale(self, days: float) -> MaintenanceResult:
        return await self.run(c.ArchiveStale(days=days))

    async def get_expertise(
        self, domain: str, min_proficiency: float = 0.0
    ) -> list[ExpertiseRecord]:
        return await self.run(c.GetExpertise(domain=domain, min_proficiency=min_proficiency))

    async def domains_at_risk(self, min_agents: int = 2) -> list[DomainCoverage]:
        return await self.run(c.DomainsAtRisk(min_agents=min_agents))

    async def agent_profile(self, agent_id: str) -> AgentProfile:
        return await self.run(c.GetAgentProfile(target_agent_id=agent_id))

    # -- the entity graph ------------------------------------------------------------------

    async def entities(
        self, query: str | None = None, prefix: str | None = None, limit: int = 20
    ) -> list[EntitySummary]:
        """The entities this caller may see that ``query`` names or whose name starts with
        ``prefix``, by name, each with the number of visible entries mentioning it."""
        return await self.run(c.ListEntities(query=query, prefix=prefix, limit=limit))

    async def entity(self, name: str) -> EntityDetail:
        """One visible entity with its live edges and the newest entries mentioning it;
        :class:`NotFound` when unknown or not visible."""
        return await self.run(c.GetEntity(name=name))

    async def entity_history(self, name: str, as_of: datetime | str | None = None) -> EntityHistory:
        """The entity's typed edges live at ``as_of``, or all of them (retired included)."""
        return await self.run(c.GetEntityHistory(name=name, as_of=instant_text(as_of)))

    async def related_entities(self, name: str, depth: int = 1) -> list[RelatedEntity]:
        """Entities within ``depth`` (1 to 3) live edges of the entity, nearest first."""
        return await self.run(c.RelatedEntities(name=name, depth=depth))


def instant_text(value: datetime | str | None) -> str | None:
    """A time argument as the ISO 8601 text a command holds (anything else as given: the
    use case refuses it, naming the field)."""
    return value.isoformat() if isinstance(value, datetime) else value


def _id(value: UUID | str) -> str:
    """An id argument as the string a command holds (anything else as given: the use case
    refuses it, naming the field)."""
    return str(value) if isinstance(value, UUID) else value


__all__ = [
    "Client",
    "KnowledgeClient",
    "arguments_of",
    "as_tuple",
    "instant_text",
    "store_command",
    "store_many_command",
]
