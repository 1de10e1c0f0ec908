"""The generated tables of the docs are what the code and the results files give now:
the settings (docs/configuration.md), the command line (docs/cli.md) and the benchmark
results (docs/benchmark-results.md). A new setting, option or results file fails here
until ``python scripts/docs_tables.py`` has rewritten the page."""

from __future__ import annotations

import importlib.util
import re
import sys
from types import ModuleType

import pytest
from attrs import fields

from apollo_app.settings import Settings, known_variables
from tests.docs_pages import ROOT, page

REGENERATE = "python scripts/docs_tables.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_tables", ROOT / "scripts" / "docs_tables.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("docs_tables", module)
    spec.loader.exec_module(module)
    return module


docs_tables = _generator()


@pytest.mark.parametrize(
    ("page_name", "table", "generate"), docs_tables.TABLES, ids=[t[1] for t in docs_tables.TABLES]
)
def test_the_committed_table_is_the_generated_one(page_name: str, table: str, generate) -> None:
    committed, fresh = docs_tables.rendered(page_name, table, generate)
    assert fresh == committed, (
        f"docs/{page_name}: the {table} table is out of date; run `{REGENERATE}` and commit it"
    )


def test_every_setting_has_a_row_with_its_meaning() -> None:
    """Each variable from_env reads and each field of Settings is in the table, with the
    field's comment: a setting without one fails the generator itself."""
    text = page("configuration")
    for name in known_variables():
        assert f"| `{name}` |" in text, name
    for attribute in fields(Settings):
        assert f"| `{attribute.name}` |" in text, attribute.name
    assert "| `APOLLO_POLICY_<NAME>` | `policy` |" in text


def test_a_field_without_a_comment_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    comments = docs_tables.field_comments()
    comments.pop("replica_wait")
    monkeypatch.setattr(docs_tables, "field_comments", lambda: comments)
    with pytest.raises(SystemExit, match=r"Settings\.replica_wait has no `#:` comment"):
        docs_tables.settings_table()


def test_the_settings_table_gives_bounds_and_defaults() -> None:
    table = docs_tables.settings_table()
    row = next(line for line in table.splitlines() if "`APOLLO_HTTP_PORT`" in line)
    assert "| int, 1 to 65,535 | `8765` |" in row
    row = next(line for line in table.splitlines() if "`APOLLO_DATABASE_URL`" in line)
    assert "| unset |" in row


def test_every_command_and_option_is_on_the_cli_page() -> None:
    from apollo_app.cli.main import build_parser

    text = page("cli")
    parser = build_parser()
    (commands,) = [a for a in parser._actions if a.dest == "command"]
    for name, command in commands.choices.items():  # type: ignore[attr-defined]
        assert f"### `apollo {name}`" in text, name
        for action in command._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert re.search(rf"`{re.escape(flag)}[ `]", text), (name, flag)


def test_every_results_file_has_its_section_with_command_and_machine() -> None:
    text = page("benchmark-results") + page("service-benchmark-results")
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.json")):
        section = text.split(f"### `{path.name}`", 1)
        assert len(section) == 2, path.name
        body = section[1].split("\n### ", 1)[0]
        assert "Command: " in body and "; machine: " in body and "\n|" in body, path.name
