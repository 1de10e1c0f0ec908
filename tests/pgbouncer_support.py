"""A PgBouncer in transaction mode in front of the test PostgreSQL server.

Debian's ``pgbouncer`` package (``scripts/test`` installs it when missing, as root). Each
session starts its own: a free TCP port, its configuration, auth file, log and pid file
in a temporary folder, stopped by its pid when the session ends (even after a failure).
Its pool holds ``POOL_SIZE`` server connections per database, fewer than a store's pool:
the store's callers share them the way a fleet's processes share a real pooler's.

Without ``pgbouncer`` the tests that need it skip on a developer machine and fail under
CI (``CI`` set): CI runs them.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from apollo_adapters.postgres.embedded import SYSTEM_USER, temporary_folder
from tests.postgres_support import DisposablePostgresStore, PostgresTestServer, hashing_model_id
from tests.processes import (
    alive,
    command_line,
    free_port,
    stop_pid,
    stop_with_parent,
    wait_for_port,
)
from tests.replica_support import LocalServer

PGBOUNCER = "/usr/sbin/pgbouncer"
#: Server connections per database and user: fewer than the store's pool (10 by default)
#: and than the callers of the concurrency suite.
POOL_SIZE = 3
START_SECONDS = 20.0
STOP_SECONDS = 10.0


class PgBouncer:
    """One pgbouncer process in transaction mode in front of ``server``: ``pool_size``
    server connections per database and user, at most ``max_client_conn`` clients.

    ``detached``: a process of its own session that outlives the one that started it
    (``scripts/cluster``); else it gets SIGTERM when its starter dies."""

    def __init__(
        self,
        server: PostgresTestServer | LocalServer,
        folder: Path,
        *,
        pool_size: int = POOL_SIZE,
        max_client_conn: int = 500,
        port: int | None = None,
        detached: bool = False,
    ) -> None:
        self.server = server
        self.folder = folder
        self.port = port or free_port()
        self.pool_size = pool_size
        self.max_client_conn = max_client_conn
        self.detached = detached
        self._process: subprocess.Popen[bytes] | None = None

    def _config(self) -> Path:
        target = conninfo_to_dict(self.server.admin_conninfo)
        user = str(target.get("user") or "postgres")
        host = str(target.get("host") or "127.0.0.1")
        port = str(target.get("port") or 5432)
        (self.folder / "userlist.txt").write_text(f'"{user}" ""\n', encoding="utf-8")
        config = self.folder / "pgbouncer.ini"
        config.write_text(
            "\n".join(
                [
                    "[databases]",
                    f"* = host={host} port={port}",
                    "[pgbouncer]",
                    "listen_addr = 127.0.0.1",
                    f"listen_port = {self.port}",
                    "unix_socket_dir =",
                    "auth_type = trust",
                    f"auth_file = {self.folder / 'userlist.txt'}",
                    f"logfile = {self.folder / 'pgbouncer.log'}",
                    f"pidfile = {self.folder / 'pgbouncer.pid'}",
                    "pool_mode = transaction",
                    f"default_pool_size = {self.pool_size}",
                    f"max_client_conn = {self.max_client_conn}",
                    "server_reset_query =",
                    "ignore_startup_parameters = extra_float_digits",
                    "",
                ]
            ),
            encoding="utf-8",
        )
        return config

    @property
    def pid(self) -> int | None:
        """The running pgbouncer's pid (None when it is not running): the process this
        object started, else the one its pid file names (another process started it)."""
        if self._process is not None and self._process.poll() is None:
            return self._process.pid
        try:  # another process may have started it again since
            pid = int((self.folder / "pgbouncer.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        ours = str(self.folder / "pgbouncer.ini") in command_line(pid)  # not a reused pid
        return pid if ours and alive(pid) else None

    def start(self) -> None:
        """Start it on its port (again, after :meth:`stop`) and wait until it listens."""
        config = self._config()
        command = [PGBOUNCER, "-q", str(config)]
        if os.geteuid() == 0:  # pgbouncer refuses to run as root
            account = pwd.getpwnam(SYSTEM_USER)
            for path in self.folder.iterdir():
                os.chown(path, account.pw_uid, account.pw_gid)
            os.chown(self.folder, account.pw_uid, account.pw_gid)
            command[1:1] = ["-u", SYSTEM_USER]
        errors = self.folder / "pgbouncer.stderr"
        with errors.open("ab") as output:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=output,
                start_new_session=self.detached,
                preexec_fn=None if self.detached else stop_with_parent,
            )
        try:
            wait_for_port(self.port, START_SECONDS, self._process)
        except RuntimeError as exc:
            self.stop()
            said = errors.read_text(errors="replace").strip()[-2000:]
            raise RuntimeError(f"pgbouncer did not start: {exc}: {said}") from None

    def stop(self, *, immediate: bool = False) -> None:
        """SIGINT (safe shutdown: it waits for the transactions in flight), or with
        ``immediate`` SIGTERM (every connection closed at once, transactions in flight
        cut); SIGKILL after ``STOP_SECONDS``."""
        pid = self.pid
        process, self._process = self._process, None
        if pid is not None:
            sig = signal.SIGTERM if immediate else signal.SIGINT
            ours = process if process is not None and process.pid == pid else None
            stop_pid(pid, grace=STOP_SECONDS, sig=sig, child=ours)

    def restart(self) -> None:
        """Stop it at once (clients' connections cut mid-transaction), start it again on
        the same port."""
        self.stop(immediate=True)
        self.start()

    def conninfo(self, database: str) -> str:
        """A connection to ``database`` through this pooler."""
        return make_conninfo(
            self.server.admin_conninfo, host="127.0.0.1", port=str(self.port), dbname=database
        )


def pgbouncer_available() -> bool:
    return Path(PGBOUNCER).is_file() and os.access(PGBOUNCER, os.X_OK)


def require_pgbouncer() -> None:
    """Skip without pgbouncer on a developer machine; fail under CI, which runs these."""
    if pgbouncer_available():
        return
    reason = f"{PGBOUNCER} is missing (Debian's pgbouncer package)"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI runs the pooler tests (scripts/test installs it)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pgbouncer(postgres_server: PostgresTestServer) -> Iterator[PgBouncer]:
    """This session's PgBouncer in transaction mode, in front of its PostgreSQL server."""
    require_pgbouncer()
    folder = temporary_folder("apollo-pgbouncer-")
    bouncer = PgBouncer(postgres_server, folder)
    try:
        bouncer.start()
        yield bouncer
    finally:
        bouncer.stop()
        shutil.rmtree(folder, ignore_errors=True)


async def fresh_pooled_store(
    bouncer: PgBouncer,
    *,
    dimension: int = 384,
    model_id: str | None = None,
    **options: Any,
) -> DisposablePostgresStore:
    """A store on a new, migrated, empty database, reached through ``bouncer`` (migrations
    and the schema check straight to the server, as ``APOLLO_MIGRATION_DATABASE_URL``)."""
    import psycopg

    server = bouncer.server
    database = await server.create_database(dimension=dimension)
    direct = server.conninfo(database)
    model = model_id or hashing_model_id(dimension)
    if model != hashing_model_id(dimension):
        async with await psycopg.AsyncConnection.connect(direct, autocommit=True) as conn:
            await conn.execute("UPDATE apollo_store_meta SET embedding_model_id = %s", (model,))
    store = await DisposablePostgresStore.open(
        bouncer.conninfo(database),
        embedder_model_id=model,
        dimension=dimension,
        transaction_pooler=True,
        migration_conninfo=direct,
        **options,
    )
    store.server = server
    store.database = database
    store.conninfo = direct
    return store
