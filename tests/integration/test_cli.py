"""The installed ``apollo`` command, run for real in a subprocess.

The tests of the embedded default (a data folder; each call starts and stops its own
server) use one data folder shared by this module. The tests of what the commands do
with a store use a database of the session's server instead (``APOLLO_DATABASE_URL``,
cloned from one the ``apollo migrate`` of this module made), so they pay for no server
start per call. Both kinds are marked ``postgres``.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from apollo_adapters.postgres.embedded import temporary_folder
from tests.bounds_cases import CASES, LINE_CASES
from tests.environ import without_apollo_settings
from tests.postgres_support import PostgresTestServer

TIMEOUT = 180
COMMANDS = (
    "serve",
    "demo",
    "simulate",
    "ingest",
    "query",
    "entity",
    "entities",
    "migrate",
    "reembed",
    "label",
    "stats",
)


def _apollo_command() -> str:
    beside = Path(sys.executable).parent / "apollo"
    if beside.exists():
        return str(beside)
    found = shutil.which("apollo")
    if found is None:
        pytest.fail("the apollo console script is not installed (pip install -e .)")
    return found


APOLLO = _apollo_command()


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    folder = temporary_folder("apollo-cli-data-")  # open to the server's system user
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def migrated_database(postgres_server: PostgresTestServer) -> str:
    """A database of the session's server that ``apollo migrate`` (the default embedder)
    made, the template of each test's own."""
    name = asyncio.run(postgres_server.create_database())
    migrated = run("migrate", database_url=postgres_server.conninfo(name))
    assert 0 == migrated.returncode, migrated.stderr
    return name


@pytest.fixture
def store_url(postgres_server: PostgresTestServer, migrated_database: str) -> str:
    """The URL of a new, migrated, empty store of the default embedder."""
    return postgres_server.conninfo(asyncio.run(postgres_server.clone_database(migrated_database)))


def run(
    *args: str,
    data_dir: Path | None = None,
    database_url: str | None = None,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    environ = without_apollo_settings()
    if data_dir is not None:
        environ["APOLLO_DATA_DIR"] = str(data_dir)
    if database_url is not None:
        environ["APOLLO_DATABASE_URL"] = database_url
    environ.update(env or {})
    return subprocess.run(
        [APOLLO, *args],
        capture_output=True,
        text=True,
        env=environ,
        input=stdin,
        timeout=TIMEOUT,
    )


@pytest.mark.postgres
def test_demo_tours_the_embedded_store_and_every_claim_holds(data_dir: Path) -> None:
    """The default demo runs on a throwaway embedded PostgreSQL, narrates each step with
    its reason, checks each claim, and leaves the configured data folder untouched."""
    result = run("demo", data_dir=data_dir)
    assert 0 == result.returncode, result.stdout + result.stderr
    out = result.stdout
    assert "embedded PostgreSQL" in out
    for line in (
        "-> created (candidate, confidence 0.50)",
        "-> rejected (-, confidence -): low_credibility",
        "-> deduplicated (candidate, confidence 0.50), entry BGP",
        "OSPF-A: candidate -> confirmed, confidence 0.50 -> 0.80",
        "-> corroborated (confirmed, confidence 1.00), entry OSPF-A",
        "1 contradiction(s); RA-ON is disputed, RA-OFF is disputed",
        "accept RA-ON -> confirmed; RA-OFF -> archived",
        "OSPF-A  confirmed 1.00 -> 0.133  kept",
        "-> deduplicated (candidate, confidence 0.50), entry MCAST",
        "MCAST is now confirmed at 0.80, agreed by claude-net-1, openai-net-2",
        "domains at risk (fewer than 2 agents with active knowledge dana may see): "
        "networking (claude-net-1), routing (openai-net-2)",
        "store, as an anonymous caller sees it (global entries only):",
        "every claim of the tour held",
    ):
        assert line in out
    assert "why:" in out
    assert "MISMATCH" not in out
    assert not (data_dir / "postgres").exists()


def test_demo_in_memory() -> None:
    """``--in-memory`` tells the same story without a server."""
    result = run("demo", "--in-memory")
    assert 0 == result.returncode, result.stdout + result.stderr
    assert "in-memory store" in result.stdout
    assert "MISMATCH" not in result.stdout
    assert "every claim of the tour held" in result.stdout


@pytest.mark.postgres
def test_migrate_reports_the_schema_version(data_dir: Path) -> None:
    """The first migrate applies every migration shipped; the second finds nothing pending."""
    from apollo_adapters.postgres.schema import migrations

    latest = max(m.version for m in migrations())
    first = run("migrate", data_dir=data_dir)
    assert 0 == first.returncode, first.stderr
    assert "applied migration 0001_initial" in first.stdout
    assert f"schema version {latest} " in first.stdout
    second = run("migrate", data_dir=data_dir)
    assert 0 == second.returncode, second.stderr
    assert "no pending migrations" in second.stdout
    assert f"schema version {latest} " in second.stdout


@pytest.mark.postgres
def test_ingest_skips_bad_lines_and_stores_the_rest(store_url: str, tmp_path: Path) -> None:
    """A line of broken JSON and a line that fails validation are reported by number;
    every other line is stored, and the exit code is 0."""
    lines = [
        {"content": "Raft elects a leader with randomized election timeouts", "tags": ["raft"]},
        "{not json",
        {"content": "Paxos needs a majority quorum to choose a value", "agent_id": "openai-c-2"},
        {"content": "   ", "knowledge_domain": "consensus"},
        {"content": "Vector clocks order events across replicas", "content_type": "concept"},
    ]
    path = tmp_path / "knowledge.jsonl"
    path.write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    )
    result = run("ingest", str(path), "--agent", "claude-ingest-1", database_url=store_url)
    assert 0 == result.returncode, result.stderr
    assert "line 2: invalid JSON" in result.stderr
    assert "line 4: content: " in result.stderr
    assert "Traceback" not in result.stderr
    assert "ingested 3 line(s): created 3" in result.stdout
    assert "2 bad line(s) skipped" in result.stdout
    # not a terminal: no progress bar, no progress lines, only the report and the summary
    assert 2 == len(result.stderr.splitlines()), result.stderr
    assert 1 == len(result.stdout.splitlines()), result.stdout

    found = run(
        "query",
        "leader election randomized timeouts",
        "--json",
        "--mode",
        "vector",
        database_url=store_url,
    )
    assert 0 == found.returncode, found.stderr
    entries = json.loads(found.stdout)["entries"]
    assert "Raft elects a leader with randomized election timeouts" == entries[0]["content"]
    assert "claude-ingest-1" == entries[0]["source_agent"]
    assert all(e["similarity"] > 0.0 for e in entries)  # unrelated texts are not matches
    assert all(e["created_at"].endswith("Z") for e in entries)  # as the HTTP API writes it

    close_only = run(
        "query",
        "leader election",
        "--mode",
        "vector",
        "--min-similarity",
        "0.99",
        database_url=store_url,
    )
    assert (0, "no results\n") == (close_only.returncode, close_only.stdout), close_only.stderr

    table = run("query", "majority quorum paxos", "--limit", "1", database_url=store_url)
    assert 0 == table.returncode, table.stderr
    assert "Paxos needs a majority quorum to choose a value" in table.stdout
    assert "similarity" in table.stdout

    stats = run("stats", "--json", database_url=store_url)
    assert 0 == stats.returncode, stats.stderr
    counts = json.loads(stats.stdout)
    assert (3, 3) == (counts["total"], counts["active"])
    assert {"candidate": 3, "confirmed": 0, "disputed": 0, "archived": 0} == counts["by_status"]
    assert 1 == counts["by_content_type"]["concept"]


@pytest.mark.postgres
def test_ingest_of_only_bad_lines_fails(store_url: str, tmp_path: Path) -> None:
    """Nothing stored because every line was bad: each line is reported, and exit 1."""
    path = tmp_path / "bad.jsonl"
    path.write_text('{"content": ""}\n[1, 2]\n{"text": "no content field"}\n')
    result = run("ingest", str(path), database_url=store_url)
    assert 1 == result.returncode, result.stdout + result.stderr
    for number in (1, 2, 3):
        assert f"apollo: line {number}: " in result.stderr
    assert "apollo: error: nothing was stored: every one of the 3 line(s) was bad" in result.stderr
    assert "ingested 0 line(s)" in result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.postgres
def test_ingest_reads_stdin(store_url: str) -> None:
    """``-`` reads the JSONL from standard input."""
    line = json.dumps({"content": "Bloom filters never give false negatives"})
    result = run("ingest", "-", database_url=store_url, stdin=line + "\n")
    assert 0 == result.returncode, result.stderr
    assert "created 1" in result.stdout


@pytest.mark.postgres
def test_entity_and_entities_read_the_graph_as_the_principal_sees_it(store_url: str) -> None:
    """``apollo entities`` lists names with their visible mention counts; ``apollo entity``
    shows edges and entries, ``--history`` the typed edges through time, ``--related`` the
    neighbours; another principal's private names stay out; unknown names exit 1."""
    texts = ("Today Lena Park works at Umbrella Labs.", "Now Lena Park leads Umbrella Labs.")
    public = "\n".join(json.dumps({"content": text}) for text in texts)
    assert 0 == run("ingest", "-", database_url=store_url, stdin=public + "\n").returncode
    secret = json.dumps({"content": "Secret: Lena Park uses Kafka.", "access_scope": "private"})
    stored = run("ingest", "-", "--principal", "alice", database_url=store_url, stdin=secret + "\n")
    assert 0 == stored.returncode, stored.stderr

    listed = run("entities", "--prefix", "L", database_url=store_url)
    assert 0 == listed.returncode, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()[1:]]
    assert [["2", "name", "Lena", "Park"]] == rows
    everything = run("entities", "--json", database_url=store_url)
    assert ["lena park", "umbrella labs"] == [e["key"] for e in json.loads(everything.stdout)]
    as_alice = run("entities", "--json", "--principal", "alice", database_url=store_url)
    assert {"kafka": 1, "lena park": 3, "umbrella labs": 2} == {
        e["key"]: e["mentions"] for e in json.loads(as_alice.stdout)
    }

    detail = run("entity", "lena PARK", "--json", database_url=store_url)
    assert 0 == detail.returncode, detail.stderr
    shown = json.loads(detail.stdout)
    assert ("Lena Park", 2) == (shown["name"], shown["mentions"])
    assert {"leads", "co_occurs"} == {e["relation"] for e in shown["edges"]}
    table = run("entity", "Lena Park", database_url=store_url)
    assert "Lena Park -leads-> Umbrella Labs" in table.stdout
    assert "Now Lena Park leads Umbrella Labs." in table.stdout

    shown_history = run("entity", "Lena Park", "--history", "--json", database_url=store_url)
    history = json.loads(shown_history.stdout)
    works, leads = history["edges"]
    assert ("works_at", leads["id"]) == (works["relation"], works["superseded_by"])
    as_of = ("--as-of", works["valid_from"])
    then = run("entity", "Lena Park", "--history", *as_of, "--json", database_url=store_url)
    assert ["works_at"] == [e["relation"] for e in json.loads(then.stdout)["edges"]]

    related = run("entity", "Umbrella Labs", "--related", "--depth", "2", database_url=store_url)
    assert 0 == related.returncode, related.stderr
    assert "Lena Park" in related.stdout and "Kafka" not in related.stdout

    hidden = run("entity", "Kafka", database_url=store_url)
    assert 1 == hidden.returncode
    assert hidden.stderr.startswith("apollo: error: NotFound")
    bad_time = run("entity", "Lena Park", "--history", "--as-of", "soon", database_url=store_url)
    assert (2, True) == (bad_time.returncode, bad_time.stderr.startswith("apollo: error: as_of:"))


def test_entity_options_that_do_not_go_together_are_usage_errors() -> None:
    """Refused before any store is opened: exit 2 naming the option."""
    for args, option in (
        (("--as-of", "2026-01-01"), "--as-of"),
        (("--depth", "2"), "--depth"),
        (("--history", "--related"), "--history"),
    ):
        result = run("entity", "Lena Park", *args)
        assert 2 == result.returncode, result.stderr
        assert result.stderr.startswith(f"apollo: error: {option}")
    too_deep = run("entity", "Lena Park", "--related", "--depth", "4")
    assert 2 == too_deep.returncode
    assert "argument --depth: must be between 1 and 3" in too_deep.stderr


def test_simulate_prints_the_summary() -> None:
    result = run("simulate", "--agents", "4", "--ticks", "10", "--domains", "2")
    assert 0 == result.returncode, result.stderr
    out = result.stdout
    assert "simulated 4 agents x 10 ticks over 2 domains" in out
    for heading in (
        "entries by status: candidate",
        "contradictions found:",
        "expertise (top agents per domain):",
        "domains at risk",
        "what it means:",
        "wall time:",
    ):
        assert heading in out


def test_version_prints_the_installed_version() -> None:
    """``apollo --version`` prints ``apollo <version>`` (the package's own) and exits 0."""
    import apollo_app

    result = run("--version")
    assert 0 == result.returncode, result.stderr
    assert f"apollo {apollo_app.__version__}\n" == result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str) -> None:
    result = run(command, "--help")
    assert 0 == result.returncode, result.stderr
    assert f"usage: apollo {command}" in result.stdout


def test_a_bad_setting_exits_2_naming_the_variable(data_dir: Path) -> None:
    result = run("stats", data_dir=data_dir, env={"APOLLO_HTTP_PORT": "notaport"})
    assert 2 == result.returncode
    assert result.stderr.startswith("apollo: error: APOLLO_HTTP_PORT")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("option", "value"),
    [("--limit", "0"), ("--limit", "1000"), ("--min-similarity", "1.5")],
)
def test_a_query_option_out_of_range_is_a_usage_error(option: str, value: str) -> None:
    """Either side of a range is refused the same way, before any store is opened: usage,
    the option named, exit 2."""
    result = run("query", "anything", option, value)
    assert 2 == result.returncode
    assert result.stderr.startswith("usage: apollo query")
    assert f"apollo query: error: argument {option}: must be " in result.stderr


def test_an_argument_the_parser_refuses_exits_2_naming_it() -> None:
    noise = run("simulate", "--noise", "1.5")
    assert 2 == noise.returncode
    assert "--noise" in noise.stderr


def test_a_database_url_of_another_kind_exits_2_naming_the_variable(tmp_path: Path) -> None:
    result = run(
        "stats", data_dir=tmp_path, env={"APOLLO_DATABASE_URL": "mysql://root@localhost/apollo"}
    )
    assert 2 == result.returncode, result.stdout + result.stderr
    assert result.stderr.startswith("apollo: error: APOLLO_DATABASE_URL: must be a PostgreSQL URL")
    assert "Traceback" not in result.stderr


def test_an_unreachable_database_exits_1(tmp_path: Path) -> None:
    """A store that cannot be reached is a runtime failure, reported in one line."""
    result = run(
        "stats",
        "--database-url",
        f"postgresql:///apollo?host={tmp_path}&connect_timeout=2",
        data_dir=tmp_path,
    )
    assert 1 == result.returncode, result.stdout + result.stderr
    assert result.stderr.startswith("apollo: error: StoreUnavailable")
    assert "Traceback" not in result.stderr


@pytest.mark.postgres
def test_a_command_that_creates_the_store_says_so_once() -> None:
    """A query in a folder without a store creates an empty one: a note on stderr says so,
    so "no results" does not look like lost data; the next query has nothing to note."""
    folder = temporary_folder("apollo-cli-new-")
    try:
        first = run("query", "leader election", data_dir=folder)
        assert (0, "no results\n") == (first.returncode, first.stdout), first.stderr
        assert [
            f"apollo: note: no store in {folder}: created a new, empty one (--data-dir, "
            "APOLLO_DATA_DIR or APOLLO_DATABASE_URL choose another)"
        ] == first.stderr.splitlines()
        again = run("query", "leader election", data_dir=folder)
        assert (0, "no results\n", "") == (again.returncode, again.stdout, again.stderr)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _schema_of(conninfo: str) -> tuple[bool, bool]:
    """Whether the database has the ``vector`` extension and Apollo's ``entries`` table."""
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector'),"
            " to_regclass('entries') IS NOT NULL"
        ).fetchone()
    assert row is not None
    return bool(row[0]), bool(row[1])


@pytest.mark.postgres
def test_read_commands_never_migrate_a_server_given_by_url(
    postgres_server: PostgresTestServer,
) -> None:
    """``query``, ``stats`` and ``entities`` use a server given by URL as it is: on an
    empty database they change nothing and say to run ``apollo migrate``, naming the flag
    the user typed; after ``apollo migrate`` they answer."""
    url = postgres_server.conninfo(asyncio.run(postgres_server.create_database()))
    for command in (("query", "leader election"), ("stats",), ("entities",)):
        result = run(*command, "--database-url", url)
        assert 2 == result.returncode, result.stdout + result.stderr
        assert result.stderr.startswith(
            "apollo: error: --database-url: the database has no Apollo schema; run `apollo migrate`"
        ), result.stderr
        assert (False, False) == _schema_of(url)
    by_variable = run("stats", env={"APOLLO_DATABASE_URL": url})
    assert by_variable.stderr.startswith("apollo: error: APOLLO_DATABASE_URL: the database")
    assert 0 == run("migrate", "--database-url", url).returncode
    assert (True, True) == _schema_of(url)
    answered = run("query", "leader election", "--database-url", url)
    assert (0, "no results\n", "") == (answered.returncode, answered.stdout, answered.stderr)


@pytest.mark.postgres
def test_another_embedder_than_the_stores_is_refused_naming_the_settings(data_dir: Path) -> None:
    """A store made by the 384-dimension hashing embedder, opened with another dimension:
    the error names APOLLO_EMBEDDER, the values configured now and the ones to set."""
    assert 0 == run("migrate", data_dir=data_dir).returncode
    result = run("stats", data_dir=data_dir, env={"APOLLO_EMBEDDING_DIMENSION": "256"})
    assert 2 == result.returncode, result.stdout + result.stderr
    assert [
        "apollo: error: APOLLO_EMBEDDER: the store holds vectors of model"
        " 'apollo-hashing-v1-384' (dimension 384), not those of the embedder configured now"
        " (APOLLO_EMBEDDER=hashing, APOLLO_EMBEDDING_DIMENSION=256); set"
        " APOLLO_EMBEDDER=hashing and APOLLO_EMBEDDING_DIMENSION=384 to open it, run"
        " `apollo reembed` to move the store to the embedder configured now, or choose a new"
        " store (APOLLO_DATA_DIR or APOLLO_DATABASE_URL) for it"
    ] == result.stderr.splitlines()


@pytest.mark.postgres
def test_query_prints_the_mode_that_ran(store_url: str) -> None:
    """``--mode lexical`` prints ``(lexical)``, the default ``(hybrid)``, ``--json`` says
    the same; a text under three characters browses."""
    stored = run(
        "ingest", "-", database_url=store_url, stdin='{"content": "Raft elects a leader"}\n'
    )
    assert 0 == stored.returncode, stored.stderr
    for mode in ("lexical", "vector", "hybrid"):
        result = run("query", "raft leader", "--mode", mode, database_url=store_url)
        assert 0 == result.returncode, result.stderr
        assert result.stdout.startswith(f"1 result(s) ({mode}):"), result.stdout
    answer = run("query", "raft leader", "--mode", "lexical", "--json", database_url=store_url)
    assert "lexical" == json.loads(answer.stdout)["mode"]
    browsed = run("query", "r", "--json", database_url=store_url)
    assert "browse" == json.loads(browsed.stdout)["mode"]


@pytest.mark.postgres
def test_a_model_other_than_the_stores_is_refused_before_it_loads(
    data_dir: Path, tmp_path: Path
) -> None:
    """The model's folder name is its id: a store made by another embedder is refused from
    it, before loading anything (this folder holds no model at all, so loading it would
    fail otherwise), naming the settings."""
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    assert 0 == run("migrate", data_dir=data_dir).returncode
    result = run(
        "stats",
        data_dir=data_dir,
        env={"APOLLO_EMBEDDER": "sentence-transformers", "APOLLO_EMBEDDING_MODEL": str(folder)},
    )
    assert 2 == result.returncode, result.stdout + result.stderr
    assert result.stderr.startswith(
        "apollo: error: APOLLO_EMBEDDER: the store holds vectors of model"
        " 'apollo-hashing-v1-384' (dimension 384), not those of the embedder configured now"
        f" (APOLLO_EMBEDDER=sentence-transformers, APOLLO_EMBEDDING_MODEL={folder});"
    ), result.stderr


@pytest.mark.postgres
def test_ingest_reports_each_over_limit_line_by_the_field_it_names(tmp_path: Path) -> None:
    """One line per row of the bounds table a JSONL line can break (the message bound
    included): each is reported by number with the field it names and stores nothing; the
    one good line is stored."""
    cases = [*LINE_CASES, CASES["message"]]
    path = tmp_path / "over-limit.jsonl"
    lines = [json.dumps(dict(case.payload)) for case in cases]
    lines.append(json.dumps({"content": "Bloom filters never give false negatives"}))
    path.write_text("\n".join(lines) + "\n")
    folder = temporary_folder("apollo-cli-bounds-")
    try:
        result = run("ingest", str(path), "--agent", "claude-bounds", data_dir=folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert 0 == result.returncode, result.stderr[-2_000:]
    for number, case in enumerate(cases, 1):
        assert f"apollo: line {number}: {case.field}: " in result.stderr, case.id
    assert "ingested 1 line(s): created 1" in result.stdout
    assert f"{len(cases)} bad line(s) skipped" in result.stdout
    assert len(result.stderr) < 300 * len(cases)  # no input echoed back whole


@pytest.mark.postgres
def test_ingest_text_stores_a_conversation_as_one_episode(store_url: str, tmp_path: Path) -> None:
    """``--text``: a JSON list of turns is a conversation, stored once; a plain file is a
    document; a bad turn is refused naming its field, and nothing is stored."""
    conversation = tmp_path / "standup.json"
    conversation.write_text(
        json.dumps(
            [
                {
                    "speaker": "ann",
                    "text": "The CI runners moved to Ubuntu 24.04. They reboot at 3am.",
                },
                {"speaker": "bob", "text": "Builds now cache their layers in the S3 bucket."},
            ]
        )
    )
    first = run("ingest", "--text", str(conversation), "--tag", "ci", database_url=store_url)
    assert 0 == first.returncode, first.stderr
    lines = first.stdout.splitlines()
    assert re.fullmatch(r"episode [0-9a-f-]{36}: 2 statement\(s\)", lines[0]), lines
    assert [line.split()[1] for line in lines[1:]] == ["created", "created"]
    again = run("ingest", "--text", str(conversation), "--tag", "ci", database_url=store_url)
    assert lines[0] == again.stdout.splitlines()[0]
    assert [line.split()[1] for line in again.stdout.splitlines()[1:]] == ["deduplicated"] * 2

    document = tmp_path / "notes.txt"
    document.write_text("[draft] The runbook lives in the wiki. Pages go to the on-call phone.")
    told = run("ingest", "--text", str(document), database_url=store_url)
    assert 0 == told.returncode, told.stderr
    assert "2 statement(s)" in told.stdout

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"speaker": "ann", "words": "no text field"}]))
    refused = run("ingest", "--text", str(bad), database_url=store_url)
    assert 2 == refused.returncode, refused.stdout + refused.stderr
    assert "text[0].words" in refused.stderr
    assert "Traceback" not in refused.stderr
    stats = json.loads(run("stats", "--json", database_url=store_url).stdout)
    assert 4 == stats["total"]
