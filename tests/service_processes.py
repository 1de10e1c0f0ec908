"""``apollo serve`` as real processes, for the tests and drills that need several of them.

Each :class:`ServiceProcess` is ``python -m apollo_app.cli serve`` with an environment of
its own (this process's, less every ``APOLLO_*`` variable, plus the ones given), its own
HTTP port on the loopback and its output in a log file. It is stopped by its pid: SIGTERM
(the clean way) or, for a crash, SIGKILL (:meth:`ServiceProcess.kill9`). A process also
gets SIGKILL when the test process dies, however it dies (Linux), so a failed run leaves
no service behind. :class:`ServiceProcesses` runs N of them on one configuration.

    with ServiceProcesses(3, service_environment(APOLLO_AMQP_URL=..., ...), folder) as fleet:
        fleet.wait_healthy()
        fleet[0].kill9()
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx

import apollo_app

SOURCES = str(Path(apollo_app.__file__).resolve().parents[1])
PR_SET_PDEATHSIG = 1
START_PATIENCE = 120.0
STOP_PATIENCE = 60.0
HEALTH = "/api/apollo/health"


def service_environment(**apollo: str) -> dict[str, str]:
    """This process's environment without its ``APOLLO_*`` variables, with Apollo's sources
    on ``PYTHONPATH``, plus ``apollo`` (``APOLLO_AMQP_URL="amqp://..."``, ...)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("APOLLO_")}
    environ["PYTHONPATH"] = os.pathsep.join([SOURCES, *filter(None, [environ.get("PYTHONPATH")])])
    environ.update(apollo)
    return environ


def free_port() -> int:
    """A loopback TCP port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _die_with_parent() -> None:
    """In the child: SIGKILL when the test process dies (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class ServiceProcess:
    """One ``apollo serve`` process (started by :meth:`start`)."""

    def __init__(self, env: Mapping[str, str], log: Path, *, name: str = "service") -> None:
        self.name = name
        self.port = free_port()
        self.env = {**env, "APOLLO_HTTP_PORT": str(self.port)}
        self.env.setdefault("APOLLO_HTTP_HOST", "127.0.0.1")
        self.log = log
        self.base_url = f"http://127.0.0.1:{self.port}/api/apollo"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError(f"{self.name} was never started")
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def start(self) -> None:
        if self.running:
            return
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "apollo_app.cli", "serve"],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )

    def health(self) -> int | None:
        """The status code of ``GET health``; None when nothing answers (yet)."""
        try:
            return httpx.get(self.base_url + "/health", timeout=2.0).status_code
        except httpx.HTTPError:
            return None

    def wait_healthy(self, timeout: float = START_PATIENCE) -> None:
        """Until ``GET health`` answers 200; RuntimeError (with the log's tail) when the
        process exits first or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while self.health() != 200:
            if not self.running:
                raise RuntimeError(f"{self.name} exited ({self.returncode}):\n{self.output()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} not healthy within {timeout:g}s:\n{self.output()}")
            time.sleep(0.1)

    def stop(self, timeout: float = STOP_PATIENCE) -> int | None:
        """SIGTERM to its pid and wait (SIGKILL after ``timeout`` seconds); the exit code
        (None if it never started)."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
        return process.returncode

    def kill9(self) -> None:
        """SIGKILL to its pid (a crash: nothing is settled or closed), then reap it."""
        process = self.process
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_PATIENCE)

    def output(self, tail: int = 4000) -> str:
        """The last ``tail`` characters of its log."""
        return self.log.read_text(errors="replace")[-tail:] if self.log.exists() else ""


class ServiceProcesses:
    """``count`` ``apollo serve`` processes with the same ``env``, logs in ``folder``;
    a context manager that starts them and stops every one on the way out."""

    def __init__(self, count: int, env: Mapping[str, str], folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.processes = [
            ServiceProcess(env, folder / f"service-{n}.log", name=f"service {n}")
            for n in range(1, count + 1)
        ]

    def __getitem__(self, index: int) -> ServiceProcess:
        return self.processes[index]

    def __iter__(self) -> Iterator[ServiceProcess]:
        return iter(self.processes)

    def __len__(self) -> int:
        return len(self.processes)

    def start(self) -> None:
        for process in self.processes:
            process.start()

    def wait_healthy(self, timeout: float = START_PATIENCE) -> None:
        for process in self.processes:
            process.wait_healthy(timeout)

    def stop(self) -> list[int | None]:
        """Stop every process (SIGTERM, all at once, then wait for each); the exit codes."""
        for process in self.processes:
            if process.running:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)
        return [process.stop() for process in self.processes]

    def outputs(self) -> str:
        return "\n".join(f"--- {p.name} ({p.log})\n{p.output()}" for p in self.processes)

    def __enter__(self) -> ServiceProcesses:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = [
    "ServiceProcess",
    "ServiceProcesses",
    "free_port",
    "service_environment",
]
