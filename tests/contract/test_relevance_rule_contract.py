"""The relevance rule (docs/retrieval.md, "The relevance rule") with the real
all-MiniLM-L6-v2 model and with keyed vectors: a paraphrase sharing no word with its note
finds it, an unrelated query returns nothing and boosts nothing, a query's best match
counts below the absolute floor when it stands out of the candidates after it, and a store
of a few entries has a floor of its own. On every store adapter."""

from __future__ import annotations

import pytest
from attrs import evolve

from tests.support import KeyedEmbedder, at_cosine

#: Five notes, and a paraphrase of four of them sharing none of their words.
NOTES = (
    "The cat sat on the mat",
    "PostgreSQL autovacuum cleans up dead tuples left by updates and deletes",
    "The orchestrator replaces a failed Docker pod by itself",
    "Invoices are due within 30 days of issue",
    "Prometheus scrapes metrics every 15 seconds",
)
PARAPHRASES = {
    "feline resting place": 0,
    "database garbage collection": 1,
    "self-healing containers": 2,
    "when do we have to pay the bill": 3,
}
UNRELATED = ("quantum chromodynamics of sourdough", "zxqv blorp", "who won the 1987 world cup")


async def _stored(apollo, notes):
    writer = apollo.client("claude-writer")
    return [(await writer.store_knowledge(content=note)).entry_id for note in notes]


async def _accesses(apollo, ids):
    return [(await apollo.get_entry(i)).access_count for i in ids]


@pytest.mark.parametrize("mode", ["hybrid", "vector"])
async def test_paraphrases_find_their_note_and_unrelated_queries_find_nothing(
    make_apollo, minilm, mode
):
    """MiniLM's cosines of these paraphrases with their notes are 0.30 to 0.48, under the
    absolute floor (0.39) for three of them, and over the floor of a store of five
    entries (0.25); the unrelated queries' best is 0.12, so they return nothing, and
    count and log no access."""
    apollo = await make_apollo(embedder=minilm)
    ids = await _stored(apollo, NOTES)
    reader = apollo.client("reader")

    for query in UNRELATED:
        assert () == (await reader.query_knowledge(query=query, mode=mode)).entries, query
    assert [0] * len(NOTES) == await _accesses(apollo, ids)
    async with apollo.store.unit_of_work() as uow:
        assert 0 == await uow.access_log.count("query")

    for query, note in PARAPHRASES.items():
        found = await reader.query_knowledge(query=query, mode=mode)
        assert ids[note] == found.entries[0].id, query
    assert [1, 1, 1, 1, 0] == await _accesses(apollo, ids)


async def test_a_store_of_one_entry(make_apollo, minilm):
    """One entry: its paraphrase finds it (0.48 over the floor of one entry, 0.17); an
    unrelated query, or a question about something else, does not."""
    apollo = await make_apollo(embedder=minilm)
    [cat] = await _stored(apollo, NOTES[:1])
    reader = apollo.client("reader")

    for query in (*UNRELATED, "database garbage collection"):
        assert () == (await reader.query_knowledge(query=query, mode="vector")).entries, query
    assert [0] == await _accesses(apollo, [cat])
    found = await reader.query_knowledge(query="feline resting place", mode="vector")
    assert [cat] == [e.id for e in found.entries]


def _rule(apollo, **rule):
    apollo.deps = evolve(apollo.deps, retrieval=evolve(apollo.deps.retrieval, **rule))


@pytest.mark.parametrize("mode", ["hybrid", "vector"])
async def test_a_best_match_below_the_floor_counts_when_it_stands_out(make_apollo, mode):
    """Floor 0.6, standout margin 0.2 over 3 candidates, minimum 0.3. The query's best
    match at 0.45 stands out of three at 0.1 (margin 0.35): it is returned and boosted,
    with a limit of one too (the store reads the background beyond the limit). Among
    three at 0.35 (margin 0.1) it does not, and nothing is returned."""
    embedder = KeyedEmbedder(32)
    apollo = await make_apollo(embedder=embedder)
    _rule(
        apollo,
        relevance_floor=0.6,
        relevance_margin=0.2,
        relevance_background=3,
        relevance_minimum=0.3,
        relevance_single=None,
    )
    standing, crowded = embedder.basis(0), embedder.basis(10)
    embedder.set("first probe", standing)
    embedder.set("second probe", crowded)
    texts = {"kiwi": at_cosine(standing, 0.45, 1)}
    texts |= {f"lime {i}": at_cosine(standing, 0.1, 2 + i) for i in range(3)}
    texts |= {"plum": at_cosine(crowded, 0.45, 11)}
    texts |= {f"pear {i}": at_cosine(crowded, 0.35, 12 + i) for i in range(3)}
    for text, vector in texts.items():
        embedder.set(text, vector)
    ids = dict(zip(texts, await _stored(apollo, list(texts)), strict=True))
    reader = apollo.client("reader")

    found = await reader.query_knowledge(query="first probe", mode=mode, limit=1)
    crowd = await reader.query_knowledge(query="second probe", mode=mode)

    assert [ids["kiwi"]] == [e.id for e in found.entries]
    assert () == crowd.entries
    assert [1] + [0] * 7 == await _accesses(apollo, list(ids.values()))


async def test_a_store_of_a_few_entries_has_the_floor_of_its_size(make_apollo):
    """Fewer candidates than the best plus the background: the floor is
    ``single + growth * ln(n)`` (0.3 + 0.1 ln n here, under the absolute floor 0.9):
    a match at 0.35 counts alone (0.30) but not among three entries (0.41)."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    _rule(
        apollo,
        relevance_floor=0.9,
        relevance_margin=0.2,
        relevance_background=10,
        relevance_minimum=0.3,
        relevance_single=0.3,
        relevance_growth=0.1,
    )
    base = embedder.basis(0)
    embedder.set("probe", base)
    embedder.set("match", at_cosine(base, 0.35, 1))
    embedder.set("other one", at_cosine(base, 0.0, 2))
    embedder.set("other two", at_cosine(base, 0.0, 3))
    [match] = await _stored(apollo, ["match"])
    reader = apollo.client("reader")

    alone = await reader.query_knowledge(query="probe", mode="vector")
    await _stored(apollo, ["other one", "other two"])
    among = await reader.query_knowledge(query="probe", mode="vector")

    assert [match] == [e.id for e in alone.entries]
    assert () == among.entries
