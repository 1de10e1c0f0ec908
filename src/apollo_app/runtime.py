"""Opening Apollo from settings: the embedded PostgreSQL + pgvector default, or any server."""

from __future__ import annotations

from typing import Any

from apollo_adapters.embedders import HashingEmbedder
from apollo_adapters.llm import OpenAIChatModel
from apollo_adapters.postgres import EmbeddedPostgres, PostgresStore
from apollo_domain.errors import ConfigurationError
from apollo_domain.ports import Embedder, GasLanguageModel

from .facade import Apollo, Closer
from .settings import Settings


def build_embedder(settings: Settings) -> Embedder:
    """The embedder named by ``APOLLO_EMBEDDER`` (hashing unless configured otherwise)."""
    if settings.embedder == "hashing":
        return HashingEmbedder(settings.embedding_dimension)
    if settings.embedder == "sentence-transformers":
        from apollo_adapters.embedders import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(settings.embedding_model)
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
        )
    raise ConfigurationError("APOLLO_EMBEDDER", f"unknown embedder {settings.embedder!r}")


def build_llm(settings: Settings) -> OpenAIChatModel | None:
    """The OpenAI-compatible chat model when ``APOLLO_LLM_URL`` is set, else None."""
    if not settings.llm_url:
        return None
    if not settings.llm_model:
        raise ConfigurationError("APOLLO_LLM_MODEL", "is required with APOLLO_LLM_URL")
    return OpenAIChatModel(settings.llm_url, settings.llm_model, settings.llm_api_key)


async def open_store(settings: Settings, embedder: Embedder) -> tuple[PostgresStore, list[Closer]]:
    """The PostgreSQL store of ``APOLLO_DATABASE_URL``, else an embedded server in
    ``APOLLO_DATA_DIR`` (started here, stopped on close). Migrates before returning."""
    closers: list[Closer] = []
    conninfo = settings.database_url
    if conninfo is None:
        server = EmbeddedPostgres(settings.data_dir / "postgres")
        conninfo = await server.start()
        closers.append(server.stop)
    try:
        store = await PostgresStore.open(
            conninfo,
            embedder_model_id=embedder.model_id,
            dimension=embedder.dimension,
            pool_max=settings.pool_max,
            ef_search=settings.ef_search,
        )
    except BaseException:
        for closer in reversed(closers):
            await closer()
        raise
    closers.append(store.close)
    return store, closers


async def open_apollo(
    cls: type[Apollo],
    settings: Settings | None = None,
    *,
    embedder: Embedder | None = None,
    clock: Any = None,
    judge: Any = None,
    llm: GasLanguageModel | None = None,
    policy: Any = None,
) -> Apollo:
    settings = settings or Settings.from_env()
    built: list[Any] = []  # what this function creates, it also closes
    if embedder is None:
        embedder = build_embedder(settings)
        built.append(embedder)
    chat = build_llm(settings) if llm is None or judge is None else None
    if chat is not None:  # one OpenAI-compatible model serves both ports
        built.append(chat)
        llm = llm or chat
        judge = judge or chat
    store, closers = await open_store(settings, embedder)
    for extra in built:
        close = getattr(extra, "aclose", None)
        if close is not None:
            closers.append(close)
    return cls.with_store(
        store,
        embedder=embedder,
        clock=clock,
        judge=judge,
        llm=llm,
        policy=policy or settings.policy,
        closers=closers,
    )
