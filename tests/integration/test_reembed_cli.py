"""``apollo reembed`` for real: a hashing store moved to the default sentence model, with a
kill -9 midway and a second run that resumes it.

The kill lands at a point the test chooses: it holds a snapshot open, so the move commits
every batch and then waits, building the new vectors' index concurrently, for that
snapshot to end; the test kills it there (the index is left half built) and the second run
rebuilds the index and switches without embedding anything again."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.environ import without_apollo_settings
from tests.postgres_support import PostgresTestServer

pytestmark = pytest.mark.postgres

APOLLO = str(Path(sys.executable).parent / "apollo")
TIMEOUT = 180
#: Notes and a query each that shares its meaning and none of its words.
NOTES = {
    "The cat sat on the mat": "feline resting place",
    "The invoice is due at the end of the month": "when do we have to pay the bill",
}
FILLER = 36  # notes that mean something else, so the move takes several batches
BATCH = 8


def _run(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [APOLLO, *args], capture_output=True, text=True, env=env, input=stdin, timeout=TIMEOUT
    )


async def _blocked_by(conninfo: str, holder: int) -> bool:
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND %s = ANY(pg_blocking_pids(pid))",
            (holder,),
        )
        row = await cur.fetchone()
        return bool(row and row[0])


async def test_a_hashing_store_moves_to_the_default_model_and_a_kill_9_midway_resumes(
    postgres_server: PostgresTestServer, onnx_cache: Path, tmp_path: Path
) -> None:
    database = await postgres_server.create_database()
    conninfo = postgres_server.conninfo(database)
    old = without_apollo_settings() | {"APOLLO_DATABASE_URL": conninfo}
    new = {k: v for k, v in old.items() if k != "APOLLO_EMBEDDER"}
    new["APOLLO_ONNX_CACHE_DIR"] = str(onnx_cache)
    notes = [*NOTES, *(f"filler note {i}: lighthouse keeper log {i * 7919}" for i in range(FILLER))]
    lines = "".join(json.dumps({"content": n, "content_type": "fact"}) + "\n" for n in notes)
    stored = await asyncio.to_thread(_run, old, "ingest", "-", stdin=lines)
    assert 0 == stored.returncode, stored.stderr
    assert f"created {len(notes)}" in stored.stdout, stored.stdout

    # The paraphrase queries miss on the hashing store: no shared words.
    missed = await asyncio.to_thread(_run, old, "query", "feline resting place", "--json")
    assert 0 == missed.returncode, missed.stderr
    assert "The cat sat on the mat" not in [
        e["content"] for e in json.loads(missed.stdout)["entries"]
    ]

    # An open snapshot of the test's own: every batch commits, then the new index (built
    # concurrently) waits for the snapshot to end, and the run is killed there.
    async with await psycopg.AsyncConnection.connect(conninfo) as holder:
        await holder.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)
        await holder.execute("SELECT 1")
        progress = tmp_path / "progress.txt"
        with progress.open("w") as err:
            move = await asyncio.create_subprocess_exec(
                APOLLO,
                "reembed",
                "--batch-size",
                str(BATCH),
                env=new,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
            try:
                async with asyncio.timeout(TIMEOUT):
                    while not await _blocked_by(conninfo, holder.info.backend_pid):
                        assert move.returncode is None, progress.read_text()
                        await asyncio.sleep(0.05)  # polls a condition; the snapshot forces it
            finally:
                move.send_signal(signal.SIGKILL)
                await move.wait()
        await holder.rollback()
    shown = progress.read_text()
    assert f"0/{len(notes)} entries" in shown, shown  # the bar, drawn from the start

    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        cur = await conn.execute("SELECT count(embedding_next), count(*) FROM entries")
        done, total = await cur.fetchone() or (0, 0)
        cur = await conn.execute("SELECT embedding_model_id FROM apollo_store_meta")
        meta = await cur.fetchone()
    assert total == len(notes)
    assert done == len(notes), "a batch was left undone"  # the kill came after the batches
    assert meta is not None and meta[0].startswith("apollo-hashing"), meta

    resumed = await asyncio.to_thread(_run, new, "reembed", "--batch-size", str(BATCH))
    assert 0 == resumed.returncode, resumed.stdout + resumed.stderr
    assert "(resumed a move that had stopped)" in resumed.stdout, resumed.stdout
    assert f"{len(notes)}/{len(notes)} entries (100%)" in resumed.stderr, resumed.stderr
    assert f"{len(notes)} in all" in resumed.stdout, resumed.stdout
    assert ": 0 entries embedded by this run" in resumed.stdout, resumed.stdout  # none again

    for note, query in NOTES.items():  # now found by meaning, each note first
        answer = await asyncio.to_thread(_run, new, "query", query, "--json", "--limit", "3")
        assert 0 == answer.returncode, answer.stderr
        entries = json.loads(answer.stdout)["entries"]
        assert entries and note == entries[0]["content"], (query, entries)

    again = await asyncio.to_thread(_run, new, "reembed")
    assert 0 == again.returncode, again.stderr
    assert "nothing to move" in again.stdout, again.stdout
    refused = await asyncio.to_thread(_run, old, "stats")
    assert 2 == refused.returncode, refused.stdout
    assert "run `apollo reembed` to move the store" in refused.stderr, refused.stderr
