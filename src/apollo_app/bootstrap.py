"""The composition root: the one place that picks adapters."""

from __future__ import annotations

from apollo_adapters.clock import SystemClock
from apollo_adapters.embedders import CachingEmbedder, HashingEmbedder
from apollo_domain.contradiction import HeuristicContradictionJudge
from apollo_domain.policy import ConfidencePolicy
from apollo_domain.ports import Clock, ContradictionJudge, Embedder, GasLanguageModel, Store
from apollo_domain.services import Deps

EMBEDDING_CACHE_SIZE = 10_000


def default_embedder() -> Embedder:
    return CachingEmbedder(HashingEmbedder(), max_entries=EMBEDDING_CACHE_SIZE)


def bootstrap(
    store: Store,
    *,
    embedder: Embedder | None = None,
    clock: Clock | None = None,
    judge: ContradictionJudge | None = None,
    llm: GasLanguageModel | None = None,
    policy: ConfidencePolicy | None = None,
) -> Deps:
    """Wire the use cases' ports. ``None`` takes the default: the cached hashing embedder,
    the system clock, the heuristic contradiction judge, no LLM, the default policy."""
    if embedder is None:
        embedder = default_embedder()
    elif not isinstance(embedder, CachingEmbedder):
        embedder = CachingEmbedder(embedder, max_entries=EMBEDDING_CACHE_SIZE)
    return Deps(
        store=store,
        embedder=embedder,
        judge=judge or HeuristicContradictionJudge(),
        clock=clock or SystemClock(),
        policy=policy or ConfidencePolicy(),
        llm=llm,
    )
