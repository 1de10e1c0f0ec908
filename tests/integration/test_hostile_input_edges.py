"""Hostile input over the real edges: the HTTP API under uvicorn and the service consuming
its queues (the in-process bus with the in-memory store, RabbitMQ with PostgreSQL).

Every case is answered with a 4xx (or an RPC ValidationError, or a dead letter on the very
first delivery) naming the offending field, never a 500 or 503, and writes nothing.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import quote
from uuid import uuid4

import httpx
import pytest
from attrs import define, field

from apollo_adapters.inprocess import InProcessBus
from apollo_adapters.memory import InMemoryStore
from apollo_adapters.rabbitmq import AiormqBus
from apollo_app import Apollo, Principal, RemoteClient, Settings
from apollo_app.cli.ingest import IngestReport, Progress, ingest_lines
from apollo_app.entrypoints.http import HttpServer, create_app
from apollo_app.entrypoints.http.operations import OPERATIONS, Operation
from apollo_app.entrypoints.service import ApolloService
from apollo_app.wire.codec import make_converter
from apollo_app.wire.envelope import ACTIONS, MUTATIONS, REQUESTS
from apollo_domain.bounds import JSON_DEPTH, MESSAGE
from apollo_domain.commands import DeprecateEntry
from apollo_domain.errors import ValidationError
from apollo_domain.limits import MAX_RELATED
from apollo_domain.model import Role
from apollo_domain.normalize import MAX_TAG_CHARS
from apollo_domain.ports.messaging import DeadLetter, Message, MessageBus
from apollo_domain.ports.topology import Topology
from tests.bounds_cases import CASES, EDGE_CASES, LINE_CASES, Case
from tests.postgres_support import PostgresTestServer, fresh_store
from tests.rabbitmq_support import (
    amqp_test_url,
    delete_topology,
    release_test_broker,
    start_test_broker,
)
from tests.support import footprint

API = "/api/apollo"
PATIENCE = 30.0
LETTERS = "".join(chr(ord("a") + (i * 7919) % 26) for i in range(2_700))


def deep(levels: int) -> str:
    """A JSON object ``levels`` levels deep, as text (json.dumps cannot encode the deepest)."""
    return '{"a":' * levels + "1" + "}" * levels


async def open_apollo(kind: str, request: pytest.FixtureRequest) -> Apollo:
    if kind == "memory":
        store: Any = InMemoryStore()
    else:
        server: PostgresTestServer = request.getfixturevalue("postgres_server")
        store = await fresh_store(server, dimension=384)
    return Apollo.with_store(store, closers=[store.close])


# ================================================================================== HTTP


@define
class Http:
    client: httpx.AsyncClient
    apollo: Apollo

    async def refused(self, path: str, body: bytes | dict[str, Any], field: str) -> None:
        """POST ``body``: 400 validation_error naming ``field``, and nothing written."""
        before = await footprint(self.apollo)
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        response = await self.client.post(
            f"{API}{path}", content=content, headers={"content-type": "application/json"}
        )
        assert 400 == response.status_code, response.text[:500]
        error = response.json()["error"]
        assert ("validation_error", field) == (error["type"], error["field"])
        assert before == await footprint(self.apollo)


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.postgres)])
async def http(request: pytest.FixtureRequest) -> AsyncIterator[Http]:
    apollo = await open_apollo(request.param, request)
    async with apollo:
        await apollo.client("claude-seed").store_knowledge(
            content="Kafka partitions order messages", tags=["kafka"]
        )
        async with (
            HttpServer(create_app(apollo), "127.0.0.1", 0) as server,
            httpx.AsyncClient(base_url=server.url, timeout=PATIENCE) as client,
        ):
            yield Http(client, apollo)


@pytest.mark.parametrize("levels", [40, 485, 969])
async def test_http_ingest_with_a_deep_context_is_a_400_naming_context(http: Http, levels: int):
    body = ('{"content":"deeply nested","context":' + deep(levels) + "}").encode()
    await http.refused("/ingest", body, "context")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"content": "unindexable tag", "tags": [LETTERS]}, "tags"),
        ({"content": "long tag", "tags": ["ok", "x" * (MAX_TAG_CHARS + 1)]}, "tags"),
        ({"content": "unindexable domain", "knowledge_domain": LETTERS}, "knowledge_domain"),
    ],
)
async def test_http_ingest_with_an_unindexable_string_is_a_400(http: Http, body, field):
    """PostgreSQL used to answer 503 with its raw index error; now both stores refuse."""
    await http.refused("/ingest", body, field)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "kafka " * 320_000}, "query"),  # 1.9 MB
        ({"query": "kafka partitions", "tags": ["!!!"]}, "tags"),
        ({"query": "kafka partitions", "knowledge_domain": "???"}, "knowledge_domain"),
    ],
)
async def test_http_query_with_hostile_input_is_a_400(http: Http, body, field):
    await http.refused("/query", body, field)


async def test_http_decay_with_a_null_factor_is_a_400_not_a_decay_cycle(http: Http):
    """Only a missing factor means "run the periodic cycle"; null is not a factor."""
    await http.refused("/maintenance/decay", {"factor": None}, "factor")


async def test_http_traverse_returns_at_most_the_cap(http: Http):
    """One anonymous request used to return every related entry (999, 20 MB)."""
    client = http.apollo.client("claude-graph")
    root = (await client.store_knowledge(content="the hub of a big graph")).entry_id
    spokes = await client.store_many(  # unrelated texts: none is a near duplicate
        [
            {"content": " ".join(uuid4().hex[j : j + 4] for j in range(0, 32, 4))}
            for _ in range(MAX_RELATED + 10)
        ]
    )
    assert all(s.entry_id is not None for s in spokes)
    for i, spoke in enumerate(spokes):
        await client.link_entries(root, spoke.entry_id, "has_a", 1.0 - i / 500)
    response = await http.client.post(f"{API}/traverse", json={"entry_id": str(root)})
    assert 200 == response.status_code
    related = response.json()["related"]
    assert [str(s.entry_id) for s in spokes[:MAX_RELATED]] == [r["id"] for r in related]


async def test_http_query_for_archived_entries_does_not_boost_them(http: Http):
    apollo = http.apollo
    stored = await apollo.client("claude-old").store_knowledge(content="Kafka used ZooKeeper")
    await apollo.run(DeprecateEntry(entry_id=str(stored.entry_id), reason="KRaft replaced it"))
    before = await apollo.get_entry(stored.entry_id)
    response = await http.client.post(
        f"{API}/query",
        json={"query": "Kafka used ZooKeeper", "status": ["archived"], "min_confidence": 0},
    )
    assert 200 == response.status_code
    assert [str(stored.entry_id)] == [e["id"] for e in response.json()["entries"]]
    after = await apollo.get_entry(stored.entry_id)
    assert (before.confidence, before.access_count) == (after.confidence, after.access_count)


# =================================================================================== bus


DUPLICATE_SCOPE = '{"content":"x","access_scope":"private","access_scope":"global"}'
DUPLICATE_DEEP = '{"content":"x","context":{"a":[{"k":1,"k":2}]}}'


@pytest.mark.parametrize("body", [DUPLICATE_SCOPE, DUPLICATE_DEEP])
async def test_http_ingest_with_a_key_given_twice_is_a_400_naming_the_key(http: Http, body: str):
    """Which of two values wins is the parser's choice: neither is taken."""
    await http.refused("/ingest", body.encode(), "body")
    response = await http.client.post(
        f"{API}/ingest", content=body.encode(), headers={"content-type": "application/json"}
    )
    assert "more than once" in response.json()["error"]["message"]


TROJAN = "grant \u202euser\u202c to \u2067שלום\u2069 \u200fread\u200e"
TROJAN_STORED = "grant user to שלום \u200fread\u200e"
BIDI_ONLY = "\u202a\u202b\u202d\u2066\u2068"


async def test_http_ingest_stores_and_returns_content_without_bidirectional_controls(
    http: Http,
):
    created = await http.client.post(f"{API}/ingest", json={"content": TROJAN})
    assert 201 == created.status_code, created.text
    entry = await http.client.get(f"{API}/entries/{created.json()['entry_id']}")
    assert TROJAN_STORED == entry.json()["content"]
    await http.refused("/ingest", {"content": BIDI_ONLY}, "content")


#: Every stored string field of an ingest, each holding controls.
EVERY_FIELD = {
    "content": "controls in every field",
    "tags": ["kafka\u202e", "\u2066ops\u2069"],
    "knowledge_domain": "infra\u202b",
    "source_channel": "chan\u2068nel\u2069",
    "context": {"note\u202e": TROJAN, "deep": [{"k": [TROJAN, 1]}]},
}


def _assert_cleaned(entry: dict[str, Any]) -> None:
    """The entry as an edge returns it: its fields without the controls, the marks kept."""
    assert (["kafka", "ops"], "infra") == (entry["tags"], entry["knowledge_domain"])
    assert entry["source"]["channel"] in ("channel", None)  # None: redacted for the reader
    context = entry.get("source_context", entry.get("context"))
    assert TROJAN_STORED == context["note"]
    assert [{"k": [TROJAN_STORED, 1]}] == context["deep"]
    assert not re.search("[\u202a-\u202e\u2066-\u2069]", json.dumps(entry, ensure_ascii=False))


async def test_http_ingest_stores_no_bidirectional_control_in_any_field(http: Http):
    created = await http.client.post(f"{API}/ingest", json=EVERY_FIELD)
    assert 201 == created.status_code, created.text
    entry = await http.client.get(f"{API}/entries/{created.json()['entry_id']}")
    _assert_cleaned(entry.json())


@define
class Mesh:
    apollo: Apollo
    bus: MessageBus
    service: ApolloService
    client: RemoteClient
    login: str
    letters: list[DeadLetter] = field(factory=list)

    async def publish(self, routing_key: str, body: bytes, exchange: str | None = None) -> None:
        message = Message(routing_key, body, message_id=uuid4().hex, user_id=self.login)
        if exchange is None:
            await self.bus.publish(message)
        else:
            await self.bus.publish(message, exchange=exchange)

    async def dead_letter(self) -> DeadLetter:
        deadline = asyncio.get_running_loop().time() + PATIENCE
        while not self.letters:
            self.letters.extend(await self.bus.drain_dead_letters())  # type: ignore[attr-defined]
            if asyncio.get_running_loop().time() > deadline:
                pytest.fail("no dead letter arrived")
            await asyncio.sleep(0.02)
        return self.letters.pop(0)


def _no_backoff(attempt: int) -> float:
    return 0.01


@pytest.fixture(scope="session")
def amqp_url() -> Iterator[str]:
    """This run's vhost, released at the end of the session: the other files' session
    fixtures hand out the same one, so a module must not delete it under them."""
    url = amqp_test_url()
    yield url
    release_test_broker()


@pytest.fixture(
    params=[
        "inprocess",
        pytest.param("rabbitmq", marks=[pytest.mark.rabbitmq, pytest.mark.postgres]),
    ]
)
async def mesh(request: pytest.FixtureRequest) -> AsyncIterator[Mesh]:
    """The service on the in-process bus over the in-memory store, or on RabbitMQ over
    PostgreSQL; a client of its own on the same bus."""
    rabbit = request.param == "rabbitmq"
    apollo = await open_apollo("postgres" if rabbit else "memory", request)
    bus: Any
    if rabbit:
        url = request.getfixturevalue("amqp_url")
        topology = start_test_broker().topology()
        bus = await AiormqBus.connect(
            url, topology=topology, max_redeliveries=5, retry_backoff=_no_backoff
        )
        login = bus.login
    else:
        topology, login = Topology(), "alice"
        bus = InProcessBus(topology, max_redeliveries=5, retry_backoff=_no_backoff, login=login)
    service = ApolloService(
        apollo, bus, Settings(embedder="hashing", prefetch=4), topology=topology
    )
    await service.start()
    client = RemoteClient(bus, agent_id="claude-mesh", topology=topology, rpc_timeout=PATIENCE)
    try:
        yield Mesh(apollo, bus, service, client, login)
    finally:
        await service.stop()
        await bus.close()
        await apollo.close()
        if rabbit:
            await delete_topology(url, topology)


async def _dead_on_first_delivery(
    mesh: Mesh, publish: Callable[[], Awaitable[None]], field: str, caplog: pytest.LogCaptureFixture
) -> DeadLetter:
    """The message is dead-lettered straight away (a ValidationError, not a retry), its
    reason names ``field``, and nothing was written."""
    before = await footprint(mesh.apollo)
    caplog.set_level(logging.INFO, logger="apollo.service")
    await publish()
    letter = await mesh.dead_letter()
    assert letter.reason.startswith(f"ValidationError: {field}:"), letter.reason
    assert not any("will retry" in r.getMessage() for r in caplog.records)
    assert sum(len(r.getMessage()) for r in caplog.records) < 10_000  # no megabyte of log
    assert before == await footprint(mesh.apollo)
    return letter


def _ingest(payload: str) -> bytes:
    return ('{"v":1,"action":"ingest","payload":' + payload + "}").encode()


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ('{"content":"deeply nested","context":' + deep(969) + "}", "context"),
        ('{"content":"deeply nested","context":' + deep(40) + "}", "context"),
        (json.dumps({"content": "unindexable tag", "tags": [LETTERS]}), "tags"),
        (json.dumps({"content": "unindexable", "knowledge_domain": LETTERS}), "knowledge_domain"),
    ],
)
async def test_bus_ingest_of_hostile_input_is_dead_lettered_on_first_delivery(
    mesh: Mesh, payload: str, field: str, caplog: pytest.LogCaptureFixture
):
    queue = mesh.service.topology.ingest_queue
    await _dead_on_first_delivery(
        mesh, lambda: mesh.publish(queue, _ingest(payload)), field, caplog
    )


@pytest.mark.parametrize("payload", [DUPLICATE_SCOPE, DUPLICATE_DEEP])
async def test_bus_ingest_with_a_key_given_twice_is_dead_lettered_naming_the_key(
    mesh: Mesh, payload: str, caplog: pytest.LogCaptureFixture
):
    queue = mesh.service.topology.ingest_queue
    letter = await _dead_on_first_delivery(
        mesh, lambda: mesh.publish(queue, _ingest(payload)), "body", caplog
    )
    assert "more than once" in letter.reason


async def test_bus_ingest_stores_content_without_bidirectional_controls(mesh: Mesh):
    await mesh.publish(mesh.service.topology.ingest_queue, _ingest(json.dumps({"content": TROJAN})))
    reader = mesh.apollo.client("claude-reader")
    deadline = asyncio.get_running_loop().time() + PATIENCE
    while not (found := (await reader.query_knowledge("grant user to")).entries):
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail("the ingest was never stored")
        await asyncio.sleep(0.02)  # waiting for the consumer, as dead_letter() does
    assert [TROJAN_STORED] == [entry.content for entry in found]


async def test_bus_ingest_stores_no_bidirectional_control_in_any_field(mesh: Mesh):
    await mesh.publish(mesh.service.topology.ingest_queue, _ingest(json.dumps(EVERY_FIELD)))
    reader = mesh.apollo.client("claude-reader")
    deadline = asyncio.get_running_loop().time() + PATIENCE
    while not (found := (await reader.query_knowledge("controls in every field")).entries):
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail("the ingest was never stored")
        await asyncio.sleep(0.02)  # waiting for the consumer, as dead_letter() does
    entry = await mesh.apollo.get_entry(found[0].id)
    _assert_cleaned(make_converter(forbid_extra_keys=False, round_scores=True).unstructure(entry))


async def test_bus_ingest_of_bidirectional_controls_only_is_dead_lettered(
    mesh: Mesh, caplog: pytest.LogCaptureFixture
):
    queue = mesh.service.topology.ingest_queue
    payload = json.dumps({"content": BIDI_ONLY})
    await _dead_on_first_delivery(
        mesh, lambda: mesh.publish(queue, _ingest(payload)), "content", caplog
    )


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ('{"request_id":"r-1","response_content":"x","routing":' + deep(969) + "}", "event"),
        (json.dumps({"request_id": "r" * 300, "response_content": "x"}), "request_id"),
    ],
)
async def test_bus_gas_event_of_hostile_input_is_dead_lettered_on_first_delivery(
    mesh: Mesh, event: str, field: str, caplog: pytest.LogCaptureFixture
):
    topology = mesh.service.topology
    await _dead_on_first_delivery(
        mesh,
        lambda: mesh.publish(
            topology.audit_routing_key, event.encode(), exchange=topology.audit_exchange
        ),
        field,
        caplog,
    )


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"query": "kafka " * 320_000}, "query"),
        ({"query": "kafka partitions", "tags": ["!!!"]}, "tags"),
        ({"query": "kafka partitions", "knowledge_domain": "???"}, "knowledge_domain"),
    ],
)
async def test_bus_query_of_hostile_input_is_a_validation_error_reply(
    mesh: Mesh, arguments: dict[str, Any], field: str
):
    """Over RPC the service answers with the ValidationError; the client raises it."""
    before = await footprint(mesh.apollo)
    with pytest.raises(ValidationError) as caught:
        await mesh.client.query_knowledge(**arguments)
    assert field == caught.value.field
    assert before == await footprint(mesh.apollo)


async def test_bus_query_of_a_deep_payload_is_a_validation_error_reply(mesh: Mesh):
    """A raw request whose payload nests too deeply: the reply names the field."""
    body = '{"v":1,"action":"query","payload":{"query":"x","tags":' + "[" * 969 + "]" * 969
    request = Message(
        mesh.service.topology.query_queue,
        (body + "}}").encode(),
        message_id=uuid4().hex,
        user_id=mesh.login,
    )
    reply = await mesh.bus.request(request, timeout=PATIENCE)
    error = json.loads(reply.body)["error"]
    assert ("validation_error", "tags") == (error["type"], error["field"])
    assert 0 == (await mesh.apollo.stats(Principal(mesh.login))).total


# ============================================================ the bounds table, every edge


def _operation(kind: type[Any]) -> Operation:
    """The HTTP route that carries ``kind`` (the first one: ``/query`` before ``/retrieve``)."""
    return next(op for op in OPERATIONS if op.command is kind)


HTTP_CASES = [case for case in EDGE_CASES if not case.gas]


@pytest.mark.parametrize("case", HTTP_CASES, ids=lambda case: case.id)
async def test_http_refuses_every_over_limit_input_naming_the_field(http: Http, case: Case):
    """One request per row of the bounds table: 400 naming the field, nothing written."""
    op = _operation(case.kind)
    payload = dict(case.payload)
    path = op.path
    for name, target in op.path_fields.items():
        path = re.sub(r"\{" + name + r"(:\w+)?\}", quote(str(payload.pop(target)), safe=""), path)
    before = await footprint(http.apollo)
    if op.reads_body:
        response = await http.client.post(f"{API}{path}", json=payload)
    else:
        response = await http.client.get(f"{API}{path}", params=payload)
    assert 400 == response.status_code, response.text[:500]
    error = response.json()["error"]
    assert ("validation_error", case.field) == (error["type"], error["field"])
    assert len(response.content) < 1_000  # the input is never echoed back whole
    assert before == await footprint(http.apollo)


async def test_http_refuses_a_body_over_the_message_bound_before_parsing_it(http: Http):
    case = CASES[MESSAGE.name]
    before = await footprint(http.apollo)
    response = await http.client.post(f"{API}/ingest", json=dict(case.payload))
    assert 413 == response.status_code
    error = response.json()["error"]
    assert ("payload_too_large", MESSAGE.field) == (error["type"], error["field"])
    assert f"{MESSAGE.limit:,} bytes" in error["message"]
    assert before == await footprint(http.apollo)


def _envelope(case: Case) -> bytes:
    return json.dumps(
        {"v": 1, "action": ACTIONS[case.kind], "payload": dict(case.payload)}
    ).encode()


BUS_MUTATIONS = [c for c in EDGE_CASES if not c.gas and ACTIONS[c.kind] in MUTATIONS]
BUS_REQUESTS = [c for c in EDGE_CASES if not c.gas and ACTIONS[c.kind] in REQUESTS]
GAS_CASES = [c for c in EDGE_CASES if c.gas]


@pytest.mark.parametrize("case", BUS_MUTATIONS, ids=lambda case: case.id)
async def test_bus_dead_letters_every_over_limit_mutation_naming_the_field(
    mesh: Mesh, case: Case, caplog: pytest.LogCaptureFixture
):
    queue = mesh.service.topology.ingest_queue
    await _dead_on_first_delivery(
        mesh, lambda: mesh.publish(queue, _envelope(case)), case.field, caplog
    )


@pytest.mark.parametrize("case", BUS_REQUESTS, ids=lambda case: case.id)
async def test_bus_answers_every_over_limit_request_with_an_error_naming_the_field(
    mesh: Mesh, case: Case
):
    before = await footprint(mesh.apollo)
    request = Message(
        mesh.service.topology.query_queue,
        _envelope(case),
        message_id=uuid4().hex,
        user_id=mesh.login,
    )
    reply = await mesh.bus.request(request, timeout=PATIENCE)
    error = json.loads(reply.body)["error"]
    assert ("validation_error", case.field) == (error["type"], error["field"])
    assert before == await footprint(mesh.apollo)


@pytest.mark.parametrize("case", GAS_CASES, ids=lambda case: case.id)
async def test_bus_dead_letters_every_over_limit_gas_event_naming_the_field(
    mesh: Mesh, case: Case, caplog: pytest.LogCaptureFixture
):
    topology = mesh.service.topology
    body = json.dumps(case.payload["event"]).encode()
    await _dead_on_first_delivery(
        mesh,
        lambda: mesh.publish(topology.audit_routing_key, body, exchange=topology.audit_exchange),
        case.field,
        caplog,
    )


@pytest.mark.parametrize("where", ["ingest", "gas"])
async def test_bus_dead_letters_a_message_over_the_bound_before_parsing_it(
    mesh: Mesh, where: str, caplog: pytest.LogCaptureFixture
):
    """Measured before it is parsed: the reason names the bound, not the content."""
    topology = mesh.service.topology
    if where == "ingest":
        body = _envelope(CASES[MESSAGE.name])

        async def publish() -> None:
            await mesh.publish(topology.ingest_queue, body)
    else:
        event = {"request_id": "r-huge", "response_content": "x" * MESSAGE.limit}
        body = json.dumps(event).encode()

        async def publish() -> None:
            await mesh.publish(topology.audit_routing_key, body, exchange=topology.audit_exchange)

    assert len(body) > MESSAGE.limit
    letter = await _dead_on_first_delivery(mesh, publish, MESSAGE.field, caplog)
    assert f"at most {MESSAGE.limit:,} bytes are allowed ({MESSAGE.name})" in letter.reason


# =================================================================================== CLI


@pytest.mark.parametrize("case", [*LINE_CASES, CASES[MESSAGE.name]], ids=lambda case: case.id)
async def test_cli_ingest_reports_every_over_limit_line_naming_the_field(case: Case):
    """``apollo ingest`` reads a JSONL line as a store command: an over-limit line is a
    bad line naming the field, and stores nothing; the good line beside it is stored."""
    async with Apollo.in_memory() as apollo:
        report = IngestReport()
        lines = [json.dumps(dict(case.payload)), json.dumps({"content": "a fine line"})]
        await ingest_lines(
            apollo,
            lines,
            report,
            agent_id="claude-cli",
            principal=Principal("cli-admin", role=Role.ADMIN),
            progress=Progress(2, io.StringIO()),
        )
        assert 1 == len(report.bad), report.bad
        number, reason = report.bad[0]
        assert 1 == number
        assert reason.startswith(f"{case.field}: "), reason
        assert len(reason) < 500
        assert 1 == (await apollo.stats()).total


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/traverse", {"entry_id": "x" * 1_000_000}, "entry_id"),
        ("/ingest", {"content": "scoped", "access_scope": "x" * 1_000_000}, "access_scope"),
        ("/query", {"query": "kafka", "status": ["x" * 1_000_000]}, "status"),
        ("/query", {"query": "kafka", "mode": "x" * 1_000_000}, "mode"),
    ],
)
async def test_http_errors_never_echo_a_megabyte_of_input(
    http: Http, path: str, body: dict[str, Any], field: str
):
    response = await http.client.post(f"{API}{path}", json=body)
    assert 400 == response.status_code
    assert field == response.json()["error"]["field"]
    assert len(response.content) < 1_000


@pytest.mark.parametrize(
    "as_of", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "99999-01-01"]
)
async def test_http_entity_history_with_an_unrepresentable_as_of_is_a_400(http: Http, as_of: str):
    """It used to be a 500 (OverflowError)."""
    await http.apollo.client("claude-graph").store_knowledge(content="Dana Wu works at Initech")
    response = await http.client.get(f"{API}/entities/Initech/history", params={"as_of": as_of})
    assert 400 == response.status_code, response.text[:300]
    error = response.json()["error"]
    assert ("validation_error", "as_of") == (error["type"], error["field"])


def _writeback(case: Case) -> bytes:
    """A store case as a writeback-vectorize message: the content, the agent credited, and
    every other field in its metadata."""
    fields = dict(case.payload)
    payload: dict[str, Any] = {"content": fields.pop("content")}
    if "agent_id" in fields:
        payload["agent_id"] = fields.pop("agent_id")
    payload["metadata"] = fields
    return json.dumps({"v": 1, "action": "writeback_vectorize", "payload": payload}).encode()


@pytest.mark.parametrize("case", LINE_CASES, ids=lambda case: case.id)
async def test_bus_dead_letters_every_over_limit_writeback_naming_the_field(
    mesh: Mesh, case: Case, caplog: pytest.LogCaptureFixture
):
    """A writeback is ingested with its metadata as the ingest's fields: the same bounds
    (a value nested too deeply is refused as the message is decoded, in ``metadata``)."""
    queue = mesh.service.topology.writeback_vectorize_queue
    field = "metadata" if case.bound is JSON_DEPTH else case.field
    await _dead_on_first_delivery(
        mesh, lambda: mesh.publish(queue, _writeback(case)), field, caplog
    )
