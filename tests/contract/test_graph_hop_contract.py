"""Two-hop retrieval: the graph fill carries a query's entity across one typed edge
(docs/retrieval.md, "How retrieval works")."""

from __future__ import annotations

import attrs
import pytest

from apollo_app import Apollo, Principal
from apollo_domain.lexical import rank
from apollo_domain.model import Status, Viewer
from apollo_domain.ports import SearchFilter
from apollo_domain.retrieval import RetrievalSettings
from tests.contract.stores import POOLED_STORE_KINDS, pooled_store_kind

# Through a transaction-mode pooler too: the graph fill's reads go in one pipeline.
store_kind = pytest.fixture(params=POOLED_STORE_KINDS)(pooled_store_kind)

QUESTION = "Where are the headquarters of Alice Moreau's employer?"
# The question's terms: headquarters, alice, moreau, employer. The seed Alice Moreau names
# two of them; the other two are the residual question.
ASKED, NAMED, RESIDUAL = 4, 2, 2
# No vector match counts: what is found, the lexical and graph signals found.
ASK = {"query": QUESTION, "min_similarity": 0.99, "limit": 20}


def carried(own_terms: int) -> float:
    """The lexical rank carried to an entry holding ``own_terms`` residual terms once, and
    reached across one of Alice Moreau's typed edges: its own rank for the residual,
    scaled to the whole question, plus half the rank her name earns."""
    own = rank([1] * own_terms, RESIDUAL) * RESIDUAL / ASKED
    return own + 0.5 * rank([1] * NAMED, ASKED)


async def _world(apollo: Apollo, edge_owner: Principal | None = None) -> dict[str, object]:
    """Alice Moreau works at Acme Corp (stated by ``edge_owner``'s private note when
    given); the headquarters of Acme Corp and of Globex, which no edge of hers reaches."""
    writer = apollo.client("writer")
    stating = writer if edge_owner is None else apollo.client("writer", edge_owner)
    scope = "global" if edge_owner is None else "private"
    ids = {
        "edge": await stating.store_knowledge(
            content="Alice Moreau works at Acme Corp.", access_scope=scope
        ),
        "hobby": await writer.store_knowledge(content="Alice Moreau enjoys sailing."),
        "acme": await writer.store_knowledge(content="Acme Corp keeps its headquarters in Oslo."),
        "globex": await writer.store_knowledge(content="Globex keeps its headquarters in Paris."),
    }
    return {name: result.entry_id for name, result in ids.items()}


async def test_a_question_reaches_an_entry_across_a_typed_edge(make_apollo):
    """The answer names only Acme Corp, which Alice Moreau's ``works_at`` edge leads to: it
    is carried the lexical rank of her name at half weight, and ranks above the other
    headquarters note, which holds the same term and no edge reaches."""
    apollo = await make_apollo()
    ids = await _world(apollo)
    result = await apollo.client("reader").query_knowledge(**ASK)
    by_id = {view.id: view for view in result.entries}
    assert pytest.approx(carried(1), rel=1e-6) == by_id[ids["acme"]].signals["lexical"]
    assert pytest.approx(rank([1], ASKED), rel=1e-6) == by_id[ids["globex"]].signals["lexical"]
    ranked = [view.id for view in result.entries]
    assert ranked.index(ids["acme"]) < ranked.index(ids["globex"])


async def test_only_what_the_seeds_own_entries_leave_open_is_carried(make_apollo):
    """Once an entry about Alice Moreau holds ``headquarters``, that term is answered
    without a hop: the Acme Corp note keeps its own rank."""
    apollo = await make_apollo()
    ids = await _world(apollo)
    await apollo.client("writer").store_knowledge(content="Alice Moreau toured the headquarters.")
    result = await apollo.client("reader").query_knowledge(**ASK)
    by_id = {view.id: view for view in result.entries}
    assert pytest.approx(rank([1], ASKED), rel=1e-6) == by_id[ids["acme"]].signals["lexical"]


async def test_a_hop_follows_typed_edges_only(make_apollo):
    """``co_occurs`` is no relation: an entity named beside Alice Moreau is no bridge."""
    apollo = await make_apollo()
    writer = apollo.client("writer")
    await writer.store_knowledge(content="Alice Moreau and Acme Corp were in the news.")
    acme = await writer.store_knowledge(content="Acme Corp keeps its headquarters in Oslo.")
    result = await apollo.client("reader").query_knowledge(**ASK)
    by_id = {view.id: view for view in result.entries}
    assert pytest.approx(rank([1], ASKED), rel=1e-6) == by_id[acme.entry_id].signals["lexical"]


async def test_an_edge_known_only_from_a_hidden_entry_carries_nothing(make_apollo):
    """Alice's private note states the edge: her query is carried across it, Bob's is not
    (for him Alice Moreau's only visible entry is the hobby note)."""
    apollo = await make_apollo()
    ids = await _world(apollo, edge_owner=Principal("alice"))
    bob = await apollo.client("reader", Principal("bob")).query_knowledge(**ASK)
    seen_by_bob = {view.id: view for view in bob.entries}
    assert ids["edge"] not in seen_by_bob
    assert pytest.approx(rank([1], ASKED), rel=1e-6) == seen_by_bob[ids["acme"]].signals["lexical"]
    alice = await apollo.client("reader", Principal("alice")).query_knowledge(**ASK)
    seen_by_alice = {view.id: view for view in alice.entries}
    assert pytest.approx(carried(1), rel=1e-6) == seen_by_alice[ids["acme"]].signals["lexical"]


async def test_an_archived_edge_carries_nothing(make_apollo):
    """Archived knowledge vouches for nothing: once the note stating the edge is
    deprecated, the Acme Corp note keeps its own rank."""
    apollo = await make_apollo()
    ids = await _world(apollo)
    admin = apollo.client("curator", Principal("curator", role="admin"))
    await admin.deprecate_entry(entry_id=ids["edge"], reason="left the company")
    result = await apollo.client("reader").query_knowledge(**ASK)
    by_id = {view.id: view for view in result.entries}
    assert pytest.approx(rank([1], ASKED), rel=1e-6) == by_id[ids["acme"]].signals["lexical"]


async def test_a_term_only_a_hidden_entry_holds_stays_open(make_apollo):
    """Whether a term is answered is judged on the entries the caller may see: Alice's
    private note about the headquarters closes the term for her alone, so Bob's query
    is still carried across the public edge (and learns nothing of her note)."""
    apollo = await make_apollo()
    ids = await _world(apollo)
    await apollo.client("writer", Principal("alice")).store_knowledge(
        content="Alice Moreau toured the headquarters.", access_scope="private"
    )
    bob = await apollo.client("reader", Principal("bob")).query_knowledge(**ASK)
    assert (
        pytest.approx(carried(1), rel=1e-6)
        == {v.id: v for v in bob.entries}[ids["acme"]].signals["lexical"]
    )
    alice = await apollo.client("reader", Principal("alice")).query_knowledge(**ASK)
    assert (
        pytest.approx(rank([1], ASKED), rel=1e-6)
        == {v.id: v for v in alice.entries}[ids["acme"]].signals["lexical"]
    )


async def test_the_bridges_are_the_most_supported_far_ends(make_apollo):
    """With room for one bridge, the edge two notes state wins over the edge one states."""
    apollo = await make_apollo()
    writer = apollo.client("writer")
    for content in (
        "Alice Moreau works at Acme Corp.",
        "As of May, Alice Moreau works at Acme Corp.",
        "Alice Moreau lives in Porto.",
    ):
        await writer.store_knowledge(content=content)
    acme = await writer.store_knowledge(content="Acme Corp keeps its headquarters in Oslo.")
    porto = await writer.store_knowledge(content="A bank keeps its headquarters in Porto.")
    narrow = Apollo(attrs.evolve(apollo.deps, retrieval=RetrievalSettings(graph_neighbours=1)))
    result = await narrow.client("reader").query_knowledge(**ASK)
    lexical = {view.id: view.signals.get("lexical") for view in result.entries}
    assert pytest.approx(carried(1), rel=1e-6) == lexical[acme.entry_id]
    assert pytest.approx(rank([1], ASKED), rel=1e-6) == lexical[porto.entry_id]
    wide = await apollo.client("reader").query_knowledge(**ASK)
    assert (
        pytest.approx(carried(1), rel=1e-6)
        == {v.id: v for v in wide.entries}[porto.entry_id].signals["lexical"]
    )


@pytest.mark.parametrize("viewer", [Viewer("bob"), Viewer("alice")])
async def test_surroundings_read_what_their_three_reads_read(make_apollo, viewer):
    """The graph fill's one read after its seeds are known returns what
    ``neighbours``, ``mentioning`` and ``hop_search`` return, whoever asks and with the
    caps biting."""
    apollo = await make_apollo()
    await _world(apollo, edge_owner=Principal("alice"))
    writer = apollo.client("writer")
    for content in (
        "Alice Moreau lives in Porto.",
        "Alice Moreau met Bruno Diaz in Porto.",
        "A bank keeps its headquarters in Porto.",
        "Bruno Diaz builds boats in Porto.",
    ):
        await writer.store_knowledge(content=content)
    flt = SearchFilter(viewer, frozenset({Status.CANDIDATE, Status.CONFIRMED}))
    async with apollo.store.unit_of_work() as uow:
        seeds = [entity.id for entity in await uow.graph.find(["alice moreau"], viewer)]
        for neighbours, scan in ((1, 2), (8, 50)):
            read = await uow.graph.surroundings(
                seeds,
                flt,
                neighbours=neighbours,
                scan=scan,
                hop_text="headquarters employer",
                hop_limit=5,
                bridges=neighbours,
            )
            linked = await uow.graph.neighbours(seeds, viewer, neighbours)
            assert linked == read.neighbours
            named = [*seeds, *(entity_id for entity_id, _ in linked)]
            assert await uow.graph.mentioning(named, flt, scan) == read.mentioning
            hops = await uow.graph.hop_search(
                seeds, "headquarters employer", flt, 5, bridges=neighbours
            )
            assert hops == read.hops
            assert read.hops  # the caps leave something to compare
        unhopped = await uow.graph.surroundings(seeds, flt, neighbours=8, scan=50)
        assert ([], read.mentioning) == (unhopped.hops, unhopped.mentioning)


async def test_an_edge_stated_after_its_seed_was_looked_up_is_crossed_once_looked_up_again(
    make_apollo,
):
    """A seed without a live typed edge reaches nothing across one (the PostgreSQL store
    does not even send the hop search then); once an edge is stated, looking the seed up
    again crosses it."""
    apollo = await make_apollo()
    writer = apollo.client("writer")
    await writer.store_knowledge(content="Alice Moreau enjoys sailing.")
    acme = await writer.store_knowledge(content="Acme Corp keeps its headquarters in Oslo.")
    viewer = Viewer("bob")
    flt = SearchFilter(viewer, frozenset({Status.CANDIDATE, Status.CONFIRMED}))

    async def hops() -> list[object]:
        async with apollo.store.unit_of_work() as uow:
            seeds = [entity.id for entity in await uow.graph.find(["alice moreau"], viewer)]
            read = await uow.graph.surroundings(
                seeds,
                flt,
                neighbours=8,
                scan=50,
                hop_text="headquarters employer",
                hop_limit=5,
                bridges=8,
            )
        return [entry_id for entry_id, _, _ in read.hops]

    assert [] == await hops()
    await writer.store_knowledge(content="Alice Moreau works at Acme Corp.")
    assert [acme.entry_id] == await hops()
