"""The ``apollo`` process under faults: crashes, a killed postmaster, concurrent first
starts, a busy HTTP port and a closed stdout.

Each test runs the real command in subprocesses on a data folder of its own, and checks
the embedded PostgreSQL through ``/proc`` (a process whose command line names the data
folder, or whose working directory is it). Every wait polls with a deadline.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

import apollo_app
from tests.environ import without_apollo_settings

DEADLINE = 180.0
SOURCES = str(Path(apollo_app.__file__).resolve().parents[1])


def environment(data_dir: Path, **extra: str) -> dict[str, str]:
    environ = without_apollo_settings()
    environ["PYTHONPATH"] = os.pathsep.join([SOURCES, *filter(None, [environ.get("PYTHONPATH")])])
    environ["APOLLO_DATA_DIR"] = str(data_dir)
    environ.update(extra)
    return environ


def apollo(*args: str) -> list[str]:
    return [sys.executable, "-m", "apollo_app.cli", *args]


def run(data_dir: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        apollo(*args),
        env=environment(data_dir, **extra),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )


def eventually(condition: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout:g} s: {what}")
        time.sleep(0.05)


def postgres_processes(pgdata: Path) -> list[str]:
    """Live processes of ``pgdata``'s server, as "pid command" lines (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue  # gone meanwhile
        if stat[stat.rindex(")") + 2] == "Z":
            continue  # a zombie holds nothing
        if cwd == str(pgdata) or str(pgdata) in command:
            found.append(f"{entry.name} {command}")
    return found


def postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().split()[0])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Service:
    """``apollo serve`` on a data folder and a port of its own."""

    def __init__(self, data_dir: Path, log: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/api/apollo"
        self.log = log
        with log.open("a") as output:
            self.process = subprocess.Popen(
                apollo("serve"),
                env=environment(data_dir, APOLLO_HTTP_PORT=str(self.port)),
                stdout=output,
                stderr=output,
            )
        eventually(self.healthy, "apollo serve answers /health")

    def healthy(self) -> bool:
        if self.process.poll() is not None:
            pytest.fail(f"apollo serve exited: {self.log.read_text()}")
        try:
            return httpx.get(f"{self.base}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def ingest(self, content: str) -> None:
        response = httpx.post(f"{self.base}/ingest", json={"content": content}, timeout=30)
        assert response.is_success, response.text

    def crash(self) -> None:
        self.process.kill()
        self.process.wait(timeout=DEADLINE)

    def stop(self) -> tuple[int, str]:
        """SIGTERM, the clean way to stop the service; its exit status and its output."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=DEADLINE), self.log.read_text()


@pytest.fixture
def data_dir(server_folder: Path) -> Iterator[Path]:
    folder = server_folder / "apollo-data"
    yield folder
    pgdata = folder / "postgres"
    for line in postgres_processes(pgdata):  # never leave a server behind, even on failure
        os.kill(int(line.split()[0]), signal.SIGKILL)


@pytest.mark.postgres
def test_a_clean_stop_after_a_crash_mid_ingest_leaves_no_server(data_dir: Path) -> None:
    """kill -9 of ``apollo serve`` while HTTP ingests run leaves its PostgreSQL running;
    the next run adopts that server, and its clean stop stops it: nothing is left."""
    pgdata = data_dir / "postgres"
    service = Service(data_dir, data_dir.parent / "serve.log")
    ingested = threading.Event()
    halt = threading.Event()
    failures: list[BaseException] = []

    def ingest_in_a_loop() -> None:
        count = 0
        while not halt.is_set():
            try:
                service.ingest(f"fact number {count} about the mesh")
            except (httpx.HTTPError, AssertionError) as exc:
                if not halt.is_set():
                    failures.append(exc)
                    ingested.set()  # nothing more will come: stop waiting
                return
            count += 1
            if count == 5:
                ingested.set()

    loop = threading.Thread(target=ingest_in_a_loop)
    loop.start()
    try:
        assert ingested.wait(timeout=DEADLINE)
        assert [] == failures
        halt.set()  # what fails from here on is the crash's doing, not a fault
        service.crash()  # mid-ingest: the loop is still posting
    finally:
        halt.set()
        loop.join(timeout=DEADLINE)
    assert [] == failures
    assert postgres_processes(pgdata), "the crash leaves the server running"

    restarted = Service(data_dir, data_dir.parent / "serve.log")
    restarted.ingest("written after the restart")
    status, stderr = restarted.stop()

    assert 0 == status, stderr
    assert [] == postgres_processes(pgdata)


@pytest.mark.postgres
def test_a_restart_right_after_the_postmaster_was_killed_starts_a_new_server(
    data_dir: Path,
) -> None:
    """A ``postmaster.pid`` whose process is dead or still a zombie is cleaned up and a new
    server started (adopting the dead one would fail every connection)."""
    pgdata = data_dir / "postgres"
    service = Service(data_dir, data_dir.parent / "serve.log")
    os.kill(postmaster_pid(pgdata), signal.SIGKILL)

    stats = run(data_dir, "stats", "--json")
    status, stderr = service.stop()

    assert 0 == stats.returncode, stats.stderr
    assert '"total"' in stats.stdout
    assert 0 == status, stderr
    assert [] == postgres_processes(pgdata)


@pytest.mark.postgres
@pytest.mark.parametrize("attempt", range(3))
def test_two_commands_starting_together_on_a_new_data_folder_both_succeed(
    data_dir: Path, attempt: int
) -> None:
    """Concurrent first starts take turns under the data folder's lock: one initializes
    the folder and creates the database, the other adopts the server."""
    environ = environment(data_dir)
    commands = [
        subprocess.Popen(
            apollo("stats", "--json"),
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [(p.wait(timeout=DEADLINE), *p.communicate(timeout=DEADLINE)) for p in commands]

    assert [0, 0] == [status for status, _, _ in results], results
    assert [] == postgres_processes(data_dir / "postgres")


def test_a_busy_port_fails_in_one_line_before_anything_runs(data_dir: Path) -> None:
    """A second ``apollo serve`` on a busy port: one ``apollo: error:`` line, exit 1, and
    it never says it is running (nor starts a database)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run(data_dir, "serve", APOLLO_HTTP_PORT=str(port))

    assert 1 == result.returncode
    lines = result.stderr.splitlines()
    assert 1 == len(lines), result.stderr
    assert lines[0].startswith("apollo: error: ")
    assert str(port) in lines[0]
    assert "running" not in result.stdout + result.stderr
    assert not (data_dir / "postgres").exists()


@pytest.mark.postgres
def test_a_closed_stdout_ends_the_command_quietly(data_dir: Path) -> None:
    """``apollo stats | head``: the reader went away before the output; no traceback, the
    SIGPIPE status, and the embedded server is still stopped."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    try:
        result = subprocess.run(
            apollo("stats"),
            env=environment(data_dir),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=DEADLINE,
        )
    finally:
        os.close(write_end)

    # Only the note that a new, empty store was created (when this test made it).
    assert [] == [x for x in result.stderr.splitlines() if not x.startswith("apollo: note: ")]
    assert 128 + signal.SIGPIPE == result.returncode
    assert [] == postgres_processes(data_dir / "postgres")


@pytest.mark.postgres
def test_stats_piped_into_head_prints_no_traceback(data_dir: Path) -> None:
    """The shell pipeline itself: whatever the timing, the first lines and no traceback."""
    command = " ".join(f"'{part}'" for part in apollo("stats")) + " | head -2"
    result = subprocess.run(
        ["/bin/sh", "-c", command],
        env=environment(data_dir),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )

    assert 0 == result.returncode
    assert "entries:" in result.stdout
    assert 2 == len(result.stdout.splitlines())
    assert "Traceback" not in result.stderr
