"""The hashing embedder and the LRU caching wrapper."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from apollo_adapters.embedders import CachingEmbedder, HashingEmbedder, OpenAIEmbedder
from apollo_domain.errors import EmbeddingError
from apollo_domain.ports import Embedder

SIMILAR = [
    (
        "The quick brown fox jumps over the lazy dog near the river bank",
        "The quick brown fox leaps over the lazy dog near the river bank",
    ),
    (
        "BGP uses TCP port 179 to establish sessions between routers",
        "BGP uses TCP port 179 to establish sessions between peers",
    ),
    (
        "Redis keeps the whole dataset in memory and persists snapshots to disk",
        "Redis keeps the whole dataset in memory and writes snapshots to disk",
    ),
]
UNRELATED = [
    (
        "The quick brown fox jumps over the lazy dog",
        "Kubernetes schedules pods onto nodes based on resource requests",
    ),
    (
        "The database server does not support TLS connections",
        "Python lists are dynamic arrays with amortized constant appends",
    ),
    (
        "Configure the load balancer health checks for this service",
        "The weather in the mountains gets cold at night",
    ),
]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))


# --------------------------------------------------------------------------- hashing


async def test_hashing_is_deterministic_across_instances() -> None:
    """Two embedders (fresh caches) produce identical vectors: the hash is stable."""
    texts = ["Apollo stores knowledge", "agents corroborate facts", ""]
    first = await HashingEmbedder().embed(texts)
    second = await HashingEmbedder().embed(texts)
    assert first == second


async def test_hashing_has_the_declared_shape_and_unit_norm() -> None:
    embedder = HashingEmbedder(dimension=128)
    assert isinstance(embedder, Embedder)
    assert embedder.model_id == "apollo-hashing-v1-128"
    texts = ["one", "two words", "  many   words\tand\nwhitespace  ", "!!!", "", "é" * 500]
    vectors = await embedder.embed(texts)
    assert len(vectors) == len(texts)
    for vector in vectors:
        assert len(vector) == 128
        assert all(isinstance(x, float) for x in vector)
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


def test_matrix_is_float32_and_normalized() -> None:
    matrix = HashingEmbedder().embed_sync(["a", "b c", "d e f"])
    assert matrix.dtype == np.float32
    assert matrix.shape == (3, 384)
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)


def test_empty_texts_share_one_fixed_unit_vector() -> None:
    """Empty and whitespace-only texts embed to the same unit vector, not a zero vector."""
    embedder = HashingEmbedder()
    empty, blank, punctuation = embedder.embed_sync(["", " \n\t ", "!!!"])
    assert np.linalg.norm(empty) == pytest.approx(1.0)
    assert np.array_equal(empty, blank)
    assert not np.array_equal(empty, punctuation)


def test_whitespace_and_case_do_not_matter() -> None:
    embedder = HashingEmbedder()
    a, b = embedder.embed_sync(["Redis is FAST", "  redis   is\nfast "])
    assert np.array_equal(a, b)


@pytest.mark.parametrize(("a", "b"), SIMILAR)
def test_one_changed_word_stays_similar(a: str, b: str) -> None:
    a_vec, b_vec = HashingEmbedder().embed_sync([a, b])
    assert cosine(a_vec, b_vec) >= 0.8


@pytest.mark.parametrize(("a", "b"), UNRELATED)
def test_unrelated_sentences_are_dissimilar(a: str, b: str) -> None:
    a_vec, b_vec = HashingEmbedder().embed_sync([a, b])
    assert cosine(a_vec, b_vec) < 0.3


def test_batch_equals_one_by_one() -> None:
    texts = [s for pair in SIMILAR + UNRELATED for s in pair] + ["", "x"]
    embedder = HashingEmbedder()
    batch = embedder.embed_sync(texts)
    single = np.vstack([HashingEmbedder().embed_sync([text]) for text in texts])
    assert np.array_equal(batch, single)


async def test_no_texts_no_vectors() -> None:
    assert await HashingEmbedder().embed([]) == []
    assert HashingEmbedder().embed_sync([]).shape == (0, 384)


# --------------------------------------------------------------------------- caching


class CountingEmbedder:
    """An inner embedder that records every batch and can misbehave on demand."""

    def __init__(self, model_id: str = "counting", dimension: int = 3) -> None:
        self.model_id = model_id
        self.dimension = dimension
        self.batches: list[list[str]] = []
        self.drop_one = False
        self.wrong_dimension = False

    async def embed(self, texts: Sequence[str]) -> list[Sequence[float]]:
        self.batches.append(list(texts))
        size = self.dimension + (1 if self.wrong_dimension else 0)
        vectors: list[Sequence[float]] = [[float(len(t))] + [1.0] * (size - 1) for t in texts]
        return vectors[1:] if self.drop_one else vectors


async def test_cache_counts_hits_and_misses_and_embeds_misses_once() -> None:
    inner = CountingEmbedder()
    cache = CachingEmbedder(inner)
    assert (cache.model_id, cache.dimension) == ("counting", 3)

    first = await cache.embed(["a", "bb", "a"])
    assert inner.batches == [["a", "bb"]]
    assert (cache.hits, cache.misses) == (0, 3)

    second = await cache.embed(["bb", "ccc", "a"])
    assert inner.batches == [["a", "bb"], ["ccc"]]
    assert (cache.hits, cache.misses) == (2, 4)
    assert list(first[1]) == list(second[0]) == [2.0, 1.0, 1.0]
    assert [list(v) for v in second] == [[2.0, 1.0, 1.0], [3.0, 1.0, 1.0], [1.0, 1.0, 1.0]]

    third = await cache.embed(["a", "bb", "ccc"])
    assert len(inner.batches) == 2
    assert (cache.hits, cache.misses) == (5, 4)
    assert [v[0] for v in third] == [1.0, 2.0, 3.0]


async def test_cache_evicts_the_least_recently_used() -> None:
    inner = CountingEmbedder()
    cache = CachingEmbedder(inner, max_entries=2)
    await cache.embed(["a", "b"])
    await cache.embed(["a"])  # "b" is now the least recently used
    await cache.embed(["c"])
    assert len(cache) == 2
    inner.batches.clear()
    await cache.embed(["a", "c"])
    assert inner.batches == []
    await cache.embed(["b"])
    assert inner.batches == [["b"]]
    assert len(cache) == 2


async def test_cache_never_grows_past_its_bound() -> None:
    cache = CachingEmbedder(CountingEmbedder(), max_entries=5)
    await cache.embed([f"text {i}" for i in range(50)])
    assert len(cache) == 5


def test_cache_key_includes_the_model_id() -> None:
    one = CachingEmbedder(CountingEmbedder(model_id="model-a"))
    other = CachingEmbedder(CountingEmbedder(model_id="model-b"))
    assert one._key("same text") != other._key("same text")
    assert one._key("same text") == CachingEmbedder(CountingEmbedder("model-a"))._key("same text")


async def test_cache_rejects_a_wrong_vector_count() -> None:
    inner = CountingEmbedder()
    cache = CachingEmbedder(inner)
    inner.drop_one = True
    with pytest.raises(EmbeddingError, match="expected 2 vectors"):
        await cache.embed(["a", "b"])
    assert len(cache) == 0


async def test_cache_rejects_a_wrong_dimension() -> None:
    inner = CountingEmbedder()
    cache = CachingEmbedder(inner)
    inner.wrong_dimension = True
    with pytest.raises(EmbeddingError, match="dimension"):
        await cache.embed(["a"])
    assert len(cache) == 0


async def test_cache_over_hashing_returns_the_same_vectors() -> None:
    texts = ["Apollo stores knowledge", "agents corroborate facts"]
    direct = await HashingEmbedder().embed(texts)
    cached = CachingEmbedder(HashingEmbedder())
    assert [list(v) for v in await cached.embed(texts)] == direct
    assert [list(v) for v in await cached.embed(texts)] == direct
    assert cached.hits == 2


def test_each_embedder_declares_its_calibrated_relevance_floor() -> None:
    """The floors of benchmarks/relevance_floor_bench.py; an uncalibrated dimension or
    model has none, and the cache passes its inner embedder's through."""
    assert 0.15 == HashingEmbedder(384).relevance_floor
    assert None is HashingEmbedder(17).relevance_floor
    assert 0.15 == CachingEmbedder(HashingEmbedder(384)).relevance_floor
    assert 0.39 == OpenAIEmbedder("http://e", "all-MiniLM-L6-v2", dimension=384).relevance_floor
    assert None is OpenAIEmbedder("http://e", "unknown-model", dimension=8).relevance_floor
    assert 0.2 == OpenAIEmbedder("http://e", "m", dimension=8, relevance_floor=0.2).relevance_floor


async def test_a_repeated_query_does_not_run_the_model_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The query texts have a cache of their own, keyed by model id and the query as
    embedded (spacing collapsed): asking again, differently spaced, after a bulk ingest
    that overflowed the stored texts' cache, reaches the model no more; another query
    does."""
    from apollo_app import Apollo, bootstrap
    from tests.support import KeyedEmbedder

    monkeypatch.setattr(bootstrap, "EMBEDDING_CACHE_SIZE", 4)
    model = KeyedEmbedder(16)
    async with Apollo.in_memory(embedder=model) as apollo:
        client = apollo.client("claude-a")
        await client.store_knowledge(content="Kafka orders messages within a partition")
        first = await client.query_knowledge("kafka  partition order")
        asked = model.calls
        await client.store_many([{"content": f"note {i} about topic {i * 3}"} for i in range(12)])
        stored = model.calls
        again = await client.query_knowledge(" kafka partition\torder ")
        assert (asked + 1, stored) == (stored, model.calls)
        assert ["Kafka orders messages within a partition"] == [e.content for e in first.entries]
        assert first.entries[0].id in [e.id for e in again.entries]
        other = await client.query_knowledge("kafka partition leaders")
        assert stored + 1 == model.calls, other
