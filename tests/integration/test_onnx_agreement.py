"""The ONNX embedder's vectors against the PyTorch model's, text by text, on varied texts
(empty and blank ones, and long ones cut at the model's 256 tokens): the graph built from
the weights with numpy is the same model (cosine ≥ 0.9999 on every text, 1.0 to float
rounding), so it shares the PyTorch embedder's model id; int8 stays close (measured 0.974
at worst, on "ok", and 0.991 on average; asserted with margin: ≥ 0.95 each, ≥ 0.98 on
average)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from apollo_adapters.embedders import OnnxEmbedder, SentenceTransformerEmbedder

pytest.importorskip("sentence_transformers", reason="the reference vectors need PyTorch")

TEXTS = [
    "BGP uses TCP port 179 to establish sessions between routers.",
    "What port does BGP listen on?",
    "Redis keeps the whole dataset in memory and persists snapshots to disk.",
    "PostgreSQL's MVCC keeps old row versions until VACUUM removes them.",
    "The HNSW index trades memory for fast approximate nearest-neighbour search.",
    "Alice works at Initech.",
    "Initech's headquarters are in Austin, Texas.",
    "Where is the headquarters of the company Alice works for?",
    "The Eiffel Tower was completed in 1889 for the World's Fair.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen.",
    "ok",
    "",
    "   ",
    "!!!",
    "?",
    "42",
    "3.14159 2.71828 1.41421",
    "SELECT id, name FROM users WHERE created_at > now() - interval '1 day';",
    "def embed(texts): return [model(t) for t in texts]",
    "https://example.com/path?query=1&other=two#fragment",
    "user@example.org wrote: see ticket #1234 for the stack trace",
    "Ünïcödé — diacritics and dashes everywhere",
    "日本語のテキストも埋め込めます。",
    "Привет, как дела? Всё хорошо.",
    "Le chat est assis sur le tapis.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "El conocimiento compartido entre agentes mejora las respuestas.",
    "🙂🚀🔥 emoji only, almost",
    "A" * 300,
    "word " * 40,
    "word " * 400,
    "lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor " * 8,
    "The meeting moved from Tuesday to Thursday at 3 pm UTC.",
    "The service returned HTTP 503 with a Retry-After header of 5 seconds.",
    "The contradiction judge found that the new fact negates the stored one.",
    "Not every agent agrees: the vote was 3 to 2 against.",
    "The cat is sitting on the mat.",
    "A cat sits on a mat.",
    "Quarterly revenue grew by ten percent year over year.",
    "RabbitMQ delivers each message to one consumer of a queue, with acknowledgements.",
    "Memory usage spiked after the deploy; the OOM killer stopped the worker twice.",
    "  leading and trailing whitespace   ",
    "MiXeD CaSe TeXt WiTh NuMbErS 123",
    "tab\tseparated\tvalues\tin\tone\tline",
    "line one\nline two\nline three",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "The patient was prescribed 500 mg of amoxicillin three times daily.",
    "Mount Everest is 8,849 metres above sea level.",
    "Who wrote 'Pride and Prejudice'?",
    "Jane Austen published Pride and Prejudice in 1813.",
]


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    return SentenceTransformerEmbedder().embed_sync(TEXTS)


def cosines(reference: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(reference, axis=1) * np.linalg.norm(vectors, axis=1)
    result: np.ndarray = (reference * vectors).sum(axis=1) / norms
    return result


def test_fp32_vectors_agree_with_the_pytorch_model_on_every_text(
    reference: np.ndarray, onnx_cache: Path
) -> None:
    agreement = cosines(reference, OnnxEmbedder(cache_dir=onnx_cache).embed_sync(TEXTS))
    assert 50 == len(agreement)
    worst = int(agreement.argmin())
    assert agreement.min() >= 0.9999, f"{agreement.min():.6f} on {TEXTS[worst]!r}"


def test_int8_vectors_stay_close_to_the_pytorch_model(
    reference: np.ndarray, onnx_cache: Path
) -> None:
    """Measured: min 0.974, mean 0.991 (benchmarks/embedder_bench.py prints them)."""
    int8 = OnnxEmbedder(cache_dir=onnx_cache, quantize="int8")
    agreement = cosines(reference, int8.embed_sync(TEXTS))
    worst = int(agreement.argmin())
    assert agreement.min() >= 0.95, f"{agreement.min():.4f} on {TEXTS[worst]!r}"
    assert agreement.mean() >= 0.98
