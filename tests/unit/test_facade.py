"""The public surface of apollo_app: exports, the blocking twin, client defaults."""

from __future__ import annotations

import apollo_app
from apollo_app import Apollo, BlockingApollo, Outcome, Principal, Status


def test_public_names_resolve():
    """Every name apollo_app exports exists, and the core ones are exported."""
    for name in apollo_app.__all__:
        assert getattr(apollo_app, name) is not None
    assert {"Apollo", "Client", "Settings", "Principal", "IngestResult", "QueryResult"} <= set(
        apollo_app.__all__
    )


def test_blocking_twin_runs_the_same_use_cases():
    """A synchronous caller stores and finds knowledge through BlockingApollo."""
    with BlockingApollo.in_memory() as apollo:
        client = apollo.client(agent_id="claude-sync", principal=Principal("alice"))
        stored = client.store_knowledge(content="Synchronous callers are served too")
        assert stored.outcome == Outcome.CREATED
        found = client.query_knowledge(query="synchronous callers served", min_confidence=0.0)
        assert [stored.entry_id] == [e.id for e in found.entries]
        assert apollo.get_entry(stored.entry_id).status == Status.CANDIDATE


async def test_in_memory_defaults_work_without_arguments():
    """None everywhere: hashing embedder, system clock, heuristic judge, default policy."""
    async with Apollo.in_memory() as apollo:
        client = apollo.client("claude-1")
        first = await client.store_knowledge(content="Postgres uses MVCC for concurrency")
        found = await client.query_knowledge(query="postgres concurrency mvcc")
        assert first.entry_id == found.entries[0].id
        assert apollo.policy.initial_confidence == 0.5
