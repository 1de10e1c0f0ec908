"""The language-model text splitter (``OpenAIChatModel.split``) against a real local HTTP
server (Starlette under uvicorn on a loopback port).

The server answers ``/chat/completions`` with the canned content :data:`ANSWERS` holds for
the requested ``model``; ``boom`` answers 500 and ``slow`` answers after a second.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import pytest_asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from apollo_adapters.llm import OpenAIChatModel
from apollo_adapters.llm.openai_chat import MAX_SPLIT_PROMPT_CHARS
from apollo_domain import bounds as b
from apollo_domain.entities import EntityMention, Extraction, TypedMention
from apollo_domain.episodes import Statement, Turn
from apollo_domain.errors import TransportError
from apollo_domain.ports import TextSplitter
from apollo_domain.services.entities import MAX_ENTITIES_PER_ENTRY
from tests.unit.test_openai_adapters import serving

AT = datetime(2026, 1, 2, 10, tzinfo=UTC)
TURNS = (
    Turn("Alice joined Acme in 2024. She works on Orion.", "alice", AT),
    Turn("I use Postgres.", "bob"),
    Turn("The meeting is on Friday."),
)
NUMBERED = (
    "[0] alice (2026-01-02T10:00:00+00:00): Alice joined Acme in 2024. She works on Orion.\n"
    "[1] bob: I use Postgres.\n"
    "[2]: The meeting is on Friday."
)

GOOD: dict[str, Any] = {
    "statements": [
        {
            "text": "  Alice joined Acme in 2024.  ",
            "turn": 0,
            "entities": [
                {"name": "Alice", "kind": "Person"},
                {"name": " Acme "},
                {"name": "2024", "kind": "date"},
                {"name": ""},
                {"name": 7},
                "Orion",
            ],
            "edges": [
                {"src": "Alice", "relation": "Joined At", "dst": "Acme"},
                {"src": "Alice", "relation": "knows", "dst": "Carol"},  # Carol is not listed
                {"src": "Alice", "relation": "", "dst": "Acme"},
                {"src": "Alice", "dst": "2024"},
                "Alice knows Acme",
            ],
        },
        {
            "text": "Alice works on Orion.",
            "turn": 0,
            "entities": [{"name": "Alice"}, {"name": "Orion", "kind": "product"}],
            "edges": [{"src": "alice", "relation": "works_on", "dst": "ORION"}],
        },
        {"text": "Bob uses Postgres.", "turn": 1, "entities": "Bob, Postgres"},
        {"text": "The meeting is on Friday.", "turn": 2},
        {"text": "   ", "turn": 0},
        {"text": "Out of range.", "turn": 3},
        {"text": "A turn as a string.", "turn": "1"},
        {"text": "A turn as a boolean.", "turn": True},
        {"turn": 1},
        "A bare string.",
        None,
    ]
}
CROWDED: dict[str, Any] = {
    "statements": [
        {
            "text": "Many names.",
            "turn": 0,
            "entities": [{"name": "x" * 201}, {"name": "Alice"}, {"name": "ALICE"}]
            + [{"name": f"name {i}"} for i in range(30)],
        }
    ]
}
ANSWERS: dict[str, str] = {
    "split": json.dumps(GOOD),
    "crowded": json.dumps(CROWDED),
    "empty": '{"statements": []}',
    "babble": "I would rather not say.",
    "no-statements": '{"facts": ["Alice joined Acme."]}',
    "too-many": json.dumps(
        {"statements": [{"text": f"Fact {i}.", "turn": 0} for i in range(b.STATEMENTS.limit + 1)]}
    ),
    "oversized": json.dumps(
        {
            "statements": [
                {"text": "A short fact.", "turn": 0},
                {"text": "x" * (b.STATEMENT.limit + 1), "turn": 0},
            ]
        }
    ),
    "slow": '{"statements": []}',
}


class FakeChat:
    """A chat completions endpoint with canned contents; remembers every request body."""

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        model = body["model"]
        if model == "boom":
            return JSONResponse({"error": {"message": "internal"}}, status_code=500)
        if model == "slow":
            await asyncio.sleep(1.0)
        message = {"role": "assistant", "content": ANSWERS[model]}
        return JSONResponse({"object": "chat.completion", "choices": [{"message": message}]})


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fake_chat() -> AsyncIterator[tuple[FakeChat, str]]:
    fake = FakeChat()
    async with serving(fake.app, "fake chat server") as url:
        yield fake, url


@pytest.fixture
def server(fake_chat: tuple[FakeChat, str]) -> FakeChat:
    fake_chat[0].requests.clear()
    return fake_chat[0]


@pytest.fixture
def base_url(fake_chat: tuple[FakeChat, str]) -> str:
    return fake_chat[1]


async def _split(base_url: str, model: str, turns: tuple[Turn, ...] = TURNS) -> list[Statement]:
    chat = OpenAIChatModel(base_url, model, timeout=0.2)
    try:
        return await chat.split(turns)
    finally:
        await chat.aclose()


async def test_a_good_answer_gives_statements_with_their_turns_and_extractions(
    server: FakeChat, base_url: str
) -> None:
    """Each usable statement keeps its turn's speaker and time and the entities and edges
    the model listed; malformed statements, entities and edges, and an edge naming an
    entity the statement does not list, are dropped."""
    chat = OpenAIChatModel(base_url, "split")
    try:
        assert isinstance(chat, TextSplitter)
        statements = await chat.split(TURNS)
    finally:
        await chat.aclose()
    assert [
        Statement(
            "Alice joined Acme in 2024.",
            0,
            "alice",
            AT,
            Extraction(
                (
                    EntityMention("Alice", "person"),
                    EntityMention("Acme"),
                    EntityMention("2024", "date"),
                ),
                (TypedMention("Alice", "joined_at", "Acme"),),
            ),
        ),
        Statement(
            "Alice works on Orion.",
            0,
            "alice",
            AT,
            Extraction(
                (EntityMention("Alice"), EntityMention("Orion", "product")),
                (TypedMention("Alice", "works_on", "Orion"),),
            ),
        ),
        # no list of entities: the entity extractor reads the text
        Statement("Bob uses Postgres.", 1, "bob", None, None),
        Statement("The meeting is on Friday.", 2, None, None, None),
    ] == statements
    [body] = server.requests
    assert "split" == body["model"]
    assert {"type": "json_object"} == body["response_format"]
    assert ["system", "user"] == [message["role"] for message in body["messages"]]
    assert '"statements"' in body["messages"][0]["content"]
    assert NUMBERED == body["messages"][1]["content"]


async def test_entities_are_capped_and_named_once(base_url: str) -> None:
    """A name over 200 characters is dropped, names equal once normalized are one entity,
    and a statement keeps at most as many entities as an entry is tagged with."""
    [statement] = await _split(base_url, "crowded")
    assert statement.extraction is not None
    names = [mention.name for mention in statement.extraction.entities]
    assert ["Alice"] + [f"name {i}" for i in range(MAX_ENTITIES_PER_ENTRY - 1)] == names


async def test_an_answer_with_no_statements_listed_is_an_empty_split(base_url: str) -> None:
    assert [] == await _split(base_url, "empty")


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("boom", "answered 500"),
        ("babble", "babble gave no statements"),
        ("no-statements", "no-statements gave no statements"),
        (
            "too-many",
            f"into {b.STATEMENTS.limit + 1:,} statements; "
            f"at most {b.STATEMENTS.limit:,} are allowed",
        ),
        (
            "oversized",
            f"statement 1 of {b.STATEMENT.limit + 1:,} characters; "
            f"at most {b.STATEMENT.limit:,} are allowed",
        ),
    ],
)
async def test_an_unusable_answer_is_a_transport_error(
    base_url: str, model: str, message: str
) -> None:
    """Oversized answers are refused whole, never cut."""
    with pytest.raises(TransportError, match=message):
        await _split(base_url, model)


async def test_a_server_slower_than_the_timeout_is_a_transport_error(base_url: str) -> None:
    with pytest.raises(TransportError, match="failed") as caught:
        await _split(base_url, "slow")
    assert isinstance(caught.value.__cause__, httpx.TimeoutException)


async def test_a_text_too_long_for_the_model_is_refused_before_any_request(
    server: FakeChat, base_url: str
) -> None:
    half = MAX_SPLIT_PROMPT_CHARS // 2
    turns = (Turn("x" * half, "alice"), Turn("y" * half, "bob"))
    with pytest.raises(TransportError, match="the text is too long for split"):
        await _split(base_url, "split", turns)
    assert [] == server.requests


async def test_store_text_with_the_model_stores_its_statements_or_nothing(base_url: str) -> None:
    """Through Apollo: the model's statements are what is stored, each with the entities it
    named in the graph; a model that fails stores nothing at all."""
    from apollo_app import Apollo

    turns = [
        {"speaker": t.speaker, "text": t.text, "at": None if t.at is None else t.at.isoformat()}
        for t in TURNS
    ]
    good = OpenAIChatModel(base_url, "split", timeout=5.0)
    async with Apollo.in_memory(llm=good) as apollo:
        told = await apollo.client("claude-a").store_text(turns)
        episode = await apollo.get_episode(told.episode_id)
        assert [s.content for s in episode.statements] == [
            "alice: Alice joined Acme in 2024.",
            "alice: Alice works on Orion.",
            "bob: Bob uses Postgres.",
            "The meeting is on Friday.",
        ]
        orion = await apollo.client("claude-a").entity("Orion")
        assert "works_on" in {edge.relation for edge in orion.edges}
    await good.aclose()
    failing = OpenAIChatModel(base_url, "boom", timeout=5.0)
    async with Apollo.in_memory(llm=failing) as apollo:
        with pytest.raises(TransportError):
            await apollo.client("claude-a").store_text(turns)
        assert 0 == (await apollo.stats()).total
    await failing.aclose()
