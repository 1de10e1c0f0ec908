"""Attacks on the HTTP API, each refused with the right status and nothing changed.

Every test runs against real uvicorn on loopback, with an in-memory Apollo whose state is
read back directly (statuses, confidences, credibility) before and after the attack.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import httpx
import pytest
from attrs import frozen

from apollo_app import Apollo, Principal, Status
from apollo_app.entrypoints.http import HttpServer, create_app
from apollo_app.metrics import Metrics
from apollo_domain.lifecycle import dispute

API = "/api/apollo"
TOKENS = {
    "tok-alice": "alice",  # a writer acting as agent alice
    "tok-bob": "bob",
    "tok-rita": "rita:reader",
    "tok-ops": "ops:admin",
    "tok-mesh": "mesh:gateway",
}
ALICE = {"Authorization": "Bearer tok-alice"}
BOB = {"Authorization": "Bearer tok-bob"}
RITA = {"Authorization": "Bearer tok-rita"}
OPS = {"Authorization": "Bearer tok-ops"}
NOBODY: dict[str, str] = {}


@frozen
class Served:
    apollo: Apollo
    url: str


async def _serve(tokens: dict[str, str] | None) -> AsyncIterator[Served]:
    async with Apollo.in_memory() as apollo:
        app = create_app(apollo, tokens=tokens)
        async with HttpServer(app, "127.0.0.1", 0) as server:
            yield Served(apollo, server.url)


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    async for running in _serve(TOKENS):
        yield running


@pytest.fixture
async def open_server() -> AsyncIterator[Served]:
    """No tokens: loopback only, every caller anonymous."""
    async for running in _serve(None):
        yield running


async def _call(
    served: Served, method: str, path: str, headers: dict[str, str], body: Any = None
) -> httpx.Response:
    async with httpx.AsyncClient(base_url=served.url) as http:
        return await http.request(method, API + path, json=body, headers=headers)


async def _snapshot(apollo: Apollo) -> list[tuple[UUID, Status, float]]:
    """Every entry's status and confidence, whoever owns it."""
    async with apollo.store.unit_of_work() as uow:
        entries = await uow.entries.by_agent("alice") + await uow.entries.by_agent("bob")
    return sorted((e.id, e.status, e.confidence) for e in entries)


async def _entry(served: Served, headers: dict[str, str], content: str, **body: Any) -> str:
    response = await _call(served, "POST", "/ingest", headers, {"content": content, **body})
    assert 201 == response.status_code, response.text
    return str(response.json()["entry_id"])


async def _disputed(served: Served, headers: dict[str, str], content: str) -> str:
    entry_id = await _entry(served, headers, content)
    async with served.apollo.store.unit_of_work() as uow:
        entry = await uow.entries.get(UUID(entry_id))
        assert entry is not None
        await uow.entries.update(dispute(entry, entry.updated_at))
        await uow.commit()
    return entry_id


def _refused(response: httpx.Response, status: int, kind: str) -> None:
    assert status == response.status_code, response.text
    assert kind == response.json()["error"]["type"]


async def test_without_a_token_nothing_but_health_and_the_document_answers(served: Served):
    """Once tokens are configured, an anonymous request is a 401 on every route that reads
    or writes knowledge; health and the OpenAPI document stay open."""
    entry_id = await _disputed(served, ALICE, "The build cache lives on the NFS share")
    before = await _snapshot(served.apollo)
    attempts = [
        ("POST", "/ingest", {"content": "anonymous write"}),
        ("POST", f"/entries/{entry_id}/deprecate", {"reason": "vandalism"}),
        ("POST", f"/entries/{entry_id}/resolve", {"resolution": "reject"}),
        ("POST", "/query", {"query": "build cache"}),
        ("GET", f"/entries/{entry_id}", None),
        ("GET", "/stats", None),
        ("GET", "/expertise/general", None),
        ("POST", "/maintenance/decay", {"factor": 0}),
    ]
    for method, path, body in attempts:
        _refused(await _call(served, method, path, NOBODY, body), 401, "unauthorized")
    assert before == await _snapshot(served.apollo)
    assert 200 == (await _call(served, "GET", "/health", NOBODY)).status_code
    async with httpx.AsyncClient(base_url=served.url) as http:
        assert 200 == (await http.get("/openapi.json")).status_code
        assert 401 == (await http.get("/metrics")).status_code


@pytest.mark.parametrize("reserved", ["redacted", "unknown", "http", "Hidden", "hidden-1"])
async def test_no_token_credits_work_to_an_agent_id_apollo_reserves(served: Served, reserved):
    """Not even a gateway or an admin: 400 naming agent_id, nothing stored."""
    for token in ({"Authorization": "Bearer tok-mesh"}, OPS):
        body = {"content": "credited to Apollo itself", "agent_id": reserved}
        response = await _call(served, "POST", "/ingest", token, body)
        _refused(response, 400, "validation_error")
        assert "agent_id" == response.json()["error"]["field"]
    assert 0 == (await served.apollo.stats()).total


async def test_submission_metadata_is_the_edges(served: Served):
    """submitted_by / submitted_from are the token's principal and http; a body naming
    them is refused (400 naming the field), nothing stored."""
    body = {"content": "who sent this?", "submitted_by": "the-ceo", "submitted_from": "board"}
    response = await _call(served, "POST", "/ingest", ALICE, body)
    _refused(response, 400, "validation_error")
    assert "submitted_by" == response.json()["error"]["field"]
    assert 0 == (await served.apollo.stats()).total
    entry_id = await _entry(served, ALICE, "who sent this?")
    source = (await served.apollo.get_entry(entry_id)).source
    assert ("alice", "http") == (source.submitted_by, source.submitted_from)


async def test_metrics_are_an_admins_with_tokens():
    """The counters cover the whole store, private writes included: a writer or a reader
    gets 403, an admin the exposition."""
    async with Apollo.in_memory() as apollo:
        app = create_app(apollo, tokens=TOKENS, metrics=Metrics())
        async with (
            HttpServer(app, "127.0.0.1", 0) as server,
            httpx.AsyncClient(base_url=server.url) as http,
        ):
            statuses = [
                (await http.get("/metrics", headers=headers)).status_code
                for headers in (ALICE, RITA, OPS)
            ]
    assert [403, 403, 200] == statuses


async def test_a_writer_cannot_decay_or_archive_the_store(served: Served):
    """maintenance/decay with factor 0 and archive-stale 0 days are admin work: 403 and
    every entry keeps its confidence and status; an admin token may run them."""
    await _entry(served, ALICE, "Alice's global fact about the deploy window")
    await _entry(served, BOB, "Bob's private note", access_scope="private")
    before = await _snapshot(served.apollo)
    for headers in (ALICE, RITA):
        _refused(
            await _call(served, "POST", "/maintenance/decay", headers, {"factor": 0}),
            403,
            "forbidden",
        )
        _refused(
            await _call(served, "POST", "/maintenance/archive-stale", headers, {"days": 0}),
            403,
            "forbidden",
        )
    assert before == await _snapshot(served.apollo)
    allowed = await _call(served, "POST", "/maintenance/decay", OPS, {"factor": 1})
    assert 200 == allowed.status_code


async def test_only_an_admin_resolves_disputes_so_credibility_cannot_be_driven_down(served):
    """The chain 'write as the victim, contradict, resolve reject' stops at every step: a
    writer cannot speak as another agent, and cannot resolve a dispute."""
    victim = await _disputed(served, BOB, "Bob says the failover takes 30 seconds")
    as_victim = await _call(
        served, "POST", "/ingest", ALICE, {"content": "forged", "agent_id": "bob"}
    )
    _refused(as_victim, 403, "forbidden")
    assert "agent_id" == as_victim.json()["error"]["field"]
    before = await _snapshot(served.apollo)
    async with served.apollo.store.unit_of_work() as uow:
        credibility = await uow.credibility.get("bob")
    for _ in range(3):
        _refused(
            await _call(
                served, "POST", f"/entries/{victim}/resolve", ALICE, {"resolution": "reject"}
            ),
            403,
            "forbidden",
        )
    assert before == await _snapshot(served.apollo)
    async with served.apollo.store.unit_of_work() as uow:
        assert credibility == await uow.credibility.get("bob")


async def test_one_writer_cannot_pose_as_several_independent_sources(served: Served):
    """Several agent ids from one writer token are refused, so its own entry can never be
    corroborated by itself: it stays a candidate at 0.5."""
    entry_id = await _entry(served, ALICE, "The staging database runs PostgreSQL 16")
    for agent in ("claude-1", "openai-2", "gemini-3"):
        response = await _call(
            served,
            "POST",
            "/ingest",
            ALICE,
            {"content": "The staging database runs PostgreSQL 16", "agent_id": agent},
        )
        _refused(response, 403, "forbidden")
    await served.apollo.check_corroboration()
    entry = await served.apollo.get_entry(entry_id)
    assert (Status.CANDIDATE, 0.5) == (entry.status, entry.confidence)


async def test_a_writer_deprecates_only_its_own_entries(served: Served):
    mine = await _entry(served, ALICE, "Alice's runbook: restart the ingest workers")
    theirs = await _entry(served, BOB, "Bob's runbook: drain the queue first")
    _refused(
        await _call(served, "POST", f"/entries/{theirs}/deprecate", ALICE, {"reason": "mine now"}),
        403,
        "forbidden",
    )
    assert Status.CANDIDATE == (await served.apollo.get_entry(theirs)).status
    done = await _call(served, "POST", f"/entries/{mine}/deprecate", ALICE, {"reason": "old"})
    assert 200 == done.status_code
    admin = await _call(served, "POST", f"/entries/{theirs}/deprecate", OPS, {"reason": "spam"})
    assert 200 == admin.status_code


async def test_a_reader_reads_and_writes_nothing(served: Served):
    await _entry(served, ALICE, "Readers may query global knowledge")
    found = await _call(served, "POST", "/query", RITA, {"query": "global knowledge"})
    assert 200 == found.status_code
    _refused(
        await _call(served, "POST", "/ingest", RITA, {"content": "a reader's write"}),
        403,
        "forbidden",
    )
    assert 1 == (await served.apollo.stats(Principal("rita"))).total


async def test_expertise_views_show_nothing_of_what_the_caller_cannot_see(served: Served):
    """Private domains, their agents and counts never reach another principal."""
    await _entry(
        served, ALICE, "Codename Nightjar ships in March", access_scope="private", tags=["nightjar"]
    )
    await _entry(served, BOB, "Public fact about routing", tags=["routing"])
    experts = await _call(served, "GET", "/expertise/nightjar", BOB)
    assert (200, {"agents": []}) == (experts.status_code, experts.json())
    at_risk = await _call(served, "GET", "/expertise/at-risk", BOB)
    assert "nightjar" not in str(at_risk.json())
    profile = await _call(served, "GET", "/agents/alice/profile", BOB)
    assert (200, 0, []) == (
        profile.status_code,
        profile.json()["total_entries"],
        profile.json()["domains"],
    )
    own = await _call(served, "GET", "/expertise/nightjar", ALICE)
    assert ["alice"] == [agent["agent_id"] for agent in own.json()["agents"]]


async def test_no_token_mode_refuses_browsers_and_rebound_hosts(open_server: Served):
    """Without tokens: a text/plain body (a form a web page can send) is a 415, a foreign
    Host (DNS rebinding) or a cross-site Origin a 403; nothing is written."""
    plain = await _call_raw(
        open_server,
        "/ingest",
        b'{"content": "from a web page"}',
        {"Content-Type": "text/plain"},
    )
    _refused(plain, 415, "unsupported_media_type")
    rebound = await _call_raw(
        open_server,
        "/ingest",
        b'{"content": "rebound"}',
        {"Content-Type": "application/json", "Host": "attacker.example"},
    )
    _refused(rebound, 403, "forbidden")
    cross_site = await _call_raw(
        open_server,
        "/maintenance/decay",
        b'{"factor": 0}',
        {"Content-Type": "application/json", "Origin": "http://evil.example"},
    )
    _refused(cross_site, 403, "forbidden")
    assert 0 == (await open_server.apollo.stats()).total
    local = await _call_raw(
        open_server,
        "/ingest",
        b'{"content": "from this machine"}',
        {"Content-Type": "application/json", "Origin": "http://localhost:8765"},
    )
    assert 201 == local.status_code, local.text
    decay = await _call_raw(
        open_server, "/maintenance/decay", b'{"factor": 0}', {"Content-Type": "application/json"}
    )
    _refused(decay, 403, "forbidden")


async def _call_raw(
    served: Served, path: str, body: bytes, headers: dict[str, str]
) -> httpx.Response:
    async with httpx.AsyncClient(base_url=served.url) as http:
        return await http.post(API + path, content=body, headers=headers)


async def test_anonymous_readers_see_no_agent_names(open_server: Served):
    """A global entry alice's agent wrote and bob's agreed with is readable by anyone, but
    no agent is named: not its source, owner or submitter, not the agreeing sources of
    its confirmation, not its evidence, not in a query; views about agents are refused."""
    apollo = open_server.apollo
    alice = apollo.client("claude-1", Principal("alice"))
    created = await alice.store_knowledge(content="A global fact", submitted_by="alice")
    await apollo.client("openai-2", Principal("bob")).store_knowledge(content="A global fact")
    await apollo.check_corroboration()
    confirmed = await apollo.get_entry(created.entry_id)
    assert ["claude-1", "openai-2"] == confirmed.source_context["bootstrap"]["agreement"]
    async with httpx.AsyncClient(base_url=open_server.url) as http:
        entry = (await http.get(f"{API}/entries/{created.entry_id}")).json()
        evidence = (await http.get(f"{API}/entries/{created.entry_id}/evidence")).json()
        found = (await http.post(f"{API}/query", json={"query": "global fact"})).json()
        profile = await http.get(f"{API}/agents/claude-1/profile")
        expertise = await http.get(f"{API}/expertise/general")
        source = await http.get(f"{API}/sources/claude-1")
    assert (None, None) == (entry["owner_id"], entry["source"]["submitted_by"])
    assert "hidden" == entry["source"]["agent_id"]
    assert ["hidden", "hidden"] == entry["source_context"]["bootstrap"]["agreement"]
    assert [("hidden-1", True), ("hidden-2", True)] == [
        (item["agent_id"], item["independent"]) for item in evidence["evidence"]
    ]
    assert ["hidden"] == [view["source_agent"] for view in found["entries"]]
    assert [403, 403, 403] == [r.status_code for r in (profile, expertise, source)]


async def test_the_console_is_public_and_runs_only_its_own_scripts(served: Served):
    """The console's page and files answer without a token (they hold no data: the API
    still wants one) under a Content-Security-Policy that allows only this origin."""
    async with httpx.AsyncClient(base_url=served.url) as http:
        page = await http.get("/")
        script = await http.get("/console/app.js")
        styles = await http.get("/console/style.css")
        missing = await http.get("/console/nothing.js")
        data = await http.post(f"{API}/query", json={"query": "anything"})
    assert (200, "text/html") == (page.status_code, page.headers["content-type"].split(";")[0])
    assert '<script type="module" src="/console/app.js">' in page.text
    assert 200 == script.status_code and "javascript" in script.headers["content-type"]
    assert 200 == styles.status_code
    for response in (page, script, styles):
        policy = response.headers["content-security-policy"]
        assert "default-src 'none'" in policy
        assert "script-src 'self';" in policy and "connect-src 'self';" in policy
        assert "unsafe" not in policy
        assert "nosniff" == response.headers["x-content-type-options"]
        assert "DENY" == response.headers["x-frame-options"]
    _refused(missing, 404, "not_found")
    _refused(data, 401, "unauthorized")


async def test_the_console_page_is_loopback_only_without_tokens(open_server: Served):
    async with httpx.AsyncClient(base_url=open_server.url) as http:
        assert 200 == (await http.get("/")).status_code
        rebound = await http.get("/", headers={"Host": "attacker.example"})
    _refused(rebound, 403, "forbidden")


async def test_evidence_and_relations_show_nothing_the_caller_cannot_see(served: Served):
    """Alice's private entry has no evidence nor relations for bob, and a relation from a
    global entry to it is left out of the global entry's relations."""
    public = await _entry(served, ALICE, "The CI runners use spot instances")
    private = await _entry(
        served, ALICE, "Our spot bid is 40 percent of on-demand", access_scope="private"
    )
    await served.apollo.client("alice", Principal("alice")).link_entries(
        from_entry_id=public, to_entry_id=private, relation_type="extends"
    )
    for path in (f"/entries/{private}/evidence", f"/entries/{private}/relations"):
        _refused(await _call(served, "GET", path, BOB), 404, "not_found")
    mine = await _call(served, "GET", f"/entries/{public}/relations", ALICE)
    assert [private] == [r["id"] for r in mine.json()["relations"]]
    theirs = await _call(served, "GET", f"/entries/{public}/relations", BOB)
    assert {"relations": []} == theirs.json()
    evidence = await _call(served, "GET", f"/entries/{public}/evidence", RITA)
    assert ["alice"] == [e["agent_id"] for e in evidence.json()["evidence"]]


async def test_only_an_admin_labels_a_source(served: Served):
    """A writer cannot flag a rival (or promote itself); an admin can, and unlabel again."""
    for headers, label in ((ALICE, "troll"), (BOB, "moderator"), (RITA, "flagged")):
        _refused(
            await _call(served, "PUT", "/sources/bob/label", headers, {"label": label}),
            403,
            "forbidden",
        )
    standing = await _call(served, "GET", "/sources/bob", ALICE)
    assert (200, 0.5, None) == (
        standing.status_code,
        standing.json()["credibility"],
        standing.json()["label"],
    )
    flagged = await _call(served, "PUT", "/sources/bob/label", OPS, {"label": "flagged"})
    assert (200, 0.05, "flagged") == (
        flagged.status_code,
        flagged.json()["credibility"],
        flagged.json()["label"],
    )
    cleared = await _call(served, "DELETE", "/sources/bob/label", OPS)
    assert (200, 0.5, None) == (
        cleared.status_code,
        cleared.json()["credibility"],
        cleared.json()["label"],
    )
