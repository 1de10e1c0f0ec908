"""Rank and score fusion, and the retrieval settings (apollo_domain.retrieval)."""

from __future__ import annotations

import math
import uuid
from itertools import pairwise

import pytest
from attrs import evolve
from hypothesis import event, given
from hypothesis import strategies as st

from apollo_domain.errors import ValidationError
from apollo_domain.retrieval import RetrievalSettings, carry, fuse, standout
from tests.strategies import candidate_cosines

A, B, C = sorted(uuid.UUID(int=i) for i in (1, 2, 3))


RRF = RetrievalSettings(fusion="rrf")


def test_relative_score_is_the_default_fusion():
    """It measured better than rank fusion with a real embedding model (docs/retrieval.md)."""
    assert "relative_score" == RetrievalSettings().fusion


def test_fused_score_is_the_sum_of_weighted_reciprocal_ranks():
    settings = RRF
    fused = fuse({"vector": [(A, 0.9), (B, 0.8)], "lexical": [(B, 3.0), (C, 1.0)]}, settings)
    assert [B, A, C] == [f.entry_id for f in fused]
    assert pytest.approx(1 / 62 + 1 / 61) == fused[0].score
    assert {"vector": 0.8, "lexical": 3.0} == fused[0].signals
    assert {"vector": 0.9} == fused[1].signals


def test_ties_are_broken_by_id_and_weights_apply():
    fused = fuse({"vector": [(B, 0.5)], "lexical": [(A, 1.0)]}, RRF)
    assert [A, B] == [f.entry_id for f in fused]
    graph_only = fuse({"graph": [(A, 1.0)]}, RetrievalSettings(fusion="rrf", graph_weight=0.5))
    assert pytest.approx(0.5 / 61) == graph_only[0].score


def test_a_signal_counts_once_per_entry():
    fused = fuse({"graph": [(A, 2.0), (A, 1.0)]}, RRF)
    assert pytest.approx(0.5 / 61) == fused[0].score


def test_a_carried_score_counts_only_where_it_is_higher():
    """CombMAX: each entry at its best of its own and its carried score, best first."""
    assert [(C, 5.0), (B, 3.0), (A, 1.0)] == carry([(B, 3.0), (A, 1.0)], [(A, 0.5), (C, 5.0)])
    assert [(B, 1.0), (A, 1.0)] == carry([(B, 1.0), (A, 1.0)], [])  # nothing carried: as is
    assert [(A, 2.0), (B, 2.0)] == carry([(B, 2.0)], [(A, 2.0)])  # ties by id


@given(
    st.lists(st.tuples(st.sampled_from([A, B, C]), st.floats(0, 1)), unique_by=lambda p: p[0]),
    st.lists(st.tuples(st.sampled_from([A, B, C]), st.floats(0, 1)), unique_by=lambda p: p[0]),
)
def test_carrying_never_lowers_a_score_nor_drops_an_entry(own, carried):
    merged = dict(carry(own, carried))
    assert {e for e, _ in own} | {e for e, _ in carried} == set(merged)
    assert all(merged[e] >= s for e, s in [*own, *carried])


def test_relative_score_fusion_keeps_how_far_apart_a_signals_candidates_are():
    """Each signal's scores are rescaled to [0, 1] over its list: each signal's clear winner
    goes ahead of an entry both signals found with weak scores, which rank fusion puts
    first."""
    rankings = {"vector": [(A, 0.50), (B, 0.25)], "lexical": [(C, 10.0), (B, 1.0)]}
    by_rank = fuse(rankings, RRF)
    by_score = fuse(rankings, RetrievalSettings(fusion="relative_score"))
    assert B == by_rank[0].entry_id
    assert [A, C, B] == [f.entry_id for f in by_score]
    assert [1.0, 1.0, 0.0] == pytest.approx([f.score for f in by_score])


def test_relative_score_weights_apply_and_equal_scores_count_fully():
    fused = fuse(
        {"graph": [(A, 1.0), (B, 0.5), (C, 0.0)], "vector": [(C, 0.3)]},
        RetrievalSettings(fusion="relative_score", graph_weight=0.5),
    )
    assert [C, A, B] == [f.entry_id for f in fused]
    assert [1.0, 0.5, 0.25] == pytest.approx([f.score for f in fused])


def test_settings_overrides_are_validated():
    assert 10 == RetrievalSettings.from_overrides(rrf_k=10).rrf_k
    with pytest.raises(ValidationError) as unknown:
        RetrievalSettings.from_overrides(bogus=1)
    assert "bogus" == unknown.value.field
    with pytest.raises(ValidationError) as bad:
        RetrievalSettings.from_overrides(rrf_k=0)
    assert "rrf_k" == bad.value.field
    with pytest.raises(ValidationError) as fusion:
        RetrievalSettings.from_overrides(fusion="borda")
    assert "fusion" == fusion.value.field


rankings = st.dictionaries(
    st.sampled_from(["vector", "lexical", "graph"]),
    st.lists(st.tuples(st.sampled_from([A, B, C]), st.floats(0, 1)), max_size=5),
)


@given(rankings, st.sampled_from(["rrf", "relative_score"]))
def test_fusion_returns_each_ranked_entry_once_best_first(ranked, fusion):
    fused = fuse(ranked, RetrievalSettings(fusion=fusion))
    event(f"{fusion}: {min(len(fused), 2)}+ fused entries")
    event(f"signals per entry: {max((len(f.signals) for f in fused), default=0)}")
    ids = [f.entry_id for f in fused]
    assert len(ids) == len(set(ids))
    assert set(ids) == {entry_id for ranking in ranked.values() for entry_id, _ in ranking}
    assert all(a.score >= b.score for a, b in pairwise(fused))
    for f in fused:
        assert set(f.signals) == {
            s for s, r in ranked.items() if any(e == f.entry_id for e, _ in r)
        }


def test_query_names_are_word_runs_longest_first_without_lone_stop_words():
    from apollo_domain.services.graph_fill import query_names

    names = query_names("Where did Alice Moreau's team move, in 2023?")
    assert "alice moreau" in names
    assert "2023" in names and "alice" in names
    assert "where" not in names and "in" not in names
    assert names.index("alice moreau") < names.index("alice")
    assert [] == query_names("  ?! ")


def test_the_relevance_floor_is_a_cosine_or_none():
    """None until the composition root takes the embedder's; a value out of [-1, 1] is
    refused naming the setting."""
    assert None is RetrievalSettings().relevance_floor
    assert RetrievalSettings().relevant(-1.0)
    floored = RetrievalSettings.from_overrides(relevance_floor=0.4)
    assert (False, True) == (floored.relevant(0.39), floored.relevant(0.4))
    with pytest.raises(ValidationError) as err:
        RetrievalSettings.from_overrides(relevance_floor=1.5)
    assert "relevance_floor" == err.value.field


#: The calibrated shape of a sentence model's rule, with round numbers.
RULE = RetrievalSettings(
    relevance_floor=0.4,
    relevance_margin=0.2,
    relevance_background=3,
    relevance_minimum=0.25,
    relevance_single=0.2,
    relevance_growth=0.05,
)


def test_without_a_margin_the_cutoff_is_the_absolute_floor():
    """No rule: everything counts; a floor alone: the floor, whatever the candidates."""
    assert -math.inf == RetrievalSettings().relevance_cutoff([0.9, 0.1])
    assert 0.4 == RetrievalSettings(relevance_floor=0.4).relevance_cutoff([0.9, 0.1, 0.1])
    assert 0.4 == RetrievalSettings(relevance_floor=0.4).relevance_cutoff([])


def test_a_best_match_that_stands_out_lowers_the_cutoff_to_the_minimum():
    """0.35 over a background of 0.1 (margin 0.25 ≥ 0.2): its matches count from 0.25; over
    0.2 (margin 0.15) only the floor admits; a best under the minimum never stands out."""
    assert 0.25 == RULE.relevance_cutoff([0.35, 0.1, 0.1, 0.1, 0.3])
    assert 0.4 == RULE.relevance_cutoff([0.35, 0.2, 0.2, 0.2])
    assert 0.4 == RULE.relevance_cutoff([0.24, -0.5, -0.5, -0.5])
    assert pytest.approx(0.25) == standout([0.35, 0.1, 0.1, 0.1, 0.3], 3)


def test_a_store_of_a_few_entries_has_the_floor_of_its_size():
    """Fewer than 1 + background candidates: single + growth * ln(n), at most the floor;
    without a single floor the absolute floor, without either the minimum; an empty store
    the floor."""
    assert 0.2 == RULE.relevance_cutoff([0.1])
    assert pytest.approx(0.2 + 0.05 * math.log(3)) == RULE.relevance_cutoff([0.3, 0.2, 0.1])
    capped = evolve(RULE, relevance_growth=1.0)
    assert 0.4 == capped.relevance_cutoff([0.3, 0.2, 0.1])
    assert 0.4 == evolve(RULE, relevance_single=None).relevance_cutoff([0.3])
    no_floor = evolve(RULE, relevance_single=None, relevance_floor=None)
    assert 0.25 == no_floor.relevance_cutoff([0.3])
    assert 0.4 == RULE.relevance_cutoff([])
    assert None is standout([0.3, 0.2, 0.1], 3)


def test_the_rule_settings_are_bounded():
    """Each constant out of its range is refused naming it."""
    for name, value in [
        ("relevance_margin", -0.1),
        ("relevance_background", 0),
        ("relevance_background", 51),
        ("relevance_minimum", 1.5),
        ("relevance_single", -2.0),
        ("relevance_growth", 1.5),
    ]:
        with pytest.raises(ValidationError) as err:
            RetrievalSettings.from_overrides(**{name: value})
        assert name == err.value.field


@given(candidate_cosines)
def test_the_cutoff_is_one_of_the_rules_parts_and_sees_only_the_first_candidates(cosines):
    """Whatever the candidates, the cutoff is the floor, the minimum or the floor of the
    store's size; only the first 1 + background candidates decide it; and a query whose
    candidates are all equal never stands out."""
    cutoff = RULE.relevance_cutoff(cosines)
    k = RULE.relevance_background
    if len(cosines) <= k:
        event("a store of a few entries")
        small = 0.2 + 0.05 * math.log(len(cosines)) if cosines else 0.4
        assert pytest.approx(min(0.4, small)) == cutoff
    else:
        event("stands out" if cutoff == 0.25 else "one of a crowd")
        assert cutoff in (0.4, 0.25)
        assert cutoff == RULE.relevance_cutoff([*cosines[: 1 + k], -1.0, -1.0])
        assert 0.4 == RULE.relevance_cutoff([cosines[0]] * len(cosines))
