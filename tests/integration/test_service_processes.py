"""The service-process harness (``tests/service_processes.py``): real ``apollo serve``
processes on one PostgreSQL database, each on its own port, stopped by pid."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from apollo_adapters.postgres.embedded import temporary_folder
from tests.postgres_support import PostgresTestServer, scalar
from tests.processes import alive
from tests.service_processes import ServiceProcesses, service_environment

pytestmark = [pytest.mark.postgres, pytest.mark.cluster]


@pytest.fixture
def folder() -> Iterator[Path]:
    made = temporary_folder("apollo-services-")
    yield made
    import shutil

    shutil.rmtree(made, ignore_errors=True)


async def test_two_processes_share_one_database_and_die_by_pid(
    postgres_server: PostgresTestServer, folder: Path
) -> None:
    """What one process stores, the other finds; ``kill9`` ends one at once while the
    other goes on serving; ``restart`` brings it back on its port; ``stop`` ends both."""
    database = await postgres_server.create_database(dimension=384)
    conninfo = postgres_server.conninfo(database)
    fleet = ServiceProcesses(2, service_environment(database_url=conninfo), folder)
    try:
        await asyncio.to_thread(fleet.start)
        first, second = fleet
        assert first.port != second.port
        async with httpx.AsyncClient(timeout=30) as http:
            stored = await http.post(
                f"{first.api}/ingest", json={"content": "BGP routes converge after a flap"}
            )
            assert 201 == stored.status_code, stored.text
            found = await http.post(
                f"{second.api}/query", json={"query": "BGP routes converge", "min_confidence": 0}
            )
            assert found.is_success, found.text
            ids = [e["id"] for e in found.json()["entries"]]
            assert stored.json()["entry_id"] in ids

            killed = first.pid
            assert killed is not None
            fleet.kill9(0)
            assert not alive(killed)
            assert (await http.get(f"{second.api}/health")).status_code == 200
            with pytest.raises(httpx.ConnectError):
                await http.get(f"{first.api}/health")

            port = first.port
            await asyncio.to_thread(fleet.restart, 0)
            assert port == first.port and killed != first.pid
            assert (await http.get(f"{first.api}/health")).status_code == 200
        pids = [pid for pid in fleet.pids if pid is not None]
    finally:
        await asyncio.to_thread(fleet.stop)
    assert 2 == len(pids) and not any(alive(pid) for pid in pids)
    assert 1 == await scalar(conninfo, "SELECT count(*) FROM entries")
    await postgres_server.drop_database(database)
