"""Nothing invisible reaches a reader: every read method of the client protocol, on every
store, for random principals, groups, scopes and links.

Each stored entry carries its own markers (content word, domain and agent id), so any
appearance of an invisible entry's id or marker anywhere in a result is a leak. A read
method added to ``KnowledgeClient`` without a recipe here fails the test, so new reads are
covered as they come.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from attrs import frozen
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from apollo_adapters.clock import ManualClock
from apollo_app import Apollo, KnowledgeClient, NotFound, Principal
from apollo_app.wire.codec import make_converter
from apollo_domain.rules import is_visible
from apollo_domain.services import resolve_viewer
from tests.contract.stores import open_store
from tests.support import KeyedEmbedder

OWNERS = ["alice", "bob", "carol", "dave", None]
GROUPS = ["ops", "research"]
SCOPES = ["global", "team", "private"]
MAX_EXAMPLES = {"memory": 40, "postgres": 8}
_converter = make_converter(forbid_extra_keys=False, round_scores=False)


@frozen
class Planned:
    owner: str | None
    scope: str


@frozen
class Scenario:
    entries: tuple[Planned, ...]
    memberships: frozenset[tuple[str, str]]
    links: tuple[tuple[int, int], ...]
    viewer: str | None


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    count = draw(st.integers(2, 6))
    planned = []
    for _ in range(count):
        owner = draw(st.sampled_from(OWNERS))
        scope = "global" if owner is None else draw(st.sampled_from(SCOPES))
        planned.append(Planned(owner, scope))
    pairs = [(p, g) for p in OWNERS if p is not None for g in GROUPS]
    memberships = frozenset(draw(st.lists(st.sampled_from(pairs), max_size=5)))
    links = draw(
        st.lists(st.tuples(st.integers(0, count - 1), st.integers(0, count - 1)), max_size=6)
    )
    return Scenario(
        tuple(planned),
        memberships,
        tuple((a, b) for a, b in links if a != b),
        draw(st.sampled_from(OWNERS)),
    )


def _marker(index: int) -> str:
    return f"zq{index}marker"


#: Entities every entry mentions, so that the entity graph joins visible and invisible
#: entries; the relations between the two shared ones supersede each other in turn.
HUB, BASE = "zqhub", "zqbase"
RELATIONS = ("uses", "leads", "works at")


#: The episode each entry stored from a text was in, by index, for the scenario playing.
EPISODES: dict[int, Any] = {}


def _content(index: int) -> str:
    """An entry's text: its marker is an entity (quoted) with typed edges to the hub."""
    relation = RELATIONS[index % len(RELATIONS)]
    return (
        f'Fact number {index}: "{_marker(index)}" uses "{HUB}". Then "{HUB}" {relation} "{BASE}".'
    )


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON-ready value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield str(key)
            yield from _strings(inner)
    elif isinstance(value, list | tuple):
        for inner in value:
            yield from _strings(inner)


def _read_methods() -> list[str]:
    """The methods of the client protocol that return values, not dispatch envelopes."""
    names = []
    for name, member in inspect.getmembers(KnowledgeClient, inspect.isfunction):
        if name.startswith("_"):
            continue
        returned = str(inspect.signature(member).return_annotation)
        if "Dispatch" not in returned:
            names.append(name)
    return sorted(names)


#: How each read method is called for one scenario: argument sets from the stored markers.
RECIPES: dict[str, Callable[[list[Any], int], list[dict[str, Any]]]] = {
    "query_knowledge": lambda ids, n: (
        [
            {
                "query": f"{_marker(i)} fact",
                "min_confidence": 0.0,
                "limit": 100,
                "context_window": 5,
            }
            for i in range(n)
        ]
        + [{"query": "zq", "min_confidence": 0.0, "limit": 100, "context_window": 5}]
    ),
    # the episode of each even entry (stored from a text), under its entry's id
    "get_episode": lambda ids, n: [{"episode_id": EPISODES[i]} for i in range(n) if i in EPISODES],
    "retrieve": lambda ids, n: [
        {"query": f"{_marker(i)} fact", "min_confidence": 0.0, "limit": 100} for i in range(n)
    ],
    "related_entries": lambda ids, n: [{"entry_id": entry_id, "depth": 3} for entry_id in ids],
    "get_expertise": lambda ids, n: [{"domain": f"dom{_marker(i)}"} for i in range(n)],
    "domains_at_risk": lambda ids, n: [{"min_agents": 100}],
    "agent_profile": lambda ids, n: [{"agent_id": f"agent-{_marker(i)}"} for i in range(n)],
    # names asked in capitals, so a name echoed back (lowercase, as written) is still a leak
    "entities": lambda ids, n: (
        [{"query": f"where is {_marker(i)} now"} for i in range(n)]
        + [{"prefix": "ZQ", "limit": 100}, {}]
    ),
    "entity": lambda ids, n: [{"name": name.upper()} for name in (HUB, *map(_marker, range(n)))],
    "entity_history": lambda ids, n: [
        {"name": name.upper()} for name in (HUB, BASE, *map(_marker, range(n)))
    ],
    "related_entities": lambda ids, n: [
        {"name": name.upper(), "depth": 3} for name in (BASE, *map(_marker, range(n)))
    ],
}


def test_every_read_method_has_a_recipe():
    assert set(_read_methods()) == set(RECIPES)


async def _play(kind: str, request: pytest.FixtureRequest, scenario: Scenario) -> int:
    embedder = KeyedEmbedder(16)
    store = await open_store(
        kind, request, dimension=embedder.dimension, model_id=embedder.model_id
    )
    apollo = Apollo.with_store(
        store, embedder=embedder, clock=ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    )
    try:
        for principal, group in scenario.memberships:
            await apollo.directory.add_membership(principal, group)
        ids = []
        EPISODES.clear()
        for index, planned in enumerate(scenario.entries):
            writer = apollo.client(f"agent-{_marker(index)}", Principal(planned.owner))
            fields = {
                "knowledge_domain": f"dom{_marker(index)}",
                "access_scope": planned.scope,
            }
            if index % 2 == 0:  # a text of two statements: the fact, and one after it
                told = await writer.store_text(
                    text=f"{_content(index)}\n\nThe story of {_marker(index)} ends here.",
                    **fields,
                )
                EPISODES[index] = told.episode_id
                stored = told.statements[0]
            else:
                stored = await writer.store_knowledge(content=_content(index), **fields)
            assert stored.entry_id is not None, stored
            ids.append(stored.entry_id)
        entries = [await apollo.get_entry(entry_id) for entry_id in ids]
        for a, b in scenario.links:  # linked by someone who sees both ends
            for owner in OWNERS:
                viewer = await resolve_viewer(apollo.directory, Principal(owner))
                if is_visible(entries[a], viewer) and is_visible(entries[b], viewer):
                    await apollo.client("curator", Principal(owner)).link_entries(
                        ids[a], ids[b], "extends"
                    )
                    break
        viewer = await resolve_viewer(apollo.directory, Principal(scenario.viewer))
        hidden = [i for i, entry in enumerate(entries) if not is_visible(entry, viewer)]
        forbidden = {str(ids[i]) for i in hidden} | {_marker(i) for i in hidden}
        reader = apollo.client("reader", Principal(scenario.viewer))
        calls = 0
        for name in _read_methods():
            for arguments in RECIPES[name](ids, len(ids)):
                try:
                    result = await getattr(reader, name)(**arguments)
                except NotFound:
                    continue
                calls += 1
                asked = {value for value in arguments.values() if isinstance(value, str)}
                leaked = [
                    text
                    for text in _strings(_converter.unstructure(result))
                    for secret in forbidden
                    if secret in text and text not in asked  # an echo of the question is not
                ]
                assert not leaked, f"{name}({arguments}) showed {leaked}"
        event(f"{kind}: {len(hidden)} hidden of {len(ids)}")
        return len(hidden) if calls else 0
    finally:
        await store.close()


@pytest.mark.parametrize("kind", ["memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_no_read_shows_what_the_caller_cannot_see(kind: str, request: pytest.FixtureRequest):
    hidden_seen: list[int] = []

    @settings(
        max_examples=MAX_EXAMPLES[kind],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(scenarios())
    def check(scenario: Scenario) -> None:
        loop = asyncio.new_event_loop()
        try:
            hidden_seen.append(loop.run_until_complete(_play(kind, request, scenario)))
        finally:
            loop.close()

    check()
    # the leak checks ran, with something to hide, in some example
    assert any(hidden > 0 for hidden in hidden_seen), "no scenario hid anything"
