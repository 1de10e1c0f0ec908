"""The composition root: the one module of ``apollo_app`` that picks and builds adapters.

Everything else asks it: the facade for stores (:func:`in_memory`, :func:`open_durable`),
the service and client mode for buses (:func:`open_bus`), the CLI for migrations
(:func:`migrate_database`), the demo and simulations for a manual clock. Tests pass fakes
through the same functions (:class:`Overrides`). Nothing here runs at import time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import evolve, frozen

from apollo_adapters.clock import ManualClock, SystemClock
from apollo_adapters.embedders import CachingEmbedder, HashingEmbedder
from apollo_adapters.embedders.hashing import MODEL_ID_PREFIX as HASHING_MODEL_PREFIX
from apollo_adapters.heuristics import HeuristicContradictionJudge, HeuristicEntityExtractor
from apollo_adapters.memory import InMemoryStore
from apollo_adapters.memory.rates import InMemoryWriteBudget
from apollo_domain.episodes import SentenceSplitter
from apollo_domain.errors import ConfigurationError, ValidationError
from apollo_domain.policy import ConfidencePolicy
from apollo_domain.ports import (
    Clock,
    ContradictionJudge,
    Embedder,
    EntityExtractor,
    GasLanguageModel,
    Store,
    TextSplitter,
    WriteBudget,
)
from apollo_domain.ports.messaging import MessageBus
from apollo_domain.ports.topology import Topology
from apollo_domain.rates import WriteRate
from apollo_domain.retrieval import RetrievalSettings
from apollo_domain.retry import OutboxRetry
from apollo_domain.services import Deps
from apollo_domain.services.context import DEFAULT_BOOST_WINDOW

from .settings import Settings

if TYPE_CHECKING:
    from apollo_adapters.postgres import EmbeddedPostgres

    from .reembed import ReembedReport

EMBEDDING_CACHE_SIZE = 10_000
#: The query texts whose embeddings are kept (a cache apart from the stored texts': a
#: bulk ingest does not push the repeated queries out).
QUERY_CACHE_SIZE = 4_096
Closer = Callable[[], Awaitable[None]]


@frozen
class Overrides:
    """Ports the embedding program (or a test) supplies itself; ``None`` takes the default:
    the cached hashing embedder (or the one the settings name), the system clock, the
    heuristic contradiction judge (or the configured LLM), no LLM, the default policy (or
    the settings'), the default retrieval settings, the heuristic entity extractor, the
    default outbox backoff and boost window (or the settings'). The heuristics read long
    texts in a worker thread, off the event loop."""

    embedder: Embedder | None = None
    clock: Clock | None = None
    judge: ContradictionJudge | None = None
    llm: GasLanguageModel | None = None
    policy: ConfidencePolicy | None = None
    retrieval: RetrievalSettings | None = None
    extractor: EntityExtractor | None = None
    outbox_retry: OutboxRetry | None = None
    boost_window: timedelta | None = None
    #: What splits texts into statements (``store_text``); None: the language model when
    #: it can (an OpenAI-compatible one can), else the deterministic split.
    splitter: TextSplitter | None = None
    #: Each principal's write rate over the edges (:mod:`apollo_domain.rates`); None: no
    #: limit (a store opened from settings takes ``APOLLO_WRITE_RATE``'s).
    write_rate: WriteRate | None = None


@frozen
class Wired:
    """Wired use-case dependencies and what to close, in order, when done with them."""

    deps: Deps
    closers: tuple[Closer, ...] = ()


def default_embedder() -> Embedder:
    """The embedder of a store wired without one (:func:`in_memory`, ``Apollo.in_memory``,
    ``Apollo.with_store``): the deterministic hashing embedder. Those stores live for one
    process and serve simulations and tests, which want instant, reproducible vectors and
    no model to load; a durable store gets the embedder its settings name (the sentence
    model by default)."""
    return CachingEmbedder(HashingEmbedder(), max_entries=EMBEDDING_CACHE_SIZE)


def hashing_embedder(dimension: int = 384) -> HashingEmbedder:
    """The deterministic hashing embedder (no model): simulations and tests."""
    return HashingEmbedder(dimension)


def manual_clock() -> ManualClock:
    """A clock that moves only when told to (``advance``): simulations and tests."""
    return ManualClock()


def embedded_server(data_dir: Path, **options: Any) -> EmbeddedPostgres:
    """An embedded PostgreSQL + pgvector server in ``data_dir`` (not started)."""
    from apollo_adapters.postgres import EmbeddedPostgres

    return EmbeddedPostgres(data_dir, **options)


def server_folder(prefix: str) -> Path:
    """A new temporary folder for an embedded server's data folder (the caller removes it);
    as root, the server's system user may enter it."""
    from apollo_adapters.postgres.embedded import temporary_folder

    return temporary_folder(prefix)


async def migrate_schema(conninfo: str, embedder: Embedder) -> list[int]:
    """Apply pending migrations for ``embedder``'s model and dimension; the versions applied."""
    from apollo_adapters.postgres import migrate

    return await migrate(conninfo, dimension=embedder.dimension, model_id=embedder.model_id)


async def open_postgres(conninfo: str, embedder: Embedder, *, migrate: bool = True) -> Store:
    """The PostgreSQL store at ``conninfo`` for ``embedder``'s model and dimension."""
    from apollo_adapters.postgres import PostgresStore

    return await PostgresStore.open(
        conninfo,
        embedder_model_id=embedder.model_id,
        dimension=embedder.dimension,
        migrate=migrate,
    )


def relevance_floor_of(embedder: Embedder) -> float | None:
    """The cosine under which ``embedder``'s query matches say nothing: the
    ``relevance_floor`` it declares (calibrated by ``benchmarks/relevance_floor_bench.py``),
    or None (no floor) for an embedder that declares none."""
    floor = getattr(embedder, "relevance_floor", None)
    return None if floor is None else float(floor)


def relevance_rule_of(embedder: Embedder) -> dict[str, Any]:
    """The rest of ``embedder``'s relevance rule, as retrieval settings: the
    ``relevance_rule`` it declares (calibrated by ``benchmarks/relevance_rule_bench.py``:
    the standout and the floor of a store of a few entries), or none."""
    rule = getattr(embedder, "relevance_rule", None)
    return {} if rule is None else dict(rule)


def wire(store: Store, overrides: Overrides = Overrides()) -> Deps:
    """The use cases' ports over ``store``. The embedder is cached twice over: the texts
    it stores and searches with (``EMBEDDING_CACHE_SIZE``) and, apart, the query texts
    (``QUERY_CACHE_SIZE``, keyed by model id and the query as embedded). The retrieval
    settings' relevance rule, unless its floor is set, is the embedder's
    (:func:`relevance_floor_of`, :func:`relevance_rule_of`); a floor set alone is the whole
    rule (``APOLLO_RELEVANCE_FLOOR``)."""
    embedder = overrides.embedder
    if embedder is None:
        embedder = default_embedder()
    elif not isinstance(embedder, CachingEmbedder):
        embedder = CachingEmbedder(embedder, max_entries=EMBEDDING_CACHE_SIZE)
    model = embedder.inner if isinstance(embedder, CachingEmbedder) else embedder
    clock = overrides.clock or SystemClock()
    retrieval = overrides.retrieval or RetrievalSettings()
    if retrieval.relevance_floor is None:  # the rule belongs to the embedder
        own = retrieval.relevance_margin is not None or retrieval.relevance_single is not None
        rule = {} if own else relevance_rule_of(embedder)
        retrieval = evolve(retrieval, relevance_floor=relevance_floor_of(embedder), **rule)
    return Deps(
        store=store,
        embedder=embedder,
        query_embedder=CachingEmbedder(model, max_entries=QUERY_CACHE_SIZE),
        judge=overrides.judge or HeuristicContradictionJudge(),
        clock=clock,
        policy=overrides.policy or ConfidencePolicy(),
        llm=overrides.llm,
        splitter=overrides.splitter or _splitter_of(overrides.llm),
        retrieval=retrieval,
        extractor=overrides.extractor or HeuristicEntityExtractor(),
        outbox_retry=overrides.outbox_retry or OutboxRetry(),
        boost_window=(
            DEFAULT_BOOST_WINDOW if overrides.boost_window is None else overrides.boost_window
        ),
        write_budget=write_budget_of(store, overrides.write_rate, clock),
    )


def write_budget_of(store: Store, rate: WriteRate | None, clock: Clock) -> WriteBudget | None:
    """The buckets of ``rate`` where ``store`` keeps them (a store with a
    ``write_budget(rate, clock)`` of its own: the PostgreSQL store's, shared by every
    process of a fleet), else in this process; None without a rate."""
    if rate is None:
        return None
    own = getattr(store, "write_budget", None)
    if callable(own):
        budget: WriteBudget = own(rate, clock)
        return budget
    return InMemoryWriteBudget(rate, clock)


def _splitter_of(llm: GasLanguageModel | None) -> TextSplitter:
    """The language model when it splits texts too, else the deterministic split."""
    return llm if isinstance(llm, TextSplitter) else SentenceSplitter()


def in_memory(overrides: Overrides = Overrides()) -> Wired:
    """Everything in this process: the in-memory store (exact numpy search)."""
    store = InMemoryStore()
    return Wired(wire(store, overrides), (store.close,))


#: The ONNX embedder's options → the settings that give them.
_ONNX_VARIABLES = {
    "cache_dir": "APOLLO_ONNX_CACHE_DIR",
    "quantize": "APOLLO_ONNX_QUANTIZE",
    "threads": "APOLLO_ONNX_THREADS",
}


def build_embedder(settings: Settings) -> Embedder:
    """The embedder named by ``APOLLO_EMBEDDER`` (the packaged sentence model run by ONNX
    Runtime unless configured otherwise). Loading a model blocks for a second or more:
    async code calls this in a worker thread (:func:`load_embedder`)."""
    if settings.embedder == "hashing":
        return HashingEmbedder(settings.embedding_dimension)
    if settings.embedder == "sentence-transformers":
        from apollo_adapters.embedders import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(settings.embedding_model)
    if settings.embedder == "onnx":
        from apollo_adapters.embedders import OnnxEmbedder

        try:
            return OnnxEmbedder(
                settings.embedding_model,
                cache_dir=settings.onnx_cache,
                quantize=None if settings.onnx_quantize == "none" else settings.onnx_quantize,
                threads=settings.onnx_threads,
            )
        except ConfigurationError as exc:  # name the setting, not the option
            variable = _ONNX_VARIABLES.get(exc.variable)
            if variable is None:
                raise
            raise ConfigurationError(variable, exc.message) from exc
    if settings.embedder == "openai":
        from apollo_adapters.embedders import OpenAIEmbedder

        if not settings.embedding_url or not settings.embedding_model:
            raise ConfigurationError(
                "APOLLO_EMBEDDING_URL",
                "the openai embedder needs APOLLO_EMBEDDING_URL and APOLLO_EMBEDDING_MODEL",
            )
        return OpenAIEmbedder(
            settings.embedding_url,
            settings.embedding_model,
            settings.llm_api_key,
            dimension=settings.embedding_dimension,
            relevance_floor=settings.relevance_floor,
        )
    raise ConfigurationError("APOLLO_EMBEDDER", f"unknown embedder {settings.embedder!r}")


async def load_embedder(settings: Settings) -> Embedder:
    """:func:`build_embedder` in a worker thread: loading (or building) a model never
    blocks the event loop."""
    return await asyncio.to_thread(build_embedder, settings)


def build_llm(settings: Settings) -> Any:
    """The OpenAI-compatible chat model when ``APOLLO_LLM_URL`` is set (it serves both the
    GAS language model and the contradiction judge ports), else None."""
    if not settings.llm_url:
        return None
    if not settings.llm_model:
        raise ConfigurationError("APOLLO_LLM_MODEL", "is required with APOLLO_LLM_URL")
    from apollo_adapters.llm import OpenAIChatModel

    return OpenAIChatModel(settings.llm_url, settings.llm_model, settings.llm_api_key)


async def _close_all(closers: Sequence[Closer]) -> None:
    for closer in reversed(closers):
        await closer()


def embedded_store_exists(settings: Settings) -> bool:
    """Whether ``APOLLO_DATA_DIR`` already holds an embedded server's data."""
    return (settings.data_dir / "postgres" / "PG_VERSION").exists()


async def _database(settings: Settings) -> tuple[str, list[Closer]]:
    """The conninfo of ``APOLLO_DATABASE_URL``, else of an embedded server started in
    ``APOLLO_DATA_DIR`` (stopped by the returned closer)."""
    if settings.database_url is not None:
        return settings.database_url, []
    from apollo_adapters.postgres import EmbeddedPostgres, FolderClosed

    server = EmbeddedPostgres(settings.data_dir / "postgres")
    try:
        return await server.start(), [server.stop]
    except FolderClosed as exc:
        if exc.target != server.data_dir:
            raise
        raise ConfigurationError("APOLLO_DATA_DIR", str(exc)) from exc


def _migration_conninfo(settings: Settings, conninfo: str) -> str:
    """Where migrations and the schema check run: ``APOLLO_MIGRATION_DATABASE_URL`` (the
    primary itself, past any pooler) when set with ``APOLLO_DATABASE_URL``, else
    ``conninfo``."""
    if settings.database_url is not None and settings.migration_database_url is not None:
        return settings.migration_database_url
    return conninfo


@contextmanager
def _pgvector_hint(settings: Settings) -> Iterator[None]:
    """A server at ``APOLLO_DATABASE_URL`` without pgvector is a setting to fix: the error
    names the variable and says how (the embedded server always has pgvector)."""
    from apollo_adapters.postgres.errors import MissingPgvector

    try:
        yield
    except MissingPgvector as exc:
        if settings.database_url is None:
            raise
        raise ConfigurationError(
            "APOLLO_DATABASE_URL",
            f"{exc}. Install pgvector on that server, or unset APOLLO_DATABASE_URL to let "
            "Apollo run its embedded PostgreSQL + pgvector",
        ) from exc


@contextmanager
def _embedder_hint(settings: Settings) -> Iterator[None]:
    """A store made with another embedder than the one configured: the error names the
    settings that choose the embedder, with their values, and the one that made it."""
    from apollo_adapters.postgres.errors import EmbedderMismatch

    try:
        yield
    except EmbedderMismatch as exc:
        chosen = f"APOLLO_EMBEDDER={settings.embedder}"
        if settings.embedder == "hashing":
            chosen += f", APOLLO_EMBEDDING_DIMENSION={settings.embedding_dimension}"
        elif settings.embedding_model:
            chosen += f", APOLLO_EMBEDDING_MODEL={settings.embedding_model}"
        if settings.embedder == "onnx":
            chosen += f", APOLLO_ONNX_QUANTIZE={settings.onnx_quantize}"
        made_by = (
            f"APOLLO_EMBEDDER=hashing and APOLLO_EMBEDDING_DIMENSION={exc.stored_dimension}"
            if exc.stored_model.startswith(HASHING_MODEL_PREFIX)
            else f"the embedder of model {exc.stored_model!r}"
        )
        raise ConfigurationError(
            "APOLLO_EMBEDDER",
            f"the store holds vectors of model {exc.stored_model!r} (dimension"
            f" {exc.stored_dimension}), not those of the embedder configured now ({chosen});"
            f" set {made_by} to open it, run `apollo reembed` to move the store to the"
            " embedder configured now, or choose a new store (APOLLO_DATA_DIR or"
            " APOLLO_DATABASE_URL) for it",
        ) from exc


async def _check_model_before_loading(settings: Settings, conninfo: str) -> None:
    """A local model takes seconds to load (or export): a store made with another model is
    refused (naming the settings) before it is loaded, from the model id alone."""
    if settings.embedder not in ("sentence-transformers", "onnx"):
        return
    from apollo_adapters.embedders.sentence import model_id_of
    from apollo_adapters.postgres import PostgresStore
    from apollo_adapters.postgres.errors import EmbedderMismatch

    configured = model_id_of(settings.embedding_model)
    if settings.embedder == "onnx" and settings.onnx_quantize != "none":
        configured += f"+{settings.onnx_quantize}"
    with _embedder_hint(settings):
        stored = await PostgresStore.stored_embedder(conninfo)
        if stored is not None and stored[0] != configured:
            model, dimension = stored
            raise EmbedderMismatch(
                f"the store holds vectors of model {model!r} but the configured embedder"
                f" is {configured!r}",
                model,
                dimension,
            )


@contextmanager
def _migrate_hint(settings: Settings) -> Iterator[None]:
    """A server at ``APOLLO_DATABASE_URL`` opened without migrating whose schema is not
    current: the error names the variable and the command that migrates it."""
    from apollo_adapters.postgres.errors import SchemaNotCurrent

    try:
        yield
    except SchemaNotCurrent as exc:
        if settings.database_url is None:
            raise
        raise ConfigurationError(
            "APOLLO_DATABASE_URL",
            f"{exc}; run `apollo migrate` to create or update it (this command does not"
            " change a server's schema)",
        ) from exc


async def open_durable(
    settings: Settings, overrides: Overrides = Overrides(), *, migrate: bool = True
) -> Wired:
    """The PostgreSQL store of ``APOLLO_DATABASE_URL`` (else the embedded server), migrated,
    with the embedder and LLM the settings name unless ``overrides`` supplies them.

    With ``migrate=False`` a server given by URL is used as it is: a schema that is missing
    or has migrations pending is a :class:`ConfigurationError` naming the variable that
    says to run ``apollo migrate``. The embedded server is always migrated: it is Apollo's
    own."""
    from apollo_adapters.postgres import PostgresStore

    closers: list[Closer] = []
    embedder = overrides.embedder
    llm, judge = overrides.llm, overrides.judge
    try:
        conninfo, server_closers = await _database(settings)
        closers.extend(server_closers)
        if embedder is None:
            await _check_model_before_loading(settings, conninfo)
            embedder = await load_embedder(settings)
            _closer_of(embedder, closers)
        chat = build_llm(settings) if llm is None or judge is None else None
        if chat is not None:  # one OpenAI-compatible model serves both ports
            _closer_of(chat, closers)
            llm = llm or chat
            judge = judge or chat
        with _pgvector_hint(settings), _migrate_hint(settings), _embedder_hint(settings):
            store = await PostgresStore.open(
                conninfo,
                embedder_model_id=embedder.model_id,
                dimension=embedder.dimension,
                pool_max=settings.pool_max,
                ef_search=settings.ef_search,
                ingest_ef_search=settings.ingest_ef_search,
                migrate=migrate or settings.database_url is None,
                transaction_pooler=settings.transaction_pooler,
                migration_conninfo=_migration_conninfo(settings, conninfo),
            )
        closers.append(store.close)
        if settings.read_database_url is not None and settings.database_url is not None:
            await store.with_replica(settings.read_database_url, wait=settings.replica_wait)
    except BaseException:
        await _close_all(closers)
        raise
    deps = wire(
        store,
        Overrides(
            embedder=embedder,
            clock=overrides.clock,
            judge=judge,
            llm=llm,
            policy=overrides.policy or settings.policy,
            retrieval=overrides.retrieval or settings.retrieval,
            extractor=overrides.extractor,
            splitter=overrides.splitter,
            outbox_retry=overrides.outbox_retry or settings.outbox_retry,
            boost_window=(
                settings.boost_window if overrides.boost_window is None else overrides.boost_window
            ),
            write_rate=overrides.write_rate or settings.write_limit,
        ),
    )
    return Wired(deps, tuple(closers))  # closed in reverse: the store first, the embedder last


def rewire_embedder(deps: Deps, embedder: Embedder) -> Deps:
    """``deps`` embedding with ``embedder`` (after a store moved to it): both caches start
    empty, and a relevance rule that was the old embedder's becomes the new one's."""
    old = deps.embedder.inner if isinstance(deps.embedder, CachingEmbedder) else deps.embedder
    model = embedder.inner if isinstance(embedder, CachingEmbedder) else embedder
    retrieval = deps.retrieval
    if retrieval.relevance_floor == relevance_floor_of(old):  # the rule was the embedder's
        retrieval = evolve(
            retrieval, relevance_floor=relevance_floor_of(model), **relevance_rule_of(model)
        )
    return evolve(
        deps,
        embedder=CachingEmbedder(model, max_entries=EMBEDDING_CACHE_SIZE),
        query_embedder=CachingEmbedder(model, max_entries=QUERY_CACHE_SIZE),
        retrieval=retrieval,
    )


async def reembed_store(
    settings: Settings, *, batch_size: int, progress: Callable[[int, int], None] | None = None
) -> ReembedReport:
    """Move the configured store (the embedded server, or ``APOLLO_DATABASE_URL``'s) to the
    embedder the settings name now, whichever model made it (``apollo reembed``)."""
    from apollo_adapters.postgres import PostgresStore, migrate
    from apollo_adapters.postgres.reembed import PostgresReembedding

    from .reembed import check_batch, reembed

    check_batch(batch_size)
    closers: list[Closer] = []
    try:
        conninfo, server_closers = await _database(settings)
        closers.extend(server_closers)
        direct = _migration_conninfo(settings, conninfo)
        stored = await PostgresStore.stored_embedder(direct)
        embedder = await load_embedder(settings)
        _closer_of(embedder, closers)
        if stored is None:  # nothing stored yet: the store is made for the new embedder
            stored = (embedder.model_id, embedder.dimension)
        with _pgvector_hint(settings):
            await migrate(direct, dimension=stored[1], model_id=stored[0])
        moving = PostgresReembedding(direct, embedder.model_id, embedder.dimension)
        return await reembed(moving, embedder, batch_size=batch_size, progress=progress)
    finally:
        await _close_all(closers)


def _closer_of(resource: Any, closers: list[Closer]) -> None:
    close = getattr(resource, "aclose", None)
    if close is not None:
        closers.append(close)


async def migrate_database(settings: Settings) -> tuple[list[int], int, dict[int, str]]:
    """Apply pending migrations to the configured database (starting the embedded one when
    no URL is set) and check it matches the embedder. Returns (versions applied now, the
    current version, every version's name)."""
    from apollo_adapters.postgres import PostgresStore, migrate
    from apollo_adapters.postgres.schema import migrations

    closers: list[Closer] = []
    try:
        conninfo, server_closers = await _database(settings)
        closers.extend(server_closers)
        await _check_model_before_loading(settings, conninfo)
        embedder = await load_embedder(settings)
        _closer_of(embedder, closers)
        direct = _migration_conninfo(settings, conninfo)
        with _pgvector_hint(settings):
            applied = await migrate(
                direct, dimension=embedder.dimension, model_id=embedder.model_id
            )
        with _embedder_hint(settings):
            store = await PostgresStore.open(
                conninfo,
                embedder_model_id=embedder.model_id,
                dimension=embedder.dimension,
                pool_max=1,
                migrate=False,
                transaction_pooler=settings.transaction_pooler,
                migration_conninfo=direct,
            )
        await store.close()
    finally:
        await _close_all(closers)
    names = {m.version: m.name for m in migrations()}
    return applied, max(names), names


def topology_of(settings: Settings) -> Topology:
    """Apollo's topology named by the settings: queues ``<queue_prefix>.ingest``, ``.query``,
    ``.writeback.store``, ``.writeback.vectorize``, ``.gas`` and ``.dead``; the dead-letter
    exchange ``<exchange>.dlx``; the GAS queue bound to ``audit_exchange``. The defaults give
    the production names, and ``Topology().with_prefix(p)`` equals the topology of settings
    whose exchange, queue prefix and audit exchange all start with ``p``."""
    queues = settings.queue_prefix
    exchange = settings.exchange
    return Topology(
        exchange=exchange,
        ingest_queue=f"{queues}.ingest",
        query_queue=f"{queues}.query",
        writeback_store_queue=f"{queues}.writeback.store",
        writeback_vectorize_queue=f"{queues}.writeback.vectorize",
        gas_queue=f"{queues}.gas",
        audit_exchange=settings.audit_exchange,
        dead_letter_exchange=f"{exchange}.dlx",
        dead_letter_queue=f"{queues}.dead",
    )


async def open_bus(
    settings: Settings,
    topology: Topology | None = None,
    *,
    amqp_url: str | None = None,
) -> MessageBus:
    """RabbitMQ at ``amqp_url`` (default ``settings.amqp_url``; declaring the topology,
    idempotently), else the in-process bus."""
    topology = topology or topology_of(settings)
    url = amqp_url or settings.amqp_url
    if url:
        from apollo_adapters.rabbitmq import AiormqBus

        try:
            return await AiormqBus.connect(
                url,
                topology=topology,
                max_redeliveries=settings.max_redeliveries,
                gateway_users=settings.gateway_users,
                queue_type=settings.queue_type,
            )
        except ValidationError as exc:
            if exc.field != "url":
                raise
            raise ConfigurationError("APOLLO_AMQP_URL", exc.message) from None
    from apollo_adapters.inprocess import InProcessBus

    return InProcessBus(topology, max_redeliveries=settings.max_redeliveries)


async def connect_broker(
    amqp_url: str,
    topology: Topology | None = None,
    *,
    declare_topology: bool = True,
    queue_type: str = "quorum",
) -> MessageBus:
    """A RabbitMQ bus at ``amqp_url`` declaring ``topology`` (the production names by
    default; not declared when ``declare_topology`` is false) with ``queue_type`` queues:
    client mode's transport."""
    from apollo_adapters.rabbitmq import AiormqBus

    return await AiormqBus.connect(
        amqp_url,
        topology=topology or Topology(),
        declare_topology=declare_topology,
        queue_type=queue_type,
    )


__all__ = [
    "Closer",
    "HashingEmbedder",
    "ManualClock",
    "Overrides",
    "Wired",
    "build_embedder",
    "build_llm",
    "connect_broker",
    "default_embedder",
    "embedded_server",
    "embedded_store_exists",
    "hashing_embedder",
    "in_memory",
    "load_embedder",
    "manual_clock",
    "migrate_database",
    "migrate_schema",
    "open_bus",
    "open_durable",
    "open_postgres",
    "relevance_floor_of",
    "relevance_rule_of",
    "server_folder",
    "topology_of",
    "wire",
    "write_budget_of",
]
