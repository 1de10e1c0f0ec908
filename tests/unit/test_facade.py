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


async def test_remote_store_many_publishes_one_batch_and_returns_its_envelopes():
    """Client mode: store_many validates every item, hands the whole batch to the bus's
    publish_many in item order and returns one Dispatch per item, carrying its message id.
    A bad item publishes nothing."""
    import json

    import pytest

    from apollo_app import RemoteClient
    from apollo_domain.errors import ValidationError
    from apollo_domain.ports.topology import Topology

    class BatchBus:
        login = "guest"

        def __init__(self):
            self.batches = []

        async def publish_many(self, messages, *, exchange=None):
            self.batches.append((list(messages), exchange))

    bus = BatchBus()
    client = RemoteClient(bus, agent_id="claude-batch")
    dispatches = await client.store_many(
        [{"content": "First note"}, {"content": "  Second note ", "tags": ["Ops"]}]
    )

    ((batch, exchange),) = bus.batches
    assert exchange is None
    assert [d.message_id for d in dispatches] == [m.message_id for m in batch]
    assert 2 == len({m.message_id for m in batch})
    assert ["store_knowledge", "store_knowledge"] == [d.action for d in dispatches]
    assert ["First note", "Second note"] == [d.payload["content"] for d in dispatches]
    assert [d.payload["content"] for d in dispatches] == [
        json.loads(m.body)["payload"]["content"] for m in batch
    ]
    assert {(Topology().ingest_queue, "guest")} == {(m.routing_key, m.user_id) for m in batch}

    with pytest.raises(ValidationError, match=r"items\[1\]\.content"):
        await client.store_many([{"content": "fine"}, {"content": ""}])
    assert 1 == len(bus.batches)
