"""Regenerate the tables of the docs that are generated from the code and the results.

    python scripts/docs_tables.py          # rewrite them in place
    python scripts/docs_tables.py --check  # exit 1, naming each stale table, if one is stale

Each table sits in its page between ``<!-- generated: NAME ... -->`` and
``<!-- end generated: NAME -->``; the text outside the markers is written by hand:

- ``settings`` (docs/configuration.md): every ``APOLLO_*`` variable ``Settings.from_env``
  reads, with its field, type, bounds, default and the field's ``#:`` comment;
- ``cli`` (docs/cli.md): every ``apollo`` command with its arguments, from ``build_parser()``;
- ``benchmark-results`` (docs/benchmark-results.md) and ``service-benchmark-results``
  (docs/service-benchmark-results.md): each ``benchmarks/results/*.json`` of the store,
  and of the service around it, with the command that wrote it, the machine it ran on and
  its table.

tests/unit/test_docs_generated.py fails when a committed table differs from what this
script generates (a new setting, option or results file not yet in the docs).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import re
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RESULTS = ROOT / "benchmarks" / "results"
COMMAND = "python scripts/docs_tables.py"
for _path in (ROOT, ROOT / "src"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))


def _cell(text: str) -> str:
    """``text`` fit for one cell of a markdown table."""
    return " ".join(text.split()).replace("|", "\\|")


def _rst_to_md(text: str) -> str:
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


# -- settings ------------------------------------------------------------------------------


def _evaluate(node: ast.expr) -> Any:
    return eval(compile(ast.Expression(node), "<bound>", "eval"), {"__builtins__": {}})


def _kwargs_key(node: ast.AST) -> str | None:
    """The key of the first ``kwargs["key"] = ...`` under ``node``."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assign):
            for target in sub.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "kwargs"
                    and isinstance(target.slice, ast.Constant)
                    and isinstance(target.slice.value, str)
                ):
                    return target.slice.value
    return None


def _statement_lists(tree: ast.AST) -> Iterator[list[ast.stmt]]:
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield body


def settings_variables() -> dict[str, tuple[str, str]]:
    """{variable: (field, bounds)} read from ``Settings.from_env``'s source: the
    ``text(VAR, field)`` / ``number(VAR, field, kind, low, high)`` calls, the
    ``(VAR, field)`` pairs it loops over, and ``value = env.get(VAR)`` followed by an
    ``if`` that sets ``kwargs[field]``."""
    from attrs import fields

    from apollo_app.settings import Settings

    names = {a.name for a in fields(Settings)}
    tree = ast.parse(textwrap.dedent(inspect.getsource(Settings.from_env)))
    found: dict[str, tuple[str, str]] = {}

    def pair(items: Sequence[ast.expr]) -> tuple[str, str] | None:
        if len(items) < 2 or not all(isinstance(i, ast.Constant) for i in items[:2]):
            return None
        variable, attr = (i.value for i in items[:2])  # type: ignore[attr-defined]
        if isinstance(variable, str) and variable.startswith("APOLLO_") and attr in names:
            return variable, attr
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (hit := pair(node.args)):
            bounds = ""
            if isinstance(node.func, ast.Name) and node.func.id == "number":
                kind = node.args[2].id if isinstance(node.args[2], ast.Name) else "?"
                low, high = (_evaluate(a) for a in node.args[3:5])
                bounds = f"{kind}, {low:,} to {high:,}"
            found[hit[0]] = (hit[1], bounds)
        elif isinstance(node, ast.Tuple) and (hit := pair(node.elts)):
            found.setdefault(hit[0], (hit[1], ""))
    for body in _statement_lists(tree):
        for index, statement in enumerate(body):
            value = statement.value if isinstance(statement, ast.Assign) else None
            if (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and value.func.attr == "get"
                and value.args
                and isinstance(value.args[0], ast.Constant)
                and str(value.args[0].value).startswith("APOLLO_")
            ):
                # value = env.get(VAR), then an `if` that sets kwargs[field]
                key = _kwargs_key(body[index + 1]) if index + 1 < len(body) else None
                if key in names:
                    found.setdefault(str(value.args[0].value), (str(key), ""))
            elif (
                isinstance(value, ast.Constant)
                and isinstance(value.value, str)
                and value.value.startswith("APOLLO_")
                and value.value.endswith("_")
            ):
                # prefix = "APOLLO_POLICY_": a family of variables that sets one field
                keys = [_kwargs_key(later) for later in body[index + 1 :]]
                key = next((k for k in keys if k is not None), None)
                if key in names:
                    found[value.value + "<NAME>"] = (str(key), "")
    return found


def _plain(found: Mapping[str, tuple[str, str]]) -> set[str]:
    return {attr for attr, _ in found.values()}


def field_comments() -> dict[str, str]:
    """{field: its ``#:`` comment} from the source of ``Settings``."""
    from apollo_app.settings import Settings

    comments: dict[str, str] = {}
    block: list[str] = []
    for line in inspect.getsource(Settings).splitlines():
        stripped = line.strip()
        if stripped.startswith("#:"):
            block.append(stripped[2:].strip())
            continue
        match = re.match(r"    (\w+): ", line)
        if match and block:
            comments[match.group(1)] = " ".join(block)
        block = []
    return comments


def _default(attribute: Any) -> str:
    from attrs import NOTHING, Factory

    default = attribute.default
    if default is NOTHING:
        return "required"
    if isinstance(default, Factory):
        default = default.factory()  # type: ignore[call-arg]
        if not isinstance(default, Mapping | frozenset | set | list | tuple):
            return f"`{type(default).__name__}()`"
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, Mapping | frozenset | set | list | tuple):
        return "none" if not default else f"`{', '.join(sorted(map(str, default)))}`"
    if isinstance(default, float):
        return f"`{default:g}`"
    return f"`{default}`"


def settings_table() -> str:
    from attrs import fields

    from apollo_app.settings import Settings, known_variables

    variables = settings_variables()
    comments = field_comments()
    by_name = {a.name: a for a in fields(Settings)}
    problems = [
        f"Settings.from_env reads {name}, but {COMMAND} cannot tell which field it sets"
        for name in sorted(known_variables() - set(variables))
    ]
    mapped = _plain(variables)
    problems += [
        f"the field Settings.{name} is read from no APOLLO_* variable"
        for name in by_name
        if name not in mapped
    ]
    problems += [
        f"the field Settings.{name} has no `#:` comment saying what it does"
        for name in by_name
        if name not in comments
    ]
    if problems:
        raise SystemExit("settings table:\n  " + "\n  ".join(problems))
    rows = [
        "| variable | field | type | default | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    order = list(by_name)
    for variable, (name, bounds) in sorted(
        variables.items(), key=lambda item: (order.index(item[1][0]), item[0])
    ):
        kind = str(by_name[name].type).replace(" | ", " or ")
        if bounds:
            kind = bounds
        rows.append(
            "| "
            + " | ".join(
                (
                    f"`{variable}`",
                    f"`{name}`",
                    _cell(kind),
                    _cell(_default(by_name[name])),
                    _cell(_rst_to_md(comments[name])),
                )
            )
            + " |"
        )
    return "\n".join(rows)


# -- command line --------------------------------------------------------------------------


def _argument(action: argparse.Action) -> str:
    if action.option_strings:
        name = ", ".join(action.option_strings)
        if action.nargs == 0:
            return f"`{name}`"
        metavar = action.metavar or (
            "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest
        )
        if not action.metavar and not action.choices:
            metavar = action.dest.upper()
        return f"`{name} {metavar}`"
    if action.metavar:
        return f"`{action.metavar}`"
    if action.choices:
        return "`{" + ",".join(map(str, action.choices)) + "}`"
    return f"`{action.dest}`"


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": prog}
    if action.choices and action.metavar:
        text += f" (one of {', '.join(map(str, action.choices))})"
    return text


def cli_tables() -> str:
    from apollo_app.cli.main import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help or "" for a in subparsers._choices_actions}
    parts: list[str] = []
    for name, command in subparsers.choices.items():
        parts.append(f"### `{command.prog}`")
        parts.append("")
        parts.append(_cell(command.description or helps.get(name, "")))
        rows = [
            _argument(action) + " | " + _cell(_help(action, command.prog))
            for action in command._actions
            if not isinstance(action, argparse._HelpAction) and action.help != argparse.SUPPRESS
        ]
        if rows:
            parts += ["", "| argument | meaning |", "| --- | --- |"]
            parts += [f"| {row} |" for row in rows]
        parts.append("")
    return "\n".join(parts).rstrip()


# -- benchmark results ---------------------------------------------------------------------

#: Keys of a results file that are not figures.
_NOT_FIGURES = frozenset({"name", "command", "machine", "config", "load_average"})


def _module_of(path: Path, result: Mapping[str, Any]) -> str | None:
    """The benchmark script that wrote the results file ``path``."""
    stem = path.stem
    candidates = [str(result.get("name", "")), stem]
    candidates += [stem[: i + len("_bench")] for i in [stem.find("_bench")] if i >= 0]
    candidates += [stem.split("_")[0] + "_bench"]
    for candidate in candidates:
        name = candidate if candidate.endswith("_bench") else candidate + "_bench"
        if (ROOT / "benchmarks" / f"{name}.py").is_file():
            return name
    return None


#: A list of more figures than this shows as its length (the JSON holds them).
_LONGEST_LIST = 8


def _fmt(value: Any) -> str:
    from benchmarks._common import fmt

    if isinstance(value, list | tuple):
        if len(value) > _LONGEST_LIST:
            return f"{len(value)} values (in the JSON)"
        if all(isinstance(v, int | float | str) or v is None for v in value):
            return _cell(" / ".join(fmt(v) for v in value))
        return _cell(json.dumps(value, sort_keys=True, default=str))
    if isinstance(value, dict):
        return _cell(json.dumps(value, sort_keys=True, default=str))
    return _cell(fmt(value))


def _labelled(value: Any) -> dict[str, Any] | None:
    """``value`` as {label: record} when it is a set of like records (a dict of dicts, or
    a list of dicts with a ``label`` or ``name``), else None."""
    if (
        isinstance(value, dict)
        and len(value) >= 2
        and all(isinstance(v, dict) for v in value.values())
    ):
        return {str(k): v for k, v in value.items()}
    if (
        isinstance(value, list)
        and 2 <= len(value) <= _LONGEST_LIST
        and all(isinstance(v, dict) for v in value)
    ):
        return {str(v.get("label", v.get("name", i))): v for i, v in enumerate(value)}
    return None


def _like_rows(value: Any) -> bool:
    """Whether ``value`` is a list of records with the same scalar fields (a sweep)."""
    return (
        isinstance(value, list)
        and len(value) >= 2
        and all(isinstance(v, dict) and v.keys() == value[0].keys() for v in value)
        and all(not isinstance(x, dict | list) for v in value for x in v.values())
    )


def _rows_table(path: str, rows: list[dict[str, Any]]) -> str:
    keys = list(rows[0])
    lines = [f"| {_cell(path)}: " + " | ".join(_cell(k) for k in keys) + " |"]
    lines[0] = "| " + " | ".join(f"{_cell(path)} / {_cell(k)}" for k in keys) + " |"
    lines.append("|" + " --- |" * len(keys))
    lines += ["| " + " | ".join(_fmt(row[k]) for k in keys) + " |" for row in rows]
    return "\n".join(lines)


def _leaves(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for key in sorted(value, key=str):
            yield from _leaves(value[key], (*path, str(key)))
    elif (
        isinstance(value, list)
        and 0 < len(value) <= _LONGEST_LIST
        and all(isinstance(v, dict) for v in value)
        and not _like_rows(value)
    ):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, str(index)))
    else:
        yield " / ".join(path), value


def generic_table(result: Mapping[str, Any]) -> str:
    """Every figure of ``result`` (its configuration and machine aside): a set of like
    records (runs, set-ups) as one table with a column per record, the rest one row per
    figure."""
    single = ["| figure | value |", "| --- | --- |"]
    tables: list[str] = []
    for key in sorted(result):
        if key in _NOT_FIGURES:
            continue
        records = _labelled(result[key])
        if records is None:
            for path, v in _leaves(result[key], (key,)):
                if _like_rows(v):
                    tables.append(_rows_table(path, v))
                else:
                    single.append(f"| {_cell(path)} | {_fmt(v)} |")
            continue
        columns = list(records)
        cells: dict[str, dict[str, Any]] = {}
        for column, record in records.items():
            for path, v in _leaves(record):
                cells.setdefault(path, {})[column] = v
        rows = [
            f"| {_cell(key)} | " + " | ".join(f"`{_cell(c)}`" for c in columns) + " |",
            "| --- |" + " --- |" * len(columns),
        ]
        for path, by_column in cells.items():
            values = [_fmt(by_column[c]) if c in by_column else "" for c in columns]
            rows.append(f"| {_cell(path)} | " + " | ".join(values) + " |")
        tables.append("\n".join(rows))
    parts = ([("\n".join(single))] if len(single) > 2 else []) + tables
    return "\n\n".join(parts)


def _machine(result: Mapping[str, Any]) -> str:
    machine = result.get("machine") or {}
    parts = []
    if "cpus" in machine:
        parts.append(f"{machine['cpus']} CPUs")
    if "platform" in machine:
        parts.append(str(machine["platform"]))
    for key in ("python", "numpy"):
        if key in machine:
            parts.append(f"{key} {machine[key]}")
    load = machine.get("load_average", result.get("load_average"))
    if isinstance(load, Mapping):
        load = load.get("start")
    if isinstance(load, list | tuple) and load:
        parts.append("load average " + " / ".join(f"{float(x):.2f}" for x in load))
    return ", ".join(parts) or "not recorded"


def _blocks(text: str) -> str:
    """``text`` with a blank line wherever a table starts or ends."""
    out: list[str] = []
    for line in text.splitlines():
        line = line.rstrip()
        if out and out[-1] and line and out[-1].startswith("|") != line.startswith("|"):
            out.append("")
        out.append(line)
    return "\n".join(out)


def result_section(path: Path) -> str:
    result = json.loads(path.read_text(encoding="utf-8"))
    module = _module_of(path, result)
    command = result.get("command")
    ran = (
        f"`{command}`"
        if command
        else f"no command recorded (written by `benchmarks/{module}.py`)"
        if module
        else "no command recorded"
    )
    ran_on = f"Command: {_cell(ran)}; machine: {_cell(_machine(result))}"
    if isinstance(result.get("wall_seconds"), int | float):
        ran_on += f"; wall {result['wall_seconds']:,.0f} s"
    lines = [f"### `{path.name}`", ran_on + "."]
    body = None
    report: Callable[[Any], Any] | None = None
    if module is not None:
        # bus_queue_types.json: bus_bench.report_queue_types, else the module's report
        loaded = importlib.import_module(f"benchmarks.{module}")
        kind = str(result.get("name", path.stem)).removeprefix(module.removesuffix("_bench"))
        report = getattr(loaded, f"report{kind}", None) if kind.startswith("_") else None
        report = report or getattr(loaded, "report", None)
    if report is not None and len(inspect.signature(report).parameters) == 1:
        try:
            text = report(result)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            text = None
        if isinstance(text, str) and "\n|" in "\n" + text:
            body = _blocks(text.strip())
    lines += ["", body or generic_table(result)]
    return "\n".join(lines)


#: The results of the service around the store (transports, HTTP, MCP, fleets, the peer):
#: docs/service-benchmark-results.md; every other file is the store's, on
#: docs/benchmark-results.md.
SERVICE_RESULTS = frozenset(
    {
        "bus.json",
        "bus_queue_types.json",
        "fleet_bench.json",
        "judgement_lag_bench.json",
        "load_bench.json",
        "mcp_bench.json",
        "peer.json",
    }
)


def benchmark_tables() -> str:
    """The store's results files (every one but :data:`SERVICE_RESULTS`)."""
    paths = (p for p in sorted(RESULTS.glob("*.json")) if p.name not in SERVICE_RESULTS)
    return "\n\n".join(result_section(p) for p in paths)


def service_benchmark_tables() -> str:
    """The service's results files (:data:`SERVICE_RESULTS`)."""
    paths = (p for p in sorted(RESULTS.glob("*.json")) if p.name in SERVICE_RESULTS)
    return "\n\n".join(result_section(p) for p in paths)


# -- the pages -----------------------------------------------------------------------------

#: (page, table name, generator)
TABLES: tuple[tuple[str, str, Callable[[], str]], ...] = (
    ("configuration.md", "settings", settings_table),
    ("cli.md", "cli", cli_tables),
    ("benchmark-results.md", "benchmark-results", benchmark_tables),
    ("service-benchmark-results.md", "service-benchmark-results", service_benchmark_tables),
)


def markers(name: str) -> tuple[str, str]:
    return (
        f"<!-- generated: {name} (regenerate: {COMMAND}) -->",
        f"<!-- end generated: {name} -->",
    )


def split(text: str, name: str) -> tuple[str, str, str]:
    """(before, the generated part, after) of a page holding the table ``name``."""
    begin, end = markers(name)
    start = text.find(begin)
    stop = text.find(end)
    if start < 0 or stop < start:
        raise SystemExit(f"the page has no {begin!r} ... {end!r} markers")
    head = start + len(begin)
    return text[:head], text[head:stop], text[stop:]


def rendered(page: str, name: str, generate: Callable[[], str]) -> tuple[str, str]:
    """(the page as committed, the page with its table regenerated)."""
    text = (DOCS / page).read_text(encoding="utf-8")
    before, _, after = split(text, name)
    return text, before + "\n" + generate() + "\n" + after


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale tables")
    args = parser.parse_args(argv)
    stale = []
    for page, name, generate in TABLES:
        committed, fresh = rendered(page, name, generate)
        if committed != fresh:
            stale.append(f"docs/{page} ({name})")
            if not args.check:
                (DOCS / page).write_text(fresh, encoding="utf-8")
    if stale:
        verb = "stale" if args.check else "rewritten"
        print(f"{verb}: " + ", ".join(stale))
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
