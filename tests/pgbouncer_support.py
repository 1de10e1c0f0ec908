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
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from apollo_adapters.postgres.embedded import SYSTEM_USER, temporary_folder
from tests.postgres_support import DisposablePostgresStore, PostgresTestServer, hashing_model_id
from tests.processes import free_port

PGBOUNCER = "/usr/sbin/pgbouncer"
#: Server connections per database and user: fewer than the store's pool (10 by default)
#: and than the callers of the concurrency suite.
POOL_SIZE = 3
START_SECONDS = 20.0
STOP_SECONDS = 10.0


class PgBouncer:
    """One pgbouncer process in transaction mode in front of ``server``."""

    def __init__(self, server: PostgresTestServer, folder: Path) -> None:
        self.server = server
        self.folder = folder
        self.port = free_port()
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
                    f"default_pool_size = {POOL_SIZE}",
                    "max_client_conn = 500",
                    "server_reset_query =",
                    "ignore_startup_parameters = extra_float_digits",
                    "",
                ]
            ),
            encoding="utf-8",
        )
        return config

    def start(self) -> None:
        config = self._config()
        command = [PGBOUNCER, "-q", str(config)]
        if os.geteuid() == 0:  # pgbouncer refuses to run as root
            account = pwd.getpwnam(SYSTEM_USER)
            for path in self.folder.iterdir():
                os.chown(path, account.pw_uid, account.pw_gid)
            os.chown(self.folder, account.pw_uid, account.pw_gid)
            command[1:1] = ["-u", SYSTEM_USER]
        self._process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                _, err = self._process.communicate()
                raise RuntimeError(f"pgbouncer exited at start: {err.decode(errors='replace')}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)  # polling a port that opens; no ordering depends on it
        self.stop()
        raise RuntimeError(f"pgbouncer did not listen on port {self.port} in {START_SECONDS}s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        os.kill(process.pid, signal.SIGINT)  # SIGINT: close every connection, then exit
        try:
            process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
        if process.stderr is not None:
            process.stderr.close()

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
