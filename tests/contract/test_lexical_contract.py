"""Lexical search of the entry repository (docs/retrieval.md, "How retrieval works"), on every store
adapter."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from apollo_app import Principal
from apollo_domain.model import (
    ACTIVE_STATUSES,
    Entry,
    SourceRef,
    Status,
    Viewer,
)
from apollo_domain.ports import SearchFilter
from apollo_domain.testing import make_entry

ACTIVE = frozenset({Status.CANDIDATE, Status.CONFIRMED})
WHEN = datetime(2026, 1, 1, tzinfo=UTC)


def _everyone(**kwargs) -> SearchFilter:
    return SearchFilter(Viewer(None), ACTIVE, **kwargs)


async def _search(apollo, query: str, flt: SearchFilter | None = None, limit: int = 10):
    async with apollo.store.unit_of_work() as uow:
        return await uow.entries.lexical_search(query, flt or _everyone(), limit)


async def _store(apollo, text: str, agent: str = "writer", **kwargs):
    result = await apollo.client(agent, kwargs.pop("principal", None)).store_knowledge(
        content=text, **kwargs
    )
    assert result.entry_id is not None
    return result.entry_id


def _entry(text: str) -> Entry:
    return make_entry(
        text,
        knowledge_domain="general",
        tags=(),
        source=SourceRef("writer"),
        created_at=WHEN,
        source_context={},
    )


async def test_entries_holding_a_query_term_match_and_others_do_not(make_apollo):
    """A query is the OR of its terms; an entry with none of them is not a match."""
    apollo = await make_apollo()
    orion = await _store(apollo, "Project Orion ships the billing service")
    vega = await _store(apollo, "Project Vega replaces the search cluster")
    await _store(apollo, "Lunch is served at noon in the cafeteria")
    found = await _search(apollo, "who leads orion and vega?")
    assert {orion, vega} == {hit.entry.id for hit in found}
    assert all(hit.similarity > 0 for hit in found)
    assert [] == await _search(apollo, "payroll audit")


async def test_stop_words_alone_match_nothing(make_apollo):
    """Stop words stay in the index but never match: ``the`` is in every entry here."""
    apollo = await make_apollo()
    await _store(apollo, "the cache holds the sessions")
    await _store(apollo, "the queue holds the jobs")
    assert [] == await _search(apollo, "where is the")


async def test_names_numbers_and_identifiers_match_exactly(make_apollo):
    """The ``simple`` configuration keeps tokens as written (lowercased), unstemmed."""
    apollo = await make_apollo()
    release = await _store(apollo, "Release v2.4.1 of node.js fixed the 2023 outage")
    other = await _store(apollo, "Release notes are written by the docs team")
    assert [release] == [h.entry.id for h in await _search(apollo, "v2.4.1")]
    assert [release] == [h.entry.id for h in await _search(apollo, "NODE.JS in 2023")]
    assert [other] == [h.entry.id for h in await _search(apollo, "written")]
    assert [] == await _search(apollo, "write")  # no stemming


async def test_more_occurrences_of_a_term_rank_higher(make_apollo):
    """Ordered by relevance, then by id."""
    apollo = await make_apollo()
    once = await _store(apollo, "kafka appears once in this note about queues")
    twice = await _store(apollo, "kafka kafka twice")
    found = await _search(apollo, "kafka")
    assert [twice, once] == [h.entry.id for h in found]
    assert found[0].similarity > found[1].similarity
    assert [twice] == [h.entry.id for h in await _search(apollo, "kafka", limit=1)]


async def test_ties_are_broken_by_id(make_apollo):
    apollo = await make_apollo()
    ids = [await _store(apollo, f"redis shard {name}") for name in ("alpha", "bravo", "delta")]
    found = await _search(apollo, "redis")
    assert sorted(ids) == [h.entry.id for h in found]


async def test_filters_and_visibility_apply_as_for_vector_search(make_apollo):
    """Visibility, status, confidence, tags and domain: the same SearchFilter rules."""
    apollo = await make_apollo()
    await apollo.directory.add_membership("alice", "ops")
    await apollo.directory.add_membership("bob", "ops")
    alice = Principal("alice")
    public = await _store(apollo, "zephyr global runbook", tags=["ops"])
    team = await _store(apollo, "zephyr team runbook", principal=alice, access_scope="team")
    private = await _store(
        apollo, "zephyr private runbook", principal=alice, access_scope="private"
    )
    other_domain = await _store(apollo, "zephyr billing runbook", tags=["billing"])

    async def seen(viewer: Viewer, **kwargs) -> set[uuid.UUID]:
        return {h.entry.id for h in await _search(apollo, "zephyr", _with(viewer, **kwargs))}

    def _with(viewer: Viewer, **kwargs) -> SearchFilter:
        return SearchFilter(viewer, kwargs.pop("statuses", ACTIVE), **kwargs)

    alice_view = Viewer("alice", frozenset({"alice", "bob"}))
    bob_view = Viewer("bob", frozenset({"alice", "bob"}))
    everyone = {public, team, private, other_domain}
    assert everyone == await seen(alice_view)
    assert {public, team, other_domain} == await seen(bob_view)
    assert {public, other_domain} == await seen(Viewer("carol"))
    assert {public, other_domain} == await seen(Viewer(None))
    assert {public} == await seen(alice_view, tags=("ops",))
    assert {other_domain} == await seen(alice_view, knowledge_domain="billing")
    assert set() == await seen(alice_view, min_confidence=0.6)
    assert set() == await seen(alice_view, statuses=frozenset({Status.CONFIRMED}))
    assert {team} == await seen(alice_view, only_ids=frozenset({team, uuid.uuid4()}))
    assert everyone - {team} == await seen(alice_view, exclude_ids=frozenset({team}))
    await apollo.client("curator", Principal("curator", role="admin")).deprecate_entry(
        entry_id=public, reason="old"
    )
    assert {other_domain} == await seen(Viewer(None))
    archived = frozenset(ACTIVE_STATUSES | {Status.ARCHIVED})
    assert {public, other_domain} == await seen(Viewer(None), statuses=archived)


async def test_writes_are_seen_in_their_unit_of_work_and_rolled_back_with_it(make_apollo):
    """An entry added in a unit of work matches within it and is gone after a rollback;
    the scores of the other entries are what they were before."""
    apollo = await make_apollo()
    await _store(apollo, "quasar telemetry pipeline")
    await _store(apollo, "quasar dashboard")
    before = [(h.entry.id, h.similarity) for h in await _search(apollo, "quasar pipeline")]
    added = _entry("quasar quasar pipeline pipeline replay")
    async with apollo.store.unit_of_work() as uow:
        await uow.entries.add(added)
        inside = await uow.entries.lexical_search("quasar pipeline", _everyone(), 10)
        assert added.id == inside[0].entry.id
    assert before == [(h.entry.id, h.similarity) for h in await _search(apollo, "quasar pipeline")]


async def test_deleted_entries_no_longer_match(make_apollo):
    apollo = await make_apollo()
    gone = await _store(apollo, "nebula cache warmup")
    kept = await _store(apollo, "nebula cache eviction")
    async with apollo.store.unit_of_work() as uow:
        assert 1 == await uow.entries.delete([gone])
        await uow.commit()
    assert [kept] == [h.entry.id for h in await _search(apollo, "nebula")]


# What PostgreSQL 18's ts_rank returns for these texts and queries, e.g.
# SELECT ts_rank(to_tsvector('simple', text), to_tsquery('simple', 'ines | sister')):
# a query term held once adds 0.0607927 / (distinct query terms), four times 0.0865452 / n,
# three times 0.0827456 / n, 255 times or more 0.0997621 / n.
_ONE_OF_FOUR = 0.01519817765802145
_TWO_OF_FOUR = 0.0303963553160429
_FOUR_TIMES_OF_FOUR = 0.021636294201016426
_ONE_OF_TWO = 0.0303963553160429
_FOUR_TIMES_OF_TWO = 0.04327258840203285
_TWO_OF_TWO = 0.0607927106320858
_THREE_TIMES = 0.08274563401937485
_MOST_TIMES = 0.09976206719875336

_RANKED_TEXTS = {
    "turn": (
        "We were both tired, so the call was shorter than usual. Ines said her sister Lena is"
        " getting married on August 12, and she is the maid of honour. Anyway, we spent most"
        " of the time catching up on the usual stuff."
    ),
    "note": "Ines Ferreira leads Project Hydra.",
    "chatter": "Had coffee with Ines this morning, we mostly complained about the heat.",
    "repeats": "Ines, Ines, Ines: Ines again.",
    "other": "Vera Ferreira shipped release v2.19.6 of the billing service.",
    "unrelated": "The billing service moved to a new cluster.",
    "flood": "kafka " * 300,  # a lexeme keeps at most 255 positions
    "late": "x " * 16380 + "kafka " * 5,  # positions past 16383 are one
    "thrice": "kafka lag, kafka offsets, kafka.",
}

_RANKINGS = {
    # wedding, ines, ferreira, sister: the long turn holding two of them ties the short
    # note holding two, whatever their lengths; four times one term ranks below both.
    "When is the wedding of Ines Ferreira's sister?": {
        "turn": _TWO_OF_FOUR,
        "note": _TWO_OF_FOUR,
        "repeats": _FOUR_TIMES_OF_FOUR,
        "chatter": _ONE_OF_FOUR,
        "other": _ONE_OF_FOUR,
    },
    "Lena married?": {"turn": _TWO_OF_TWO},
    # a repeated query term counts once
    "ines ines billing": {
        "repeats": _FOUR_TIMES_OF_TWO,
        "turn": _ONE_OF_TWO,
        "note": _ONE_OF_TWO,
        "chatter": _ONE_OF_TWO,
        "other": _ONE_OF_TWO,
        "unrelated": _ONE_OF_TWO,
    },
    "kafka": {"flood": _MOST_TIMES, "late": _THREE_TIMES, "thrice": _THREE_TIMES},
}


async def test_every_store_ranks_and_scores_as_postgresql_ts_rank(make_apollo):
    """One ranking on every store (apollo_domain.lexical.rank): PostgreSQL's ``ts_rank``
    over the OR of the query's terms, not normalized by length. Each store returns the
    matches in the same order (score, then id) with the same scores."""
    apollo = await make_apollo()
    ids = {}
    async with apollo.store.unit_of_work() as uow:
        for name, text in _RANKED_TEXTS.items():
            entry = _entry(text)
            await uow.entries.add(entry)
            ids[entry.id] = name
        await uow.commit()
    for query, expected in _RANKINGS.items():
        by_id = {entry_id: expected[name] for entry_id, name in ids.items() if name in expected}
        order = sorted(by_id, key=lambda entry_id: (-by_id[entry_id], entry_id))
        found = await _search(apollo, query)
        assert [ids[i] for i in order] == [ids[h.entry.id] for h in found], query
        assert [by_id[i] for i in order] == pytest.approx([h.similarity for h in found], rel=1e-6)
