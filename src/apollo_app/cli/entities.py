"""The ``apollo entity`` and ``apollo entities`` subcommands: reading the entity graph as a
principal sees it (the same commands as the library, HTTP and the bus)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from apollo_domain import commands as c
from apollo_domain.results import (
    EntityDetail,
    EntityEdgeView,
    EntityHistory,
    EntitySummary,
    RelatedEntity,
)

from ..wire.codec import format_datetime, make_converter
from .common import (
    EXIT_OK,
    UsageError,
    load_settings,
    one_line,
    open_apollo,
    principal_of,
    run_async,
)

_json = make_converter(forbid_extra_keys=False, round_scores=True)


async def _run(args: argparse.Namespace, command: c.Command[Any]) -> Any:
    settings = load_settings(args)
    async with open_apollo(settings, migrate=False) as apollo:
        return await apollo.client(args.agent, principal_of(args)).run(command)


def _print_json(result: Any) -> None:
    print(json.dumps(_json.unstructure(result), indent=2, ensure_ascii=False))


def cmd_entities(args: argparse.Namespace) -> int:
    """List the entities the principal may see, by name (optionally those a text names or
    that start with a prefix)."""
    command = c.ListEntities(query=args.query, prefix=args.prefix, limit=args.limit)
    found: list[EntitySummary] = run_async(_run(args, command))
    if args.json:
        _print_json(found)
        return EXIT_OK
    if not found:
        print("no entities")
        return EXIT_OK
    print(f"{'mentions':>8}  {'kind':<10}  name")
    for summary in found:
        print(f"{summary.mentions:>8}  {summary.kind or '-':<10}  {one_line(summary.name)}")
    return EXIT_OK


def cmd_entity(args: argparse.Namespace) -> int:
    """One entity: its live edges and newest entries; ``--history`` its typed edges through
    time (``--as-of`` at one instant); ``--related`` its neighbourhood."""
    if args.as_of is not None and not args.history:
        raise UsageError("--as-of needs --history")
    if args.depth is not None and not args.related:
        raise UsageError("--depth needs --related")
    if args.history and args.related:
        raise UsageError("--history and --related are separate views; choose one")
    command: c.Command[Any]
    if args.history:
        command = c.GetEntityHistory(name=args.name, as_of=args.as_of)
    elif args.related:
        command = c.RelatedEntities(name=args.name, depth=args.depth or 1)
    else:
        command = c.GetEntity(name=args.name)
    result = run_async(_run(args, command))
    if args.json:
        _print_json(result)
    elif isinstance(result, EntityHistory):
        _print_history(result)
    elif isinstance(result, EntityDetail):
        _print_detail(result)
    else:
        _print_related(args.name, result)
    return EXIT_OK


def _edge_line(edge: EntityEdgeView) -> str:
    arrow = f"-{edge.relation}-" if edge.relation == "co_occurs" else f"-{edge.relation}->"
    span = format_datetime(edge.valid_from)
    span += f" .. {format_datetime(edge.valid_to)}" if edge.valid_to is not None else " .."
    retired = f", superseded by {edge.superseded_by}" if edge.superseded_by is not None else ""
    return (
        f"  {one_line(edge.src, 40)} {arrow} {one_line(edge.dst, 40)}  [{span}]  "
        f"{edge.support} entr{'y' if edge.support == 1 else 'ies'}{retired}"
    )


def _print_detail(detail: EntityDetail) -> None:
    print(f"{detail.name} ({detail.kind or 'entity'}): {detail.mentions} mention(s)")
    print(f"edges ({len(detail.edges)}):")
    for edge in detail.edges:
        print(_edge_line(edge))
    print(f"newest entries ({len(detail.entries)}):")
    for entry in detail.entries:
        print(
            f"  {entry.id}  {entry.status.value:<9}  {entry.confidence:.2f}  "
            f"{one_line(entry.snippet, 80)}"
        )


def _print_history(history: EntityHistory) -> None:
    when = "every typed edge" if history.as_of is None else format_datetime(history.as_of)
    print(f"{history.name}: typed edges ({when}): {len(history.edges)}")
    for edge in history.edges:
        print(_edge_line(edge))


def _print_related(name: str, related: list[RelatedEntity]) -> None:
    if not related:
        print(f"no entities related to {name!r}")
        return
    print(f"{'depth':>5}  {'relation':<12}  {'via':<24}  name")
    for item in related:
        print(
            f"{item.depth:>5}  {item.relation:<12}  {one_line(item.via, 24):<24}  "
            f"{one_line(item.name)}"
        )


__all__ = ["cmd_entities", "cmd_entity"]
