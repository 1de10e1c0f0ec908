"""Reading the entity graph (entities, entity, entity_history, related_entities) through the
command layer, on every store adapter: what a principal may see, bi-temporal history, and
the bounds of every answer."""

from __future__ import annotations

from datetime import timedelta

import pytest

from apollo_adapters.clock import ManualClock
from apollo_app import NotFound, Principal, ValidationError
from apollo_domain.services.entity_reads import (
    ENTITY_ENTRIES,
    MAX_ENTITY_EDGES,
    MAX_RELATED_ENTITIES,
    SNIPPET_CHARS,
)
from tests.contract.stores import EPOCH

ALICE = Principal("alice")
BOB = Principal("bob")
ADMIN = Principal("ops", role="admin")


async def _store(apollo, text: str, principal=None, **kwargs):
    result = await apollo.client("writer", principal).store_knowledge(content=text, **kwargs)
    assert result.entry_id is not None, result
    return result.entry_id


def _edges(detail) -> set[tuple[str, str, str]]:
    return {(e.src, e.relation, e.dst) for e in detail.edges}


async def test_entities_by_prefix_and_by_query_count_the_visible_mentions(make_apollo):
    """A listing is by name; each count is of the entries the caller may see."""
    apollo = await make_apollo()
    await _store(apollo, "Yesterday Alice Moreau met Aaron Blake in Lisbon.")
    await _store(apollo, "Later Alice Moreau flew to Lisbon again.")
    await _store(apollo, "Today Alice Moreau rated Lisbon highly.", ALICE, access_scope="private")
    bob, alice = apollo.client("b", BOB), apollo.client("a", ALICE)

    assert [("aaron blake", 1), ("alice moreau", 2)] == [
        (e.key, e.mentions) for e in await bob.entities(prefix="A")
    ]
    assert [("alice moreau", 3)] == [
        (e.key, e.mentions) for e in await alice.entities(prefix="ali")
    ]
    named = await bob.entities(query="Where did Alice Moreau go after Lisbon?")
    assert [("alice moreau", "Alice Moreau", 2), ("lisbon", "Lisbon", 2)] == [
        (e.key, e.name, e.mentions) for e in named
    ]
    assert ["lisbon"] == [e.key for e in await bob.entities(query="Lisbon or Alice", prefix="l")]
    everything = await bob.entities()
    assert ["aaron blake", "alice moreau", "lisbon"] == [e.key for e in everything]
    assert ["aaron blake"] == [e.key for e in await bob.entities(limit=1)]
    assert [] == await bob.entities(prefix="zz")


async def test_an_entity_known_only_from_private_text_never_reaches_another_principal(
    make_apollo,
):
    apollo = await make_apollo()
    await _store(apollo, "Public note: Dana Wu joined the board.")
    await _store(apollo, "Secret: Dana Wu works at Initech.", ALICE, access_scope="private")
    bob, alice = apollo.client("b", BOB), apollo.client("a", ALICE)
    anonymous = apollo.client("anon")

    for reader in (bob, anonymous):
        assert ["dana wu"] == [e.key for e in await reader.entities()]
        assert [] == await reader.entities(query="Initech")
        with pytest.raises(NotFound):
            await reader.entity("Initech")
        with pytest.raises(NotFound):
            await reader.entity_history("initech")
        with pytest.raises(NotFound):
            await reader.related_entities("INITECH")
        dana = await reader.entity("Dana Wu")
        assert (1, set()) == (dana.mentions, _edges(dana))
        assert [] == await reader.related_entities("Dana Wu")
        assert () == (await reader.entity_history("Dana Wu")).edges

    dana = await alice.entity("  dana   WU ")
    assert 2 == dana.mentions
    assert {("Dana Wu", "works_at", "Initech")} <= _edges(dana)
    assert ["initech"] == [r.key for r in await alice.related_entities("Dana Wu")]


async def test_an_edge_supported_only_by_an_invisible_entry_is_hidden(make_apollo):
    """Both entities are public, the edge between them is not; a shared edge shows only the
    supporting entries the caller may see."""
    apollo = await make_apollo()
    public = await _store(apollo, "Yesterday Erik Sand visited Initech and Oslo.")
    await _store(apollo, "The vendor Initech sells staplers to Mira Holt.")
    hidden = await _store(
        apollo, "Secret: Mira Holt works at Initech near Oslo.", ALICE, access_scope="private"
    )
    bob, alice = apollo.client("b", BOB), apollo.client("a", ALICE)

    mira = await bob.entity("Mira Holt")
    assert {("co_occurs", frozenset({"Initech", "Mira Holt"}))} == {
        (e.relation, frozenset({e.src, e.dst})) for e in mira.edges
    }
    assert "works_at" in {e.relation for e in (await alice.entity("Mira Holt")).edges}
    assert "oslo" not in {r.key for r in await bob.related_entities("Mira Holt")}
    assert "oslo" in {r.key for r in await alice.related_entities("Mira Holt")}

    initech = await bob.entity("Initech")
    (oslo_edge,) = [e for e in initech.edges if {e.src, e.dst} == {"Initech", "Oslo"}]
    assert (1, (public,)) == (oslo_edge.support, oslo_edge.entry_ids)
    seen_by_alice = await alice.entity("Initech")
    (shared,) = [e for e in seen_by_alice.edges if {e.src, e.dst} == {"Initech", "Oslo"}]
    assert (2, (public, hidden)) == (shared.support, shared.entry_ids)
    assert hidden not in {entry.id for entry in initech.entries}


async def test_archived_entries_make_nothing_visible(make_apollo):
    apollo = await make_apollo()
    kept = await _store(apollo, "Yesterday Nora Vik moved to Bergen.")
    gone = await _store(apollo, "Yesterday Nora Vik adopted Grafana.")
    writer = apollo.client("writer")
    assert 2 == (await writer.entity("Nora Vik")).mentions
    await writer.deprecate_entry(gone, reason="withdrawn")

    with pytest.raises(NotFound):
        await writer.entity("Grafana")
    assert ["bergen", "nora vik"] == [e.key for e in await writer.entities()]
    nora = await writer.entity("Nora Vik")
    assert (1, [kept]) == (nora.mentions, [entry.id for entry in nora.entries])
    assert {("Nora Vik", "lives_in", "Bergen")} == {
        (e.src, e.relation, e.dst) for e in nora.edges if e.relation != "co_occurs"
    }
    assert ["bergen"] == [r.key for r in await writer.related_entities("Nora Vik")]


async def test_history_keeps_superseded_edges_and_reads_as_of(make_apollo):
    """A new relation on a pair retires the live one (valid_to, superseded_by); history
    without as_of shows both, as_of shows what was live then."""
    clock = ManualClock(EPOCH)
    apollo = await make_apollo(clock=clock)
    await _store(apollo, "Today Alice Moreau works at Acme Corp.")
    clock.advance(days=30)
    await _store(apollo, "Now Alice Moreau leads Acme Corp.")
    reader = apollo.client("reader", Principal("rita", role="reader"))

    full = await reader.entity_history("Alice Moreau")
    assert full.as_of is None
    works, leads = full.edges
    assert ("works_at", EPOCH, EPOCH + timedelta(days=30), leads.id) == (
        works.relation,
        works.valid_from,
        works.valid_to,
        works.superseded_by,
    )
    assert ("leads", None, None) == (leads.relation, leads.valid_to, leads.superseded_by)
    assert ("Alice Moreau", "Acme Corp") == (works.src, works.dst)

    then = await reader.entity_history("acme corp", as_of=EPOCH + timedelta(days=10))
    assert ["works_at"] == [e.relation for e in then.edges]
    assert EPOCH + timedelta(days=10) == then.as_of
    at_change = await reader.entity_history("Acme Corp", as_of="2026-01-31T00:00:00+00:00")
    assert ["leads"] == [e.relation for e in at_change.edges]
    naive_date = await reader.entity_history("Acme Corp", as_of="2026-01-15")
    assert ["works_at"] == [e.relation for e in naive_date.edges]
    before = await reader.entity_history("Acme Corp", as_of=EPOCH - timedelta(seconds=1))
    assert () == before.edges
    live = await reader.entity("Alice Moreau")
    assert {"leads", "co_occurs"} == {e.relation for e in live.edges}

    for bad in ("yesterday", "2026-13-01", 12):
        with pytest.raises(ValidationError) as caught:
            await reader.entity_history("Acme Corp", as_of=bad)
        assert "as_of" == caught.value.field


async def test_an_invisible_superseding_edge_is_never_named(make_apollo):
    """The retired edge keeps its valid_to, but only a caller who may see the edge that
    retired it learns its id."""
    clock = ManualClock(EPOCH)
    apollo = await make_apollo(clock=clock)
    await _store(apollo, "Today Lena Park works at Umbrella Labs.")
    clock.advance(days=1)
    await _store(apollo, "Now Lena Park leads Umbrella Labs.", ALICE, access_scope="private")

    (for_bob,) = (await apollo.client("b", BOB).entity_history("Lena Park")).edges
    assert ("works_at", None) == (for_bob.relation, for_bob.superseded_by)
    assert for_bob.valid_to is not None
    works, leads = (await apollo.client("a", ALICE).entity_history("Lena Park")).edges
    assert leads.id == works.superseded_by


async def test_related_entities_walk_live_edges_breadth_first(make_apollo):
    apollo = await make_apollo()
    await _store(apollo, "Anna Berg works at Bolt Labs.")
    await _store(apollo, "Today Bolt Labs is based in Oslo.")
    await _store(apollo, "The city of Oslo lies in Norway.")
    reader = apollo.client("reader")

    one = await reader.related_entities("Anna Berg")
    assert [("bolt labs", 1, "works_at", "Anna Berg")] == [
        (r.key, r.depth, r.relation, r.via) for r in one
    ]
    three = await reader.related_entities("anna berg", depth=3)
    assert [("bolt labs", 1), ("oslo", 2), ("norway", 3)] == [(r.key, r.depth) for r in three]
    assert ("lives_in", "Bolt Labs") == (three[1].relation, three[1].via)
    back = await reader.related_entities("Norway", depth=2)
    assert [("oslo", 1, "co_occurs"), ("bolt labs", 2, "lives_in")] == [
        (r.key, r.depth, r.relation) for r in back
    ]
    for depth in (0, 4, "2", True):
        with pytest.raises(ValidationError) as caught:
            await reader.related_entities("Anna Berg", depth=depth)
        assert "depth" == caught.value.field


async def test_every_answer_is_bounded(make_apollo):
    """A hub entity with more edges, neighbours and entries than any answer shows."""
    clock = ManualClock(EPOCH)
    apollo = await make_apollo(clock=clock)
    newest = None
    for batch in range(ENTITY_ENTRIES + 1):
        clock.advance(minutes=1)
        names = ", ".join(f'"node {batch:02d}-{i:02d}"' for i in range(10))
        newest = await _store(apollo, f'Yesterday "hub x" linked {names}. ' + "x" * 300)
    reader = apollo.client("reader")

    hub = await reader.entity("hub x")
    assert ENTITY_ENTRIES + 1 == hub.mentions
    assert MAX_ENTITY_EDGES == len(hub.edges)
    assert ENTITY_ENTRIES == len(hub.entries)
    assert newest == hub.entries[0].id
    assert all(len(entry.snippet) == SNIPPET_CHARS for entry in hub.entries)
    related = await reader.related_entities("hub x", depth=3)
    assert MAX_RELATED_ENTITIES == len(related)
    assert {1} == {r.depth for r in related}
    assert 5 == len(await reader.entities(prefix="node", limit=5))
    for limit in (0, 101, "5", None):
        with pytest.raises(ValidationError) as caught:
            await reader.entities(limit=limit)
        assert "limit" == caught.value.field


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"name": "   "}, "name"),
        ({"name": 7}, "name"),
        ({"name": "x" * 1001}, "name"),
    ],
)
async def test_bad_names_are_refused_naming_the_field(make_apollo, arguments, field):
    apollo = await make_apollo()
    with pytest.raises(ValidationError) as caught:
        await apollo.client("reader").entity(**arguments)
    assert field == caught.value.field


async def test_bad_listing_arguments_are_refused_naming_the_field(make_apollo):
    apollo = await make_apollo()
    reader = apollo.client("reader")
    for arguments, field in (
        ({"prefix": 3}, "prefix"),
        ({"prefix": "p" * 1001}, "prefix"),
        ({"query": ["a"]}, "query"),
        ({"query": "q" * 10_001}, "query"),
    ):
        with pytest.raises(ValidationError) as caught:
            await reader.entities(**arguments)
        assert field == caught.value.field


async def test_an_unknown_entity_is_not_found(make_apollo):
    apollo = await make_apollo()
    reader = apollo.client("reader")
    for read in (reader.entity, reader.entity_history, reader.related_entities):
        with pytest.raises(NotFound):
            await read("Nobody Known")
