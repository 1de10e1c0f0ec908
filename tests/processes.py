"""Helpers for the local servers the test harnesses start: a free port, a child that dies
with its parent, and stopping a process by its pid (a signal, a bounded wait, then
SIGKILL).

Shared by the PgBouncer, replica, service-process and fleet harnesses, and usable outside
pytest (``scripts/cluster`` stops what an earlier run started, from pids in a state file).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
#: How often a wait for a process to exit (or a port to open) looks again.
POLL_SECONDS = 0.05


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_with_parent() -> None:
    """In a child (``preexec_fn``): SIGTERM when the process that started it dies, however
    it dies (Linux), so nothing outlives a test run that was killed."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def alive(pid: int, child: subprocess.Popen[bytes] | None = None) -> bool:
    """Whether ``pid`` still runs (a zombie does not). ``child``: the same process started
    by this one, which is then reaped once it exits."""
    if child is not None:
        return child.poll() is None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def command_line(pid: int) -> str:
    """``pid``'s command line, arguments joined by spaces ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def wait_gone(pid: int, seconds: float, child: subprocess.Popen[bytes] | None = None) -> bool:
    """Wait up to ``seconds`` for ``pid`` to exit; whether it did."""
    deadline = time.monotonic() + seconds
    while alive(pid, child):
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_SECONDS)  # waiting for an exit; no ordering depends on it
    return True


def stop_pid(
    pid: int,
    *,
    grace: float,
    sig: signal.Signals = signal.SIGTERM,
    child: subprocess.Popen[bytes] | None = None,
    group: bool = False,
) -> None:
    """Stop ``pid``: ``sig``, up to ``grace`` seconds for it to exit, then SIGKILL (to its
    process group too with ``group``), and wait until it is gone."""
    if not alive(pid, child):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    if wait_gone(pid, grace, child):
        return
    kill9(pid, child=child, group=group)


def kill9(pid: int, *, child: subprocess.Popen[bytes] | None = None, group: bool = False) -> None:
    """SIGKILL ``pid`` (its process group with ``group``) and wait until it is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    if not wait_gone(pid, 30.0, child):
        raise RuntimeError(f"process {pid} survives SIGKILL")


def wait_for_port(port: int, seconds: float, child: subprocess.Popen[bytes] | None = None) -> None:
    """Wait until something accepts connections on 127.0.0.1:``port``; fail when ``child``
    exits first or after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        if child is not None and child.poll() is not None:
            raise RuntimeError(f"the process exited (code {child.returncode}) before port {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on port {port} after {seconds:g}s") from None
            time.sleep(POLL_SECONDS)  # polling a port that opens; no ordering depends on it


__all__ = [
    "alive",
    "command_line",
    "free_port",
    "kill9",
    "stop_pid",
    "stop_with_parent",
    "wait_for_port",
    "wait_gone",
]
