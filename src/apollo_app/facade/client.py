"""The runner methods of an agent: one :class:`KnowledgeClient` protocol, and the in-process
:class:`Client` that carries each call out as a command through the handler table.

Each runner method is named after its action (:mod:`apollo_domain.actions`) and its
parameters are written once, in :class:`KnowledgeClient`; :class:`Client` and
:class:`~apollo_app.facade.remote.RemoteClient` take them from there (:func:`parameters_of`).
The defaults there are the command's own (a test compares them field by field)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar
from uuid import UUID

import attrs

from apollo_domain import commands as c
from apollo_domain.bounds import STORE_MANY
from apollo_domain.causal import format_token
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
    EpisodeView,
    IngestResult,
    LifecycleResult,
    LinkResult,
    MaintenanceResult,
    QueryResult,
    RelatedEntity,
    RelatedEntry,
    TextResult,
)
from apollo_domain.services import Caller, Deps

from .causal import CallerTokens

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

    async def store_text(
        self,
        text: str | Sequence[Mapping[str, Any]],
        content_type: str | None = "observation",
        tags: Sequence[str] | None = None,
        context: Mapping[str, Any] | None = None,
        knowledge_domain: str | None = None,
        access_scope: str = "global",
    ) -> TextResult | Dispatch: ...

    async def get_episode(self, episode_id: UUID | str) -> EpisodeView: ...

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
        context_window: int = 0,
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
        context_window: int = 0,
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


P = ParamSpec("P")
T = TypeVar("T")
C = TypeVar("C", bound=c.Command[Any])


def parameters_of(
    method: Callable[Concatenate[Any, P], Awaitable[Any]],
) -> Callable[
    [Callable[..., Coroutine[Any, Any, T]]], Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]
]:
    """A runner method with the parameters (names, order, defaults) of ``method`` of
    :class:`KnowledgeClient`, where they are written once: the decorated body receives
    them all by name, defaults filled in, and returns its own result type."""
    signature = inspect.signature(method)

    def decorate(
        body: Callable[..., Coroutine[Any, Any, T]],
    ) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]:
        @functools.wraps(body)
        async def runner(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            del arguments["self"]
            return await body(self, **arguments)

        returns = inspect.signature(body).return_annotation
        runner.__signature__ = signature.replace(  # type: ignore[attr-defined]
            return_annotation=returns
        )
        return runner

    return decorate


def command_of(kind: type[C], arguments: Mapping[str, Any], **renamed: str) -> C:
    """A command of ``kind`` from a runner method's arguments, each given to the field of
    its name (``renamed``: parameter → field, for the others). Lists and tuples become the
    tuples a command holds, ids strings, times ISO 8601 text, mappings dicts; anything else
    is passed as given, for the use case to refuse with a clear error."""
    return kind(**{renamed.get(name, name): _held(value) for name, value in arguments.items()})


def _held(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(value)
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return dict(value)
    return value


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
        built.append(command_of(c.StoreKnowledge, item))
    return c.StoreMany(items=tuple(built))


class Client:
    """The runner methods of one agent acting as one principal, in this process: each
    builds its action's command (:func:`command_of`) and carries it out through the
    handler table."""

    def __init__(self, deps: Deps, caller: Caller, tokens: CallerTokens | None = None) -> None:
        self._deps = deps
        self.caller = caller
        self._tokens = tokens if tokens is not None else CallerTokens()

    @property
    def causal_token(self) -> str | None:
        """The latest causal token of this client's caller (``c1.<hex>``), None before its
        first write: its reads wait for nothing older (see :mod:`apollo_domain.causal`)."""
        token = self._tokens.get(self.caller)
        return None if token is None else format_token(token)

    @property
    def agent_id(self) -> str:
        return self.caller.agent_id

    @property
    def principal(self) -> Principal:
        return self.caller.principal

    async def run(self, command: c.Command[R]) -> R:
        """Carry out any command as this client's caller, reading its own writes: in a
        causal scope at the caller's latest token, kept for its next call."""
        return await self._tokens.carry(self.caller, handle(self._deps, self.caller, command))

    @parameters_of(KnowledgeClient.store_knowledge)
    async def store_knowledge(self, **arguments: Any) -> IngestResult:
        return await self.run(command_of(c.StoreKnowledge, arguments))

    @parameters_of(KnowledgeClient.store_many)
    async def store_many(self, **arguments: Any) -> list[IngestResult]:
        """Bulk ``store_knowledge``: each item holds its keyword arguments. Same rules and
        outcomes as storing the items one by one in order, much faster (one embedding call
        and one search pass per chunk of 256). Every item is validated before anything is
        written; a :class:`ValidationError` names the item index and field."""
        return await self.run(store_many_command(arguments["items"]))

    @parameters_of(KnowledgeClient.store_text)
    async def store_text(self, **arguments: Any) -> TextResult:
        """Store a document (a string) or a conversation (``{speaker, text, at}`` turns) as
        one episode of statements, each stored as ``store_knowledge`` stores one; all or
        nothing, and the same text again creates nothing new (docs/texts.md)."""
        return await self.run(command_of(c.StoreText, arguments))

    @parameters_of(KnowledgeClient.get_episode)
    async def get_episode(self, **arguments: Any) -> EpisodeView:
        """An episode this caller may see: its text as given and its visible statements;
        :class:`NotFound` when unknown or not visible."""
        return await self.run(command_of(c.GetEpisode, arguments))

    @parameters_of(KnowledgeClient.query_knowledge)
    async def query_knowledge(self, **arguments: Any) -> QueryResult:
        """Semantic search (or newest-first browse under three characters). Entries at or
        below ``min_similarity`` are not matches; returned entries get the retrieval boost."""
        return await self.run(command_of(c.QueryKnowledge, arguments))

    @parameters_of(KnowledgeClient.retrieve)
    async def retrieve(self, **arguments: Any) -> QueryResult:
        """Like ``query_knowledge`` (the retrieval boost included) but without access counts
        or access-log rows."""
        return await self.run(command_of(c.Retrieve, arguments))

    @parameters_of(KnowledgeClient.related_entries)
    async def related_entries(self, **arguments: Any) -> list[RelatedEntry]:
        return await self.run(command_of(c.RelatedEntries, arguments))

    @parameters_of(KnowledgeClient.link_entries)
    async def link_entries(self, **arguments: Any) -> LinkResult:
        return await self.run(command_of(c.LinkEntries, arguments))

    @parameters_of(KnowledgeClient.deprecate_entry)
    async def deprecate_entry(self, **arguments: Any) -> LifecycleResult:
        return await self.run(command_of(c.DeprecateEntry, arguments))

    @parameters_of(KnowledgeClient.resolve_dispute)
    async def resolve_dispute(self, **arguments: Any) -> LifecycleResult:
        return await self.run(command_of(c.ResolveDispute, arguments))

    @parameters_of(KnowledgeClient.force_decay)
    async def force_decay(self, **arguments: Any) -> MaintenanceResult:
        return await self.run(command_of(c.ForceDecay, arguments))

    @parameters_of(KnowledgeClient.archive_stale)
    async def archive_stale(self, **arguments: Any) -> MaintenanceResult:
        return await self.run(command_of(c.ArchiveStale, arguments))

    @parameters_of(KnowledgeClient.get_expertise)
    async def get_expertise(self, **arguments: Any) -> list[ExpertiseRecord]:
        return await self.run(command_of(c.GetExpertise, arguments))

    @parameters_of(KnowledgeClient.domains_at_risk)
    async def domains_at_risk(self, **arguments: Any) -> list[DomainCoverage]:
        return await self.run(command_of(c.DomainsAtRisk, arguments))

    @parameters_of(KnowledgeClient.agent_profile)
    async def agent_profile(self, **arguments: Any) -> AgentProfile:
        return await self.run(command_of(c.GetAgentProfile, arguments, agent_id=SUBJECT))

    # -- the entity graph ------------------------------------------------------------------

    @parameters_of(KnowledgeClient.entities)
    async def entities(self, **arguments: Any) -> list[EntitySummary]:
        """The entities this caller may see that ``query`` names or whose name starts with
        ``prefix``, by name, each with the number of visible entries mentioning it."""
        return await self.run(command_of(c.ListEntities, arguments))

    @parameters_of(KnowledgeClient.entity)
    async def entity(self, **arguments: Any) -> EntityDetail:
        """One visible entity with its live edges and the newest entries mentioning it;
        :class:`NotFound` when unknown or not visible."""
        return await self.run(command_of(c.GetEntity, arguments))

    @parameters_of(KnowledgeClient.entity_history)
    async def entity_history(self, **arguments: Any) -> EntityHistory:
        """The entity's typed edges live at ``as_of``, or all of them (retired included)."""
        return await self.run(command_of(c.GetEntityHistory, arguments))

    @parameters_of(KnowledgeClient.related_entities)
    async def related_entities(self, **arguments: Any) -> list[RelatedEntity]:
        """Entities within ``depth`` (1 to 3) live edges of the entity, nearest first."""
        return await self.run(command_of(c.RelatedEntities, arguments))


#: The field of the agent a command is about, which the runner methods call ``agent_id``.
SUBJECT = "target_agent_id"

__all__ = [
    "SUBJECT",
    "Client",
    "KnowledgeClient",
    "command_of",
    "parameters_of",
    "store_many_command",
]
