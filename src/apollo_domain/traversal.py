"""Spreading activation over typed relations (docs/architecture.md, "The use cases")."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from uuid import UUID

from attrs import frozen

from .bounds import RELATION_TYPES
from .errors import ValidationError
from .limits import MAX_DEPTH
from .model import Relation, RelationType
from .validation import shown

DECAY_PER_HOP = 0.6
MIN_ACTIVATION = 0.1


@frozen
class Activation:
    entry_id: UUID
    relation_type: RelationType
    depth: int
    activation: float
    via: UUID  # the entry the best path reached this one from


def parse_relation_types(
    values: Iterable[object] | None, field: str = "relation_types"
) -> frozenset[RelationType] | None:
    """None → every type; more than the ``RELATION_TYPES`` bound or unknown names →
    :class:`ValidationError` naming ``field``."""
    if values is None:
        return None
    given = [values] if isinstance(values, str) else list(values)
    RELATION_TYPES.check(len(given))
    parsed: set[RelationType] = set()
    for value in given:
        name = str(value).strip().lower().removeprefix(":")
        try:
            parsed.add(RelationType(name))
        except ValueError:
            allowed = ", ".join(t.value for t in RelationType)
            raise ValidationError(
                field, f"unknown relation type {shown(value)}; expected one of {allowed}"
            ) from None
    return frozenset(parsed)


def validate_depth(depth: object) -> int:
    if isinstance(depth, bool) or not isinstance(depth, int):
        raise ValidationError("depth", f"must be an integer, got {depth!r}")
    if not 1 <= depth <= MAX_DEPTH:
        raise ValidationError("depth", f"must be between 1 and {MAX_DEPTH}, got {depth}")
    return depth


def activation_step(
    root: UUID,
    frontier: dict[UUID, float],
    edges: Iterable[Relation],
    depth: int,
    best: dict[UUID, Activation],
    admissible: Callable[[UUID], bool],
    relation_types: Collection[RelationType] | None = None,
) -> dict[UUID, float]:
    """One hop of spreading activation; updates ``best`` and returns the next frontier.

    activation(child) = activation(parent) · 0.6 · weight. Each entry keeps its highest
    activation; a child is expanded further only while its activation > 0.1. The root is
    never returned; entries ``admissible`` rejects (invisible, archived) are neither
    returned nor traversed through.
    """
    next_frontier: dict[UUID, float] = {}
    for edge in edges:
        if relation_types is not None and edge.relation_type not in relation_types:
            continue
        parent = frontier.get(edge.from_id)
        child = edge.to_id
        if parent is None or child == root:
            continue
        activation = parent * DECAY_PER_HOP * max(edge.weight, 0.0)
        if activation <= 0.0 or not admissible(child):
            continue
        known = best.get(child)
        if known is None or activation > known.activation:
            best[child] = Activation(child, edge.relation_type, depth, activation, edge.from_id)
            if activation > MIN_ACTIVATION:
                next_frontier[child] = max(activation, next_frontier.get(child, 0.0))
    return next_frontier


def ranked(best: dict[UUID, Activation]) -> list[Activation]:
    """Activation desc, then depth, then id."""
    return sorted(best.values(), key=lambda a: (-a.activation, a.depth, str(a.entry_id)))


def spread(
    root: UUID,
    relations: Iterable[Relation],
    *,
    max_depth: int,
    relation_types: Collection[RelationType] | None = None,
    admissible: Callable[[UUID], bool] = lambda _id: True,
) -> list[Activation]:
    """Spreading activation from ``root`` over an in-memory relation list, breadth first,
    continuing while depth < ``max_depth`` and activation > 0.1."""
    by_source: dict[UUID, list[Relation]] = {}
    for relation in relations:
        by_source.setdefault(relation.from_id, []).append(relation)
    best: dict[UUID, Activation] = {}
    frontier: dict[UUID, float] = {root: 1.0}
    for depth in range(1, max_depth + 1):
        edges = [edge for node in frontier for edge in by_source.get(node, ())]
        frontier = activation_step(root, frontier, edges, depth, best, admissible, relation_types)
        if not frontier:
            break
    return ranked(best)


__all__ = [
    "DECAY_PER_HOP",
    "MIN_ACTIVATION",
    "Activation",
    "activation_step",
    "parse_relation_types",
    "ranked",
    "spread",
    "validate_depth",
]
