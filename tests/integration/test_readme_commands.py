"""Every shell block of README.md and of the docs pages marked runnable (an
``<!-- runnable -->`` line right above it) runs as pasted, in a fresh folder, against a
real ``apollo``.

A block that calls the HTTP API on ``localhost:8765`` gets a real ``apollo serve`` (on a
free port, which replaces 8765 in the block), started with the ``APOLLO_*`` variables the
block exports. ``curl`` fails on an HTTP error, so a refused request fails the block; and
no block may store a placeholder such as ``...`` as knowledge.
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from apollo_adapters.postgres.embedded import temporary_folder
from tests.docs_pages import documentation
from tests.environ import without_apollo_settings
from tests.integration.test_cli import APOLLO

pytestmark = pytest.mark.postgres

MARK = "<!-- runnable -->"
PORT_IN_README = "localhost:8765"
DEADLINE = 120.0
#: Fails the block on an HTTP error status and ends each answer with a newline.
CURL = 'curl() { command curl --fail-with-body "$@"; echo; }\n'


def runnable_blocks() -> list[str]:
    """The shell blocks that follow a runnable mark, README first, then the docs pages in
    nav order; a block shown twice (the quick start) runs once."""
    blocks: list[str] = []
    for path in documentation():
        for block in re.findall(
            rf"^{re.escape(MARK)}\n```(?:sh|bash)\n(.*?)^```$",
            path.read_text(),
            flags=re.DOTALL | re.M,
        ):
            if block not in blocks:
                blocks.append(block)
    return blocks


def _exports(block: str) -> dict[str, str]:
    """The ``APOLLO_*`` variables the block exports."""
    found = {}
    for line in block.splitlines():
        if line.startswith("export APOLLO_"):
            name, _, value = line.removeprefix("export ").partition("=")
            found[name] = shlex.split(value.split("#", 1)[0])[0]
    return found


def _environment(**extra: str) -> dict[str, str]:
    environ = without_apollo_settings()
    environ.update(extra)
    return environ


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def _serving(folder: Path, settings: dict[str, str]) -> Iterator[int]:
    """``apollo serve`` with ``settings``, a data folder in ``folder``, on a free port."""
    port = _free_port()
    log = folder / "serve.log"
    environ = _environment(
        **settings, APOLLO_DATA_DIR=str(folder / "served"), APOLLO_HTTP_PORT=str(port)
    )
    with log.open("w") as output:
        process = subprocess.Popen(
            [APOLLO, "serve"], env=environ, stdout=output, stderr=output, cwd=folder
        )
    try:
        deadline = time.monotonic() + DEADLINE
        while True:
            if process.poll() is not None:
                pytest.fail(f"apollo serve exited: {log.read_text()}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/apollo/health").is_success:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"apollo serve did not answer within {DEADLINE:g} s")
            time.sleep(0.2)
        yield port
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=DEADLINE)


def _stored(port: int, settings: dict[str, str]) -> list[str]:
    """The content of every entry the block left (as an admin when there are tokens)."""
    headers = {}
    tokens = settings.get("APOLLO_API_TOKENS", "")
    admin = [t.split("=", 1)[0] for t in tokens.split(",") if t.endswith(":admin")]
    if admin:
        headers["Authorization"] = f"Bearer {admin[0]}"
    found = httpx.post(
        f"http://127.0.0.1:{port}/api/apollo/query",
        json={"query": "", "limit": 100, "min_confidence": 0},
        headers=headers,
    )
    assert found.is_success, found.text
    return [entry["content"] for entry in found.json()["entries"]]


def test_the_readme_marks_its_commands_runnable() -> None:
    """The quick start's own commands and the HTTP examples are marked."""
    blocks = runnable_blocks()
    assert any(".venv/bin/apollo ingest" in block for block in blocks)
    assert sum(PORT_IN_README in block for block in blocks) >= 2


@pytest.mark.parametrize("block", runnable_blocks(), ids=lambda b: b.splitlines()[0][:40])
def test_a_runnable_readme_block_runs_as_pasted(block: str) -> None:
    folder = temporary_folder("apollo-readme-")  # open to the embedded server's user
    try:
        venv = folder / ".venv" / "bin"
        venv.mkdir(parents=True)
        (venv / "apollo").symlink_to(APOLLO)
        settings = _exports(block)
        if PORT_IN_README not in block:
            _run_block(folder, block)
            return
        with _serving(folder, settings) as port:
            run = _run_block(folder, block.replace(PORT_IN_README, f"localhost:{port}"))
            stored = _stored(port, settings)
        assert stored, run.stdout

        placeholders = [text for text in stored if not text.strip(". ")]
        assert [] == placeholders, stored
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run_block(folder: Path, block: str) -> subprocess.CompletedProcess[str]:
    """Run a documented shell block under bash (stopping at its first failing command) in
    ``folder``; it must exit 0."""
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", CURL + block],
        cwd=folder,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert 0 == run.returncode, run.stdout + run.stderr
    return run
