"""How the embedded server's processes are judged: zombies, reused pids, stale handles, the
data folder's lock. Real processes (``sleep``), no PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from apollo_adapters.postgres.postmaster import (
    FolderLock,
    Handle,
    Handles,
    ProcessRef,
    running_postmaster,
)
from apollo_domain.errors import StoreUnavailable

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2]


def eventually(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


def write_postmaster_pid(pgdata: Path, pid: int) -> None:
    pgdata.mkdir(exist_ok=True)
    lines = [str(pid), str(pgdata), "1700000000", "5432", str(pgdata), "", "0 0", "ready"]
    (pgdata / "postmaster.pid").write_text("\n".join(lines) + "\n")
    (pgdata / ".s.PGSQL.5432.lock").write_text(f"{pid}\n{pgdata}\n")


def test_a_zombie_postmaster_is_dead_its_files_go_and_it_is_reaped(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """A killed postmaster stays a zombie until its parent reaps it; kill(pid, 0) still
    succeeds, yet it serves nothing: its lock files are removed so a new server can start."""
    sleeper.kill()
    eventually(lambda: state(sleeper.pid) == "Z")
    pgdata = tmp_path / "pgdata"
    write_postmaster_pid(pgdata, sleeper.pid)

    assert running_postmaster(pgdata) is None
    assert not (pgdata / "postmaster.pid").exists()
    assert not (pgdata / ".s.PGSQL.5432.lock").exists()
    assert state(sleeper.pid) is None  # reaped, since it was this process's child


def test_a_postmaster_pid_reused_by_another_process_is_not_adopted(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """The pid runs, but not in this data folder: the file is stale."""
    pgdata = tmp_path / "pgdata"
    write_postmaster_pid(pgdata, sleeper.pid)

    assert running_postmaster(pgdata) is None
    assert not (pgdata / "postmaster.pid").exists()
    # Left alone: neither killed (a zombie, or gone) nor stopped; just started, it may
    # still be running rather than asleep.
    assert state(sleeper.pid) in ("R", "S", "D")


def test_a_live_postmaster_is_found(tmp_path: Path) -> None:
    pgdata = tmp_path / "pgdata"
    pgdata.mkdir()
    process = subprocess.Popen(["sleep", "60"], cwd=pgdata)  # works in the data folder
    try:
        write_postmaster_pid(pgdata, process.pid)
        found = running_postmaster(pgdata)
        assert found is not None
        assert (process.pid, 5432, pgdata, "ready") == (
            found.pid,
            found.port,
            found.socket_dir,
            found.status,
        )
        assert (pgdata / "postmaster.pid").exists()
    finally:
        process.kill()
        process.wait()


def test_handles_of_dead_or_reused_processes_are_pruned(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """A process killed without letting go leaves its handle; it no longer counts. A pid
    recorded with another start time is another process and does not count either."""
    handles = Handles(tmp_path)
    (tmp_path / Handles.LEGACY_FILE).write_text("[999999]")  # the wheel's list of old runs
    mine = Handle.new()
    crashed = Handle(ProcessRef.of(sleeper.pid), "crashed")
    reused = Handle(ProcessRef(sleeper.pid, -1), "reused")
    for handle in (mine, crashed, reused):
        handles.add(handle)
    assert [mine, crashed] == handles.live()

    sleeper.kill()
    sleeper.wait()
    assert [mine] == handles.live()
    assert not (tmp_path / Handles.LEGACY_FILE).exists()
    assert [] == handles.remove(mine)
    assert not handles.path.exists()


def test_the_folder_lock_excludes_a_second_holder_until_released(tmp_path: Path) -> None:
    path = tmp_path / ".pgdata.lock"
    with FolderLock(path, timeout=5.0), pytest.raises(StoreUnavailable):
        FolderLock(path, timeout=0.2).__enter__()
    with FolderLock(path, timeout=0.2):
        pass
