"""OpenAI-compatible adapters against a real local HTTP server (Starlette under uvicorn).

The server answers ``/embeddings`` and ``/chat/completions`` with canned, OpenAI-shaped
JSON; the requested ``model`` name picks the scenario (good answer, 500, malformed JSON,
wrong dimension, ...).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from apollo_adapters.embedders import CachingEmbedder, OpenAIEmbedder
from apollo_adapters.llm import OpenAIChatModel
from apollo_domain.errors import EmbeddingError, TransportError
from apollo_domain.ports import ContradictionJudge, Embedder, GasLanguageModel

DIMENSION = 4


class FakeOpenAI:
    """Canned OpenAI answers; remembers every request it received."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        self.app = Starlette(
            routes=[
                Route("/v1/embeddings", self.embeddings, methods=["POST"]),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
            ]
        )

    async def embeddings(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append((request.url.path, dict(request.headers), body))
        model, texts = body["model"], body["input"]
        if model == "boom":
            return JSONResponse({"error": {"message": "internal"}}, status_code=500)
        if model == "garbage":
            return Response("{not json", media_type="application/json")
        if model == "slow":
            await asyncio.sleep(1.0)
        size = DIMENSION - 1 if model == "wrong-dim" else DIMENSION
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(t))] + [0.5] * (size - 1)}
            for i, t in enumerate(texts)
        ]
        if model == "short":
            data = data[1:]
        data.reverse()  # indices, not list order, say which vector is which
        return JSONResponse({"object": "list", "data": data, "model": model})

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append((request.url.path, dict(request.headers), body))
        model = body["model"]
        if model == "boom":
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=503)
        if model == "not-a-completion":
            return JSONResponse({"unexpected": True})
        system = body["messages"][0]["content"]
        return JSONResponse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": _content(model, system)},
                        "finish_reason": "stop",
                    }
                ],
            }
        )


def _content(model: str, system: str) -> str:
    if model == "judge-yes":
        return '{"contradicts": true}'
    if model == "judge-no":
        return '```json\n{"contradicts": false}\n```'
    if model == "babble":
        return "I would rather not say."
    if '"facts"' in system:
        answer: Any = {
            "facts": [
                {"content": "  BGP uses TCP port 179.  ", "content_type": "fact"},
                {"content": "", "content_type": "fact"},
                {"content_type": "fact"},
                "Routers exchange keepalives every 60 seconds.",
                {"content": 42},
                17,
            ]
        }
    elif '"relations"' in system:
        answer = {
            "relations": [
                {"relation_type": "depends_on", "confidence": 0.9},
                {"relation_type": "Similar To", "confidence": "0.75"},
                {"relation_type": "invented_type", "confidence": 0.9},
                {"relation_type": "causes", "confidence": "high"},
                {"relation_type": "extends", "confidence": 7},
                {"relation_type": "is_a"},
                "supersedes",
            ]
        }
    elif '"syntheses"' in system:
        answer = {
            "syntheses": [
                {"content": "BGP liveness depends on TCP", "source_indices": [0, 1, 1, 9, -1]},
                {"content": "   ", "source_indices": [0]},
                {"content": "Keepalives ride on the TCP session", "source_indices": "0,1"},
                None,
            ]
        }
    elif '"questions"' in system:
        return 'Sure! {"questions": ["Which port does BGP use?", "", 3, null]} Hope it helps.'
    else:
        answer = {}
    return json.dumps(answer)


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@asynccontextmanager
async def serving(app: Any, what: str) -> AsyncIterator[str]:
    """``app`` under uvicorn on a free loopback port, its ``/v1`` base URL while it runs."""
    sock = _free_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    for _ in range(500):
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    if not server.started:
        task.cancel()
        raise RuntimeError(f"the {what} did not start")
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        await task
        sock.close()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fake_openai() -> AsyncIterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI()
    async with serving(fake.app, "fake OpenAI server") as url:
        yield fake, url


@pytest.fixture
def server(fake_openai: tuple[FakeOpenAI, str]) -> FakeOpenAI:
    fake_openai[0].requests.clear()
    return fake_openai[0]


@pytest.fixture
def base_url(fake_openai: tuple[FakeOpenAI, str]) -> str:
    return fake_openai[1]


# --------------------------------------------------------------------------- embeddings


async def test_embedder_returns_vectors_in_input_order(server: FakeOpenAI, base_url: str) -> None:
    embedder = OpenAIEmbedder(base_url, "good", api_key="sk-test", dimension=DIMENSION)
    try:
        assert isinstance(embedder, Embedder)
        vectors = await embedder.embed(["a", "bbb", "cc"])
    finally:
        await embedder.aclose()
    assert [v[0] for v in vectors] == [1.0, 3.0, 2.0]
    assert all(len(v) == DIMENSION for v in vectors)
    path, headers, body = server.requests[0]
    assert path == "/v1/embeddings"
    assert headers["authorization"] == "Bearer sk-test"
    assert body == {"model": "good", "input": ["a", "bbb", "cc"]}


async def test_embedder_splits_large_inputs_into_batches(server: FakeOpenAI, base_url: str) -> None:
    async with httpx.AsyncClient() as client:
        embedder = OpenAIEmbedder(
            base_url, "good", dimension=DIMENSION, client=client, batch_size=2
        )
        vectors = await embedder.embed(["a", "bb", "ccc", "dddd", "eeeee"])
        await embedder.aclose()  # a shared client stays open
        assert not client.is_closed
    assert [v[0] for v in vectors] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert [len(body["input"]) for _, _, body in server.requests] == [2, 2, 1]
    assert "authorization" not in server.requests[0][1]


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("boom", "answered 500"),
        ("garbage", "malformed JSON"),
        ("wrong-dim", "expected dimension 4, got 3"),
        ("short", "expected 2 embeddings, got 1"),
    ],
)
async def test_embedder_failures_are_embedding_errors(
    server: FakeOpenAI, base_url: str, model: str, message: str
) -> None:
    embedder = OpenAIEmbedder(base_url, model, dimension=DIMENSION)
    try:
        with pytest.raises(EmbeddingError, match=message):
            await embedder.embed(["a", "b"])
    finally:
        await embedder.aclose()


async def test_embedder_timeout_is_an_embedding_error(server: FakeOpenAI, base_url: str) -> None:
    embedder = OpenAIEmbedder(base_url, "slow", dimension=DIMENSION, timeout=0.1)
    try:
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(["a"])
    finally:
        await embedder.aclose()
    assert isinstance(caught.value.__cause__, httpx.TimeoutException)


async def test_embedder_unreachable_server_is_an_embedding_error() -> None:
    sock = _free_socket()  # bound but never listening: connections are refused
    try:
        embedder = OpenAIEmbedder(
            f"http://127.0.0.1:{sock.getsockname()[1]}/v1", "good", dimension=DIMENSION
        )
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(["a"])
        await embedder.aclose()
    finally:
        sock.close()
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


async def test_caching_in_front_of_http_calls_the_server_once(
    server: FakeOpenAI, base_url: str
) -> None:
    inner = OpenAIEmbedder(base_url, "good", dimension=DIMENSION)
    cache = CachingEmbedder(inner)
    try:
        first = await cache.embed(["same", "text"])
        second = await cache.embed(["text", "same"])
    finally:
        await inner.aclose()
    assert len(server.requests) == 1
    assert [list(v) for v in second] == [list(first[1]), list(first[0])]


# --------------------------------------------------------------------------- chat


async def test_contradiction_verdicts(server: FakeOpenAI, base_url: str) -> None:
    yes = OpenAIChatModel(base_url, "judge-yes", api_key="sk-chat")
    no = OpenAIChatModel(base_url, "judge-no")
    try:
        assert isinstance(yes, ContradictionJudge)
        assert await yes.contradicts("port 179", "port 180") is True
        assert await no.contradicts("port 179", "port 179") is False
    finally:
        await yes.aclose()
        await no.aclose()
    _, headers, body = server.requests[0]
    assert headers["authorization"] == "Bearer sk-chat"
    assert body["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "port 179" in body["messages"][1]["content"]
    assert "negates" in body["messages"][0]["content"]  # a flipped negation contradicts


async def test_a_verdict_that_is_not_json_is_a_transport_error(base_url: str) -> None:
    model = OpenAIChatModel(base_url, "babble")
    try:
        with pytest.raises(TransportError, match="no contradiction verdict"):
            await model.contradicts("a", "b")
    finally:
        await model.aclose()


@pytest.mark.parametrize(
    ("model", "message"), [("boom", "answered 503"), ("not-a-completion", "no chat completion")]
)
async def test_chat_failures_are_transport_errors(base_url: str, model: str, message: str) -> None:
    chat = OpenAIChatModel(base_url, model)
    try:
        with pytest.raises(TransportError, match=message):
            await chat.comprehend([], "anything")
        with pytest.raises(TransportError, match=message):
            await chat.contradicts("a", "b")
    finally:
        await chat.aclose()


async def test_comprehend_keeps_only_well_formed_facts(server: FakeOpenAI, base_url: str) -> None:
    chat = OpenAIChatModel(base_url, "gas")
    try:
        assert isinstance(chat, GasLanguageModel)
        facts = await chat.comprehend(
            [{"role": "user", "content": "How does BGP connect?"}, {"role": "tool"}],
            "BGP runs over TCP port 179 and sends keepalives every 60 seconds.",
        )
    finally:
        await chat.aclose()
    assert facts == [
        {"content": "BGP uses TCP port 179.", "content_type": "fact"},
        {"content": "Routers exchange keepalives every 60 seconds.", "content_type": "fact"},
    ]
    prompt = server.requests[0][2]["messages"][1]["content"]
    assert "user: How does BGP connect?" in prompt
    assert "keepalives every 60 seconds" in prompt


async def test_relate_keeps_known_types_with_numeric_confidence(base_url: str) -> None:
    """Unknown types and non-numeric confidences are dropped; a numeric confidence passes
    unclamped (7 stays 7.0), so the GAS gate can skip and count it instead of storing the
    strongest edge."""
    chat = OpenAIChatModel(base_url, "gas")
    try:
        relations = await chat.relate("BGP uses TCP", "TCP is a transport protocol")
    finally:
        await chat.aclose()
    assert relations == [
        {"relation_type": "depends_on", "confidence": 0.9},
        {"relation_type": "similar_to", "confidence": 0.75},
        {"relation_type": "extends", "confidence": 7.0},
    ]


async def test_synthesize_drops_empty_content_and_bad_indices(base_url: str) -> None:
    chat = OpenAIChatModel(base_url, "gas")
    try:
        syntheses = await chat.synthesize(["BGP uses TCP port 179", "Keepalives every 60 s"])
        assert await chat.synthesize([]) == []
    finally:
        await chat.aclose()
    assert syntheses == [
        {
            "content": "BGP liveness depends on TCP",
            "content_type": "concept",
            "source_indices": [0, 1],
        },
        {
            "content": "Keepalives ride on the TCP session",
            "content_type": "concept",
            "source_indices": [],
        },
    ]


async def test_anticipate_extracts_json_from_chatter(base_url: str) -> None:
    chat = OpenAIChatModel(base_url, "gas")
    try:
        questions = await chat.anticipate(["BGP uses TCP port 179"])
    finally:
        await chat.aclose()
    assert questions == ["Which port does BGP use?"]


# --------------------------------------------------------------------------- credentials

SECRET = "hunter2pass"


def _with_userinfo(url: str) -> str:
    return url.replace("http://", f"http://bob:{SECRET}@", 1)


async def test_url_credentials_become_basic_auth_and_never_appear_in_logs_or_errors(
    server: FakeOpenAI, base_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``user:pass@`` in the LLM URL is sent as basic auth; httpx logs the bare URL and the
    error of a failed call names the URL without the password or the API key."""
    caplog.set_level(logging.DEBUG)
    chat = OpenAIChatModel(_with_userinfo(base_url), "judge-yes", api_key="sk-secret-key")
    boom = OpenAIChatModel(_with_userinfo(base_url), "boom", api_key="sk-secret-key")
    try:
        assert await chat.contradicts("a", "b") is True
        with pytest.raises(TransportError) as caught:
            await boom.contradicts("a", "b")
    finally:
        await chat.aclose()
        await boom.aclose()
    _, headers, _ = server.requests[0]
    assert headers["authorization"].startswith("Basic ")  # as httpx does for URL userinfo
    assert SECRET not in str(caught.value) and "sk-secret-key" not in str(caught.value)
    assert base_url in str(caught.value)
    assert SECRET not in repr(chat)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "HTTP Request" in logged and SECRET not in logged


async def test_url_credentials_without_an_api_key_are_sent_as_basic_auth(
    server: FakeOpenAI, base_url: str
) -> None:
    embedder = OpenAIEmbedder(_with_userinfo(base_url), "good", dimension=DIMENSION)
    try:
        await embedder.embed(["a"])
    finally:
        await embedder.aclose()
    _, headers, _ = server.requests[0]
    expected = "Basic " + base64.b64encode(f"bob:{SECRET}".encode()).decode()
    assert expected == headers["authorization"]


async def test_embedder_errors_never_show_url_credentials(base_url: str) -> None:
    closed = _free_socket()
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: the connection is refused
    for url in (_with_userinfo(base_url), f"http://bob:{SECRET}@127.0.0.1:{port}/v1"):
        embedder = OpenAIEmbedder(url, "boom", api_key="sk-secret-key", dimension=DIMENSION)
        try:
            with pytest.raises(EmbeddingError) as caught:
                await embedder.embed(["a"])
        finally:
            await embedder.aclose()
        assert SECRET not in str(caught.value) and "sk-secret-key" not in str(caught.value)
