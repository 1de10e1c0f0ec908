"""``Apollo`` and its ``Client``: the embedding program's view of the knowledge store."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from types import TracebackType
from typing import Any
from uuid import UUID

from attrs import frozen

from apollo_adapters.memory import InMemoryStore
from apollo_domain import services
from apollo_domain.errors import NotFound, StoreUnavailable, ValidationError
from apollo_domain.expertise import DomainCoverage
from apollo_domain.model import Entry, Evidence, Principal
from apollo_domain.policy import ConfidencePolicy
from apollo_domain.ports import (
    STORE_PARTS,
    Clock,
    ContradictionJudge,
    Embedder,
    ExpertiseRecord,
    GasLanguageModel,
    IdentityDirectory,
    Store,
    StoreStats,
)
from apollo_domain.results import (
    AgentProfile,
    ContradictionReport,
    CorroborationReport,
    ErasureResult,
    GasResult,
    IngestResult,
    LifecycleResult,
    LinkResult,
    MaintenanceResult,
    QueryResult,
    RelatedEntry,
)
from apollo_domain.services import Caller, Deps
from apollo_domain.services import context as _context
from apollo_domain.services.graph import parse_id

from .bootstrap import bootstrap

Closer = Callable[[], Awaitable[None]]
_STORE_FIELDS = frozenset(
    {
        "content",
        "content_type",
        "tags",
        "context",
        "source_provider",
        "source_channel",
        "knowledge_domain",
        "access_scope",
        "submitted_by",
        "submitted_from",
    }
)
ALL_PARTS = sorted(STORE_PARTS)


@frozen
class Health:
    status: str  # "ok" | "degraded"
    data_available: bool
    detail: str | None


class Apollo:
    """A knowledge store with its use cases wired. Use as an async context manager::

    async with Apollo.in_memory() as apollo:
        client = apollo.client(agent_id="claude-net-1", principal=Principal("alice"))
        await client.store_knowledge(content="...", content_type="fact")
    """

    def __init__(self, deps: Deps, *, closers: Sequence[Closer] = ()) -> None:
        self.deps = deps
        self._closers = list(closers)
        self._closed = False

    # -- construction ------------------------------------------------------------------

    @classmethod
    def in_memory(
        cls,
        embedder: Embedder | None = None,
        clock: Clock | None = None,
        judge: ContradictionJudge | None = None,
        llm: GasLanguageModel | None = None,
        policy: ConfidencePolicy | None = None,
    ) -> Apollo:
        """Everything in this process: the in-memory store (exact numpy search)."""
        store = InMemoryStore()
        deps = bootstrap(store, embedder=embedder, clock=clock, judge=judge, llm=llm, policy=policy)
        return cls(deps, closers=[store.close])

    @classmethod
    def with_store(
        cls,
        store: Store,
        *,
        embedder: Embedder | None = None,
        clock: Clock | None = None,
        judge: ContradictionJudge | None = None,
        llm: GasLanguageModel | None = None,
        policy: ConfidencePolicy | None = None,
        closers: Sequence[Closer] = (),
    ) -> Apollo:
        """Wrap any :class:`Store` adapter (the caller keeps ownership unless it passes
        ``closers``)."""
        deps = bootstrap(store, embedder=embedder, clock=clock, judge=judge, llm=llm, policy=policy)
        return cls(deps, closers=closers)

    @classmethod
    def open(cls, settings: Any = None, **overrides: Any) -> _Opening:
        """The durable store from settings (embedded PostgreSQL + pgvector by default).

        ``async with Apollo.open(Settings()) as apollo: ...`` or ``await Apollo.open(...)``.
        """
        from .runtime import open_apollo

        return _Opening(lambda: open_apollo(cls, settings, **overrides))

    async def __aenter__(self) -> Apollo:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for closer in reversed(self._closers):
            await closer()

    # -- accessors -----------------------------------------------------------------------

    @property
    def store(self) -> Store:
        return self.deps.store

    @property
    def directory(self) -> IdentityDirectory:
        return self.deps.store.directory

    @property
    def policy(self) -> ConfidencePolicy:
        return self.deps.policy

    def client(self, agent_id: str = "unknown", principal: Principal | str | None = None) -> Client:
        """A client acting for ``agent_id`` as ``principal`` (a string means ``Principal(it)``)."""
        if isinstance(principal, str):
            principal = Principal(principal)
        return Client(self.deps, Caller.of(agent_id, principal))

    async def get_entry(self, entry_id: UUID | str, *, principal: Principal | None = None) -> Entry:
        """The full entry (status, confidence, source_context, ...). With ``principal``, only
        when that principal may see it. Unknown ids raise :class:`NotFound`."""
        target = parse_id("entry_id", entry_id)
        async with self.store.unit_of_work() as uow:
            entry = await uow.entries.get(target)
        if entry is None:
            raise NotFound(f"entry {target} not found")
        if principal is not None:
            from apollo_domain.rules import is_visible

            viewer = await _context.resolve_viewer(self.directory, principal)
            if not is_visible(entry, viewer):
                raise NotFound(f"entry {target} not found")
        return entry

    async def get_evidence(self, entry_id: UUID | str) -> list[Evidence]:
        target = parse_id("entry_id", entry_id)
        async with self.store.unit_of_work() as uow:
            return await uow.evidence.for_entry(target)

    async def stats(self, principal: Principal | None = None) -> StoreStats:
        """Counts over the entries ``principal`` may see (anonymous: global only)."""
        viewer = await _context.resolve_viewer(self.directory, principal or Principal(None))
        async with self.store.unit_of_work() as uow:
            return await uow.entries.stats(viewer, self.deps.clock.now())

    async def health(self) -> Health:
        """``ok`` when every part of the store can be written, else ``degraded``."""
        try:
            await self.store.preflight(ALL_PARTS)
        except StoreUnavailable as exc:
            return Health("degraded", False, str(exc))
        return Health("ok", True, None)

    # -- periodic work -------------------------------------------------------------------

    async def run_decay_cycle(self) -> MaintenanceResult:
        return await services.run_decay_cycle(self.deps)

    async def check_corroboration(self, limit: int = 100) -> CorroborationReport:
        return await services.check_corroboration(self.deps, limit)

    async def aggregate_expertise(self) -> MaintenanceResult:
        return await services.aggregate_expertise(self.deps)

    async def process_outbox(self, limit: int = 50) -> ContradictionReport:
        return await services.process_outbox(self.deps, limit)

    async def process_gas_event(
        self, event: Mapping[str, Any], *, principal: Principal | None = None
    ) -> GasResult:
        return await services.process_gas_event(
            self.deps, event, Caller.of("gas", principal or Principal(None))
        )

    async def erase_agent(self, agent_id: str) -> ErasureResult:
        return await services.erase_agent(self.deps, agent_id)

    @classmethod
    def client_mode(
        cls,
        amqp_url: str,
        *,
        agent_id: str = "unknown",
        topology: Any = None,
        rpc_timeout: float = 10.0,
    ) -> Any:
        """Client mode, no database: ``async with Apollo.client_mode(url, agent_id=...) as
        client`` yields a :class:`apollo_app.client_mode.RemoteClient` whose mutations are
        published to the Apollo service and whose reads are RPC requests to it."""
        from .client_mode import open_client_mode

        return open_client_mode(
            amqp_url, agent_id=agent_id, topology=topology, rpc_timeout=rpc_timeout
        )


class _Opening:
    """Awaitable and async context manager around an asynchronously opened Apollo."""

    def __init__(self, factory: Callable[[], Awaitable[Apollo]]) -> None:
        self._factory = factory
        self._apollo: Apollo | None = None

    def __await__(self) -> Generator[Any, None, Apollo]:
        return self._factory().__await__()

    async def __aenter__(self) -> Apollo:
        self._apollo = await self._factory()
        return self._apollo

    async def __aexit__(self, *exc: object) -> None:
        if self._apollo is not None:
            await self._apollo.close()


class Client:
    """The runner methods of one agent acting as one principal."""

    def __init__(self, deps: Deps, caller: Caller) -> None:
        self._deps = deps
        self.caller = caller

    @property
    def agent_id(self) -> str:
        return self.caller.agent_id

    @property
    def principal(self) -> Principal:
        return self.caller.principal

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
        request = services.prepare(
            self.caller,
            content=content,
            content_type=content_type,
            tags=tags,
            context=context,
            source_provider=source_provider,
            source_channel=source_channel,
            knowledge_domain=knowledge_domain,
            access_scope=access_scope,
            submitted_by=submitted_by,
            submitted_from=submitted_from,
        )
        return await services.ingest(self._deps, self.caller, request)

    async def store_many(self, items: Sequence[Mapping[str, Any]]) -> list[IngestResult]:
        """Bulk ``store_knowledge``: each item holds its keyword arguments. Same rules and
        outcomes as storing the items one by one in order, much faster (one embedding call
        and one search pass per chunk of 256). Every item is validated before anything is
        written; a :class:`ValidationError` names the item index and field."""
        requests = []
        for index, item in enumerate(items):
            unknown = set(item) - _STORE_FIELDS
            if unknown:
                raise ValidationError(f"items[{index}]", f"unknown fields {sorted(unknown)}")
            try:
                requests.append(services.prepare(self.caller, **item))
            except ValidationError as exc:
                raise ValidationError(f"items[{index}].{exc.field}", exc.message) from None
        return await services.ingest_many(self._deps, self.caller, requests)

    async def query_knowledge(
        self,
        query: str,
        min_confidence: float = 0.3,
        limit: int = 10,
        status: Sequence[str] | str | None = None,
        tags: Sequence[str] | None = None,
        knowledge_domain: str | None = None,
        min_similarity: float = 0.0,
    ) -> QueryResult:
        """Semantic search (or newest-first browse under three characters). Entries at or
        below ``min_similarity`` are not matches; returned entries get the retrieval boost."""
        return await services.query(
            self._deps,
            self.caller,
            query,
            min_confidence=min_confidence,
            limit=limit,
            status=status,
            tags=tags,
            knowledge_domain=knowledge_domain,
            min_similarity=min_similarity,
        )

    async def retrieve(
        self,
        query: str,
        limit: int = 5,
        min_confidence: float = 0.3,
        tags: Sequence[str] | None = None,
        knowledge_domain: str | None = None,
        min_similarity: float = 0.0,
    ) -> QueryResult:
        """Like ``query_knowledge`` (the retrieval boost included) but without access counts
        or access-log rows."""
        return await services.query(
            self._deps,
            self.caller,
            query,
            min_confidence=min_confidence,
            limit=limit,
            tags=tags,
            knowledge_domain=knowledge_domain,
            count_access=False,
            min_similarity=min_similarity,
        )

    async def related_entries(
        self, entry_id: UUID | str, depth: int = 2, relation_types: Sequence[str] | None = None
    ) -> list[RelatedEntry]:
        return await services.related_entries(
            self._deps, self.caller, entry_id, depth=depth, relation_types=relation_types
        )

    async def link_entries(
        self,
        from_entry_id: UUID | str,
        to_entry_id: UUID | str,
        relation_type: str,
        weight: float = 1.0,
    ) -> LinkResult:
        return await services.link_entries(
            self._deps, self.caller, from_entry_id, to_entry_id, relation_type, weight
        )

    async def deprecate_entry(self, entry_id: UUID | str, reason: str) -> LifecycleResult:
        return await services.deprecate_entry(self._deps, self.caller, entry_id, reason)

    async def resolve_dispute(self, entry_id: UUID | str, resolution: str) -> LifecycleResult:
        return await services.resolve_dispute(self._deps, self.caller, entry_id, resolution)

    async def force_decay(self, factor: float) -> MaintenanceResult:
        return await services.force_decay(self._deps, factor)

    async def archive_stale(self, days: float) -> MaintenanceResult:
        return await services.archive_stale(self._deps, days)

    async def get_expertise(
        self, domain: str, min_proficiency: float = 0.0
    ) -> list[ExpertiseRecord]:
        return await services.get_expertise(self._deps, domain, min_proficiency)

    async def domains_at_risk(self, min_agents: int = 2) -> list[DomainCoverage]:
        return await services.domains_at_risk(self._deps, min_agents)

    async def agent_profile(self, agent_id: str) -> AgentProfile:
        return await services.agent_profile(self._deps, agent_id)
