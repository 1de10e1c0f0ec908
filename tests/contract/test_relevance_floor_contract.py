"""The relevance floor (docs/retrieval.md, "How retrieval works"): a vector match below the
embedder's calibrated floor is neither returned nor boosted; a lexical or graph match is
relevant on its own. On every store adapter."""

from __future__ import annotations

import pytest
from attrs import evolve

from apollo_adapters.embedders import HashingEmbedder
from tests.support import KeyedEmbedder, at_cosine

FACTS = (
    "Redis keeps the whole dataset in memory and persists it with RDB snapshots",
    "PostgreSQL uses MVCC, so readers never block writers",
    "The metrics exporter is enabled on port 9187",
    "BGP sessions use TCP port 179",
    "Kafka retains messages for seven days by default",
    "RabbitMQ quorum queues replicate messages with Raft",
    "Kubernetes restarts a pod whose liveness probe fails three times",
    "TLS 1.3 removed RSA key exchange",
)


async def _confidences(apollo, ids):
    return [(await apollo.get_entry(i)).confidence for i in ids]


@pytest.mark.parametrize("mode", ["hybrid", "vector"])
async def test_an_unrelated_query_returns_nothing_and_boosts_nothing(make_apollo, mode):
    """With the default hashing embedder (its floor 0.15), "xylophone quantum marmalade"
    finds nothing among technical facts (its best cosine with them is 0.14); a related
    question still finds its fact."""
    apollo = await make_apollo(embedder=HashingEmbedder())
    writer = apollo.client("claude-writer")
    ids = [(await writer.store_knowledge(content=fact)).entry_id for fact in FACTS]
    reader = apollo.client("reader")

    result = await reader.query_knowledge(query="xylophone quantum marmalade", mode=mode)

    assert () == result.entries
    assert [0.5] * len(FACTS) == await _confidences(apollo, ids)
    async with apollo.store.unit_of_work() as uow:
        assert 0 == await uow.access_log.count("query")
    related = await reader.query_knowledge(
        query="Which port does the metrics exporter listen on?", mode=mode
    )
    assert ids[2] == related.entries[0].id


async def test_vector_matches_below_the_floor_are_left_out_before_ranking(make_apollo):
    """Floor 0.5: the entry at 0.55 is returned and boosted, the one at 0.45 is neither."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    apollo.deps = evolve(apollo.deps, retrieval=evolve(apollo.deps.retrieval, relevance_floor=0.5))
    base = embedder.basis(0)
    embedder.set("probe", base)
    embedder.set("close enough", at_cosine(base, 0.55, 1))
    embedder.set("too far", at_cosine(base, 0.45, 2))
    writer = apollo.client("claude-writer")
    close = (await writer.store_knowledge(content="close enough")).entry_id
    far = (await writer.store_knowledge(content="too far")).entry_id

    result = await apollo.client("reader").query_knowledge(query="probe", mode="vector")

    assert [close] == [e.id for e in result.entries]
    assert [pytest.approx(0.52), 0.5] == await _confidences(apollo, [close, far])


async def test_a_lexical_match_is_relevant_below_the_vector_floor(make_apollo):
    """A text holding the query's own term is found by the lexical signal however far its
    vector is; the vector signal does not vouch for it."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    apollo.deps = evolve(apollo.deps, retrieval=evolve(apollo.deps.retrieval, relevance_floor=0.5))
    base = embedder.basis(0)
    embedder.set("zookeeper quorum", base)
    embedder.set("the zookeeper ensemble elects a leader", at_cosine(base, 0.2, 1))
    entry = await apollo.client("claude-writer").store_knowledge(
        content="the zookeeper ensemble elects a leader"
    )

    result = await apollo.client("reader").query_knowledge(query="zookeeper quorum")

    assert [(entry.entry_id, ("lexical",))] == [(e.id, tuple(e.signals)) for e in result.entries]
    assert [pytest.approx(0.52)] == await _confidences(apollo, [entry.entry_id])
