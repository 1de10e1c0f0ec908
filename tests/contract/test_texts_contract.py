"""Texts and episodes (docs/texts.md) on every store: a conversation becomes one episode of
statements stored through the ordinary write path, all or nothing; entries remember their
place; a query gives each result its episode neighbours; nobody sees an episode they may
not see; the same text again creates nothing new."""

from __future__ import annotations

import asyncio
from uuid import UUID

import pytest

from apollo_app import Apollo, NotFound, Outcome, Principal, ValidationError
from apollo_domain.bounds import STATEMENTS
from apollo_domain.commands import EraseAgent, Stats
from apollo_domain.episodes import Statement, Turn
from tests.contract.stores import POOLED_STORE_KINDS, pooled_store_kind

#: Also through PgBouncer in transaction mode.
store_kind = pytest.fixture(params=POOLED_STORE_KINDS)(pooled_store_kind)

ANN = Principal("ann")
BOB = Principal("bob")
CONVERSATION = [
    {
        "speaker": "ann",
        "text": "We moved the orders database to PostgreSQL 16 on Monday. It runs on the "
        "new cluster now.",
        "at": "2026-03-02T09:00:00Z",
    },
    {
        "speaker": "bob",
        "text": "The payment service still reads from the old replica. We must switch "
        "the payment service before Friday.",
        "at": "2026-03-02T09:01:00+00:00",
    },
    {"speaker": "ann", "text": "Kafka consumer lag on the billing topic is normal again."},
]
#: What the deterministic split makes of it: the second sentence of the first turn opens
#: with "It" and keeps its predecessor.
STATEMENTS_SAID = [
    "ann: We moved the orders database to PostgreSQL 16 on Monday. It runs on the new cluster now.",
    "bob: The payment service still reads from the old replica.",
    "bob: We must switch the payment service before Friday.",
    "ann: Kafka consumer lag on the billing topic is normal again.",
]


async def _entries_of(apollo: Apollo, episode: UUID) -> list[tuple[int | None, str]]:
    async with apollo.store.unit_of_work() as uow:
        found = await uow.entries.in_episodes([(episode, 0, 1_000)], None)
    return [(e.position, e.content) for e in found]


async def test_a_conversation_becomes_one_episode_of_statements_in_order(make_apollo):
    apollo = await make_apollo()
    told = await apollo.client("claude-ann", ANN).store_text(
        CONVERSATION, tags=["ops"], context={"ticket": "OPS-7"}
    )
    assert [Outcome.CREATED] * 4 == [r.outcome for r in told.statements]
    episode = await apollo.client("claude-ann", ANN).get_episode(told.episode_id)
    assert [s.content for s in episode.statements] == STATEMENTS_SAID
    assert [s.episode_id for s in episode.statements] == [told.episode_id] * 4
    assert [s.position for s in episode.statements] == [0, 1, 2, 3]
    assert [dict(t) for t in episode.text] == [
        {"speaker": "ann", "text": CONVERSATION[0]["text"], "at": "2026-03-02T09:00:00+00:00"},
        {"speaker": "bob", "text": CONVERSATION[1]["text"], "at": "2026-03-02T09:01:00+00:00"},
        {"speaker": "ann", "text": CONVERSATION[2]["text"], "at": None},
    ]
    assert "claude-ann" == episode.agent_id
    entry = await apollo.get_entry(told.statements[1].entry_id)
    assert ("ops",) == entry.tags
    assert "OPS-7" == entry.source_context["ticket"]
    assert {
        "id": str(told.episode_id),
        "turn": 1,
        "speaker": "bob",
        "at": "2026-03-02T09:01:00+00:00",
    } == entry.source_context["episode"]
    assert (told.episode_id, 1) == (entry.episode_id, entry.position)


async def test_a_document_is_split_into_its_sentences(make_apollo):
    apollo = await make_apollo()
    document = (
        "Valkey 8 replaced Redis for the session cache. It keeps the same protocol.\n\n"
        "The cache evicts keys after 300 seconds. Ok.\n- Metrics go to Prometheus."
    )
    told = await apollo.client("claude-ann").store_text(document)
    episode = await apollo.get_episode(told.episode_id)
    assert document == episode.text
    assert [s.content for s in episode.statements] == [
        "Valkey 8 replaced Redis for the session cache. It keeps the same protocol.",
        "The cache evicts keys after 300 seconds. Ok.",
        "- Metrics go to Prometheus.",
    ]


async def test_a_query_gives_each_result_its_episode_neighbours(make_apollo):
    apollo = await make_apollo()
    ann = apollo.client("claude-ann", ANN)
    told = await ann.store_text(CONVERSATION)
    found = await ann.query_knowledge(
        "old replica", mode="lexical", context_window=1, min_confidence=0
    )
    (hit,) = [e for e in found.entries if e.id == told.statements[1].entry_id]
    assert (told.episode_id, 1) == (hit.episode_id, hit.position)
    assert [(n.position, n.content) for n in hit.neighbours] == [
        (0, STATEMENTS_SAID[0]),
        (2, STATEMENTS_SAID[2]),
    ]
    plain = await ann.query_knowledge("old replica", mode="lexical", min_confidence=0)
    assert all(e.neighbours == () for e in plain.entries)
    browsed = await ann.query_knowledge("", context_window=2, min_confidence=0)
    last = next(e for e in browsed.entries if e.position == 3)
    assert [n.position for n in last.neighbours] == [1, 2]


async def test_neighbours_leave_out_archived_statements_and_are_never_boosted(make_apollo):
    apollo = await make_apollo()
    ann = apollo.client("claude-ann", ANN)
    told = await ann.store_text(CONVERSATION)
    await ann.deprecate_entry(told.statements[0].entry_id, reason="moved again")
    before = await apollo.get_entry(told.statements[2].entry_id)
    found = await ann.query_knowledge(
        "old replica", mode="lexical", context_window=1, min_confidence=0
    )
    (hit,) = [e for e in found.entries if e.id == told.statements[1].entry_id]
    assert [n.position for n in hit.neighbours] == [2]
    after = await apollo.get_entry(told.statements[2].entry_id)
    assert (before.confidence, before.access_count) == (after.confidence, after.access_count)


async def test_a_private_episode_shows_nothing_to_another_principal(make_apollo):
    apollo = await make_apollo()
    told = await apollo.client("claude-ann", ANN).store_text(CONVERSATION, access_scope="private")
    bob = apollo.client("claude-bob", BOB)
    with pytest.raises(NotFound):
        await bob.get_episode(told.episode_id)
    found = await bob.query_knowledge("payment service", context_window=5, min_confidence=0)
    assert [] == [e for e in found.entries if e.episode_id == told.episode_id]
    assert all(
        n.id not in {r.entry_id for r in told.statements}
        for e in found.entries
        for n in e.neighbours
    )
    browsed = await bob.query_knowledge("", context_window=5, min_confidence=0)
    assert () == browsed.entries
    stats = await bob.run(Stats())
    assert 0 == stats.total
    # ... while its owner sees it all
    mine = await apollo.client("claude-ann", ANN).get_episode(told.episode_id)
    assert 4 == len(mine.statements)


async def test_the_same_conversation_again_creates_nothing_new(make_apollo):
    apollo = await make_apollo()
    ann = apollo.client("claude-ann", ANN)
    first = await ann.store_text(CONVERSATION)
    again = await ann.store_text([dict(turn) for turn in CONVERSATION])
    assert first.episode_id == again.episode_id
    assert [Outcome.DEDUPLICATED] * 4 == [r.outcome for r in again.statements]
    assert [r.entry_id for r in first.statements] == [r.entry_id for r in again.statements]
    assert 4 == (await ann.run(Stats())).total
    assert [p for p, _ in await _entries_of(apollo, first.episode_id)] == [0, 1, 2, 3]
    # another agent saying the same is another episode, its statements the same entries
    other = await apollo.client("claude-bob", ANN).store_text(CONVERSATION)
    assert other.episode_id != first.episode_id
    assert {r.entry_id for r in other.statements} == {r.entry_id for r in first.statements}
    assert Outcome.CREATED not in {r.outcome for r in other.statements}


async def test_a_failure_midway_stores_neither_the_episode_nor_any_statement(make_apollo):
    apollo = await make_apollo(faulty=True)
    ann = apollo.client("claude-ann", ANN)
    apollo.store.faults.failing.add("graph.resolve")  # after the entries went in
    with pytest.raises(Exception, match="injected"):
        await ann.store_text(CONVERSATION)
    apollo.store.faults.failing.clear()
    assert 0 == (await ann.run(Stats())).total
    told = await ann.store_text(CONVERSATION)  # nothing of the failed one is in the way
    assert [Outcome.CREATED] * 4 == [r.outcome for r in told.statements]


async def test_two_callers_storing_one_text_at_once_store_it_once(make_apollo):
    """The first has recorded the episode and is held before its commit; the second must
    wait for it (PostgreSQL: the episode's unique id; in memory: the serialized units of
    work), then find it and store nothing."""
    apollo = await make_apollo(interleaved=True)
    points = apollo.deps.store
    ann = apollo.client("claude-ann", ANN)
    gate = points.hold("first", "commit")
    first = points.run("first", ann.store_text(CONVERSATION))
    await points.reached("first", "commit")
    second = points.run("second", ann.store_text(CONVERSATION))
    blocked = await points.blocked_or_done(second)
    gate.set()
    one, two = await points.finish(first, second)
    assert blocked, "the second stored the text while the first held it uncommitted"
    assert [Outcome.CREATED] * 4 == [r.outcome for r in one.statements]
    assert [Outcome.DEDUPLICATED] * 4 == [r.outcome for r in two.statements]
    assert one.episode_id == two.episode_id
    assert 4 == (await ann.run(Stats())).total


async def test_erasing_the_agent_deletes_its_episodes(make_apollo):
    apollo = await make_apollo()
    told = await apollo.client("claude-ann", ANN).store_text(CONVERSATION)
    admin = apollo.client("ops", Principal("ops", role="admin"))
    erased = await admin.run(EraseAgent(target_agent_id="claude-ann"))
    assert 1 == erased.episodes
    with pytest.raises(NotFound):
        await apollo.get_episode(told.episode_id)
    async with apollo.store.unit_of_work() as uow:
        assert await uow.episodes.get(told.episode_id) is None


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (42, "text"),
        ("   \u200b ", "text"),
        ([{"speaker": "ann"}], "text[0].text"),
        ([{"text": "hi", "speaker": 7}], "text[0].speaker"),
        ([{"text": "hi", "at": "yesterday"}], "text[0].at"),
        ([{"text": "hi", "mood": "calm"}], "text[0].mood"),
        (["just a string"], "text[0]"),
    ],
)
async def test_a_malformed_text_is_refused_naming_the_field_and_stores_nothing(
    make_apollo, text, field
):
    apollo = await make_apollo()
    with pytest.raises(ValidationError) as raised:
        await apollo.client("claude-ann").store_text(text)
    assert field == raised.value.field
    assert 0 == (await apollo.client("claude-ann").run(Stats())).total


class _Scripted:
    """A splitter that says what it is told to (a language model, say)."""

    def __init__(self, statements: list[Statement]) -> None:
        self.statements = statements
        self.seen: list[tuple[Turn, ...]] = []

    async def split(self, turns):  # type: ignore[no-untyped-def]
        self.seen.append(tuple(turns))
        return self.statements


async def test_more_statements_than_the_bound_are_refused_and_nothing_is_stored(make_apollo):
    many = [Statement(f"fact number {i} about the fleet") for i in range(STATEMENTS.limit + 1)]
    apollo = await make_apollo(llm=_Scripted(many))  # a model that splits texts too
    with pytest.raises(ValidationError, match="statements"):
        await apollo.client("claude-ann").store_text("one text")
    assert 0 == (await apollo.client("claude-ann").run(Stats())).total


async def test_episodes_of_concurrent_texts_stay_apart(make_apollo):
    apollo = await make_apollo()
    clients = [apollo.client(f"agent-{i}", Principal(f"p{i}")) for i in range(4)]
    told = await asyncio.gather(
        *(
            c.store_text(f"Agent {i} runs shard {i} of the index. It holds {i} GB.")
            for i, c in enumerate(clients)
        )
    )
    assert len({t.episode_id for t in told}) == 4
    for i, t in enumerate(told):
        assert [c for _, c in await _entries_of(apollo, t.episode_id)] == [
            f"Agent {i} runs shard {i} of the index. It holds {i} GB."
        ]


async def test_statements_said_next_to_each_other_co_occur_in_the_entity_graph(make_apollo):
    """Adjacent statements' entities are linked (co_occurs), each statement tagged only
    with what it names itself; statements further apart are not linked."""
    apollo = await make_apollo()
    ann = apollo.client("claude-ann", ANN)
    await ann.store_text(
        [
            {"speaker": "ann", "text": "Did Marta Quispe move to Lisbon?"},
            {"speaker": "bob", "text": "Yes, the Lisbon office took her in March."},
            {"speaker": "ann", "text": "Then Kestrel Labs loses its best engineer."},
            {"speaker": "bob", "text": "Ravenna Bank will hire nobody this year."},
        ]
    )
    lisbon = await ann.entity("Lisbon")
    linked = {
        name.lower()
        for edge in lisbon.edges
        if edge.relation == "co_occurs"
        for name in (edge.src, edge.dst)
    }
    assert {"marta quispe", "kestrel labs"} <= linked, lisbon
    assert "ravenna bank" not in linked
    marta = await ann.entity("Marta Quispe")
    assert [m.snippet for m in marta.entries] == ["ann: Did Marta Quispe move to Lisbon?"]
