"""A PostgreSQL server without pgvector (the machine's own PostgreSQL at 127.0.0.1:5432,
user ``postgres``): Apollo says what is missing and how to fix it, and a migration that
fails leaves the database as it was.

Each test works in a database of its own, created and dropped here. The tests are skipped
only when that server is not running.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import psycopg
import pytest
from psycopg import sql

from apollo_adapters.postgres import schema
from apollo_adapters.postgres.errors import MissingPgvector
from apollo_app import bootstrap
from apollo_app.settings import Settings
from apollo_domain.errors import ApolloError, ConfigurationError
from tests.environ import without_apollo_settings

pytestmark = pytest.mark.postgres

SERVER = "postgresql://postgres@127.0.0.1:5432/postgres?connect_timeout=3"


@pytest.fixture
def database() -> Iterator[str]:
    """The conninfo of a new, empty database on the plain server (dropped afterwards)."""
    try:
        admin = psycopg.connect(SERVER, autocommit=True)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL server at 127.0.0.1:5432: {exc}")
    name = f"apollo_plain_{uuid4().hex[:12]}"
    with admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield f"postgresql://postgres@127.0.0.1:5432/{name}?connect_timeout=3"
        finally:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _tables(conninfo: str) -> set[str]:
    with psycopg.connect(conninfo) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
    return {row[0] for row in rows}


def _has_pgvector(conninfo: str) -> bool:
    with psycopg.connect(conninfo) as conn:
        found = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        return found.fetchone() is not None


async def test_migrate_refuses_a_server_without_pgvector_and_leaves_nothing(database: str) -> None:
    """The missing extension is named, and not even the bookkeeping table is left behind."""
    if _has_pgvector(database):
        pytest.skip("this server has pgvector")
    with pytest.raises(MissingPgvector) as caught:
        await schema.migrate(database, dimension=8, model_id="hashing-8")
    assert "pgvector" in str(caught.value)
    assert set() == _tables(database)


async def test_the_settings_name_the_variable_and_the_way_out(database: str) -> None:
    """Pointing APOLLO_DATABASE_URL at it is a configuration error that says what to do:
    install pgvector there, or unset the variable for the embedded server."""
    if _has_pgvector(database):
        pytest.skip("this server has pgvector")
    settings = Settings(embedder="hashing", database_url=database, data_dir=Path("unused"))
    with pytest.raises(ConfigurationError) as caught:
        await bootstrap.migrate_database(settings)
    assert "APOLLO_DATABASE_URL" == caught.value.variable
    assert "Install pgvector" in caught.value.message
    assert "unset APOLLO_DATABASE_URL" in caught.value.message
    assert set() == _tables(database)


async def test_a_failing_migration_rolls_back_every_pending_one(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All pending migrations run in one transaction: the second failing undoes the first
    and the bookkeeping table, on a real server."""

    async def pgvector_present(conn: object) -> None:
        return None

    monkeypatch.setattr(schema, "_require_pgvector", pgvector_present)
    monkeypatch.setattr(
        schema,
        "migrations",
        lambda: [
            schema.Migration(1, "first", "CREATE TABLE apollo_probe (id integer)"),
            schema.Migration(2, "broken", "SELECT apollo_no_such_function()"),
        ],
    )
    with pytest.raises(ApolloError):
        await schema.migrate(database, dimension=8, model_id="hashing-8")
    assert set() == _tables(database)


def test_the_cli_prints_the_hint_and_exits_2(database: str, tmp_path: Path) -> None:
    if _has_pgvector(database):
        pytest.skip("this server has pgvector")
    environ = without_apollo_settings()
    environ["APOLLO_DATABASE_URL"] = database
    environ["APOLLO_DATA_DIR"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "apollo_app.cli", "migrate"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )
    assert 2 == result.returncode, result.stdout + result.stderr
    assert result.stderr.startswith("apollo: error: APOLLO_DATABASE_URL: ")
    assert "unset APOLLO_DATABASE_URL" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("version", "supported"),
    [
        ("0.8.0", True),
        ("0.7.0", True),
        ("0.10.1", True),
        ("1.0", True),
        ("0.6.2", False),
        ("0.5.1", False),
        ("0.7.0-dev", True),
        ("", False),
    ],
)
def test_pgvector_older_than_0_7_is_refused(version, supported):
    """``l2_normalize`` (pgvector 0.7) compares a fair page's candidates: an older server is
    named at start, not at the first query."""
    assert supported == schema.pgvector_supported(version)
