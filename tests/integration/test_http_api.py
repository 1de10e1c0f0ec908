"""The HTTP API against a real uvicorn server on a loopback port, with Apollo in memory behind it.

One server serves the whole module; each test swaps in a fresh Apollo (and metrics) behind
it, so every test starts from an empty store.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from typing import Any
from uuid import UUID, uuid4

import httpx
import pytest
from attrs import evolve, frozen
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from apollo_adapters.memory import InMemoryStore
from apollo_app import Apollo, Principal, Settings, Status
from apollo_app.entrypoints.http import (
    HttpServer,
    bind_host,
    create_app,
    host_overridden,
    serve_http,
)
from apollo_app.entrypoints.http import app as http_app
from apollo_app.metrics import Metrics
from apollo_app.wire.codec import decode_json, encode_json, make_converter
from apollo_domain.model import Outcome
from apollo_domain.ports import CredibilityRecord
from apollo_domain.results import AgentProfile, DomainExpertise, IngestResult
from tests.support import FaultInjectingStore

TOKENS = {
    "tok-alice": "alice",
    "tok-bob": "bob",
    "tok-carol": "carol",
    "tok-mesh": "mesh:gateway",
    "tok-ops": "ops:admin",
    "tok-reader": "rita:reader",
}
ALICE = {"Authorization": "Bearer tok-alice"}
BOB = {"Authorization": "Bearer tok-bob"}
CAROL = {"Authorization": "Bearer tok-carol"}
#: The default caller of these tests: a gateway, which may credit work to any agent.
MESH = {"Authorization": "Bearer tok-mesh"}
OPS = {"Authorization": "Bearer tok-ops"}
READER = {"Authorization": "Bearer tok-reader"}
API = "/api/apollo"


class _Swappable:
    """An ASGI app that forwards to whichever app the current test installed."""

    def __init__(self) -> None:
        self.app: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None
        await self.app(scope, receive, send)


@frozen
class Api:
    http: httpx.AsyncClient
    apollo: Apollo
    store: FaultInjectingStore
    memory: InMemoryStore
    metrics: Metrics
    app: Any

    async def ingest(self, headers: dict[str, str] | None = None, **body: Any) -> dict[str, Any]:
        """Ingest; 201 when it created an entry, else (deduplicated, corroborated) 200."""
        response = await self.http.post(f"{API}/ingest", json=body, headers=headers)
        assert response.status_code in (200, 201), response.text
        result: dict[str, Any] = response.json()
        assert (201 if result["outcome"] == "created" else 200) == response.status_code
        return result

    async def set_status(self, entry_id: str, status: Status) -> None:
        async with self.store.inner.unit_of_work() as uow:
            entry = await uow.entries.get(UUID(entry_id))
            assert entry is not None
            await uow.entries.update(evolve(entry, status=status))
            await uow.commit()


@pytest.fixture(scope="module")
async def server() -> AsyncIterator[tuple[_Swappable, str]]:
    swappable = _Swappable()
    async with HttpServer(swappable, "127.0.0.1", 0) as running:
        yield swappable, running.url


@pytest.fixture
async def api(server: tuple[_Swappable, str]) -> AsyncIterator[Api]:
    swappable, url = server
    memory = InMemoryStore()
    store = FaultInjectingStore(memory)
    metrics = Metrics()
    async with Apollo.with_store(store, closers=[store.close]) as apollo:
        app = create_app(apollo, tokens=TOKENS, metrics=metrics)
        swappable.app = app
        async with httpx.AsyncClient(base_url=url, headers=MESH) as http:
            yield Api(http, apollo, store, memory, metrics, app)
        swappable.app = None


def assert_error(
    response: httpx.Response, status: int, kind: str, field: str | None = None
) -> dict[str, Any]:
    """The response has ``status`` and the one error shape."""
    assert status == response.status_code, response.text
    body = response.json()
    assert {"error"} == set(body)
    assert {"type", "message", "field"} == set(body["error"])
    assert kind == body["error"]["type"]
    assert field == body["error"]["field"]
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


# --------------------------------------------------------------------------- health


async def test_health_ok_then_degraded_with_the_same_body(api: Api) -> None:
    """200 while every part can be written; 503 with the same body shape once one cannot."""
    ok = await api.http.get(f"{API}/health")
    assert (200, {"status": "ok", "data_available": True}) == (ok.status_code, ok.json())
    api.memory.set_unavailable({"outbox"})
    degraded = await api.http.get(f"{API}/health")
    assert (503, {"status": "degraded", "data_available": False}) == (
        degraded.status_code,
        degraded.json(),
    )


# --------------------------------------------------------------------------- ingest


async def test_ingest_created_then_deduplicated(api: Api) -> None:
    """201 for a new entry; 200 for an exact repeat, recorded against the existing entry;
    the outcome is in the body."""
    body = {"content": "Postgres uses MVCC for concurrency", "tags": ["db"]}
    response = await api.http.post(f"{API}/ingest", json=body)
    assert 201 == response.status_code, response.text
    first = response.json()
    assert "created" == first["outcome"]
    assert "candidate" == first["status"]
    assert 0.5 == first["confidence"]
    UUID(first["entry_id"])
    repeat = await api.http.post(f"{API}/ingest", json=body)
    assert 200 == repeat.status_code, repeat.text
    again = repeat.json()
    assert ("deduplicated", first["entry_id"]) == (again["outcome"], again["entry_id"])


async def test_scores_are_sent_rounded(api: Api) -> None:
    """Four retrieval boosts (three principals' queries, a fourth's retrieve) make
    0.5 + 4 x 0.02 in floating point: the API sends 0.58, with at most 6 decimals, in every
    body that shows it."""
    created = await api.ingest(content="Redis keeps its dataset in memory", tags=["cache"])
    query = {"query": "redis dataset memory", "min_confidence": 0}
    for reader in (ALICE, BOB, CAROL):
        await api.http.post(f"{API}/query", json=query, headers=reader)
    retrieved = await api.http.post(f"{API}/retrieve", json=query)
    entry = await api.http.get(f"{API}/entries/{created['entry_id']}")
    stats = await api.http.get(f"{API}/stats")
    assert 0.58 == entry.json()["confidence"]
    assert 0.58 == retrieved.json()["entries"][0]["confidence"]
    assert 0.58 == stats.json()["average_confidence"]
    for response in (entry, retrieved, stats):
        assert not re.search(r"\d\.\d{7,}", response.text), response.text


async def test_ingest_rejected_is_422_with_the_reason(api: Api) -> None:
    """A source under the credibility floor is rejected: 422, reason in the error message."""
    async with api.store.inner.unit_of_work() as uow:
        await uow.credibility.save(CredibilityRecord("troll-agent", label="troll"))
        await uow.commit()
    response = await api.http.post(
        f"{API}/ingest", json={"content": "The moon is cheese", "agent_id": "troll-agent"}
    )
    error = assert_error(response, 422, "rejected")
    assert "credibility" in error["message"]


@pytest.mark.parametrize(
    ("raw", "field", "fragment"),
    [
        (b"{not json", "body", "not valid JSON"),
        (b"[1, 2]", "body", "JSON object"),
        (b'"text"', "body", "JSON object"),
        (b'{"content": NaN}', "body", "NaN"),
        (b"\xff\xfe{}", "body", "UTF-8"),
        (b"{}", "content", "required"),
        (b'{"content": 5}', "content", "string"),
        (b'{"content": "ok", "tags": "db"}', "tags", "list"),
        (b'{"content": "ok", "tags": ["db", 3]}', "tags[1]", "string"),
        (b'{"content": "ok", "context": [1]}', "context", "object"),
        (b'{"content": "   "}', "content", ""),
        (b'{"content": "ok", "access_scope": "galaxy"}', "access_scope", ""),
    ],
)
async def test_ingest_invalid_input_is_400_naming_the_field(
    api: Api, raw: bytes, field: str, fragment: str
) -> None:
    """Malformed JSON, non-objects, missing fields and wrong types: 400 naming the field."""
    response = await api.http.post(
        f"{API}/ingest", content=raw, headers={"Content-Type": "application/json"}
    )
    error = assert_error(response, 400, "validation_error", field)
    assert fragment in error["message"]


async def test_oversized_content_and_bodies(api: Api) -> None:
    """Content over 100,000 characters is a 400 naming it; a body over the size limit is a
    413 in the error shape, naming the message bound."""
    long = await api.http.post(f"{API}/ingest", json={"content": "x" * 100_001})
    assert_error(long, 400, "validation_error", "content")
    huge = await api.http.post(f"{API}/ingest", json={"content": "x" * 3_000_000})
    assert_error(huge, 413, "payload_too_large", "message")


@pytest.mark.parametrize("smuggled", ["principal", "owner_id", "user_id"])
async def test_identity_fields_in_a_body_are_unknown_fields(api: Api, smuggled: str) -> None:
    """Identity never comes from the body: such a field is rejected by name."""
    response = await api.http.post(
        f"{API}/ingest", json={"content": "Who am I", smuggled: "alice"}, headers=BOB
    )
    error = assert_error(response, 400, "validation_error", smuggled)
    assert smuggled in error["message"]


async def test_unknown_fields_are_all_named(api: Api) -> None:
    response = await api.http.post(f"{API}/query", json={"query": "x", "zeta": 1, "alpha": 2})
    error = assert_error(response, 400, "validation_error", "alpha")
    assert "'alpha'" in error["message"] and "'zeta'" in error["message"]


async def test_agent_id_attributes_authorship_but_the_token_owns_the_entry(api: Api) -> None:
    """A writer acts as its own agent: crediting another is a 403 and writes nothing. A
    gateway may credit any agent, and the owner is still the token's principal."""
    refused = await api.http.post(
        f"{API}/ingest",
        json={"content": "Alice poses as bob", "agent_id": "bob"},
        headers=ALICE,
    )
    assert_error(refused, 403, "forbidden", "agent_id")
    assert 0 == (await api.apollo.stats(Principal("alice"))).total
    created = await api.ingest(
        content="The mesh's private runbook step", access_scope="private", agent_id="bob"
    )
    entry = (await api.http.get(f"{API}/entries/{created['entry_id']}")).json()
    assert ("mesh", "bob") == (entry["owner_id"], entry["source"]["agent_id"])
    assert_error(
        await api.http.get(f"{API}/entries/{created['entry_id']}", headers=BOB), 404, "not_found"
    )


async def test_lex_apollo_store_payloads_are_accepted(api: Api) -> None:
    """A lex-apollo ``store_knowledge`` payload names its agent ``source_agent`` and writes
    symbols (``:fact``, ``:private``): both are read as Apollo's own names, under the
    same rules (a gateway credits any agent, a writer only itself)."""
    seed = {
        "content": "BGP route reflectors reduce full-mesh IBGP complexity",
        "content_type": ":fact",
        "source_agent": "my-agent-001",
        "tags": ["bgp", "routing", "ibgp"],
        "context": {"source": "network_team_wiki"},
    }
    created = await api.ingest(**seed)
    entry = await api.apollo.get_entry(created["entry_id"])
    assert ("my-agent-001", "fact", "global") == (
        entry.source.agent_id,
        entry.content_type.value,
        entry.access_scope.value,
    )
    assert "network_team_wiki" == entry.source_context["source"]
    same = await api.ingest(**{**seed, "content": "Route reflectors", "agent_id": "my-agent-001"})
    assert "created" == same["outcome"]
    private = await api.ingest(
        ALICE, content="Alice's lab VLAN is 42", source_agent="alice", access_scope=":private"
    )
    assert "private" == (await api.apollo.get_entry(private["entry_id"])).access_scope.value
    posing = await api.http.post(
        f"{API}/ingest",
        json={"content": "Alice poses as bob", "source_agent": "bob"},
        headers=ALICE,
    )
    assert_error(posing, 403, "forbidden", "agent_id")
    both = await api.http.post(f"{API}/ingest", json={**seed, "agent_id": "someone-else"})
    error = assert_error(both, 400, "validation_error", "source_agent")
    assert "agent_id" in error["message"]
    query = await api.http.post(f"{API}/query", json={"query": "", "status": [":candidate"]})
    assert [same["entry_id"], created["entry_id"]] == [e["id"] for e in query.json()["entries"]]


async def test_symbol_style_resolution(api: Api) -> None:
    """``resolve_dispute(resolution: :accept)`` as the seed writes it."""
    disputed = await api.ingest(content="The cache TTL is 90 seconds")
    await api.set_status(disputed["entry_id"], Status.DISPUTED)
    response = await api.http.post(
        f"{API}/entries/{disputed['entry_id']}/resolve", json={"resolution": ":accept"}, headers=OPS
    )
    assert (200, "confirmed") == (response.status_code, response.json()["status"])


async def test_author_defaults_to_the_principal_else_http(api: Api) -> None:
    """The author is the token's agent (its principal unless the token names one); without
    tokens, anonymous callers write as ``http``."""
    mine = await api.ingest(ALICE, content="Attributed to the token's principal")
    entry = await api.apollo.get_entry(mine["entry_id"])
    assert "alice" == entry.source.agent_id
    app = create_app(api.apollo)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as local:
        response = await local.post(f"{API}/ingest", json={"content": "From the HTTP edge"})
    anonymous = await api.apollo.get_entry(response.json()["entry_id"])
    assert "http" == anonymous.source.agent_id


async def test_the_anonymous_http_caller_cannot_deprecate_another_agents_entry(
    api: Api,
) -> None:
    """Without tokens the anonymous HTTP caller owns nothing: what an anonymous library
    (or CLI) client stored as ``claude-7`` stays, as it does for a token's writer
    (docs/security.md, Security model)."""
    stored = await api.apollo.client("claude-7").store_knowledge(content="Stored anonymously")
    refused = await api.http.post(
        f"{API}/entries/{stored.id}/deprecate", json={"reason": "not mine"}, headers=BOB
    )
    assert 403 == refused.status_code, refused.text
    app = create_app(api.apollo)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as local:
        response = await local.post(
            f"{API}/entries/{stored.id}/deprecate", json={"reason": "superseded"}
        )
    assert 403 == response.status_code, response.text
    assert Status.CANDIDATE is (await api.apollo.get_entry(stored.id)).status


async def test_private_scope_needs_a_token(api: Api) -> None:
    """With tokens configured an anonymous request is a 401; without tokens an anonymous
    caller cannot own a private entry (400)."""
    response = await api.http.post(
        f"{API}/ingest",
        json={"content": "secret", "access_scope": "private"},
        headers={"Authorization": ""},
    )
    assert 401 == response.status_code
    app = create_app(api.apollo)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as local:
        local_response = await local.post(
            f"{API}/ingest", json={"content": "secret", "access_scope": "private"}
        )
    assert_error(local_response, 400, "validation_error", "access_scope")


# --------------------------------------------------------------------------- auth & visibility


@pytest.mark.parametrize("header", ["Bearer nope", "Basic dG9rLWFsaWNlOg==", "Bearer", "tok-alice"])
async def test_bad_credentials_are_401(api: Api, header: str) -> None:
    response = await api.http.get(f"{API}/stats", headers={"Authorization": header})
    assert_error(response, 401, "unauthorized")
    assert "Bearer" == response.headers["www-authenticate"]


async def test_visibility_private_team_global(api: Api) -> None:
    """Private: only the owner. Team: principals sharing a group. Anonymous: global only."""
    await api.apollo.directory.add_membership("alice", "ops")
    await api.apollo.directory.add_membership("carol", "ops")
    private = await api.ingest(
        ALICE, content="Private note about kafka lag", access_scope="private"
    )
    team = await api.ingest(ALICE, content="Team note about kafka partitions", access_scope="team")
    public = await api.ingest(ALICE, content="Global note about kafka retention")

    async def visible(headers: dict[str, str] | None) -> set[str]:
        ids = set()
        for created in (private, team, public):
            response = await api.http.get(f"{API}/entries/{created['entry_id']}", headers=headers)
            if response.status_code == 200:
                ids.add(created["entry_id"])
            else:
                assert_error(response, 404, "not_found")
        return ids

    everything = {private["entry_id"], team["entry_id"], public["entry_id"]}
    assert everything == await visible(ALICE)
    assert {team["entry_id"], public["entry_id"]} == await visible(CAROL)
    assert {public["entry_id"]} == await visible(BOB)
    assert {public["entry_id"]} == await visible(None)

    query = {"query": "kafka note", "min_confidence": 0.0}
    anonymous = (await api.http.post(f"{API}/query", json=query)).json()
    assert [public["entry_id"]] == [e["id"] for e in anonymous["entries"]]
    stats = (await api.http.get(f"{API}/stats")).json()
    assert 1 == stats["total"]
    assert 3 == (await api.http.get(f"{API}/stats", headers=ALICE)).json()["total"]


# --------------------------------------------------------------------------- query, retrieve


async def test_query_search_and_browse(api: Api) -> None:
    created = await api.ingest(content="Redis keeps its dataset in memory", tags=["cache"])
    semantic = await api.http.post(
        f"{API}/query", json={"query": "redis memory dataset", "min_confidence": 0, "limit": 5}
    )
    assert 200 == semantic.status_code
    body = semantic.json()
    assert "hybrid" == body["mode"]
    (entry,) = body["entries"]
    assert created["entry_id"] == entry["id"]
    assert ["cache"] == entry["tags"]
    assert entry["created_at"].endswith("Z")
    browse = (await api.http.post(f"{API}/query", json={"query": "", "status": "candidate"})).json()
    assert ("browse", [created["entry_id"]]) == (
        browse["mode"],
        [e["id"] for e in browse["entries"]],
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "x", "limit": "5"}, "limit"),
        ({"query": "x", "limit": 0}, "limit"),
        ({"query": "x", "min_confidence": 2}, "min_confidence"),
        ({"query": "x", "min_confidence": True}, "min_confidence"),
        ({"query": "x", "status": ["sleeping"]}, "status"),
        ({"query": 7}, "query"),
        ({"limit": 3}, "query"),
    ],
)
async def test_query_invalid_input_is_400(api: Api, body: dict[str, Any], field: str) -> None:
    assert_error(await api.http.post(f"{API}/query", json=body), 400, "validation_error", field)


async def test_retrieve_does_not_count_access(api: Api) -> None:
    created = await api.ingest(content="Retrieval leaves access counts alone")
    response = await api.http.post(
        f"{API}/retrieve", json={"query": "retrieval access counts", "min_confidence": 0}
    )
    assert 200 == response.status_code
    assert [created["entry_id"]] == [e["id"] for e in response.json()["entries"]]
    assert 0 == (await api.apollo.get_entry(created["entry_id"])).access_count


# --------------------------------------------------------------------------- traverse, entries


async def test_traverse_related_and_errors(api: Api) -> None:
    root = await api.ingest(content="Kubernetes schedules pods onto nodes")
    leaf = await api.ingest(content="A kubelet runs on every node")
    await api.apollo.client("curator").link_entries(root["entry_id"], leaf["entry_id"], "has_a")
    response = await api.http.post(f"{API}/traverse", json={"entry_id": root["entry_id"]})
    assert 200 == response.status_code
    (related,) = response.json()["related"]
    assert (leaf["entry_id"], "has_a", 1) == (
        related["id"],
        related["relation_type"],
        related["depth"],
    )
    unknown = await api.http.post(f"{API}/traverse", json={"entry_id": str(uuid4())})
    assert_error(unknown, 404, "not_found")
    malformed = await api.http.post(f"{API}/traverse", json={"entry_id": "root"})
    assert_error(malformed, 400, "validation_error", "entry_id")
    bad_type = await api.http.post(
        f"{API}/traverse", json={"entry_id": root["entry_id"], "relation_types": ["likes"]}
    )
    assert_error(bad_type, 400, "validation_error", "relation_types")


async def test_get_entry(api: Api) -> None:
    created = await api.ingest(content="Entries come back whole", context={"ticket": 7})
    response = await api.http.get(f"{API}/entries/{created['entry_id']}")
    assert 200 == response.status_code
    entry = response.json()
    assert "embedding" not in entry
    assert (created["entry_id"], "Entries come back whole", {"ticket": 7}) == (
        entry["id"],
        entry["content"],
        entry["source_context"],
    )
    assert_error(await api.http.get(f"{API}/entries/{uuid4()}"), 404, "not_found")
    assert_error(
        await api.http.get(f"{API}/entries/not-a-uuid"), 400, "validation_error", "entry_id"
    )


async def test_evidence_says_which_sources_count_as_independent(api: Api) -> None:
    """The origin, an independent source that said the same (agreement) and a repeat from
    the origin's own provider (not independent), in the order recorded."""
    text = "Anycast announces one prefix from many sites"
    created = await api.ingest(content=text, agent_id="claude-net-1")
    await api.ingest(content=text, agent_id="openai-net-2")
    await api.ingest(content=text, agent_id="claude-net-3")
    response = await api.http.get(f"{API}/entries/{created['entry_id']}/evidence")
    assert 200 == response.status_code, response.text
    assert [
        ("claude-net-1", "claude", "origin", True),
        ("openai-net-2", "openai", "agreement", True),
        ("claude-net-3", "claude", "deduplication", False),
    ] == [
        (e["agent_id"], e["provider"], e["kind"], e["independent"])
        for e in response.json()["evidence"]
    ]
    assert 0.5 == response.json()["evidence"][0]["credibility"]
    assert_error(await api.http.get(f"{API}/entries/{uuid4()}/evidence"), 404, "not_found")
    malformed = await api.http.get(f"{API}/entries/nope/evidence")
    assert_error(malformed, 400, "validation_error", "entry_id")


async def test_relations_come_both_ways_with_the_other_entry(api: Api) -> None:
    hub = await api.ingest(content="Relations have two ends")
    cause = await api.ingest(content="Something caused the hub")
    part = await api.ingest(content="A part of the hub")
    curator = api.apollo.client("curator")
    await curator.link_entries(
        from_entry_id=cause["entry_id"], to_entry_id=hub["entry_id"], relation_type="causes"
    )
    await curator.link_entries(
        from_entry_id=hub["entry_id"], to_entry_id=part["entry_id"], relation_type="has_a"
    )
    response = await api.http.get(f"{API}/entries/{hub['entry_id']}/relations")
    assert 200 == response.status_code, response.text
    assert [
        ("out", "has_a", part["entry_id"], "A part of the hub", "candidate"),
        ("in", "causes", cause["entry_id"], "Something caused the hub", "candidate"),
    ] == [
        (r["direction"], r["relation_type"], r["id"], r["content"], r["status"])
        for r in response.json()["relations"]
    ]
    assert_error(await api.http.get(f"{API}/entries/{uuid4()}/relations"), 404, "not_found")


# --------------------------------------------------------------------------- entity graph


async def test_entity_routes_show_only_what_the_token_may_see(api: Api) -> None:
    """A private entry's entity and edges reach its owner, never another token; an
    unknown or invisible entity is 404 with the error shape."""
    await api.ingest(content="Public note: Dana Wu joined the board.")
    await api.ingest(
        headers=ALICE, content="Secret: Dana Wu works at Initech.", access_scope="private"
    )

    listed = await api.http.get(f"{API}/entities", params={"prefix": "D"}, headers=BOB)
    assert 200 == listed.status_code, listed.text
    assert [{"name": "Dana Wu", "key": "dana wu", "kind": "name", "mentions": 1}] == listed.json()[
        "entities"
    ]
    mine = await api.http.get(
        f"{API}/entities", params={"query": "Dana Wu at Initech?"}, headers=ALICE
    )
    assert [("dana wu", 2), ("initech", 1)] == [
        (e["key"], e["mentions"]) for e in mine.json()["entities"]
    ]
    assert_error(await api.http.get(f"{API}/entities/Initech", headers=BOB), 404, "not_found")
    for suffix in ("history", "related"):
        hidden = await api.http.get(f"{API}/entities/Initech/{suffix}", headers=BOB)
        assert_error(hidden, 404, "not_found")

    dana = await api.http.get(f"{API}/entities/dana%20wu", headers=READER)
    assert 200 == dana.status_code, dana.text
    body = dana.json()
    assert ("Dana Wu", 1, []) == (body["name"], body["mentions"], body["edges"])
    assert ["Public note: Dana Wu joined the board."] == [e["snippet"] for e in body["entries"]]
    related = await api.http.get(f"{API}/entities/Dana%20Wu/related", headers=BOB)
    assert {"related": []} == related.json()

    owned = (await api.http.get(f"{API}/entities/Dana%20Wu", headers=ALICE)).json()
    (works,) = [e for e in owned["edges"] if e["relation"] == "works_at"]
    assert ("Dana Wu", "Initech", None, 1) == (
        works["src"],
        works["dst"],
        works["valid_to"],
        works["support"],
    )
    near = await api.http.get(f"{API}/entities/Dana%20Wu/related?depth=2", headers=ALICE)
    assert [("initech", 1, "works_at", "Dana Wu")] == [
        (r["key"], r["depth"], r["relation"], r["via"]) for r in near.json()["related"]
    ]


async def test_entity_history_reads_as_of(api: Api) -> None:
    await api.ingest(content="Today Lena Park works at Umbrella Labs.")
    await api.ingest(content="Now Lena Park leads Umbrella Labs.")
    full = await api.http.get(f"{API}/entities/Lena%20Park/history")
    assert 200 == full.status_code, full.text
    works, leads = full.json()["edges"]
    assert (None, "works_at", "leads") == (
        full.json()["as_of"],
        works["relation"],
        leads["relation"],
    )
    assert (leads["id"], leads["valid_from"]) == (works["superseded_by"], works["valid_to"])
    then = await api.http.get(
        f"{API}/entities/Umbrella%20Labs/history", params={"as_of": works["valid_from"]}
    )
    assert 200 == then.status_code, then.text
    assert ["works_at"] == [e["relation"] for e in then.json()["edges"]]
    assert works["valid_from"] == then.json()["as_of"]
    before = await api.http.get(
        f"{API}/entities/Lena%20Park/history", params={"as_of": "2001-01-01"}
    )
    assert ("2001-01-01T00:00:00Z", []) == (before.json()["as_of"], before.json()["edges"])


async def test_an_entity_name_with_a_slash_is_one_path_parameter(api: Api) -> None:
    await api.ingest(content="We measured 500 req/s at peak.")
    detail = await api.http.get(f"{API}/entities/500%20req%2Fs")
    assert (200, "500 req/s") == (detail.status_code, detail.json().get("name")), detail.text
    history = await api.http.get(f"{API}/entities/500%20req%2Fs/history")
    assert (200, "500 req/s", []) == (
        history.status_code,
        history.json()["name"],
        history.json()["edges"],
    )


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/entities/Lena/history?as_of=yesterday", "as_of"),
        ("/entities/Lena/history?as_of=2026-02-30", "as_of"),
        ("/entities/Lena/related?depth=0", "depth"),
        ("/entities/Lena/related?depth=4", "depth"),
        ("/entities/Lena/related?depth=deep", "depth"),
        ("/entities?limit=0", "limit"),
        ("/entities?limit=101", "limit"),
        ("/entities?agent_id=someone", "agent_id"),
        ("/entities/Lena?depth=2", "depth"),
        ("/entities/%20%20", "name"),
    ],
)
async def test_entity_routes_refuse_bad_parameters(api: Api, url: str, field: str) -> None:
    await api.ingest(content="Today Lena works with Kafka in Oslo.")
    assert_error(await api.http.get(API + url), 400, "validation_error", field)


# --------------------------------------------------------------------------- lifecycle


async def test_deprecate_then_repeat(api: Api) -> None:
    created = await api.ingest(content="Python 2 is supported")
    url = f"{API}/entries/{created['entry_id']}/deprecate"
    first = await api.http.post(url, json={"reason": "end of life"})
    assert (200, True, "archived") == (
        first.status_code,
        first.json()["changed"],
        first.json()["status"],
    )
    repeat = await api.http.post(url, json={"reason": "end of life"})
    assert (200, False) == (repeat.status_code, repeat.json()["changed"])
    entry = await api.apollo.get_entry(created["entry_id"])
    assert "end of life" == entry.source_context["deprecation_reason"]


async def test_deprecate_errors(api: Api) -> None:
    created = await api.ingest(content="Deprecation needs a reason")
    url = f"{API}/entries/{created['entry_id']}/deprecate"
    assert_error(await api.http.post(url, json={}), 400, "validation_error", "reason")
    assert_error(await api.http.post(url, json={"reason": " "}), 400, "validation_error", "reason")
    missing = await api.http.post(f"{API}/entries/{uuid4()}/deprecate", json={"reason": "gone"})
    assert_error(missing, 404, "not_found")


async def test_deprecate_store_unavailable_is_503_and_changes_nothing(api: Api) -> None:
    created = await api.ingest(content="The store may go away")
    api.memory.set_unavailable({"entries"})
    response = await api.http.post(
        f"{API}/entries/{created['entry_id']}/deprecate", json={"reason": "obsolete"}
    )
    assert_error(response, 503, "store_unavailable")
    api.memory.set_unavailable(())
    assert Status.CANDIDATE == (await api.apollo.get_entry(created["entry_id"])).status


@pytest.mark.parametrize("failing", ["entries.update", "access_log.record", "commit"])
async def test_deprecate_persistence_failure_is_500_and_changes_nothing(
    api: Api, failing: str
) -> None:
    """Status change, reason and access log commit together: any failure leaves nothing."""
    created = await api.ingest(content="Writes can fail")
    api.store.faults.failing.add(failing)
    response = await api.http.post(
        f"{API}/entries/{created['entry_id']}/deprecate", json={"reason": "obsolete"}
    )
    assert_error(response, 500, "persistence_failed")
    api.store.faults.failing.clear()
    entry = await api.apollo.get_entry(created["entry_id"])
    assert (Status.CANDIDATE, None) == (
        entry.status,
        entry.source_context.get("deprecation_reason"),
    )


async def test_resolve(api: Api) -> None:
    disputed = await api.ingest(content="The cache TTL is 60 seconds")
    await api.set_status(disputed["entry_id"], Status.DISPUTED)
    url = f"{API}/entries/{disputed['entry_id']}/resolve"
    unknown = await api.http.post(url, json={"resolution": "maybe"}, headers=OPS)
    assert_error(unknown, 400, "unknown_resolution", "resolution")
    accepted = await api.http.post(url, json={"resolution": "accept"}, headers=OPS)
    assert (200, "confirmed", True) == (
        accepted.status_code,
        accepted.json()["status"],
        accepted.json()["changed"],
    )
    again = await api.http.post(url, json={"resolution": "accept"}, headers=OPS)
    assert_error(again, 409, "invalid_transition")
    missing = await api.http.post(
        f"{API}/entries/{uuid4()}/resolve", json={"resolution": "keep"}, headers=OPS
    )
    assert_error(missing, 404, "not_found")


async def test_unknown_resolution_wins_over_not_disputed(api: Api) -> None:
    """An unknown resolution on a non-disputed entry is a 400, not a 409."""
    created = await api.ingest(content="Candidates are not disputed")
    url = f"{API}/entries/{created['entry_id']}/resolve"
    assert_error(
        await api.http.post(url, json={"resolution": "maybe"}, headers=OPS),
        400,
        "unknown_resolution",
        "resolution",
    )
    assert_error(
        await api.http.post(url, json={"resolution": "reject"}, headers=OPS),
        409,
        "invalid_transition",
    )


# --------------------------------------------------------------------------- expertise


async def test_expertise_at_risk_and_profile(api: Api) -> None:
    await api.ingest(content="Terraform plans before it applies", tags=["infra"], agent_id="a1")
    await api.ingest(content="Ansible playbooks are idempotent", tags=["infra"], agent_id="a2")
    await api.ingest(content="Go channels synchronize goroutines", tags=["golang"], agent_id="a1")
    await api.apollo.aggregate_expertise()

    experts = await api.http.get(f"{API}/expertise/infra", params={"min_proficiency": 0})
    assert 200 == experts.status_code
    assert {"a1", "a2"} == {a["agent_id"] for a in experts.json()["agents"]}

    at_risk = await api.http.get(f"{API}/expertise/at-risk", params={"min_agents": 2})
    assert 200 == at_risk.status_code
    assert ["golang"] == [d["knowledge_domain"] for d in at_risk.json()["domains"]]

    profile = await api.http.get(f"{API}/agents/a1/profile")
    assert 200 == profile.status_code
    assert ("a1", 2) == (profile.json()["agent_id"], profile.json()["total_entries"])


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/expertise/infra?min_proficiency=high", "min_proficiency"),
        ("/expertise/infra?min_proficiency=1.5", "min_proficiency"),
        ("/expertise/infra?limit=3", "limit"),
        ("/expertise/at-risk?min_agents=0", "min_agents"),
        ("/expertise/at-risk?min_agents=two", "min_agents"),
        ("/expertise/at-risk?min_proficiency=0.5", "min_proficiency"),
        ("/expertise/%20", "domain"),
    ],
)
async def test_expertise_invalid_parameters_are_400(api: Api, url: str, field: str) -> None:
    assert_error(await api.http.get(API + url), 400, "validation_error", field)


# --------------------------------------------------------------------------- maintenance, stats


async def test_maintenance_decay_and_archive(api: Api) -> None:
    created = await api.ingest(content="Confidence decays when nobody uses it")
    forced = await api.http.post(f"{API}/maintenance/decay", json={"factor": 0.5}, headers=OPS)
    assert (200, {"action": "force_decay", "affected": 1, "archived": 0}) == (
        forced.status_code,
        forced.json(),
    )
    assert 0.25 == (await api.apollo.get_entry(created["entry_id"])).confidence
    cycle = await api.http.post(f"{API}/maintenance/decay", headers=OPS)
    assert (200, "decay") == (cycle.status_code, cycle.json()["action"])
    stale = await api.http.post(f"{API}/maintenance/archive-stale", json={"days": 0}, headers=OPS)
    assert (200, 1) == (stale.status_code, stale.json()["archived"])
    assert Status.ARCHIVED == (await api.apollo.get_entry(created["entry_id"])).status


async def test_maintenance_errors(api: Api) -> None:
    decay = f"{API}/maintenance/decay"
    assert_error(
        await api.http.post(decay, json={"factor": 0.5}, headers={"Authorization": ""}),
        401,
        "unauthorized",
    )
    assert_error(await api.http.post(decay, json={"factor": 0.5}, headers=ALICE), 403, "forbidden")
    assert_error(
        await api.http.post(decay, json={"factor": 2}, headers=OPS),
        400,
        "validation_error",
        "factor",
    )
    assert_error(
        await api.http.post(f"{API}/maintenance/archive-stale", json={}, headers=OPS),
        400,
        "validation_error",
        "days",
    )
    assert_error(
        await api.http.post(f"{API}/maintenance/archive-stale", json={"days": -1}, headers=OPS),
        400,
        "validation_error",
        "days",
    )


async def test_maintenance_needs_an_admin_even_without_tokens(api: Api) -> None:
    """Without tokens the anonymous caller is a writer: maintenance is refused (403)."""
    app = create_app(api.apollo)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as local:
        response = await local.post(f"{API}/maintenance/decay", json={"factor": 0})
    assert_error(response, 403, "forbidden")


async def test_stats(api: Api) -> None:
    first = await api.ingest(content="Stats count what the caller sees", content_type="fact")
    await api.ingest(content="Observations are the default content type")
    await api.set_status(first["entry_id"], Status.DISPUTED)
    response = await api.http.get(f"{API}/stats")
    assert 200 == response.status_code
    stats = response.json()
    assert (2, 2, 2, 0.5, 0) == (
        stats["total"],
        stats["active"],
        stats["last_24h"],
        stats["average_confidence"],
        stats["total_relations"],
    )
    assert {"candidate": 1, "confirmed": 0, "disputed": 1, "archived": 0} == stats["by_status"]
    assert {"fact": 1, "observation": 1} == {k: v for k, v in stats["by_content_type"].items() if v}


# --------------------------------------------------------------------------- routing, metrics


async def test_unknown_route_and_wrong_method_use_the_error_shape(api: Api) -> None:
    assert_error(await api.http.get(f"{API}/nowhere"), 404, "not_found")
    assert_error(await api.http.get("/nowhere"), 404, "not_found")
    assert 200 == (await api.http.get("/")).status_code  # the console
    wrong = await api.http.delete(f"{API}/ingest")
    assert_error(wrong, 405, "method_not_allowed")
    assert "POST" in wrong.headers["allow"]
    assert_error(await api.http.get(f"{API}/query"), 405, "method_not_allowed")


async def test_a_fault_no_handler_knows_is_a_500_that_keeps_its_text_to_the_log(
    api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The one exception map: what no handler knows is answered 500 ``internal_error``
    without its text, which goes to the log with its cause."""

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the password is hunter2")

    monkeypatch.setattr(http_app, "handle", broken)
    transport = httpx.ASGITransport(app=create_app(api.apollo), raise_app_exceptions=False)
    caplog.set_level(logging.ERROR, logger="apollo.http")
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as local:
        response = await local.post(f"{API}/query", json={"query": "anything"})
    assert_error(response, 500, "internal_error")
    assert "hunter2" not in response.text
    assert any("hunter2" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)


async def test_metrics_expose_ingest_outcomes_queries_and_requests(api: Api) -> None:
    await api.ingest(content="Counted once")
    await api.ingest(content="Counted once")
    await api.ingest(content="Counted twice over")
    await api.http.post(f"{API}/query", json={"query": "counted"})
    await api.http.get(f"{API}/nowhere")
    await api.http.delete(f"{API}/ingest")
    response = await api.http.get("/metrics", headers=OPS)
    assert 200 == response.status_code
    assert response.headers["content-type"].startswith("text/plain")
    lines = set(response.text.splitlines())
    assert 'apollo_ingest_total{outcome="created"} 2.0' in lines
    assert 'apollo_ingest_total{outcome="deduplicated"} 1.0' in lines
    assert 'apollo_ingest_total{outcome="rejected"} 0.0' in lines
    assert "apollo_query_seconds_count 1.0" in lines
    assert 'apollo_queue_depth{queue="outbox"} 2.0' in lines
    assert (
        'apollo_http_requests_total{method="POST",route="/api/apollo/ingest",status="201"} 2.0'
        in lines
    )
    assert (
        'apollo_http_requests_total{method="POST",route="/api/apollo/ingest",status="200"} 1.0'
        in lines
    )
    assert 'apollo_http_requests_total{method="GET",route="unmatched",status="404"} 1.0' in lines
    assert 'apollo_http_requests_total{method="DELETE",route="unmatched",status="405"} 1.0' in lines


async def test_metrics_count_what_the_loopback_guard_refuses(api: Api) -> None:
    """Without tokens a foreign Host is refused before routing: counted as unmatched 403."""
    metrics = Metrics()
    app = create_app(api.apollo, metrics=metrics)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as local:
        refused = await local.get(f"{API}/stats", headers={"Host": "evil.example"})
        assert_error(refused, 403, "forbidden")
        await local.get(f"{API}/nowhere")
    text = metrics.render()[0].decode().splitlines()
    assert 'apollo_http_requests_total{method="GET",route="unmatched",status="403"} 1.0' in text
    assert 'apollo_http_requests_total{method="GET",route="unmatched",status="404"} 1.0' in text


async def test_metrics_callbacks_for_the_service_runtime() -> None:
    """The service feeds maintenance counts and bus queue depths through these methods."""
    metrics = Metrics()
    metrics.observe_maintenance(decayed=4, archived=1)
    metrics.observe_maintenance(archived=2)
    metrics.set_queue_depth("legion.apollo.ingest", 7)
    metrics.observe_ingest("corroborated")
    text = metrics.render()[0].decode()
    for line in (
        "apollo_decayed_total 4.0",
        "apollo_archived_total 3.0",
        'apollo_queue_depth{queue="legion.apollo.ingest"} 7.0',
        'apollo_ingest_total{outcome="corroborated"} 1.0',
    ):
        assert line in text.splitlines()
    assert "apollo_decayed_total 0.0" in Metrics().render()[0].decode().splitlines()


async def test_openapi_covers_every_route(api: Api) -> None:
    """Each Starlette route (path and method) is an operation of the document; bodies are
    described with their fields, and every error response uses the error schema."""
    document = (await api.http.get("/openapi.json")).json()
    assert document["openapi"].startswith("3.1")
    schemas = document["components"]["schemas"]
    # The console's page and files are not API operations: they, and only they, are left
    # out of the document on purpose.
    console = [r for r in api.app.routes if not (isinstance(r, Route) and r.include_in_schema)]
    assert ["/", "/console"] == sorted(getattr(r, "path", "") for r in console)
    routes = [r for r in api.app.routes if r not in console]
    assert len(routes) >= 16
    for route in routes:
        for method in route.methods - {"HEAD"}:
            path = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)  # {name:path} is {name}
            operation = document["paths"].get(path, {}).get(method.lower())
            assert operation is not None, f"{method} {route.path} is missing"
            assert operation["responses"]
            for status, response in operation["responses"].items():
                # /mcp speaks JSON-RPC: its protocol errors are JSON-RPC error objects.
                jsonrpc = route.path == "/mcp" and int(status) in (400, 413)
                if int(status) >= 400 and not route.path.endswith("/health") and not jsonrpc:
                    ref = response["content"]["application/json"]["schema"]["$ref"]
                    assert "#/components/schemas/Error" == ref
    ingest = document["paths"][f"{API}/ingest"]["post"]
    body_ref = ingest["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = schemas[body_ref.rsplit("/", 1)[1]]
    assert ["content"] == body["required"]
    assert body["additionalProperties"] is False
    assert {"content", "tags", "access_scope", "agent_id"} <= set(body["properties"])
    assert {"200", "201", "400", "401", "422", "500", "503"} <= set(ingest["responses"])
    stats = document["paths"][f"{API}/stats"]["get"]["responses"]["200"]
    stats_schema = stats["content"]["application/json"]["schema"]
    assert "active" in stats_schema["required"]
    assert "active" not in stats_schema["properties"]["by_status"]["properties"]
    deprecate = document["paths"][f"{API}/entries/{{entry_id}}/deprecate"]["post"]
    assert {"200", "404", "500", "503"} <= set(deprecate["responses"])


# --------------------------------------------------------------------------- JSON edge


def test_converter_round_trips_results_through_json() -> None:
    """UUIDs as strings, datetimes as ISO 8601 UTC, enums as values, tuples as lists."""
    converter = make_converter(forbid_extra_keys=False, round_scores=False)
    when = datetime(2024, 5, 1, 12, 30, tzinfo=timezone(timedelta(hours=2)))
    profile = AgentProfile("a1", (DomainExpertise("db", 2, 0.7, 0.6, when),), 2, 0.6, when)
    data = decode_json(encode_json(converter.unstructure(profile)))
    assert "2024-05-01T10:30:00Z" == data["last_active_at"]
    assert isinstance(data["domains"], list)
    assert profile == converter.structure(data, AgentProfile)
    result = IngestResult(Outcome.CREATED, uuid4(), Status.CANDIDATE, 0.5)
    encoded = converter.unstructure(result)
    assert ("created", str(result.entry_id)) == (encoded["outcome"], encoded["entry_id"])
    assert result == converter.structure(encoded, IngestResult)


# --------------------------------------------------------------------------- serving


def test_bind_host_is_loopback_without_tokens() -> None:
    assert "127.0.0.1" == bind_host("0.0.0.0", {})
    assert "127.0.0.1" == bind_host("0.0.0.0", None)
    assert "0.0.0.0" == bind_host("0.0.0.0", {"t": "alice"})


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_host_setting_is_overridden_only_with_a_warning() -> None:
    """Without tokens a host other than loopback is not used, and the warning says so,
    naming both settings; loopback itself, or tokens, need no word."""
    warning = host_overridden("0.0.0.0", None)
    assert warning is not None
    assert warning.startswith("APOLLO_HTTP_HOST=0.0.0.0 is overridden:")
    assert "listens on 127.0.0.1 only" in warning and "APOLLO_API_TOKENS" in warning
    assert host_overridden("127.0.0.1", None) is None
    assert host_overridden("localhost", {}) is None
    assert host_overridden("0.0.0.0", {"t": "alice"}) is None


def test_apollo_serve_binds_loopback_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    """``apollo serve`` binds its socket before anything starts: without tokens on
    loopback, with the one warning that names the overridden host setting."""
    from apollo_app.entrypoints.service.runner import _http_socket

    settings = Settings(embedder="hashing", http_host="0.0.0.0", http_port=0)
    with caplog.at_level(logging.WARNING), _http_socket(settings) as sock:
        assert sock is not None
        assert "127.0.0.1" == sock.getsockname()[0]
    assert [host_overridden("0.0.0.0", None)] == [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
    ]


async def test_serve_http_serves_until_cancelled(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    """serve_http binds loopback without tokens (with one warning that the host setting is
    overridden), signals readiness, and releases the port when its task is cancelled."""
    port = _free_port()
    settings = Settings(embedder="hashing", http_host="0.0.0.0", http_port=port)
    ready = asyncio.Event()
    with caplog.at_level(logging.WARNING, logger="apollo.http"):
        task = asyncio.create_task(serve_http(api.apollo, settings, Metrics(), ready=ready))
        await asyncio.wait_for(ready.wait(), timeout=10)
    assert [host_overridden("0.0.0.0", None)] == [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
    ]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as local:
        assert 200 == (await local.get(f"{API}/health")).status_code
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with socket.socket() as again:
        again.bind(("127.0.0.1", port))  # the port is free again


async def test_http_server_stops_when_should_exit_is_set(api: Api) -> None:
    server = HttpServer(create_app(api.apollo), "127.0.0.1", 0)
    await server.start()
    port = server.port
    assert server._server is not None
    server._server.should_exit = True
    await asyncio.wait_for(server.wait(), timeout=10)
    await server.stop()
    with socket.socket() as again:
        again.bind(("127.0.0.1", port))


async def test_a_query_over_http_says_how_many_near_duplicates_it_folded(api: Api) -> None:
    """One source's template filled in five times is one result with ``folded: 4``, and the
    OpenAPI document describes the field."""
    words = ["kafka", "static", "membership", "keeps", "partitions", "stable", "EveCloud"]
    for i in range(5):
        text = " ".join(words[i:] + words[:i])
        await api.ingest(content=f"{text} offer {i}")

    body = (await api.http.post(f"{API}/query", json={"query": "kafka static membership"})).json()
    document = (await api.http.get("/openapi.json")).json()

    assert [4] == [entry["folded"] for entry in body["entries"]]
    view = document["components"]["schemas"]["EntryView"]
    assert "integer" == view["properties"]["folded"]["type"]


# --------------------------------------------------------------------------- texts


async def test_a_conversation_posted_to_texts_is_one_episode_with_neighbours(api: Api) -> None:
    conversation = [
        {"speaker": "ann", "text": "The billing cluster runs PostgreSQL 16.", "at": "2026-03-02"},
        {"speaker": "bob", "text": "Its replica lags by two seconds at peak."},
        {"speaker": "ann", "text": "We page the database team above five seconds."},
    ]
    told = await api.http.post(
        f"{API}/texts", json={"text": conversation, "access_scope": "private"}, headers=ALICE
    )
    assert 200 == told.status_code, told.text
    body = told.json()
    assert ["created"] * 3 == [s["outcome"] for s in body["statements"]]
    again = await api.http.post(
        f"{API}/texts", json={"text": conversation, "access_scope": "private"}, headers=ALICE
    )
    assert body["episode_id"] == again.json()["episode_id"]
    assert ["deduplicated"] * 3 == [s["outcome"] for s in again.json()["statements"]]

    found = await api.http.post(
        f"{API}/query",
        json={"query": "replica lags", "mode": "lexical", "context_window": 1},
        headers=ALICE,
    )
    (hit,) = found.json()["entries"]
    assert (body["episode_id"], 1) == (hit["episode_id"], hit["position"])
    assert [0, 2] == [n["position"] for n in hit["neighbours"]]
    assert "ann: The billing cluster runs PostgreSQL 16." == hit["neighbours"][0]["content"]

    episode = await api.http.get(f"{API}/episodes/{body['episode_id']}", headers=ALICE)
    assert 200 == episode.status_code
    assert conversation[1]["text"] == episode.json()["text"][1]["text"]
    assert "2026-03-02T00:00:00+00:00" == episode.json()["text"][0]["at"]
    assert 3 == len(episode.json()["statements"])
    # another principal sees nothing of it
    assert_error(
        await api.http.get(f"{API}/episodes/{body['episode_id']}", headers=BOB), 404, "not_found"
    )
    theirs = await api.http.post(
        f"{API}/query", json={"query": "replica lags", "context_window": 5}, headers=BOB
    )
    assert [] == theirs.json()["entries"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": [{"speaker": "ann"}]}, "text[0].text"),
        ({"text": "fine", "access_scope": "galactic"}, "access_scope"),
        ({"text": "x" * 4_001}, "text"),
        ({"text": "fine", "speaker": "ann"}, "speaker"),
    ],
)
async def test_a_bad_text_is_400_naming_the_field_and_stores_nothing(
    api: Api, body: dict[str, Any], field: str
) -> None:
    response = await api.http.post(f"{API}/texts", json=body, headers=ALICE)
    assert_error(response, 400, "validation_error", field)
    stats = await api.http.get(f"{API}/stats", headers=ALICE)
    assert 0 == stats.json()["total"]


async def test_an_episode_id_that_is_not_a_uuid_is_400(api: Api) -> None:
    assert_error(await api.http.get(f"{API}/episodes/nope"), 400, "validation_error", "episode_id")
