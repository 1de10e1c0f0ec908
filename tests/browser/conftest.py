"""Fixtures of the browser tests: a real ``apollo serve`` (embedded PostgreSQL in a folder
of its own, tokens for an admin, a reader and a gateway that seeds it) and the system's
chromium driven by playwright.

Without ``/usr/bin/chromium`` (or playwright) these tests skip on a developer machine and
fail under CI (``CI`` set, e.g. ``CI=true``): CI must run them.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import apollo_app
from apollo_adapters.postgres.embedded import temporary_folder
from tests.environ import without_apollo_settings

CHROMIUM = Path("/usr/bin/chromium")
DEADLINE = 180.0
SOURCES = str(Path(apollo_app.__file__).resolve().parents[1])
ADMIN_TOKEN = "console-admin-token"
READER_TOKEN = "console-reader-token"
GATEWAY_TOKEN = "console-gateway-token"
TOKENS = f"{ADMIN_TOKEN}=ada:admin,{READER_TOKEN}=rita:reader,{GATEWAY_TOKEN}=mesh:gateway"


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false"):
        pytest.fail(f"{reason}; CI runs the browser tests (scripts/test installs chromium)")
    pytest.skip(reason)


def _eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {DEADLINE:g} s: {what}")
        time.sleep(0.1)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _server_processes(pgdata: Path) -> list[int]:
    """Live processes of the embedded server of ``pgdata`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd == str(pgdata) or str(pgdata) in command:
            found.append(int(entry.name))
    return found


class Service:
    """``apollo serve`` as a user runs it, plus an HTTP client for seeding and checking."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "serve.log"
        environ = without_apollo_settings()
        environ["PYTHONPATH"] = os.pathsep.join(
            [SOURCES, *filter(None, [environ.get("PYTHONPATH")])]
        )
        environ.update(
            APOLLO_DATA_DIR=str(folder / "data"),
            APOLLO_HTTP_PORT=str(self.port),
            APOLLO_API_TOKENS=TOKENS,
            APOLLO_OUTBOX_INTERVAL="0.2",
        )
        with self.log.open("w") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "apollo_app.cli", "serve"],
                env=environ,
                stdout=output,
                stderr=output,
            )
        self.http = httpx.Client(base_url=f"{self.url}/api/apollo", timeout=30)
        try:
            _eventually(self._healthy, "apollo serve answers /health")
        except BaseException:
            self.stop()
            raise

    def _healthy(self) -> bool:
        if self.process.poll() is not None:
            pytest.fail(f"apollo serve exited: {self.log.read_text()}")
        try:
            return self.http.get("/health").status_code == 200
        except httpx.HTTPError:
            return False

    def call(self, method: str, path: str, token: str = GATEWAY_TOKEN, **kw: Any) -> Any:
        response = self.http.request(
            method, path, headers={"Authorization": f"Bearer {token}"}, **kw
        )
        assert response.is_success, response.text
        return response.json()

    def ingest(self, content: str, agent: str, **fields: Any) -> str:
        body = {"content": content, "agent_id": agent, **fields}
        return str(self.call("POST", "/ingest", json=body)["entry_id"])

    def entry(self, entry_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.call("GET", f"/entries/{entry_id}", token=ADMIN_TOKEN)
        return result

    def wait_for_status(self, entry_id: str, status: str) -> None:
        _eventually(lambda: self.entry(entry_id)["status"] == status, f"{entry_id} is {status}")

    def stop(self) -> None:
        self.http.close()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=DEADLINE)
        finally:
            for pid in _server_processes(self.folder / "data" / "postgres"):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    # Not tmp_path: that folder is closed (0700) to the embedded server's system user.
    folder = temporary_folder("apollo-console-")
    try:
        running = Service(folder)
        try:
            yield running
        finally:
            running.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists() or shutil.which(str(CHROMIUM)) is None:
        _missing(f"{CHROMIUM} is not installed")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[dev]')")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser tab (its own sessionStorage) that records console errors."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(20_000)
    tab.errors = []
    tab.on("pageerror", lambda error: tab.errors.append(str(error)))
    try:
        yield tab
    finally:
        context.close()
