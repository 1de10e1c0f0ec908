"""The processes behind an embedded data folder: who runs its server, who still uses it.

- :class:`FolderLock`: an exclusive ``fcntl.flock`` on a lock file beside the data folder,
  held while a server is started, adopted or stopped, so concurrent processes take turns.
- :class:`ProcessRef`: a process id plus its start time, so a reused pid is not mistaken
  for the process that wrote it; a zombie counts as dead.
- :class:`Postmaster`: the ``postmaster.pid`` file and whether its process is alive
  (stale files of a dead or zombie postmaster are removed, so a new server can start).
- :class:`Handles`: the processes currently using the server (one entry per
  :class:`~.embedded.EmbeddedPostgres` that started or adopted it); the last one to let
  go stops it, and entries of processes that died without letting go are pruned.

Process inspection reads ``/proc`` where it exists (Linux); elsewhere it falls back to
``kill(pid, 0)`` and cannot see zombies or leftover children.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attrs import frozen

from apollo_domain.errors import StoreUnavailable

log = logging.getLogger("apollo.embedded_postgres")

POLL_SECONDS = 0.05
PROC = Path("/proc")


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` seconds pass; returns the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECONDS)


# --------------------------------------------------------------------------- the lock


class FolderLock:
    """An exclusive lock on ``path`` (``fcntl.flock``), waited for at most ``timeout`` s.

    flock locks belong to the open file, so two holders in one process exclude each other
    too, and the kernel releases the lock of a process that dies.
    """

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None

    def __enter__(self) -> FolderLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if not wait_until(lambda: _try_lock(fd), self.timeout):
                raise StoreUnavailable(
                    f"another process has held {self.path} for more than {self.timeout:g} s"
                )
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


# --------------------------------------------------------------------------- processes


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) from ``/proc/<pid>/stat``, or None."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def _kill_zero(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap(pid: int) -> None:
    """Collect the exit status of ``pid`` if it is a child of this process."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


@frozen
class ProcessRef:
    """A process: its pid and, where ``/proc`` tells it, its start time."""

    pid: int
    started: int | None = None

    @classmethod
    def of(cls, pid: int) -> ProcessRef:
        stat = _proc_stat(pid) if PROC.is_dir() else None
        return cls(pid, None if stat is None else stat[1])

    def alive(self) -> bool:
        """Running (not a zombie) and, when known, started when this reference was taken."""
        if self.pid <= 0:
            return False
        if not PROC.is_dir():
            return _kill_zero(self.pid)
        stat = _proc_stat(self.pid)
        if stat is None:
            return False
        state, started = stat
        if state in ("Z", "X", "x"):
            _reap(self.pid)
            return False
        return self.started is None or self.started == started


def _readlink(path: Path) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def data_folder_processes(pgdata: Path) -> list[int]:
    """Live ``postgres`` processes whose working directory is ``pgdata`` (a postmaster and
    its children all work there); empty where ``/proc`` is missing."""
    if not PROC.is_dir():
        return []
    folder = str(pgdata)
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        if _readlink(entry / "cwd") != folder:
            continue
        exe = _readlink(entry / "exe")
        if exe is None or Path(exe.removesuffix(" (deleted)")).name != "postgres":
            continue
        pid = int(entry.name)
        if ProcessRef(pid).alive():
            found.append(pid)
    return found


def end_leftovers(pgdata: Path, timeout: float) -> None:
    """Wait (bounded) for the processes of ``pgdata``'s previous server to exit; kill those
    that outlive ``timeout`` (children of a killed postmaster notice its death and exit on
    their own, but a new server cannot start while they hold the old shared memory)."""
    if wait_until(lambda: not data_folder_processes(pgdata), timeout):
        return
    for pid in data_folder_processes(pgdata):
        log.warning("killing pid %d, a leftover of the server of %s", pid, pgdata)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if not wait_until(lambda: not data_folder_processes(pgdata), timeout):
        raise StoreUnavailable(f"processes of an old server of {pgdata} do not exit")


# --------------------------------------------------------------------------- postmaster.pid


@frozen
class Postmaster:
    """What ``postmaster.pid`` says about the server of a data folder."""

    pid: int
    port: int | None
    socket_dir: Path | None
    status: str

    FILE = "postmaster.pid"

    @classmethod
    def read(cls, pgdata: Path) -> Postmaster | None:
        """The file's contents, or None when there is no (readable) file."""
        try:
            lines = (pgdata / cls.FILE).read_text().splitlines()
        except OSError:
            return None
        if not lines or not lines[0].strip().isdigit():
            return None
        field = [line.strip() for line in lines] + [""] * 8
        return cls(
            pid=int(field[0]),
            port=int(field[3]) if field[3].isdigit() else None,
            socket_dir=Path(field[4]) if field[4] else None,
            status=field[7],
        )

    def alive(self, pgdata: Path) -> bool:
        """The process runs, is no zombie, and works in ``pgdata`` (not a reused pid)."""
        if not ProcessRef(self.pid).alive():
            return False
        cwd = _readlink(PROC / str(self.pid) / "cwd") if PROC.is_dir() else None
        return cwd is None or cwd == str(pgdata)

    def remove_stale_files(self, pgdata: Path) -> None:
        """Remove the lock files of this dead postmaster (``postmaster.pid`` and the socket
        lock), which would make a new server refuse to start while the pid is a zombie."""
        log.info("removing the files of postmaster %d of %s, which is gone", self.pid, pgdata)
        with contextlib.suppress(FileNotFoundError):
            (pgdata / self.FILE).unlink()
        if self.socket_dir is None or self.port is None:
            return
        socket = self.socket_dir / f".s.PGSQL.{self.port}"
        lock = socket.with_name(socket.name + ".lock")
        holder = Postmaster._first_pid(lock)
        if holder is None or holder == self.pid or not ProcessRef(holder).alive():
            for path in (lock, socket):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    @staticmethod
    def _first_pid(path: Path) -> int | None:
        try:
            first = path.read_text().split("\n", 1)[0].strip()
        except OSError:
            return None
        return int(first) if first.isdigit() else None


def running_postmaster(pgdata: Path) -> Postmaster | None:
    """The live postmaster of ``pgdata``, or None (after removing the files of a dead one)."""
    postmaster = Postmaster.read(pgdata)
    if postmaster is None:
        return None
    if postmaster.alive(pgdata):
        return postmaster
    postmaster.remove_stale_files(pgdata)
    return None


# --------------------------------------------------------------------------- handles


@frozen
class Handle:
    """One user of the server: a process and a token naming one user inside it."""

    process: ProcessRef
    token: str

    @classmethod
    def new(cls) -> Handle:
        return cls(ProcessRef.of(os.getpid()), uuid.uuid4().hex)


class Handles:
    """The users of a data folder's server, in a JSON file in the data folder. Read and
    written only under the :class:`FolderLock`."""

    FILE = "apollo_handles.json"
    LEGACY_FILE = ".handle_pids.json"  # the wheel's own list, from before Apollo managed it

    def __init__(self, pgdata: Path) -> None:
        self.path = pgdata / self.FILE
        self._legacy = pgdata / self.LEGACY_FILE

    def _read(self) -> list[Handle]:
        try:
            raw: Any = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError):
            log.warning("ignoring the unreadable %s", self.path)
            return []
        handles = []
        for item in raw if isinstance(raw, list) else []:
            with contextlib.suppress(KeyError, TypeError, ValueError):
                started = item.get("started")
                process = ProcessRef(int(item["pid"]), None if started is None else int(started))
                handles.append(Handle(process, str(item["token"])))
        return handles

    def _write(self, handles: list[Handle]) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._legacy.unlink()  # the wheel no longer tracks this folder; its pids are stale
        if not handles:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            return
        items = [
            {"pid": h.process.pid, "started": h.process.started, "token": h.token} for h in handles
        ]
        temporary = self.path.with_name(self.path.name + ".tmp")
        temporary.write_text(json.dumps(items))
        os.replace(temporary, self.path)

    def live(self) -> list[Handle]:
        """The handles whose process still runs (the others are dropped from the file)."""
        handles = self._read()
        alive = [h for h in handles if h.process.alive()]
        if len(alive) != len(handles) or self._legacy.exists():
            self._write(alive)
        return alive

    def add(self, handle: Handle) -> None:
        handles = [h for h in self.live() if h != handle]
        self._write([*handles, handle])

    def remove(self, handle: Handle) -> list[Handle]:
        """Drop ``handle``; returns the live handles that remain."""
        handles = [h for h in self.live() if h != handle]
        self._write(handles)
        return handles
