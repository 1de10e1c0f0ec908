"""The MCP conformance suite (npm ``@modelcontextprotocol/conformance``) against ``/mcp``.

Its server scenarios that apply to a server with tools of its own pass; those that do not
(fixture tools and resources of its reference server, prompts, logging, subscriptions) are
listed with the reason in ``tests/conformance/mcp-baseline.yml``, which the suite checks
both ways (a listed scenario that passes fails the run too). ``scripts/test`` installs the
suite and the Node.js it needs (22 or later) into ``.cache/mcp-conformance``; without them
the test skips on a developer machine and fails under CI."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from apollo_app import Apollo
from apollo_app.entrypoints.http import HttpServer, create_app

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".cache" / "mcp-conformance" / "node_modules" / ".bin"
BASELINE = ROOT / "tests" / "conformance" / "mcp-baseline.yml"
#: The scenarios Apollo must pass (each with at least one successful check).
PASSING = ("server-initialize", "ping", "tools-list", "resources-list", "dns-rebinding-protection")
RUN_SECONDS = 180


def _suite() -> tuple[str, str]:
    node, conformance = TOOLS / "node", TOOLS / "conformance"
    if not (node.exists() and conformance.exists()):
        reason = f"the MCP conformance suite is not installed in {TOOLS.parent.parent}"
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false"):
            pytest.fail(f"{reason}; CI runs it (scripts/test installs it)")
        pytest.skip(f"{reason} (scripts/test installs it)")
    return str(node), str(conformance)


async def test_the_scenarios_that_apply_pass_and_the_others_are_the_baseline(
    tmp_path: Path,
) -> None:
    node, conformance = _suite()
    results = tmp_path / "results"
    async with Apollo.in_memory() as apollo, HttpServer(create_app(apollo)) as server:
        url = f"http://localhost:{server.port}/mcp"  # no tokens: the loopback-only mode
        process = await asyncio.create_subprocess_exec(
            node,
            conformance,
            "server",
            "--url",
            url,
            "--suite",
            "all",
            "--expected-failures",
            str(BASELINE),
            "-o",
            str(results),
            cwd=tmp_path,
            env={**os.environ, "PATH": f"{TOOLS}{os.pathsep}{os.environ.get('PATH', '')}"},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(process.communicate(), RUN_SECONDS)
    report = output.decode(errors="replace")
    assert 0 == process.returncode, report[-4000:]
    for scenario in PASSING:
        (folder,) = results.glob(f"server-{scenario}-*")
        checks = json.loads((folder / "checks.json").read_text())
        statuses = {check["status"] for check in checks}
        assert "SUCCESS" in statuses and "FAILURE" not in statuses, (scenario, checks)
    shutil.rmtree(results, ignore_errors=True)
