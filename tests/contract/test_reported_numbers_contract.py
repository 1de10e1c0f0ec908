"""One formatting rule for the numbers Apollo reports, and one name for an entry's id:
the same values from every store, through the library, HTTP and the CLI."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from apollo_adapters.clock import ManualClock
from apollo_app import Apollo
from apollo_app.cli.commands import query_to_json
from apollo_app.entrypoints.http import create_app
from apollo_domain.results import SCORE_DIGITS
from tests.contract.stores import EPOCH, open_store
from tests.support import KeyedEmbedder

API = "/api/apollo"
TEXT = "Globex keeps its build cache on the shared volume"
PROBE = "where is the build cache"


def _is_reported(value: float) -> bool:
    return value == round(value, SCORE_DIGITS)


async def _confidences(kind: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The confidences one store reports for an entry decayed for an hour and a second,
    then found once on each edge."""
    embedder = KeyedEmbedder(16)
    embedder.set(TEXT, embedder.basis(0))
    embedder.set(PROBE, embedder.basis(0))
    store = await open_store(kind, request, dimension=16, model_id=embedder.model_id)
    clock = ManualClock(EPOCH)
    try:
        apollo = Apollo.with_store(store, embedder=embedder, clock=clock)
        stored = await apollo.client("claude-7").store_knowledge(content=TEXT)
        clock.advance(hours=1, seconds=1)
        await apollo.run_decay_cycle()
        library = await apollo.client("reader").query_knowledge(query=PROBE, min_confidence=0)
        transport = httpx.ASGITransport(app=create_app(apollo))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            ingested = (await http.post(f"{API}/ingest", json={"content": TEXT})).json()
            found = (
                await http.post(f"{API}/query", json={"query": PROBE, "min_confidence": 0})
            ).json()
        cli = query_to_json(
            await apollo.client("reader").query_knowledge(query=PROBE, min_confidence=0)
        )
        return {
            "library": [e.confidence for e in library.entries],
            "http": [e["confidence"] for e in found["entries"]],
            "cli": [e["confidence"] for e in cli["entries"]],
            "ids": (
                stored.id == stored.entry_id,
                ingested["id"] == ingested["entry_id"],
                [e["id"] for e in found["entries"]] == [str(stored.id)],
                [e["id"] for e in cli["entries"]] == [str(stored.id)],
            ),
        }
    finally:
        await store.close()


@pytest.mark.postgres
async def test_every_store_and_edge_reports_the_same_confidences(
    request: pytest.FixtureRequest,
) -> None:
    """A confidence decayed over an hour and a second is no short decimal; each store and
    each edge reports it rounded to ``SCORE_DIGITS`` places, so the two stores agree
    exactly; results name an entry's id ``id`` (``entry_id`` stays, the same id)."""
    memory = await _confidences("memory", request)
    postgres = await _confidences("postgres", request)
    assert memory == postgres
    values = [v for edge in ("library", "http", "cli") for v in memory[edge]]
    assert 3 == len(values)
    assert all(_is_reported(v) for v in values), values
    assert (True, True, True, True) == memory["ids"]
