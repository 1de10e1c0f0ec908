"""How a hybrid query ranks (docs/retrieval.md, "How retrieval works"): the settings, and the two
fusions.

Each signal (``vector``, ``lexical``, ``graph``) ranks its own candidates; the fused
ranking combines them in one of two ways (``RetrievalSettings.fusion``):

- ``rrf``, reciprocal rank fusion: an entry's fused score is the sum, over the signals that
  found it, of ``weight / (rrf_k + rank)`` (rank 1 is the best). Fusing ranks rather than
  scores needs no calibration between a cosine, a ``ts_rank`` value and a graph
  count (Cormack, Clarke and Büttcher, "Reciprocal rank fusion outperforms Condorcet and
  individual rank learning methods", SIGIR 2009, where ``k = 60`` comes from).
- ``relative_score``: each signal's scores are rescaled to [0, 1] over its own candidate
  list (min-max, as Weaviate's relative score fusion; a list of equal scores is all 1)
  and the fused score is the weighted sum. It keeps how far apart a signal's candidates
  are, so a clear winner of one signal is not pulled down to an entry two signals found
  weakly; but each list's weakest candidate adds nothing, which hurts a short list such
  as the graph fill's.

The relevance rule: every text has some cosine with every other, so a vector match says
nothing about the query unless it clears the rule, and the vector signal drops it before
fusion (neither returned nor boosted). The rule has two parts, either of which admits:

- the absolute floor (``RetrievalSettings.relevance_floor``): a match at or above it counts;
- the standout (``relevance_margin``, ``relevance_background``, ``relevance_minimum``): the
  query's best cosine, minus the mean of the ``relevance_background`` candidates after it,
  is at least the margin, and the best is at least the minimum. A paraphrase has a low
  cosine with its note but a higher one than with everything else the store holds; an
  unrelated query's best is one of a crowd. When the query stands out, every candidate at
  or above the minimum counts.

With fewer candidates than the best plus ``relevance_background``, the candidates are the
whole store as the query's filter sees it (a store of a few entries, or a narrow filter):
there is no crowd to stand out of, and the floor is that of a store of ``n`` entries,
``relevance_single + relevance_growth * ln(n)`` (at most the absolute floor). An unrelated
query's best cosine is the largest of ``n`` draws from the model's unrelated cosines,
whose tail is exponential: its quantiles grow by the same step each time ``n`` is
multiplied by e (Gumbel). Without ``relevance_single`` the absolute floor admits (or, with
none, the minimum).

The decision is :meth:`RetrievalSettings.relevance_cutoff`, fed by the candidates each
store returns best first (``benchmarks/relevance_rule_bench.py`` calibrates it). The rule
belongs to the embedder: the composition root fills it in from the embedder's declared
``relevance_floor`` and ``relevance_standout`` unless set. It applies to the vector signal
only: a lexical match holds a term of the query itself, and the graph fill an entity the
query names, which is relevance of its own; an entry the vector signal did not admit
still counts when one of those found it too, on that signal alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final
from uuid import UUID

from attrs import converters, field, frozen, validators

from .errors import ValidationError

VECTOR: Final = "vector"
LEXICAL: Final = "lexical"
GRAPH: Final = "graph"
SIGNALS: Final = (VECTOR, LEXICAL, GRAPH)

FUSIONS: Final = ("rrf", "relative_score")

_positive_int = [validators.instance_of(int), validators.ge(1)]
_weight = [validators.instance_of(float), validators.ge(0.0)]
_cosine = validators.optional(
    [validators.instance_of(float), validators.ge(-1.0), validators.le(1.0)]
)


def _int_field(default: int) -> int:
    return field(default=default, validator=_positive_int)


def _weight_field(default: float) -> float:
    return field(default=default, converter=float, validator=_weight)


@frozen
class RetrievalSettings:
    """The constants of hybrid retrieval; every one can be overridden.

    - ``fusion``: ``rrf`` or ``relative_score`` (see the module docstring).
    - ``rrf_k``: the rank offset of reciprocal rank fusion (60, Cormack et al.).
    - ``candidates``: how deep each signal's own ranking goes before fusion (at least the
      query's limit).
    - ``vector_weight`` / ``lexical_weight`` / ``graph_weight``: each signal's share of the
      fused score; the graph fill is a weaker hint than a direct match.
    - ``temporal_cues``: whether a day or span of time a question names puts the candidates
      said or stored in it first (:mod:`apollo_domain.temporal`).
    - ``graph_seeds``: at most this many entities named in the query seed the graph fill.
    - ``graph_neighbours``: at most this many neighbours of the seeds join them, those
      that the most entries link to a seed first (a hub such as a common date or quantity
      links to everything, and would make the scan read every entry that names it); and
      at most this many entities at the far end of the seeds' typed edges are searched
      for the question's other terms.
    - ``hop_weight``: what one step across an edge keeps of a seed's evidence: the
      neighbours' share of a seed's point, and the weight of a seed's name in the lexical
      rank carried to an entry reached across a typed edge
      (:mod:`apollo_domain.services.graph_fill`).
    - ``graph_scan``: at most this many entries tagged with the seeds or their neighbours
      are examined.
    - ``relevance_floor``: the cosine at or above which a vector match counts (see the
      module docstring); ``None`` until the composition root takes the embedder's.
    - ``relevance_margin``: how far a query's best cosine must stand out of the mean of the
      ``relevance_background`` candidates after it for its matches at or above
      ``relevance_minimum`` to count; ``None``: no standout part.
    - ``relevance_single`` / ``relevance_growth``: the floor of a store of one entry, and
      what it gains each time the store holds e times as many (used below
      ``1 + relevance_background`` candidates; ``None``: the absolute floor).
    """

    fusion: str = field(default="relative_score", validator=validators.in_(FUSIONS))
    rrf_k: int = _int_field(60)
    candidates: int = _int_field(50)
    vector_weight: float = _weight_field(1.0)
    lexical_weight: float = _weight_field(1.0)
    graph_weight: float = _weight_field(0.5)
    temporal_cues: bool = field(default=True, validator=validators.instance_of(bool))
    graph_seeds: int = _int_field(8)
    graph_neighbours: int = _int_field(32)
    graph_scan: int = _int_field(200)
    hop_weight: float = field(
        default=0.5, converter=float, validator=[validators.ge(0.0), validators.le(1.0)]
    )
    relevance_floor: float | None = field(
        default=None, converter=converters.optional(float), validator=_cosine
    )
    relevance_margin: float | None = field(
        default=None,
        converter=converters.optional(float),
        validator=validators.optional(
            [validators.instance_of(float), validators.ge(0.0), validators.le(2.0)]
        ),
    )
    relevance_background: int = field(default=8, validator=[*_positive_int, validators.le(50)])
    relevance_minimum: float | None = field(
        default=None, converter=converters.optional(float), validator=_cosine
    )
    relevance_single: float | None = field(
        default=None, converter=converters.optional(float), validator=_cosine
    )
    relevance_growth: float = field(
        default=0.0, converter=float, validator=[validators.ge(0.0), validators.le(1.0)]
    )

    @classmethod
    def from_overrides(cls, **overrides: object) -> RetrievalSettings:
        """Settings with some defaults replaced; unknown names or bad values →
        :class:`ValidationError` naming the setting."""
        known = {a.name: a for a in cls.__attrs_attrs__}
        for name in overrides:
            if name not in known:
                raise ValidationError(name, "is not a retrieval setting")
        try:
            return cls(**overrides)  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            name = next(iter(overrides)) if len(overrides) == 1 else "retrieval"
            raise ValidationError(name, str(exc)) from None

    def relevant(self, similarity: float) -> bool:
        """Whether a vector match at ``similarity`` clears the absolute floor alone."""
        return self.relevance_floor is None or similarity >= self.relevance_floor

    @property
    def vector_depth(self) -> int:
        """How many candidates beyond a query's limit the standout needs to see."""
        return self.relevance_background if self.relevance_margin is not None else 0

    def relevance_cutoff(self, similarities: Sequence[float]) -> float:
        """The cosine a vector match of this query needs to count, from the query's
        candidates' cosines best first (the module docstring): ``-inf`` when there is no
        rule, ``inf`` when nothing counts."""
        floor = math.inf if self.relevance_floor is None else self.relevance_floor
        if self.relevance_margin is None:
            return -math.inf if self.relevance_floor is None else floor
        minimum = -1.0 if self.relevance_minimum is None else self.relevance_minimum
        margin = standout(similarities, self.relevance_background)
        if margin is None:  # too few candidates to stand out of: the whole (filtered) store
            if self.relevance_single is not None and similarities:
                small = self.relevance_single + self.relevance_growth * math.log(len(similarities))
                return min(floor, small)
            return floor if self.relevance_floor is not None else minimum
        if margin >= self.relevance_margin and similarities[0] >= minimum:
            return min(floor, minimum)
        return floor

    def weight(self, signal: str) -> float:
        return {
            VECTOR: self.vector_weight,
            LEXICAL: self.lexical_weight,
            GRAPH: self.graph_weight,
        }[signal]


def standout(similarities: Sequence[float], background: int) -> float | None:
    """The best of ``similarities`` (best first) minus the mean of the ``background``
    after it; None when there are fewer than ``1 + background``."""
    if background < 1 or len(similarities) < 1 + background:
        return None
    rest = similarities[1 : 1 + background]
    return float(similarities[0]) - math.fsum(rest) / background


@frozen
class Fused:
    """One entry of a fused ranking: its fused score and each finding signal's own score."""

    entry_id: UUID
    score: float
    signals: Mapping[str, float]


def fuse(
    rankings: Mapping[str, Sequence[tuple[UUID, float]]], settings: RetrievalSettings
) -> list[Fused]:
    """Each signal's ranking (best first, ``(entry id, the signal's score)``) fused as
    ``settings.fusion`` says: highest fused score first, ties broken by id. An entry
    appears only when at least one signal ranked it."""
    scores: dict[UUID, float] = {}
    signals: dict[UUID, dict[str, float]] = {}
    rrf = settings.fusion == "rrf"
    for signal, ranking in rankings.items():
        weight = settings.weight(signal)
        if not rrf and ranking:
            high = max(score for _, score in ranking)
            low = min(score for _, score in ranking)
        for rank, (entry_id, score) in enumerate(ranking, start=1):
            found = signals.get(entry_id)
            if found is None:
                found = signals[entry_id] = {}
            elif signal in found:
                continue  # a signal counts once per entry: its best rank
            if rrf:
                share = weight / (settings.rrf_k + rank)
            else:
                share = weight * ((score - low) / (high - low) if high > low else 1.0)
            scores[entry_id] = scores.get(entry_id, 0.0) + share
            found[signal] = score
    # an id's integer orders as its text does (fixed-width hexadecimal)
    ordered = sorted(scores, key=lambda entry_id: (-scores[entry_id], entry_id.int))
    return [Fused(entry_id, scores[entry_id], signals[entry_id]) for entry_id in ordered]


def carry(
    ranking: Sequence[tuple[UUID, float]], carried: Sequence[tuple[UUID, float]]
) -> list[tuple[UUID, float]]:
    """One signal's ranking with scores carried to it from elsewhere: each entry at the
    best of its own score and its carried one (CombMAX, Fox and Shaw, TREC-2 1994),
    highest first, ties broken by id."""
    if not carried:
        return list(ranking)
    best = dict(ranking)
    for entry_id, score in carried:
        if score > best.get(entry_id, float("-inf")):
            best[entry_id] = score
    return sorted(best.items(), key=lambda item: (-item[1], item[0].int))


__all__ = [
    "FUSIONS",
    "GRAPH",
    "LEXICAL",
    "SIGNALS",
    "VECTOR",
    "Fused",
    "RetrievalSettings",
    "carry",
    "fuse",
    "standout",
]
