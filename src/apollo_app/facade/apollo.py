"""``Apollo``: the embedding program's view of the knowledge store."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Generator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar
from uuid import UUID

from attrs import frozen

from apollo_domain import commands as c
from apollo_domain.errors import ConfigurationError, StoreUnavailable
from apollo_domain.handlers import handle
from apollo_domain.model import Entry, Evidence, Principal, Role
from apollo_domain.policy import ConfidencePolicy
from apollo_domain.ports import (
    STORE_PARTS,
    Clock,
    ContradictionJudge,
    Embedder,
    GasLanguageModel,
    IdentityDirectory,
    Store,
    StoreStats,
)
from apollo_domain.rates import WriteRate
from apollo_domain.results import (
    ContradictionReport,
    CorroborationReport,
    EpisodeView,
    ErasureResult,
    GasResult,
    LinkedEntry,
    MaintenanceResult,
)
from apollo_domain.retrieval import RetrievalSettings
from apollo_domain.services import Caller, Deps

from .. import bootstrap
from ..bootstrap import Closer, Overrides
from ..reembed import DEFAULT_BATCH, ReembedReport, reembed
from .causal import CallerTokens
from .client import Client

R = TypeVar("R")
ALL_PARTS = sorted(STORE_PARTS)
#: The embedding program itself: no principal, reads any entry by id.
PROGRAM = Caller("apollo", Principal(None, role=Role.ADMIN), trusted=True)


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
        #: the latest causal token of each in-process caller (:class:`CallerTokens`)
        self.tokens = CallerTokens()

    # -- construction ------------------------------------------------------------------

    @classmethod
    def in_memory(
        cls,
        embedder: Embedder | None = None,
        clock: Clock | None = None,
        judge: ContradictionJudge | None = None,
        llm: GasLanguageModel | None = None,
        policy: ConfidencePolicy | None = None,
        retrieval: RetrievalSettings | None = None,
        write_rate: WriteRate | None = None,
    ) -> Apollo:
        """Everything in this process: the in-memory store (exact numpy search).

        Without ``embedder`` it embeds with the deterministic hashing embedder, not the
        sentence model that :meth:`open` uses by default: an in-memory store lives for one
        process and serves simulations and tests, which want instant, reproducible vectors
        and no model to load (texts match by shared words, not by meaning). Pass
        ``embedder=OnnxEmbedder(cache_dir=...)`` (``apollo_adapters.embedders``) for
        meaning-based matching in memory. ``write_rate`` bounds each principal's writes
        over the edges served from this Apollo (HTTP, MCP, the bus; none by default: the
        embedding program's own calls are never charged)."""
        wired = bootstrap.in_memory(
            Overrides(
                embedder, clock, judge, llm, policy, retrieval=retrieval, write_rate=write_rate
            )
        )
        return cls(wired.deps, closers=wired.closers)

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
        retrieval: RetrievalSettings | None = None,
        closers: Sequence[Closer] = (),
        write_rate: WriteRate | None = None,
    ) -> Apollo:
        """Wrap any :class:`Store` adapter (the caller keeps ownership unless it passes
        ``closers``); ``write_rate`` as :meth:`in_memory` takes it, kept where the store
        keeps its buckets (in PostgreSQL for its store)."""
        deps = bootstrap.wire(
            store,
            Overrides(
                embedder, clock, judge, llm, policy, retrieval=retrieval, write_rate=write_rate
            ),
        )
        return cls(deps, closers=closers)

    @classmethod
    def open(
        cls,
        settings: Any = None,
        *,
        embedder: Embedder | None = None,
        clock: Clock | None = None,
        judge: ContradictionJudge | None = None,
        llm: GasLanguageModel | None = None,
        policy: ConfidencePolicy | None = None,
        migrate: bool = True,
    ) -> _Opening:
        """The durable store from settings (embedded PostgreSQL + pgvector by default),
        embedding with the embedder the settings name: the packaged sentence model run by
        ONNX Runtime unless ``APOLLO_EMBEDDER`` says otherwise (loaded in a worker thread).

        ``async with Apollo.open(Settings()) as apollo: ...`` or ``await Apollo.open(...)``.
        With ``migrate=False`` a server at ``APOLLO_DATABASE_URL`` is used as it is (a
        :class:`ConfigurationError` says to run ``apollo migrate`` when its schema is not
        current); the embedded server is always migrated.
        """
        from ..settings import Settings

        overrides = Overrides(embedder, clock, judge, llm, policy)

        async def opened() -> Apollo:
            wired = await bootstrap.open_durable(
                settings or Settings.from_env(), overrides, migrate=migrate
            )
            return cls(wired.deps, closers=wired.closers)

        return _Opening(opened)

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
        return Client(self.deps, Caller.of(agent_id, principal), self.tokens)

    async def run(self, command: c.Command[R], *, principal: Principal | None = None) -> R:
        """Carry out any command, as ``principal`` or (None) as the embedding program."""
        caller = PROGRAM if principal is None else Caller.of(PROGRAM.agent_id, principal)
        return await self.tokens.carry(caller, handle(self.deps, caller, command))

    async def get_entry(self, entry_id: UUID | str, *, principal: Principal | None = None) -> Entry:
        """The full entry (status, confidence, source_context, ...). With ``principal``, only
        when that principal may see it. Unknown ids raise :class:`NotFound`."""
        return await self.run(c.GetEntry(entry_id=str(entry_id)), principal=principal)

    async def get_episode(
        self, episode_id: UUID | str, *, principal: Principal | None = None
    ) -> EpisodeView:
        """An episode (``store_text``): its text as given and its statements. With
        ``principal``, only when that principal may see it. Unknown ids raise
        :class:`NotFound`."""
        return await self.run(c.GetEpisode(episode_id=str(episode_id)), principal=principal)

    async def get_evidence(
        self, entry_id: UUID | str, *, principal: Principal | None = None
    ) -> list[Evidence]:
        """The evidence on an entry (with ``principal``: only an entry it may see)."""
        return await self.run(c.GetEvidence(entry_id=str(entry_id)), principal=principal)

    async def get_relations(
        self, entry_id: UUID | str, *, principal: Principal | None = None
    ) -> list[LinkedEntry]:
        """The relations of an entry, both ways, with the entries at their other ends (with
        ``principal``: only an entry it may see, and only the ends it may see)."""
        return await self.run(c.GetRelations(entry_id=str(entry_id)), principal=principal)

    async def stats(self, principal: Principal | None = None) -> StoreStats:
        """Counts over the entries ``principal`` may see (anonymous: global only)."""
        return await self.run(c.Stats(), principal=principal or Principal(None))

    async def health(self) -> Health:
        """``ok`` when every part of the store can be written, else ``degraded``."""
        try:
            await self.store.preflight(ALL_PARTS)
        except StoreUnavailable as exc:
            return Health("degraded", False, str(exc))
        return Health("ok", True, None)

    # -- periodic work -------------------------------------------------------------------

    async def run_decay_cycle(self) -> MaintenanceResult:
        return await self.run(c.RunDecayCycle())

    async def check_corroboration(self, limit: int = 100) -> CorroborationReport:
        return await self.run(c.CheckCorroboration(limit=limit))

    async def aggregate_expertise(self) -> MaintenanceResult:
        return await self.run(c.AggregateExpertise())

    async def process_outbox(self, limit: int = 50) -> ContradictionReport:
        return await self.run(c.ProcessOutbox(limit=limit))

    async def trim_access_log(self, days: int = 30) -> MaintenanceResult:
        """Delete the access-log rows older than ``days`` days."""
        return await self.run(c.TrimAccessLog(days=days))

    async def process_gas_event(
        self, event: Mapping[str, Any], *, principal: Principal | None = None
    ) -> GasResult:
        """Process an LLM audit event as ``principal`` (default: the embedding program as
        an anonymous gateway, so global deposits credited to the event's ``caller``)."""
        return await self.run(
            c.ProcessGasEvent(event=dict(event)),
            principal=principal or Principal(None, role=Role.GATEWAY),
        )

    async def reembed(
        self,
        embedder: Embedder,
        *,
        batch_size: int = DEFAULT_BATCH,
        progress: Callable[[int, int], None] | None = None,
    ) -> ReembedReport:
        """Move the store, in place, to ``embedder`` and embed with it from then on.

        Batch by batch (each committed on its own: a killed run resumes), then one switch;
        until it commits, queries answer from the old vectors. ``progress(done, total)``
        is called after every batch. Other processes on the same store keep the old
        embedder until they are restarted with the new one."""
        current = self.deps.embedder
        if (current.model_id, current.dimension) == (embedder.model_id, embedder.dimension):
            return ReembedReport(embedder.model_id, embedder.model_id, 0, 0, 0, False)
        opening = getattr(self.deps.store, "reembedding", None)
        if opening is None:
            raise ConfigurationError("store", "this store cannot move to another embedder")
        moving = opening(embedder.model_id, embedder.dimension)
        moving.stored_model = moving.stored_model or current.model_id
        report = await reembed(moving, embedder, batch_size=batch_size, progress=progress)
        self.deps = bootstrap.rewire_embedder(self.deps, embedder)
        return report

    async def erase_agent(self, agent_id: str) -> ErasureResult:
        return await self.run(c.EraseAgent(target_agent_id=agent_id))

    @classmethod
    def client_mode(
        cls,
        amqp_url: str,
        *,
        agent_id: str = "unknown",
        topology: Any = None,
        rpc_timeout: float = 10.0,
        service_users: Collection[str] | None = None,
        declare_topology: bool = True,
        queue_type: str | None = None,
        read_your_writes: bool = False,
    ) -> Any:
        """Client mode, no database: ``async with Apollo.client_mode(url, agent_id=...) as
        client`` yields a :class:`apollo_app.facade.remote.RemoteClient` whose mutations are
        published to the Apollo service and whose reads are RPC requests to it, answered
        only by ``service_users`` (default: ``APOLLO_SERVICE_USERS``, else the URL's
        login). ``declare_topology=False`` for a login with an agent's broker permissions
        (docs/security.md "Broker permissions"): the service declares the topology. ``queue_type``
        (default ``APOLLO_QUEUE_TYPE``, else quorum) is the type of the queues it declares.
        ``read_your_writes``: each mutation waits for the service's receipt and later reads
        present its causal token (see :class:`~apollo_app.facade.remote.RemoteClient`)."""
        from .remote import open_client_mode

        return open_client_mode(
            amqp_url,
            agent_id=agent_id,
            topology=topology,
            rpc_timeout=rpc_timeout,
            service_users=service_users,
            declare_topology=declare_topology,
            queue_type=queue_type,
            read_your_writes=read_your_writes,
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


__all__ = ["Apollo", "Health"]
