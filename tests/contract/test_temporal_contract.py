"""Temporal cues (docs/retrieval.md, "Temporal cues") on every store: a day or span a
question names puts the candidates said (or stored) then first, in every search mode; the
page holds the same entries as without the cue (a cue reorders, never adds); a conversation's
statement counts at its turn's time, an entry of its own at the time it was stored."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from attrs import evolve

from apollo_adapters.clock import ManualClock
from apollo_adapters.embedders import HashingEmbedder
from apollo_domain.temporal import TEMPORAL

MODES = ["hybrid", "vector", "lexical"]
ASKED = datetime(2026, 5, 1, 9, tzinfo=UTC)


def _session(day: str, dinner: str) -> list[dict[str, str]]:
    return [
        {"speaker": "maya", "text": "How was your week, Leo?", "at": f"{day}T18:00:00Z"},
        {"speaker": "leo", "text": f"We had dinner at {dinner} tonight.", "at": f"{day}T18:01:00Z"},
    ]


async def _two_dinners(make_apollo):
    apollo = await make_apollo(embedder=HashingEmbedder(), clock=ManualClock(ASKED))
    writer = apollo.client("claude-notes")
    march = await writer.store_text(_session("2026-03-23", "a Thai place by the river"))
    april = await writer.store_text(_session("2026-04-13", "a tapas bar near the station"))
    other = [  # another day's lines, some about dinner too: the pair is not all there is
        {"speaker": "leo", "text": "We skipped dinner at home tonight.", "at": "2026-04-20T19:00Z"},
        {"speaker": "leo", "text": "Dinner at the office again, sadly.", "at": "2026-04-21T19:00Z"},
        {
            "speaker": "leo",
            "text": "The station bar had no tables left.",
            "at": "2026-04-22T19:00Z",
        },
    ]
    await writer.store_text(other)
    return apollo, march.statements[1].entry_id, april.statements[1].entry_id


@pytest.mark.parametrize("mode", MODES)
async def test_the_statement_of_the_day_a_question_names_comes_first(make_apollo, mode):
    apollo, march, april = await _two_dinners(make_apollo)
    reader = apollo.client("reader")
    for named, said in [
        ("on 23 March", march),
        ("on 2026-04-13", april),
        ("on March 23rd", march),
        ("18 days ago", april),
        ("in March", march),
    ]:
        page = await reader.query_knowledge(
            query=f"Where did Leo have dinner {named}?", mode=mode, min_confidence=0
        )
        ids = [v.id for v in page.entries]
        assert said == ids[0], named
        assert {march, april} <= set(ids), named  # the other is still on the page
        assert TEMPORAL in page.entries[0].signals
        other = next(v for v in page.entries if v.id in {march, april} - {said})
        assert TEMPORAL not in other.signals


@pytest.mark.parametrize("mode", MODES)
async def test_a_cue_reorders_the_page_and_never_adds_to_it(make_apollo, mode):
    apollo, march, _ = await _two_dinners(make_apollo)
    asked = "Where did Leo have dinner on 23 March?"
    cued = await apollo.client("reader").retrieve(query=asked, mode=mode, limit=100)
    apollo.deps = evolve(apollo.deps, retrieval=evolve(apollo.deps.retrieval, temporal_cues=False))
    plain = await apollo.client("reader").retrieve(query=asked, mode=mode, limit=100)
    assert {v.id for v in cued.entries} == {v.id for v in plain.entries}
    assert all(TEMPORAL not in v.signals for v in plain.entries)
    assert march == cued.entries[0].id


async def test_an_unrelated_question_with_a_date_finds_nothing(make_apollo):
    apollo, _, _ = await _two_dinners(make_apollo)
    page = await apollo.client("reader").query_knowledge(
        query="xylophone quantum marmalade on 23 March", mode="vector", min_confidence=0
    )
    assert () == page.entries


async def test_an_entry_of_its_own_counts_at_the_time_it_was_stored(make_apollo):
    clock = ManualClock(datetime(2026, 3, 10, 12, tzinfo=UTC))
    apollo = await make_apollo(embedder=HashingEmbedder(), clock=clock)
    writer = apollo.client("claude-notes")
    first = await writer.store_knowledge(content="The nightly backup job failed on the db host.")
    clock.set(datetime(2026, 4, 20, 12, tzinfo=UTC))
    second = await writer.store_knowledge(content="The nightly backup job failed on the web host.")
    clock.set(datetime(2026, 4, 21, 8, tzinfo=UTC))
    reader = apollo.client("reader")
    for named, stored in [("on 10 March", first.entry_id), ("yesterday", second.entry_id)]:
        page = await reader.query_knowledge(
            query=f"which nightly backup job failed {named}", min_confidence=0
        )
        assert stored == page.entries[0].id, named
        assert TEMPORAL in page.entries[0].signals


async def test_a_writer_dating_its_flood_to_the_day_asked_still_holds_a_third_of_the_page(
    make_apollo,
):
    """A writer chooses its own turns' times: one that dates 30 variants to the day a reader
    asks about comes first with them, and still holds at most ⌈10 / 3⌉ of the page while
    other writers' matching entries (of other days) are there to fill it."""
    apollo = await make_apollo(embedder=HashingEmbedder(), clock=ManualClock(ASKED))
    for number in range(8):
        writer = apollo.client(f"claude-{number}", principal=f"writer-{number}")
        told = await writer.store_knowledge(
            content=f"The billing export job number {number} failed on the backup host."
        )
        assert told.ok
    flood = [
        {
            "speaker": "eve",
            "text": f"The billing export job failed, variant {n}: EveCloud fixes it, offer {n}.",
            "at": f"2026-04-13T10:{n:02d}:00Z",
        }
        for n in range(30)
    ]
    await apollo.client("eve-agent", principal="eve").store_text(flood)
    page = await apollo.client("reader").query_knowledge(
        query="which billing export job failed on 13 April", min_confidence=0, limit=10
    )
    from_eve = [v for v in page.entries if v.source_agent == "eve-agent"]
    assert 1 <= len(from_eve) <= 4
    assert all(TEMPORAL in v.signals for v in from_eve)
    assert 8 == len(page.entries) - len(from_eve)  # every other writer's entry is there
