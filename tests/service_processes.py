"""K ``apollo serve`` processes on this machine, each on an HTTP port of its own: the fleet
the drills and ``scripts/cluster`` run.

Each process is the real command (``python -m apollo_app.cli serve``) with the settings
given (the database URL through PgBouncer or straight to the primary, the replica's URL,
tokens, the embedder: :func:`service_environment`), none inherited from the caller's
``APOLLO_*`` variables, its own ``APOLLO_HTTP_PORT`` and data folder, and its output in
``service-<i>.log`` of the harness's folder. :meth:`ServiceProcesses.start` returns once
every process answers ``GET /api/apollo/health`` with 200. Processes are stopped by pid:
SIGTERM (the service's graceful stop: consumers drained, HTTP closed), then SIGKILL after a
grace period; :meth:`ServiceProcesses.kill9` kills one at once, as a crash would, and
:meth:`ServiceProcesses.restart` starts it again on the same port. Started from a test,
they also get SIGTERM when the test process dies (``tied_to_parent``).

    with ServiceProcesses(3, service_environment(database_url=...), folder) as fleet:
        httpx.post(fleet[0].api + "/ingest", json={"content": "..."})
        fleet.kill9(1)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

import apollo_app
from tests.environ import without_apollo_settings
from tests.processes import alive, free_port, kill9, stop_pid, stop_with_parent

#: The ``src`` folder of this checkout: the processes import the Apollo under test.
SOURCES = str(Path(apollo_app.__file__).resolve().parents[1])
START_SECONDS = 120.0
#: SIGTERM to SIGKILL: the service's own stop gives periodic work 10 s.
STOP_SECONDS = 20.0
#: What identifies a service process in ``/proc/<pid>/cmdline`` (checked before a pid
#: from a state file is signalled).
COMMAND_MARK = "apollo_app.cli serve"


def service_environment(
    *,
    database_url: str,
    migration_database_url: str | None = None,
    pooler: str | None = None,
    read_database_url: str | None = None,
    api_tokens: str | None = None,
    embedder: str = "hashing",
    amqp_url: str | None = None,
    **settings: object,
) -> dict[str, str]:
    """The ``APOLLO_*`` variables of a fleet's service process. ``settings`` are further
    ones by their lower-case name without the prefix (``pool_max=4`` →
    ``APOLLO_POOL_MAX=4``)."""
    env = {"APOLLO_DATABASE_URL": database_url, "APOLLO_EMBEDDER": embedder}
    named = {
        "APOLLO_MIGRATION_DATABASE_URL": migration_database_url,
        "APOLLO_DATABASE_POOLER": pooler,
        "APOLLO_READ_DATABASE_URL": read_database_url,
        "APOLLO_API_TOKENS": api_tokens,
        "APOLLO_AMQP_URL": amqp_url,
    }
    env.update({name: value for name, value in named.items() if value is not None})
    env.update({f"APOLLO_{name.upper()}": str(value) for name, value in settings.items()})
    return env


class ServiceProcess:
    """One ``apollo serve`` process (not started until :meth:`start`)."""

    def __init__(
        self,
        index: int,
        settings: Mapping[str, str],
        folder: Path,
        *,
        port: int | None = None,
        tied_to_parent: bool = True,
    ) -> None:
        self.index = index
        self.settings = dict(settings)
        self.folder = folder
        self.port = port or free_port()
        self.tied_to_parent = tied_to_parent
        self.log = folder / f"service-{index}.log"
        self.data_dir = folder / f"service-{index}"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api(self) -> str:
        """The HTTP API's root, ``http://127.0.0.1:<port>/api/apollo``."""
        return f"{self.base}/api/apollo"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def running(self) -> bool:
        pid = self.pid
        return pid is not None and alive(pid, self.process)

    def environment(self) -> dict[str, str]:
        env = without_apollo_settings()
        env["PYTHONPATH"] = os.pathsep.join([SOURCES, *filter(None, [env.get("PYTHONPATH")])])
        env.update(self.settings)
        env.update(
            APOLLO_HTTP_HOST="127.0.0.1",
            APOLLO_HTTP_PORT=str(self.port),
            APOLLO_DATA_DIR=str(self.data_dir),
        )
        return env

    def start(self) -> None:
        """Start the process (returns at once; :meth:`wait_healthy` waits for it)."""
        if self.running:
            raise RuntimeError(f"service {self.index} runs already (pid {self.pid})")
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "apollo_app.cli", "serve"],
                env=self.environment(),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=not self.tied_to_parent,
                preexec_fn=stop_with_parent if self.tied_to_parent else None,
            )

    def healthy(self) -> bool:
        """Whether ``/health`` answers 200 now; fails when the process has exited."""
        if not self.running:
            raise RuntimeError(f"service {self.index} exited; its log:\n{self.tail()}")
        try:
            return httpx.get(f"{self.api}/health", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_healthy(self, seconds: float = START_SECONDS) -> None:
        deadline = time.monotonic() + seconds
        while not self.healthy():
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"service {self.index} did not answer /health in {seconds:g}s:\n{self.tail()}"
                )
            time.sleep(0.05)  # polling a service that starts; no ordering depends on it

    def stop(self, grace: float = STOP_SECONDS) -> None:
        """SIGTERM, up to ``grace`` seconds for the graceful stop, then SIGKILL."""
        pid = self.pid
        if pid is not None:
            stop_pid(pid, grace=grace, child=self.process)
        self.process = None

    def kill9(self) -> None:
        """SIGKILL, as a crash: nothing in flight is finished or rolled back by the process."""
        pid = self.pid
        if pid is not None:
            kill9(pid, child=self.process)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class ServiceProcesses:
    """``count`` service processes, all with ``settings`` (or ``settings(i)`` each)."""

    def __init__(
        self,
        count: int,
        settings: Mapping[str, str] | Callable[[int], Mapping[str, str]],
        folder: Path,
        *,
        tied_to_parent: bool = True,
        ports: list[int] | None = None,
    ) -> None:
        self.folder = folder
        self.services = [
            ServiceProcess(
                i,
                settings(i) if callable(settings) else settings,
                folder,
                port=ports[i] if ports else None,
                tied_to_parent=tied_to_parent,
            )
            for i in range(count)
        ]

    def __len__(self) -> int:
        return len(self.services)

    def __getitem__(self, index: int) -> ServiceProcess:
        return self.services[index]

    def __iter__(self) -> Iterator[ServiceProcess]:
        return iter(self.services)

    @property
    def apis(self) -> list[str]:
        """Each process's HTTP API root, in order."""
        return [service.api for service in self.services]

    @property
    def pids(self) -> list[int | None]:
        return [service.pid for service in self.services]

    def start(self, seconds: float = START_SECONDS) -> ServiceProcesses:
        """Start every process at once, then wait until each answers ``/health``; on a
        failure, stop the ones started and raise with the failed one's log."""
        try:
            for service in self.services:
                service.start()
            for service in self.services:
                service.wait_healthy(seconds)
        except BaseException:
            self.stop()
            raise
        return self

    def restart(self, index: int, seconds: float = START_SECONDS) -> None:
        """Start process ``index`` again (after :meth:`kill9` or a stop), on the same port."""
        service = self.services[index]
        service.stop()
        service.start()
        service.wait_healthy(seconds)

    def kill9(self, index: int) -> None:
        self.services[index].kill9()

    def stop(self, grace: float = STOP_SECONDS) -> None:
        """Stop every process: SIGTERM to all, then each waited for (SIGKILL after
        ``grace``)."""
        for service in self.services:
            pid = service.pid
            if pid is not None and service.running:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        for service in self.services:
            service.stop(grace)

    def __enter__(self) -> ServiceProcesses:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


__all__ = ["COMMAND_MARK", "ServiceProcess", "ServiceProcesses", "service_environment"]
