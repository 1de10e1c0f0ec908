"""The pytest plugin users get with Apollo: ``apollo_clock``, ``apollo_memory`` and
``apollo_postgres``, exercised by running pytest on small test files in a subprocess."""

from __future__ import annotations

import ast
from pathlib import Path

import psycopg
import pytest

from apollo_app import pytest_plugin
from tests.postgres_support import PostgresTestServer
from tests.pytest_runs import run_pytest

# pytest-asyncio alone beside Apollo's plugin: what the fixtures need, and a quick start.
ASYNC_ONLY = ["asyncio"]

PLUGIN_FIXTURES = ("apollo_clock", "apollo_memory", "apollo_postgres", "apollo_postgres_server")

ON_THE_MANUAL_CLOCK = """
import pytest

from apollo_app import Outcome, Principal


async def decay_follows(apollo, clock):
    assert apollo.deps.clock is clock
    client = apollo.client(agent_id="claude-net-1", principal=Principal("alice"))
    stored = await client.store_knowledge(content="BGP route reflectors reduce IBGP mesh size")
    assert clock.now() == (await apollo.get_entry(stored.entry_id)).created_at

    clock.advance(hours=10)
    await apollo.run_decay_cycle()
    entry = await apollo.get_entry(stored.entry_id)
    assert 0.5 * 0.998**10 == pytest.approx(entry.confidence, abs=1e-9)


async def test_memory_decay_follows_the_manual_clock(apollo_memory, apollo_clock):
    await decay_follows(apollo_memory, apollo_clock)


async def test_postgres_decay_follows_the_manual_clock(apollo_postgres, apollo_clock):
    await decay_follows(apollo_postgres, apollo_clock)


@pytest.mark.parametrize("attempt", [1, 2])
async def test_each_test_gets_an_empty_database(apollo_postgres, attempt):
    assert 0 == (await apollo_postgres.stats()).total
    stored = await apollo_postgres.client("agent-1").store_knowledge(content="Stored once per test")
    assert Outcome.CREATED == stored.outcome
"""

IN_STRICT_MODE = """
import pytest


@pytest.mark.asyncio
async def test_the_fixtures_work_without_auto_mode(apollo_memory, apollo_clock):
    stored = await apollo_memory.client("agent-1").store_knowledge(content="Strict mode works")
    apollo_clock.advance(days=2)
    assert 1 == (await apollo_memory.stats()).total
    assert stored.entry_id == (await apollo_memory.get_entry(stored.entry_id)).id
"""


@pytest.mark.postgres
def test_memory_and_postgres_fixtures_on_an_embedded_server(tmp_path: Path) -> None:
    """With no server configured, the plugin starts an embedded PostgreSQL + pgvector for
    the session; both Apollos run on the test's manual clock, and every test gets an empty
    database."""
    (tmp_path / "test_example.py").write_text(ON_THE_MANUAL_CLOCK)

    run = run_pytest(
        tmp_path,
        "-o",
        "asyncio_mode=auto",
        env={"APOLLO_TEST_DATABASE_URL": ""},
        only_plugins=ASYNC_ONLY,
    )

    assert 0 == run.returncode, run.output
    assert run.summary.startswith("4 passed"), run.output


@pytest.mark.postgres
def test_postgres_fixture_on_a_configured_server_drops_what_it_created(
    tmp_path: Path, postgres_server: PostgresTestServer
) -> None:
    """On the server of APOLLO_TEST_DATABASE_URL the plugin clones a template per test and
    drops every database it created, the template included, when the session ends."""
    (tmp_path / "test_example.py").write_text(ON_THE_MANUAL_CLOCK)

    run = run_pytest(
        tmp_path,
        "-o",
        "asyncio_mode=auto",
        "-k",
        "postgres or empty_database",
        env={"APOLLO_TEST_DATABASE_URL": postgres_server.admin_conninfo},
        only_plugins=ASYNC_ONLY,
    )

    assert 0 == run.returncode, run.output
    assert run.summary.startswith("3 passed"), run.output
    with psycopg.connect(postgres_server.admin_conninfo) as conn:
        left = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'apollo\\_pytest\\_%'"
        ).fetchall()
    assert [] == left


def test_fixtures_work_in_strict_mode(tmp_path: Path) -> None:
    """The fixtures are pytest-asyncio fixtures, so projects that mark their async tests
    (strict mode, pytest-asyncio's default) can use them too."""
    (tmp_path / "test_example.py").write_text(IN_STRICT_MODE)

    run = run_pytest(tmp_path, "-o", "asyncio_mode=strict", only_plugins=ASYNC_ONLY)

    assert 0 == run.returncode, run.output
    assert run.summary.startswith("1 passed"), run.output


def test_the_suite_defines_no_fixture_of_the_plugin(tmp_path: Path) -> None:
    """Installing Apollo loads the plugin into this suite too: no fixture here may shadow
    one of its fixtures (or be shadowed by it)."""
    for name in PLUGIN_FIXTURES:
        assert hasattr(pytest_plugin, name), name
    tests = Path(__file__).resolve().parents[1]
    defined = {
        node.name
        for path in tests.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and any("fixture" in ast.unparse(d) for d in node.decorator_list)
    }
    assert "pg_store" in defined  # the scan sees the suite's own fixtures
    assert set() == defined & set(PLUGIN_FIXTURES)
