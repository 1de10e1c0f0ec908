"""Spreading activation over typed relations (docs/architecture.md, "The use cases")."""

from __future__ import annotations

from collections.abc import Collection
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apollo_domain.errors import ValidationError
from apollo_domain.model import Relation, RelationType
from apollo_domain.traversal import (
    MAX_DEPTH,
    Activation,
    activation_step,
    parse_relation_types,
    spread,
    validate_depth,
)
from tests.strategies import GRAPH_NODES, graph_nodes, relation_lists

ROOT, A, B, C, D, E = (UUID(int=100 + i) for i in range(6))
IS_A, CAUSES = RelationType.IS_A, RelationType.CAUSES


def edge(source: UUID, target: UUID, weight: float = 1.0, kind: RelationType = IS_A) -> Relation:
    return Relation(source, target, kind, weight)


def activations(result: list[Activation]) -> dict[UUID, float]:
    return {a.entry_id: a.activation for a in result}


# -- examples ---------------------------------------------------------------------------


def test_activation_is_parent_times_decay_times_weight() -> None:
    """Each hop multiplies by 0.6 and the edge weight: 1·0.6·0.5, then 0.3·0.6·1."""
    result = spread(ROOT, [edge(ROOT, A, 0.5), edge(A, B, 1.0)], max_depth=3)
    expected = {A: pytest.approx(0.3), B: pytest.approx(0.18)}
    assert expected == activations(result)


def test_results_carry_depth_path_and_type() -> None:
    """Each activation records its depth, the entry it was reached from and the relation type."""
    result = spread(ROOT, [edge(ROOT, A, kind=CAUSES), edge(A, B)], max_depth=2)
    expected = [
        (A, CAUSES, 1, ROOT),
        (B, IS_A, 2, A),
    ]
    assert expected == [(a.entry_id, a.relation_type, a.depth, a.via) for a in result]


def test_traversal_stops_at_max_depth() -> None:
    """A chain is followed no deeper than max_depth hops."""
    chain = [edge(ROOT, A), edge(A, B), edge(B, C), edge(C, D)]
    assert [A, B] == [a.entry_id for a in spread(ROOT, chain, max_depth=2)]


def test_entries_at_or_below_the_minimum_activation_are_not_expanded() -> None:
    """An entry reached with activation ≤ 0.1 is returned but not traversed through."""
    weight = 0.1 / 0.6  # activation 0.6 · weight == 0.1 exactly in floating point
    graph = [edge(ROOT, A, weight), edge(A, B), edge(ROOT, C, 0.1), edge(C, D)]
    result = activations(spread(ROOT, graph, max_depth=5))
    assert {A, C} == set(result)
    assert 0.1 == result[A]


def test_entries_just_above_the_minimum_activation_are_expanded() -> None:
    """An entry reached with activation > 0.1 spreads to its neighbours."""
    result = activations(spread(ROOT, [edge(ROOT, A, 0.17), edge(A, B)], max_depth=5))
    assert {A, B} == set(result)


def test_each_entry_keeps_its_best_activation() -> None:
    """In a diamond, the stronger of the two paths wins (and is the one recorded)."""
    diamond = [edge(ROOT, B, 0.5), edge(B, D), edge(ROOT, A, 1.0), edge(A, D)]
    best = {a.entry_id: a for a in spread(ROOT, diamond, max_depth=2)}
    assert (pytest.approx(0.36), A, 2) == (best[D].activation, best[D].via, best[D].depth)


def test_a_deeper_but_stronger_path_wins() -> None:
    """A weak direct edge is overridden by a strong two-hop path, which is then expanded."""
    graph = [edge(ROOT, D, 0.1), edge(ROOT, A), edge(A, D), edge(D, E)]
    result = activations(spread(ROOT, graph, max_depth=3))
    assert (pytest.approx(0.36), pytest.approx(0.216)) == (result[D], result[E])


def test_the_root_is_never_returned() -> None:
    """Cycles back to the root do not list it."""
    graph = [edge(ROOT, A), edge(A, ROOT), edge(A, B), edge(B, ROOT)]
    assert {A, B} == set(activations(spread(ROOT, graph, max_depth=4)))


def test_inadmissible_entries_are_neither_returned_nor_traversed() -> None:
    """An invisible entry hides itself and what lies only behind it."""
    graph = [edge(ROOT, A), edge(A, B), edge(ROOT, C), edge(C, D), edge(A, E), edge(C, E)]
    result = spread(ROOT, graph, max_depth=3, admissible=lambda node: node != A)
    assert {C, D, E} == set(activations(result))


def test_relation_type_filter() -> None:
    """Only relations of the requested types are followed."""
    graph = [edge(ROOT, A, kind=IS_A), edge(ROOT, B, kind=CAUSES), edge(A, C, kind=CAUSES)]
    assert [A] == [a.entry_id for a in spread(ROOT, graph, max_depth=3, relation_types={IS_A})]


def test_zero_weight_edges_lead_nowhere() -> None:
    """A relation of weight 0 activates nothing."""
    assert [] == spread(ROOT, [edge(ROOT, A, 0.0)], max_depth=2)


def test_results_are_ranked_by_activation() -> None:
    """Strongest first."""
    graph = [edge(ROOT, A, 0.2), edge(ROOT, B, 0.9), edge(ROOT, C, 0.5)]
    assert [B, C, A] == [a.entry_id for a in spread(ROOT, graph, max_depth=1)]


def test_one_activation_step() -> None:
    """activation_step records the children in ``best`` and returns those to expand next."""
    best: dict[UUID, Activation] = {}
    frontier = activation_step(
        ROOT,
        {ROOT: 1.0},
        [edge(ROOT, A, 1.0), edge(ROOT, B, 0.1), edge(C, D)],
        1,
        best,
        lambda _node: True,
    )
    expected_best = {
        A: Activation(A, IS_A, 1, 0.6, ROOT),
        B: Activation(B, IS_A, 1, pytest.approx(0.06), ROOT),  # type: ignore[arg-type]
    }
    assert ({A: 0.6}, expected_best) == (frontier, best)


def test_an_activation_step_does_not_lower_a_known_activation() -> None:
    """A weaker arrival at an entry already known is ignored."""
    best = {A: Activation(A, CAUSES, 1, 0.6, ROOT)}
    frontier = activation_step(ROOT, {B: 0.5}, [edge(B, A)], 2, best, lambda _node: True)
    assert ({}, {A: Activation(A, CAUSES, 1, 0.6, ROOT)}) == (frontier, best)


# -- relation types and depth -----------------------------------------------------------


def test_relation_types_parse_names_and_symbols() -> None:
    """Names are case-insensitive, may be symbols, and a single name is accepted."""
    expected = (None, frozenset({IS_A, CAUSES}), frozenset({IS_A}))
    actual = (
        parse_relation_types(None),
        parse_relation_types(["IS_A", ":causes", "is_a"]),
        parse_relation_types("is_a"),
    )
    assert expected == actual


@pytest.mark.parametrize("values", [["likes"], ["is_a", "nope"], "unknown", [""]])
def test_unknown_relation_types_are_rejected(values: object) -> None:
    """An unknown relation type is a ValidationError on 'relation_types'."""
    with pytest.raises(ValidationError) as raised:
        parse_relation_types(values)  # type: ignore[arg-type]
    assert "relation_types" == raised.value.field


@pytest.mark.parametrize("depth", [0, -1, MAX_DEPTH + 1, 2.0, "2", True, None])
def test_bad_depths_are_rejected(depth: object) -> None:
    """Depth is an integer between 1 and the maximum, else a ValidationError on 'depth'."""
    with pytest.raises(ValidationError) as raised:
        validate_depth(depth)
    assert "depth" == raised.value.field


# -- properties -------------------------------------------------------------------------


def reference_spread(
    root: UUID,
    relations: list[Relation],
    max_depth: int,
    admissible: Collection[UUID],
) -> dict[UUID, float]:
    """Best activation per entry over every walk from the root of at most max_depth hops that
    passes only through admissible, non-root entries each activated above 0.1."""
    best: dict[UUID, float] = {}
    walks = [(root, 1.0)]
    for _ in range(max_depth):
        extended = []
        for node, activation in walks:
            for r in relations:
                if r.from_id != node or r.to_id == root or r.to_id not in admissible:
                    continue
                child = activation * 0.6 * r.weight
                if child <= 0.0:
                    continue
                best[r.to_id] = max(best.get(r.to_id, 0.0), child)
                if child > 0.1:
                    extended.append((r.to_id, child))
        walks = extended
    return best


ROOT_NODE = GRAPH_NODES[0]


@settings(deadline=None)
@given(relation_lists, st.integers(min_value=1, max_value=MAX_DEPTH))
def test_activations_are_bounded_and_shallow_enough(
    relations: list[Relation], max_depth: int
) -> None:
    """Every returned activation is in (0, 0.6], its depth within max_depth, never the root."""
    for a in spread(ROOT_NODE, relations, max_depth=max_depth):
        assert 0.0 < a.activation <= 0.6
        assert 1 <= a.depth <= max_depth
        assert a.entry_id != ROOT_NODE


@settings(deadline=None)
@given(
    relation_lists,
    st.integers(min_value=1, max_value=4),
    st.frozensets(graph_nodes),
)
def test_spread_keeps_the_best_walk_per_entry(
    relations: list[Relation], max_depth: int, admissible: frozenset[UUID]
) -> None:
    """spread returns exactly the best activation over all admissible walks (brute force)."""
    result = spread(
        ROOT_NODE, relations, max_depth=max_depth, admissible=lambda node: node in admissible
    )
    expected = reference_spread(ROOT_NODE, relations, max_depth, admissible)
    assert {k: pytest.approx(v) for k, v in expected.items()} == activations(result)


@settings(deadline=None)
@given(relation_lists, st.frozensets(st.sampled_from(RelationType), min_size=1))
def test_filtered_traversal_uses_only_the_requested_types(
    relations: list[Relation], kinds: frozenset[RelationType]
) -> None:
    """Filtering by types equals traversing the graph with the other relations removed."""
    filtered = spread(ROOT_NODE, relations, max_depth=3, relation_types=kinds)
    pruned = spread(ROOT_NODE, [r for r in relations if r.relation_type in kinds], max_depth=3)
    assert activations(pruned) == activations(filtered)
