"""Hybrid query: vector, lexical and graph rankings fused into one (docs/retrieval.md, "How
retrieval
works")."""

from __future__ import annotations

import attrs
import pytest

from apollo_app import Apollo, Principal, ValidationError
from apollo_domain.retrieval import RetrievalSettings
from tests.support import KeyedEmbedder, at_cosine


async def _seed(apollo, embedder: KeyedEmbedder) -> dict[str, object]:
    """Three entries: one near the probe's vector sharing no term with it, one sharing the
    rare term ``zeppelin`` but orthogonal to it, one that is neither."""
    base = embedder.basis(0)
    embedder.set("where is the zeppelin hangar", base)
    embedder.set("the airship shed sits by the lake", at_cosine(base, 0.8, 1))
    embedder.set("zeppelin maintenance happens on tuesdays", embedder.basis(2))
    embedder.set("the cafeteria serves soup", [-x for x in at_cosine(base, 0.3, 3)])
    ids = {}
    for text in (
        "the airship shed sits by the lake",
        "zeppelin maintenance happens on tuesdays",
        "the cafeteria serves soup",
    ):
        ids[text] = (await apollo.client("writer").store_knowledge(content=text)).entry_id
    return ids


async def _store_near_the_probe(apollo, embedder: KeyedEmbedder, text: str) -> object:
    """Store ``text`` at cosine 0.9 to the probe's vector; its entry id."""
    embedder.set(text, at_cosine(embedder.basis(0), 0.9, 4))
    return (await apollo.client("writer").store_knowledge(content=text)).entry_id


async def test_hybrid_finds_what_either_signal_finds_and_names_the_signals(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    ids = await _seed(apollo, embedder)
    result = await apollo.client("reader").query_knowledge(query="where is the zeppelin hangar")
    by_id = {view.id: view for view in result.entries}
    assert {
        ids["the airship shed sits by the lake"],
        ids["zeppelin maintenance happens on tuesdays"],
    } == set(by_id)
    near = by_id[ids["the airship shed sits by the lake"]]
    assert ["vector"] == list(near.signals)
    assert pytest.approx(0.8, abs=1e-5) == near.signals["vector"] == near.similarity
    named = by_id[ids["zeppelin maintenance happens on tuesdays"]]
    assert ["lexical"] == list(named.signals)
    assert named.similarity is None
    assert named.signals["lexical"] > 0
    assert all(view.score is not None and view.score > 0 for view in result.entries)
    assert 0.5 == (await apollo.get_entry(ids["the cafeteria serves soup"])).confidence


async def test_an_entry_found_by_both_signals_ranks_first(make_apollo):
    """Reciprocal rank fusion: two first places beat one."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    ids = await _seed(apollo, embedder)
    both = await _store_near_the_probe(apollo, embedder, "the zeppelin hangar has a new roof")
    result = await apollo.client("reader").query_knowledge(query="where is the zeppelin hangar")
    assert both == result.entries[0].id
    assert {"vector", "lexical"} == set(result.entries[0].signals)
    assert result.entries[0].score > result.entries[1].score
    assert ids["the cafeteria serves soup"] not in {v.id for v in result.entries}


async def test_single_signal_modes(make_apollo):
    """``vector`` and ``lexical`` use one signal; lexical needs no embedding."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    ids = await _seed(apollo, embedder)
    reader = apollo.client("reader")
    vector = await reader.query_knowledge(query="where is the zeppelin hangar", mode="vector")
    assert [ids["the airship shed sits by the lake"]] == [v.id for v in vector.entries]
    calls = embedder.calls
    lexical = await reader.query_knowledge(query="where is the zeppelin hangar", mode="lexical")
    assert [ids["zeppelin maintenance happens on tuesdays"]] == [v.id for v in lexical.entries]
    assert ["lexical"] == list(lexical.entries[0].signals)
    assert calls == embedder.calls


async def test_an_unrelated_query_returns_and_boosts_nothing(make_apollo):
    """No shared term and no vector above the floor: nothing is found, nothing is boosted."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    ids = await _seed(apollo, embedder)
    embedder.set("quarterly payroll figures", [-x for x in embedder.basis(1)])
    result = await apollo.client("reader").query_knowledge(
        query="quarterly payroll figures", min_similarity=0.5
    )
    assert () == result.entries
    for entry_id in ids.values():
        assert 0.5 == (await apollo.get_entry(entry_id)).confidence
    async with apollo.store.unit_of_work() as uow:
        assert 0 == await uow.access_log.count("query")


async def test_access_log_names_the_signals(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    await _seed(apollo, embedder)
    result = await apollo.client("reader").query_knowledge(query="where is the zeppelin hangar")
    assert 2 == len(result.entries)
    async with apollo.store.unit_of_work() as uow:
        assert 2 == await uow.access_log.count("query")


async def test_unknown_mode_is_rejected(make_apollo):
    apollo = await make_apollo()
    with pytest.raises(ValidationError) as err:
        await apollo.client("reader").query_knowledge(query="anything", mode="fuzzy")
    assert "mode" == err.value.field


async def _graph_world(apollo):
    alice = Principal("alice")
    writer = apollo.client("writer")
    ids = {
        "works": (await writer.store_knowledge(content="Alice Moreau works at Acme Corp.")),
        "office": (await writer.store_knowledge(content="Acme Corp opened an office in Porto.")),
        "globex": (await writer.store_knowledge(content="Engineers join Globex in Porto.")),
        "secret": (
            await apollo.client("writer", alice).store_knowledge(
                content="Alice Moreau plans a move to Globex.", access_scope="private"
            )
        ),
        "noise": (await writer.store_knowledge(content="Zoltan Kis repairs bicycles.")),
    }
    return {name: result.entry_id for name, result in ids.items()}


async def test_graph_fill_adds_entries_of_the_query_entities_and_their_neighbours(make_apollo):
    """``alice moreau`` seeds the graph; Acme Corp is her neighbour, so the office note is
    found by the graph alone."""
    apollo = await make_apollo()
    ids = await _graph_world(apollo)
    result = await apollo.client("reader").query_knowledge(
        query="what about alice moreau", min_similarity=0.99
    )
    by_id = {view.id: view for view in result.entries}
    assert {ids["works"], ids["office"]} == set(by_id)
    assert {"lexical", "graph"} == set(by_id[ids["works"]].signals)
    # Alice's point is hers alone; Acme Corp's half point is shared by the two notes naming it.
    assert 1.25 == by_id[ids["works"]].signals["graph"]
    assert {"graph": 0.25} == dict(by_id[ids["office"]].signals)
    assert ids["works"] == result.entries[0].id


async def test_graph_fill_walks_only_edges_the_caller_may_see(make_apollo):
    """Alice's private note links her to Globex: only Alice's query reaches Globex's note."""
    apollo = await make_apollo()
    ids = await _graph_world(apollo)
    query = {"query": "Alice Moreau", "min_similarity": 0.99}
    bob = await apollo.client("reader", Principal("bob")).query_knowledge(**query)
    assert {ids["works"], ids["office"]} == {view.id for view in bob.entries}
    owner = await apollo.client("reader", Principal("alice")).query_knowledge(**query)
    assert {ids["works"], ids["office"], ids["secret"], ids["globex"]} == {
        view.id for view in owner.entries
    }


async def test_graph_fill_keeps_the_neighbours_most_entries_link_to_a_seed(make_apollo):
    """Two notes link Alice Moreau to Bruno Diaz, one to Carla Okafor: with room for one
    neighbour, the graph reaches Bruno's own note and not Carla's."""
    apollo = await make_apollo()
    writer = apollo.client("writer")
    for content in (
        "Alice Moreau met Bruno Diaz in Lisbon.",
        "Alice Moreau hired Bruno Diaz again.",
        "Alice Moreau called Carla Okafor.",
    ):
        await writer.store_knowledge(content=content)
    bruno = (await writer.store_knowledge(content="Bruno Diaz builds boats.")).entry_id
    carla = (await writer.store_knowledge(content="Carla Okafor paints walls.")).entry_id
    narrow = Apollo(attrs.evolve(apollo.deps, retrieval=RetrievalSettings(graph_neighbours=1)))
    query = {"query": "Alice Moreau", "min_similarity": 0.99, "limit": 20}
    found = {view.id for view in (await narrow.client("reader").query_knowledge(**query)).entries}
    assert bruno in found and carla not in found
    wide = {view.id for view in (await apollo.client("reader").query_knowledge(**query)).entries}
    assert {bruno, carla} <= wide


async def test_graph_fill_weighs_a_rarely_named_neighbour_above_a_common_one(make_apollo):
    """Acme Corp and Porto are both Alice's neighbours; two notes name Acme Corp and three
    name Porto, so the headquarters note gets a larger share than each Porto note."""
    apollo = await make_apollo()
    writer = apollo.client("writer")
    await writer.store_knowledge(content="Alice Moreau works at Acme Corp.")
    await writer.store_knowledge(content="Alice Moreau lives in Porto.")
    hq = await writer.store_knowledge(content="Acme Corp keeps its headquarters downtown.")
    porto = [
        (await writer.store_knowledge(content=text)).entry_id
        for text in ("The harbour of Porto is busy.", "A wine fair fills Porto every year.")
    ]
    result = await apollo.client("reader").query_knowledge(
        query="Alice Moreau", min_similarity=0.99, limit=20
    )
    graph = {view.id: view.signals["graph"] for view in result.entries}
    assert 0.25 == graph[hq.entry_id]  # 0.5 shared by the two notes naming Acme Corp
    assert [pytest.approx(0.5 / 3)] * 2 == [graph[entry_id] for entry_id in porto]  # by three
    ranked = [view.id for view in result.entries]
    assert all(ranked.index(hq.entry_id) < ranked.index(entry_id) for entry_id in porto)


async def test_single_signal_modes_have_no_graph_fill(make_apollo):
    apollo = await make_apollo()
    ids = await _graph_world(apollo)
    reader = apollo.client("reader")
    lexical = await reader.query_knowledge(query="what about alice moreau", mode="lexical")
    assert [ids["works"]] == [view.id for view in lexical.entries]
    vector = await reader.query_knowledge(
        query="what about alice moreau", mode="vector", min_similarity=0.99
    )
    assert () == vector.entries


async def test_hybrid_shows_an_archived_winner_as_it_is(make_apollo):
    """Fusing reads the winners whole after ranking ids: an archived winner the filter asks
    for is returned with its signals and stored confidence, never boosted or logged, while
    the live winners are."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    ids = await _seed(apollo, embedder)
    old = await _store_near_the_probe(apollo, embedder, "the zeppelin hangar was rebuilt")
    await apollo.client("curator", Principal("curator", role="admin")).deprecate_entry(
        entry_id=old, reason="outdated"
    )
    result = await apollo.client("reader").query_knowledge(
        query="where is the zeppelin hangar", status=["candidate", "archived"]
    )
    by_id = {view.id: view for view in result.entries}
    assert old == result.entries[0].id
    assert {"vector", "lexical"} == set(by_id[old].signals)
    assert pytest.approx(0.9, abs=1e-5) == by_id[old].similarity
    archived = await apollo.get_entry(old)
    assert (archived.confidence, "archived") == (by_id[old].confidence, archived.status.value)
    live = ids["the airship shed sits by the lake"]
    assert by_id[live].confidence > 0.5
    assert by_id[live].confidence == (await apollo.get_entry(live)).confidence
    async with apollo.store.unit_of_work() as uow:
        assert len(result.entries) - 1 == await uow.access_log.count("query")


class _Profile:
    """A query profile that keeps what it is told."""

    def __init__(self) -> None:
        self.stages: list[tuple[str, float]] = []

    def stage(self, name: str, seconds: float) -> None:
        self.stages.append((name, seconds))


@pytest.mark.parametrize(
    ("mode", "stages"),
    [
        ("hybrid", {"embed", "vector", "lexical", "graph", "fuse", "read winners", "boost"}),
        ("vector", {"embed", "vector", "fuse", "read winners", "boost"}),
        ("lexical", {"lexical", "fuse", "read winners", "boost"}),
    ],
)
async def test_a_query_tells_its_profile_each_stage_once(make_apollo, mode, stages):
    """Each stage that ran is told once, with the time it took on the use cases' clock; a
    query without a profile is answered the same."""
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    await _seed(apollo, embedder)
    unprofiled = await apollo.client("reader").query_knowledge(
        query="where is the zeppelin hangar", mode=mode
    )
    profile = _Profile()
    apollo.deps = attrs.evolve(apollo.deps, query_profile=profile)
    profiled = await apollo.client("reader").query_knowledge(
        query="where is the zeppelin hangar", mode=mode
    )
    assert [e.id for e in unprofiled.entries] == [e.id for e in profiled.entries]
    assert profiled.entries
    assert sorted(stages) == sorted(name for name, _ in profile.stages)
    assert all(seconds >= 0 for _, seconds in profile.stages)
