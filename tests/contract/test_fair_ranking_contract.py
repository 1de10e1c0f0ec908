"""Fair pages (docs/retrieval.md, "Fair pages"): a flood of one source's keyword-stuffed
variants holds at most ⌈limit / 3⌉ of a page while other sources match, the answer stays
near the top, one source's near-duplicates fold into one result, a source's only relevant
entry is never hidden, and a store of one source still fills its page. On every store
adapter, in every search mode, with the hashing embedder."""

from __future__ import annotations

import math
import random

import pytest
from benchmarks.flood_scenario import ANSWER, FACTS, QUERY, flood

from apollo_adapters.embedders import HashingEmbedder

LIMIT = 10
MODES = ["hybrid", "vector", "lexical"]


async def _seed(apollo, *, flood_agents: int = 1) -> None:
    for agent, facts in FACTS.items():
        writer = apollo.client(agent, principal=agent)
        for fact in facts:
            assert (await writer.store_knowledge(content=fact)).ok
    stored = 0
    for i, text in enumerate(flood()):
        writer = apollo.client(f"eve-{i % flood_agents}", principal="eve")
        stored += (await writer.store_knowledge(content=text)).ok
    assert stored > 150  # the flood is in the store


def _from_flood(view) -> bool:
    return view.source_agent.startswith("eve")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("flood_agents", [1, 20])
async def test_a_flood_holds_at_most_a_third_of_the_page_and_the_answer_stays_on_top(
    make_apollo, mode, flood_agents
):
    """200 variants from one principal (under one agent, or spread over 20): the reader's
    page of 10 holds at most 4 of them while the other writers' matching facts are there
    to fill it, and the exact answer is in the top 3."""
    apollo = await make_apollo(embedder=HashingEmbedder())
    await _seed(apollo, flood_agents=flood_agents)
    reader = apollo.client("reader")

    every = await reader.retrieve(query=QUERY, mode=mode, limit=100)
    matching_others = sum(not _from_flood(v) for v in every.entries)
    page = (await reader.query_knowledge(query=QUERY, mode=mode, limit=LIMIT)).entries

    cap = math.ceil(LIMIT / 3)
    flooded = sum(_from_flood(v) for v in page)
    assert matching_others >= 1
    assert flooded <= max(cap, LIMIT - matching_others)
    assert min(matching_others, LIMIT - cap) <= LIMIT - flooded
    assert ANSWER in [v.content for v in page[:3]]


@pytest.mark.parametrize("mode", MODES)
async def test_the_flood_fills_the_page_only_after_every_other_source(make_apollo, mode):
    """Whatever the mode, every other source's result on the page ranks before the flood's
    results beyond its share (the fill comes last)."""
    apollo = await make_apollo(embedder=HashingEmbedder())
    await _seed(apollo)
    page = (await apollo.client("reader").query_knowledge(query=QUERY, mode=mode)).entries

    cap = math.ceil(LIMIT / 3)
    positions = [i for i, v in enumerate(page) if _from_flood(v)]
    beyond_share = positions[cap:]
    others = [i for i, v in enumerate(page) if not _from_flood(v)]
    assert all(o < b for o in others for b in beyond_share)


@pytest.mark.parametrize("mode", MODES)
async def test_a_sources_only_relevant_entry_is_never_hidden(make_apollo, mode):
    """Dave stores one fact about static membership among the flood; it is on the page."""
    apollo = await make_apollo(embedder=HashingEmbedder())
    await _seed(apollo)
    dave = "Kafka static membership needs a distinct group.instance.id per consumer"
    assert (await apollo.client("dave", principal="dave").store_knowledge(content=dave)).ok

    page = (await apollo.client("reader").query_knowledge(query=QUERY, mode=mode)).entries

    assert dave in [v.content for v in page]


@pytest.mark.parametrize("mode", MODES)
async def test_a_store_with_a_single_source_still_returns_a_full_page(make_apollo, mode):
    """One writer, twelve distinct matching facts: the page of 10 is as full as the
    relevance rule allows (every one of the twelve in the fused modes), and it is that
    source's own ranking, cut to the limit."""
    apollo = await make_apollo(embedder=HashingEmbedder())
    writer = apollo.client("alice", principal="alice")
    facts = [fact for facts in FACTS.values() for fact in facts] + [
        "Kafka static membership delays a rebalance until session.timeout.ms passes",
        "Kafka consumers of one group share the partitions of the topics they subscribe to",
    ]
    for fact in facts:
        assert (await writer.store_knowledge(content=fact)).ok
    reader = apollo.client("reader")

    every = (await reader.retrieve(query=QUERY, mode=mode, limit=100)).entries
    page = (await reader.query_knowledge(query=QUERY, mode=mode)).entries

    if mode != "vector":  # the vector signal's relevance floor leaves some out
        assert len(facts) == len(every)
    assert min(LIMIT, len(every)) == len(page)
    assert [v.id for v in every[:LIMIT]] == [v.id for v in page]
    assert all(v.folded == 0 for v in page)


async def test_a_sources_template_variants_fold_into_one_result(make_apollo):
    """One template filled in again and again ("… offer 1", "… offer 2", in any word
    order) by one source is one result with ``folded`` counting the rest; the same text of
    another source is not folded into it."""
    apollo = await make_apollo(embedder=HashingEmbedder())
    spam = apollo.client("eve", principal="eve")
    base = ["kafka", "static", "membership", "keeps", "partitions", "stable", "EveCloud"]
    stored = 0
    for i in range(8):
        words = random.Random(i).sample(base, len(base))
        stored += (await spam.store_knowledge(content=f"{' '.join(words)} offer {i}")).ok
    other = "Kafka static membership maps each consumer to a group.instance.id"
    assert (await apollo.client("bob", principal="bob").store_knowledge(content=other)).ok

    page = (await apollo.client("reader").query_knowledge(query=QUERY)).entries

    eve = [v for v in page if v.source_agent == "eve"]
    assert [stored - 1] == [v.folded for v in eve]
    assert [0] == [v.folded for v in page if v.source_agent == "bob"]
