"""The entity graph port and entity tagging at ingest (docs/entity-graph.md, "The entity graph"),
on every
store adapter."""

from __future__ import annotations

from datetime import timedelta

from apollo_adapters.clock import ManualClock
from apollo_app import Principal
from apollo_domain.entities import CO_OCCURS, EntityMention
from apollo_domain.model import Status, Viewer
from apollo_domain.ports import SearchFilter
from tests.contract.stores import EPOCH

EVERYONE = Viewer(None)


async def _store(apollo, text: str, principal=None, **kwargs):
    result = await apollo.client("writer", principal).store_knowledge(content=text, **kwargs)
    assert result.entry_id is not None
    return result.entry_id


async def _keys(apollo, entry_id) -> list[str]:
    async with apollo.store.unit_of_work() as uow:
        return [e.key for e in await uow.graph.entities_of(entry_id)]


async def test_ingest_tags_each_entry_with_its_entities(make_apollo):
    apollo = await make_apollo()
    entry = await _store(apollo, "Alice Moreau moved to Lisbon in March 2023 with 42 kg of gear.")
    assert ["alice moreau", "lisbon", "march 2023", "42 kg"] == await _keys(apollo, entry)
    plain = await _store(apollo, "caches expire after a while")
    assert [] == await _keys(apollo, plain)


async def test_the_same_name_from_different_entries_is_one_node(make_apollo):
    apollo = await make_apollo()
    first = await _store(apollo, "Yesterday Project Orion shipped with Alice Moreau.")
    second = await _store(apollo, "Then ALICE   MOREAU reviewed Project Orion again.")
    async with apollo.store.unit_of_work() as uow:
        a = {e.key: e for e in await uow.graph.entities_of(first)}
        b = {e.key: e for e in await uow.graph.entities_of(second)}
        assert a["alice moreau"] == b["alice moreau"]
        assert "Alice Moreau" == a["alice moreau"].name  # the first name written
        found = await uow.graph.find(["alice moreau", "project orion", "nobody"], EVERYONE)
    assert ["alice moreau", "project orion"] == [e.key for e in found]


async def test_resolve_finds_or_creates_and_is_rolled_back_with_the_unit_of_work(make_apollo):
    apollo = await make_apollo()
    async with apollo.store.unit_of_work() as uow:
        made = await uow.graph.resolve(
            [EntityMention("Kafka", "name"), EntityMention(" kafka "), EntityMention("Redis")],
            EPOCH,
        )
        assert ["kafka", "redis"] == [e.key for e in made]
        again = await uow.graph.resolve([EntityMention("REDIS")], EPOCH)
        assert made[1] == again[0]
        await uow.commit()
    async with apollo.store.unit_of_work() as uow:
        assert made[0] == (await uow.graph.resolve([EntityMention("kafka")], EPOCH))[0]
        await uow.graph.resolve([EntityMention("Zookeeper")], EPOCH)  # not committed
    async with apollo.store.unit_of_work() as uow:
        fresh = await uow.graph.resolve([EntityMention("Zookeeper")], EPOCH)
        assert fresh[0].id not in {e.id for e in made}


async def test_co_occurrence_edges_are_stored_once_with_their_entries(make_apollo):
    apollo = await make_apollo()
    one = await _store(apollo, "Alice Moreau and Bruno Diaz run Project Orion.")
    two = await _store(apollo, "Later Bruno Diaz and Alice Moreau met in Lisbon.")
    async with apollo.store.unit_of_work() as uow:
        (alice,) = await uow.graph.find(["alice moreau"], EVERYONE)
        edges = await uow.graph.edges([alice.id], EVERYONE)
        entities = {
            e.id: e.key
            for e in await uow.graph.find(["bruno diaz", "project orion", "lisbon"], EVERYONE)
        }
    assert all(CO_OCCURS == e.relation and e.src_id < e.dst_id for e in edges)
    by_other = {
        entities[e.dst_id if e.src_id == alice.id else e.src_id]: e.entry_ids for e in edges
    }
    assert {"bruno diaz": (one, two), "project orion": (one,), "lisbon": (two,)} == by_other


async def test_a_new_relation_on_a_pair_supersedes_the_live_one(make_apollo):
    """Bi-temporal: the old typed edge is retired (valid_to, superseded_by), never deleted;
    an identical live edge is not inserted twice."""
    clock = ManualClock(EPOCH)
    apollo = await make_apollo(clock=clock)
    first = await _store(apollo, "Today Alice Moreau works at Acme Corp.")
    clock.advance(days=30)
    again = await _store(apollo, "As before, Alice Moreau works at Acme Corp.")
    clock.advance(days=30)
    later = await _store(apollo, "Now Alice Moreau leads Acme Corp.")
    async with apollo.store.unit_of_work() as uow:
        (alice,) = await uow.graph.find(["alice moreau"], EVERYONE)
        live = [e for e in await uow.graph.edges([alice.id], EVERYONE) if e.relation != CO_OCCURS]
        then = await uow.graph.edges([alice.id], EVERYONE, as_of=EPOCH + timedelta(days=45))
        before = await uow.graph.edges([alice.id], EVERYONE, as_of=EPOCH - timedelta(days=1))
    assert [("leads", (later,), None)] == [(e.relation, e.entry_ids, e.valid_to) for e in live]
    typed_then = [e for e in then if e.relation != CO_OCCURS]
    assert [("works_at", (first, again))] == [(e.relation, e.entry_ids) for e in typed_then]
    assert [] == before
    async with apollo.store.unit_of_work() as uow:
        retired = await uow.graph.edges([alice.id], EVERYONE, as_of=EPOCH + timedelta(days=61))
    old = typed_then[0]
    assert old.id not in {e.id for e in retired}
    async with apollo.store.unit_of_work() as uow:
        edge = await uow.graph.relate(old.src_id, "leads", old.dst_id, first, EPOCH)
        assert live[0].id == edge.id  # identical live edge: support added, nothing new
        assert (later, first) == edge.entry_ids


async def test_superseded_edge_keeps_its_history(make_apollo):
    apollo = await make_apollo()
    entry = await _store(apollo, "Carol Diaz uses Kafka.")
    async with apollo.store.unit_of_work() as uow:
        carol, kafka = await uow.graph.find(["carol diaz", "kafka"], EVERYONE)
        uses = await uow.graph.relate(carol.id, "uses", kafka.id, entry, EPOCH)
        dropped = await uow.graph.relate(
            carol.id, "stopped_using", kafka.id, entry, EPOCH + timedelta(hours=1)
        )
        history = await uow.graph.edges([carol.id], EVERYONE, as_of=EPOCH)
        await uow.commit()
    (old,) = [e for e in history if e.relation == "uses"]
    assert uses.id == old.id
    assert EPOCH + timedelta(hours=1) == old.valid_to
    assert dropped.id == old.superseded_by


async def test_entity_names_and_edges_follow_entry_visibility(make_apollo):
    """An entity or edge known only from an entry a principal cannot see never reaches it."""
    apollo = await make_apollo()
    alice = Principal("alice")
    await _store(apollo, "Public note: Dana Wu joined the board.")
    secret = await _store(
        apollo, "Secret: Dana Wu works at Initech.", principal=alice, access_scope="private"
    )
    owner = Viewer("alice")
    other = Viewer("bob")
    async with apollo.store.unit_of_work() as uow:
        assert ["dana wu", "initech"] == [
            e.key for e in await uow.graph.find(["dana wu", "initech"], owner)
        ]
        assert ["dana wu"] == [e.key for e in await uow.graph.find(["dana wu", "initech"], other)]
        (dana,) = await uow.graph.find(["dana wu"], other)
        assert [] == await uow.graph.edges([dana.id], other)
        assert {"works_at", CO_OCCURS} == {
            e.relation for e in await uow.graph.edges([dana.id], owner)
        }
        assert [("dana wu", 1)] == [
            (e.key, n) for e, n in await uow.graph.with_prefix("Da", other, 10)
        ]
        assert [] == await uow.graph.with_prefix("init", other, 10)
        assert [("initech", 1)] == [
            (e.key, n) for e, n in await uow.graph.with_prefix("init", owner, 10)
        ]
        flt = SearchFilter(other, frozenset({Status.CANDIDATE}))
        mentioning = await uow.graph.entries_mentioning([dana.id], flt, 10)
    assert secret not in {entry.id for entry, _ in mentioning}
    assert [frozenset({dana.id})] == [matched for _, matched in mentioning]


async def test_entries_mentioning_is_capped_newest_first_and_filtered(make_apollo):
    clock = ManualClock(EPOCH)
    apollo = await make_apollo(clock=clock)
    ids = []
    for i in range(4):
        clock.advance(minutes=1)
        ids.append(await _store(apollo, f"Note {i}: Eve Park reviewed item {i}.", tags=[f"t{i}"]))
    async with apollo.store.unit_of_work() as uow:
        (eve,) = await uow.graph.find(["eve park"], EVERYONE)
        flt = SearchFilter(EVERYONE, frozenset({Status.CANDIDATE}))
        newest = await uow.graph.entries_mentioning([eve.id], flt, 2)
        only_t1 = SearchFilter(EVERYONE, frozenset({Status.CANDIDATE}), tags=("t1",))
        tagged = await uow.graph.entries_mentioning([eve.id], only_t1, 10)
        # ``mentioning``: the same, by id
        assert [(e.id, m) for e, m in newest] == await uow.graph.mentioning([eve.id], flt, 2)
        assert [(ids[1], frozenset({eve.id}))] == await uow.graph.mentioning([eve.id], only_t1, 9)
        assert [] == await uow.graph.mentioning([eve.id], flt, 0)
    assert [ids[3], ids[2]] == [entry.id for entry, _ in newest]
    assert [ids[1]] == [entry.id for entry, _ in tagged]


async def test_erasure_removes_mentions_and_edges_only_the_agent_supported(make_apollo):
    apollo = await make_apollo()
    await apollo.client("keeper").store_knowledge(content="Greta Holm lives in Oslo.")
    await apollo.client("leaver").store_knowledge(content="Greta Holm uses Grafana daily.")
    await apollo.erase_agent("leaver")
    async with apollo.store.unit_of_work() as uow:
        assert [] == await uow.graph.find(["grafana"], EVERYONE)
        (greta,) = await uow.graph.find(["greta holm"], EVERYONE)
        edges = await uow.graph.edges([greta.id], EVERYONE)
    assert {"lives_in", CO_OCCURS} == {e.relation for e in edges}
    async with apollo.store.unit_of_work() as uow:
        assert 0 == await uow.graph.prune()


async def test_edge_reads_choose_time_kind_and_count(make_apollo):
    """``history`` returns retired edges too, ``typed`` picks typed or co_occurs edges,
    ``limit`` keeps the oldest; ``counted`` and ``get_many`` read nodes."""
    clock = ManualClock(EPOCH)
    apollo = await make_apollo(clock=clock)
    first = await _store(apollo, "Today Ivan Roth works at Globex.")
    clock.advance(days=1)
    await _store(apollo, "Now Ivan Roth leads Globex in Oslo.")
    async with apollo.store.unit_of_work() as uow:
        ((ivan, mentions),) = await uow.graph.counted(["ivan roth", "nobody"], EVERYONE)
        history = await uow.graph.edges([ivan.id], EVERYONE, history=True, typed=True)
        live_typed = await uow.graph.edges([ivan.id], EVERYONE, typed=True)
        paired = await uow.graph.edges([ivan.id], EVERYONE, typed=False)
        oldest = await uow.graph.edges([ivan.id], EVERYONE, history=True, limit=2)
        named = await uow.graph.get_many([e.dst_id for e in history])
    assert 2 == mentions
    assert ["works_at", "leads"] == [e.relation for e in history]
    assert ((first,), history[1].id) == (history[0].entry_ids, history[0].superseded_by)
    assert ["leads"] == [e.relation for e in live_typed]
    assert {CO_OCCURS} == {e.relation for e in paired} and 2 == len(paired)
    assert [e.id for e in await _all_edges(apollo, ivan.id)][:2] == [e.id for e in oldest]
    assert {"Globex"} == {e.name for e in named.values()}


async def _all_edges(apollo, entity_id):
    async with apollo.store.unit_of_work() as uow:
        return await uow.graph.edges([entity_id], EVERYONE, history=True)


async def test_archived_entries_make_no_entity_or_edge_visible(make_apollo):
    apollo = await make_apollo()
    entry = await _store(apollo, "Today Vera Lind adopted Grafana.")
    await apollo.client("writer").deprecate_entry(entry, reason="withdrawn")
    async with apollo.store.unit_of_work() as uow:
        assert [] == await uow.graph.find(["vera lind", "grafana"], EVERYONE)
        assert [] == await uow.graph.counted(["vera lind"], EVERYONE)
        assert [] == await uow.graph.with_prefix("", EVERYONE, 10)
        vera, _ = await uow.graph.entities_of(entry)
        assert [] == await uow.graph.edges([vera.id], EVERYONE, history=True)


async def test_neighbours_sum_the_visible_support_of_live_edges_to_other_entities(make_apollo):
    """What the graph fill ranks neighbours by: per entity at the far end of a live
    visible edge, the visible entries supporting those edges; the given ids are never
    neighbours, and what only a hidden entry supports counts for nobody else."""
    apollo = await make_apollo()
    alice = Principal("alice")
    await _store(apollo, "Hana Kim met Ivan Petrov in Oslo.")
    await _store(apollo, "Later Hana Kim called Ivan Petrov.")
    await _store(apollo, "Hana Kim works at Initech.", principal=alice, access_scope="private")
    owner, other = Viewer("alice"), Viewer("bob")
    async with apollo.store.unit_of_work() as uow:
        found = {e.key: e.id for e in await uow.graph.find(["hana kim", "ivan petrov"], owner)}
        hana, ivan = found["hana kim"], found["ivan petrov"]
        (oslo,) = [e.id for e in await uow.graph.find(["oslo"], other)]
        (initech,) = [e.id for e in await uow.graph.find(["initech"], owner)]
        assert [(ivan, 2), (oslo, 1)] == await uow.graph.neighbours([hana], other, 10)
        assert [(ivan, 2)] == await uow.graph.neighbours([hana], other, 1)
        # Initech: a co_occurs and a works_at edge, each supported by the private entry.
        tied = sorted([(initech, 2), (ivan, 2)], key=lambda n: str(n[0]))  # ties: by id
        assert [*tied, (oslo, 1)] == await uow.graph.neighbours([hana], owner, 10)
        # The edge between two given ids counts for neither; Oslo is linked to both.
        assert [(oslo, 2)] == await uow.graph.neighbours([hana, ivan], other, 10)
        assert [] == await uow.graph.neighbours([hana], other, 0)
        assert [] == await uow.graph.neighbours([], other, 10)
        for viewer in (owner, other):  # the same as counting what ``edges`` returns
            support: dict = {}
            for edge in await uow.graph.edges([hana], viewer):
                for end in {edge.src_id, edge.dst_id} - {hana}:
                    support[end] = support.get(end, 0) + len(edge.entry_ids)
            expected = sorted(support.items(), key=lambda n: (-n[1], str(n[0])))
            assert expected == await uow.graph.neighbours([hana], viewer, 10)
