"""The Embedder port on every local embedder: the hashing embedder, the caching wrapper
(over the hashing embedder), the sentence-transformers model loaded from disk, and the
same model run by ONNX Runtime (fp32 and int8, exported once per session).

The port promises one vector per text, in order, each of length ``dimension``, and that
every vector of a ``model_id`` is comparable with every other: equal texts embed equally
whichever instance, batch or call embeds them. It promises no norm (every vector is
compared by cosine), so each adapter's own tests check the normalization it performs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pytest

from apollo_adapters.embedders import (
    CachingEmbedder,
    HashingEmbedder,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
)
from apollo_domain.ports import Embedder

EmbedderFactory = Callable[[], Embedder]

TEXTS = [
    "BGP uses TCP port 179 to establish sessions between routers",
    "Redis keeps the whole dataset in memory and persists snapshots to disk",
    "",
    "  \t\n ",
    "!!!",
    "Ünïcödé — 日本語のテキスト",
    "word " * 40,
    "BGP uses TCP port 179 to establish sessions between routers",
]
TOLERANCE = 1e-5  # float32 rounding of one text batched with others


@pytest.fixture(params=["hashing", "caching", "sentence", "onnx", "onnx-int8"])
def make_embedder(request: pytest.FixtureRequest) -> EmbedderFactory:
    """Builds fresh, independent embedders of one adapter, all of one model."""
    if request.param == "hashing":
        return lambda: HashingEmbedder(64)
    if request.param == "caching":
        return lambda: CachingEmbedder(HashingEmbedder(64), max_entries=3)
    if request.param.startswith("onnx"):
        cache = request.getfixturevalue("onnx_cache")
        quantize = "int8" if request.param == "onnx-int8" else None
        # Batches of 3: the contract's texts span several batches of mixed lengths.
        return lambda: OnnxEmbedder(cache_dir=cache, quantize=quantize, batch_size=3)
    return SentenceTransformerEmbedder  # the packaged model, from disk


def assert_same_vectors(
    expected: Sequence[Sequence[float]], actual: Sequence[Sequence[float]]
) -> None:
    assert len(expected) == len(actual)
    for want, got in zip(expected, actual, strict=True):
        assert list(want) == pytest.approx(list(got), abs=TOLERANCE)


async def test_it_declares_its_model_and_dimension(make_embedder: EmbedderFactory) -> None:
    embedder = make_embedder()
    assert isinstance(embedder, Embedder)
    assert isinstance(embedder.model_id, str) and embedder.model_id
    assert isinstance(embedder.dimension, int) and embedder.dimension > 0


async def test_one_finite_vector_of_the_dimension_per_text(
    make_embedder: EmbedderFactory,
) -> None:
    embedder = make_embedder()
    vectors = await embedder.embed(TEXTS)
    assert len(TEXTS) == len(vectors)
    for vector in vectors:
        assert embedder.dimension == len(vector)
        assert all(isinstance(x, float) and math.isfinite(x) for x in vector)
        assert any(x != 0.0 for x in vector)
    assert [] == await embedder.embed([])


async def test_a_batch_embeds_each_text_as_it_would_alone(
    make_embedder: EmbedderFactory,
) -> None:
    """Position i of a batch is text i's vector, whatever else the batch holds."""
    embedder = make_embedder()
    batch = await embedder.embed(TEXTS)
    singles = [(await embedder.embed([text]))[0] for text in TEXTS]
    assert_same_vectors(singles, batch)
    reversed_batch = await embedder.embed(TEXTS[::-1])
    assert_same_vectors(batch, reversed_batch[::-1])


async def test_equal_texts_embed_equally_across_calls_and_instances(
    make_embedder: EmbedderFactory,
) -> None:
    """Same model id, same text, same vector; different texts, different vectors."""
    first, second = make_embedder(), make_embedder()
    assert (first.model_id, first.dimension) == (second.model_id, second.dimension)
    once = await first.embed(TEXTS)
    assert_same_vectors(once, await first.embed(TEXTS))
    assert_same_vectors(once, await second.embed(TEXTS))
    assert_same_vectors(once[:1], once[-1:])
    assert list(once[0]) != pytest.approx(list(once[1]), abs=TOLERANCE)
