"""A copy of a text disguised with Cyrillic or Greek look-alikes is placed as the text it
reads as (TR39 skeletons, apollo_domain.confusables), on every store adapter."""

from __future__ import annotations

from apollo_adapters.embedders import HashingEmbedder
from apollo_app import Outcome
from apollo_domain.model import EvidenceKind

FACT = "Redis keeps the whole dataset in memory"
DISGUISED = "Rеdis kееps thе wholе dаtаsеt in mеmory"  # Cyrillic е and а


async def test_a_writers_disguised_copy_of_its_own_text_is_a_near_duplicate(make_apollo):
    apollo = await make_apollo(embedder=HashingEmbedder())
    writer = apollo.client("claude-writer")
    first = await writer.store_knowledge(content=FACT)

    copy = await writer.store_knowledge(content=DISGUISED)

    assert (Outcome.REJECTED, None) == (copy.outcome, copy.entry_id)
    assert copy.reason.startswith("near_duplicate")
    assert [first.entry_id] == [
        e.id for e in (await writer.query_knowledge(query=FACT, mode="vector")).entries
    ]


async def test_an_independent_sources_disguised_copy_is_a_restatement(make_apollo):
    """Not a second entry the disguise alone kept apart: the agreement a plain copy gets."""
    apollo = await make_apollo(embedder=HashingEmbedder())
    first = await apollo.client("claude-writer").store_knowledge(content=FACT)

    copy = await apollo.client("gemini-other").store_knowledge(content=DISGUISED)

    assert (Outcome.DEDUPLICATED, first.entry_id) == (copy.outcome, copy.entry_id)
    assert [EvidenceKind.ORIGIN, EvidenceKind.AGREEMENT] == [
        e.kind for e in await apollo.get_evidence(first.entry_id)
    ]


async def test_a_disguised_query_reads_through_the_disguise(make_apollo):
    apollo = await make_apollo(embedder=HashingEmbedder())
    first = await apollo.client("claude-writer").store_knowledge(content=FACT)

    found = await apollo.client("reader").query_knowledge(query=DISGUISED, mode="vector")

    assert [first.entry_id] == [e.id for e in found.entries]
    assert 0.99 < found.entries[0].similarity
