"""The message wire format: versioned command envelopes, strict payloads, RPC replies."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apollo_app.bootstrap import topology_of
from apollo_app.settings import Settings
from apollo_app.wire.codec import make_converter
from apollo_app.wire.envelope import (
    ACTIONS,
    COMMANDS,
    MUTATIONS,
    REQUESTS,
    decode_command,
    decode_gas_event,
    encode_command,
)
from apollo_app.wire.replies import decode_reply, encode_error_reply, encode_reply
from apollo_domain import commands as c
from apollo_domain.actions import ACTIONS as RECORDS
from apollo_domain.actions import Bus, action_of
from apollo_domain.commands import QueryKnowledge, RelatedEntries, StoreKnowledge, WritebackStore
from apollo_domain.errors import (
    ApolloError,
    NotFound,
    StoreUnavailable,
    TransportError,
    UnknownResolution,
    ValidationError,
)
from apollo_domain.expertise import DomainCoverage
from apollo_domain.model import AccessScope, ContentType, RelationType, Status
from apollo_domain.ports.topology import Topology
from apollo_domain.results import (
    AgentProfile,
    DomainExpertise,
    EntryView,
    QueryResult,
    RelatedEntry,
)
from apollo_domain.writeback import writeback_arguments


def raw(document: Any) -> bytes:
    return json.dumps(document).encode()


def field_of(document: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        decode_command(raw(document))
    return caught.value.field


SEED_PAYLOAD = {
    "content": "BGP route reflectors reduce full-mesh IBGP complexity",
    "content_type": ":fact",
    "source_agent": "my-agent-001",
    "tags": ["bgp", "routing", "ibgp"],
    "context": {"source": "network_team_wiki"},
}


def test_a_lex_apollo_ingest_payload_names_its_agent_source_agent():
    """The seed's ``store_knowledge`` payload decodes as is: ``source_agent`` is the
    ``agent_id`` (so the same gateway rules apply), symbols reach the use case unchanged."""
    expected = StoreKnowledge(
        content=SEED_PAYLOAD["content"],
        content_type=":fact",
        agent_id="my-agent-001",
        tags=("bgp", "routing", "ibgp"),
        context={"source": "network_team_wiki"},
    )
    envelope = {"v": 1, "action": "ingest", "payload": SEED_PAYLOAD}
    assert expected == decode_command(raw(envelope))
    both = {**envelope, "payload": {**SEED_PAYLOAD, "agent_id": "my-agent-001"}}
    assert expected == decode_command(raw(both))
    differing = {**envelope, "payload": {**SEED_PAYLOAD, "agent_id": "another-agent"}}
    assert "source_agent" == field_of(differing)
    elsewhere = {"v": 1, "action": "query", "payload": {"query": "x", "source_agent": "a"}}
    assert "source_agent" == field_of(elsewhere)


def test_every_action_has_one_command_and_one_queue_family():
    """Each action names its own command; mutations and RPC requests do not overlap, and a
    request is a read and a mutation a write in the action records."""
    assert len(set(ACTIONS.values())) == len(ACTIONS)
    assert all(COMMANDS[name] is kind for kind, name in ACTIONS.items())
    assert not MUTATIONS & REQUESTS
    assert {"writeback_store", "writeback_vectorize"} == set(COMMANDS) - MUTATIONS - REQUESTS
    assert all(action_of(COMMANDS[a]).mutates for a in MUTATIONS)
    assert not any(action_of(COMMANDS[a]).mutates for a in REQUESTS)


def test_a_command_is_a_versioned_envelope():
    """{"v": 1, "action": ..., "payload": {...}}, and decoding gives the body back."""
    body = StoreKnowledge(
        content="BGP route reflectors reduce iBGP mesh", agent_id="a-1", tags=("bgp",)
    )
    document = json.loads(encode_command(body))
    assert {"v", "action", "payload"} == set(document)
    assert (1, "store_knowledge") == (document["v"], document["action"])
    assert ["bgp"] == document["payload"]["tags"]
    assert body == decode_command(encode_command(body))


def test_every_action_is_sent_by_its_one_name_and_read_by_its_old_ones_too():
    """A message names its action as the action's record does (the client method's name);
    the names actions had before are still read as the same command, on the same queue."""
    for kind, record in RECORDS.items():
        if kind not in ACTIONS:
            continue
        assert record.name == ACTIONS[kind]
        for name in record.names:
            assert kind is COMMANDS[name]
            assert (name in MUTATIONS) == (record.bus is Bus.INGEST)
            assert (name in REQUESTS) == (record.bus is Bus.QUERY)
    old = {
        "ingest": StoreKnowledge,
        "query": QueryKnowledge,
        "traverse": RelatedEntries,
        "link": c.LinkEntries,
        "deprecate": c.DeprecateEntry,
        "resolve": c.ResolveDispute,
        "expertise": c.GetExpertise,
        "at_risk": c.DomainsAtRisk,
        "profile": c.GetAgentProfile,
    }
    payloads: dict[str, dict[str, Any]] = {
        "ingest": {"content": "BGP route reflectors"},
        "query": {"query": "bgp"},
        "traverse": {"entry_id": str(UUID(int=1))},
        "link": {
            "from_entry_id": str(UUID(int=1)),
            "to_entry_id": str(UUID(int=2)),
            "relation_type": "supports_by",
        },
        "deprecate": {"entry_id": str(UUID(int=1)), "reason": "stale"},
        "resolve": {"entry_id": str(UUID(int=1)), "resolution": "accept"},
        "expertise": {"domain": "networking"},
        "at_risk": {},
        "profile": {"target_agent_id": "claude-a"},
    }
    for name, kind in old.items():
        raw = json.dumps({"v": 1, "action": name, "payload": payloads[name]}).encode()
        command = decode_command(raw, accept=MUTATIONS | REQUESTS)
        assert kind is type(command)
        assert name != json.loads(encode_command(command))["action"]
        assert command == decode_command(encode_command(command))


def test_an_old_query_message_that_counts_no_access_is_a_retrieve():
    """Before ``retrieve`` was its own action, a ``query`` message carried ``count_access``:
    true is the query, false the retrieve (which takes no statuses); the new names do not
    take the field."""

    def decoded(action: str, **payload: Any) -> Any:
        body = {"v": 1, "action": action, "payload": {"query": "bgp", "limit": 5, **payload}}
        return decode_command(json.dumps(body).encode(), accept=REQUESTS)

    assert QueryKnowledge(query="bgp", limit=5) == decoded("query", count_access=True)
    assert c.Retrieve(query="bgp") == decoded("query", count_access=False, status=None)
    assert "status" == field_of_raw(decoded, "query", count_access=False, status=["archived"])
    assert "count_access" == field_of_raw(decoded, "query", count_access="no")
    assert "count_access" == field_of_raw(decoded, "query_knowledge", count_access=True)
    assert "count_access" == field_of_raw(decoded, "retrieve", count_access=False)


def field_of_raw(decode: Any, *args: Any, **payload: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        decode(*args, **payload)
    return caught.value.field


text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=40)
bodies = st.one_of(
    st.builds(
        StoreKnowledge,
        content=text,
        agent_id=text,
        tags=st.none() | st.lists(text, max_size=3).map(tuple),
        context=st.none() | st.dictionaries(text, st.integers() | text, max_size=3),
    ),
    st.builds(
        QueryKnowledge,
        query=text,
        min_confidence=st.floats(0, 1),
        limit=st.integers(1, 100),
        status=st.none() | st.lists(text, max_size=2).map(tuple),
    ),
    st.builds(
        WritebackStore,
        content=text,
        embedding=st.lists(st.floats(-1, 1), min_size=1, max_size=8).map(tuple),
        metadata=st.dictionaries(text, text, max_size=3),
    ),
)


@given(bodies)
def test_encoding_then_decoding_is_the_identity(body: Any):
    """Any body survives the wire unchanged (text that a store can hold: no NUL, no lone
    surrogate)."""
    assert body == decode_command(encode_command(body))


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"v": 2, "action": "ingest", "payload": {"content": "x"}}, "v"),
        ({"action": "ingest", "payload": {"content": "x"}}, "v"),
        ({"v": 1, "action": "explode", "payload": {}}, "action"),
        ({"v": 1, "action": "ingest", "payload": []}, "payload"),
        (
            {"v": 1, "action": "ingest", "payload": {"content": "x"}, "principal": "root"},
            "principal",
        ),
        ({"v": 1, "action": "ingest", "payload": {}}, "content"),
        ({"v": 1, "action": "ingest", "payload": {"content": 42}}, "content"),
        ({"v": 1, "action": "ingest", "payload": {"content": "x", "tags": "bgp"}}, "tags"),
        ({"v": 1, "action": "ingest", "payload": {"content": "x", "tags": ["a", 1]}}, "tags[1]"),
        ({"v": 1, "action": "ingest", "payload": {"content": "x", "owner_id": "bob"}}, "owner_id"),
        ({"v": 1, "action": "query", "payload": {"query": "x", "limit": "10"}}, "limit"),
        ({"v": 1, "action": "force_decay", "payload": {"factor": "0.5"}}, "factor"),
        (
            {
                "v": 1,
                "action": "writeback_store",
                "payload": {"content": "x", "embedding": [1, "a"]},
            },
            "embedding[1]",
        ),
    ],
)
def test_bad_messages_raise_a_validation_error_naming_the_field(document: Any, field: str):
    """Unknown versions, actions, envelope or payload fields and wrong JSON types are refused
    with a ValidationError that names what is wrong: the consumer dead-letters it."""
    assert field == field_of(document)


def test_malformed_json_is_a_validation_error():
    with pytest.raises(ValidationError) as caught:
        decode_command(b"{not json")
    assert "body" == caught.value.field


def test_a_queue_accepts_only_its_own_actions():
    """A query published to the ingest queue is refused, not executed."""
    message = encode_command(QueryKnowledge(query="anything"))
    with pytest.raises(ValidationError) as caught:
        decode_command(message, accept=MUTATIONS)
    assert "action" == caught.value.field


def test_the_converter_is_private_and_fresh():
    """Each call builds a new converter; none is the cattrs global one."""
    import cattrs

    first = make_converter(forbid_extra_keys=True, round_scores=False)
    second = make_converter(forbid_extra_keys=True, round_scores=False)
    assert first is not second
    assert cattrs.global_converter not in (first, second)


def test_gas_events_are_raw_json_objects():
    event = {"request_id": "r-1", "response": {"content": "x"}}
    assert event == decode_gas_event(json.dumps(event).encode()).event
    with pytest.raises(ValidationError):
        decode_gas_event(b"[1, 2]")


def test_query_results_round_trip_through_a_reply():
    """An RPC reply brings back the same QueryResult, EntryViews with UUIDs, enums, times,
    and the count of near-duplicates folded into each."""
    result = QueryResult(
        "hybrid",
        (
            EntryView(
                uuid4(),
                "Route reflectors",
                ContentType.FACT,
                0.52,
                Status.CANDIDATE,
                0.91,
                ("bgp",),
                "bgp",
                "agent-1",
                AccessScope.GLOBAL,
                datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
                folded=3,
            ),
        ),
    )
    assert result == decode_reply(encode_reply(result), QueryResult)
    assert 3 == decode_reply(encode_reply(result), QueryResult).entries[0].folded


def test_replies_send_scores_rounded_and_commands_keep_every_digit():
    """A reply rounds scores to 6 decimals (0.5 + 4 x 0.02 is sent as 0.58); a command's
    numbers (an embedding, a caller's metadata) travel with every digit."""
    view = EntryView(
        uuid4(),
        "BGP route reflectors",
        ContentType.FACT,
        0.5 + 0.02 + 0.02 + 0.02 + 0.02,
        Status.CANDIDATE,
        0.1 + 0.2,
        (),
        "bgp",
        "agent-1",
        AccessScope.GLOBAL,
        datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    sent = json.loads(encode_reply(QueryResult("hybrid", (view,))))["result"]["entries"][0]
    assert (0.58, 0.3) == (sent["confidence"], sent["similarity"])
    embedding = (0.1 + 0.2, 1 / 3)
    command = WritebackStore(content="x", embedding=embedding, metadata={"weight": 1 / 3})
    assert command == decode_command(encode_command(command))


def test_other_results_round_trip_through_a_reply():
    root = uuid4()
    related = [
        RelatedEntry(
            uuid4(),
            RelationType.IS_A,
            1,
            0.6,
            root,
            "c",
            ContentType.CONCEPT,
            0.5,
            Status.CONFIRMED,
        )
    ]
    assert related == decode_reply(encode_reply(related), list[RelatedEntry])
    coverage = [DomainCoverage("bgp", 1, ("agent-1",))]
    assert coverage == decode_reply(encode_reply(coverage), list[DomainCoverage])
    profile = AgentProfile("a", (DomainExpertise("bgp", 2, 0.8, 0.5, None),), 2, 0.5, None)
    assert profile == decode_reply(encode_reply(profile), AgentProfile)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (NotFound("entry x not found"), NotFound),
        (UnknownResolution("unknown resolution 'maybe'"), UnknownResolution),
        (StoreUnavailable("entries: connection refused"), StoreUnavailable),
        (RuntimeError("internal detail"), ApolloError),
    ],
)
def test_error_replies_raise_the_reported_error(error: Exception, kind: type[Exception]):
    with pytest.raises(kind) as caught:
        decode_reply(encode_error_reply(error), QueryResult)
    assert kind is type(caught.value)
    assert "internal detail" not in str(caught.value)


def test_validation_error_replies_keep_the_field():
    body = json.loads(encode_error_reply(ValidationError("limit", "must be between 1 and 100")))
    assert {
        "ok": False,
        "error": {
            "type": "validation_error",
            "message": "must be between 1 and 100",
            "field": "limit",
        },
    } == body
    with pytest.raises(ValidationError) as caught:
        decode_reply(encode_error_reply(ValidationError("limit", "too big")), QueryResult)
    assert ("limit", "too big") == (caught.value.field, caught.value.message)


def test_an_unreadable_reply_is_a_transport_error():
    with pytest.raises(TransportError):
        decode_reply(b"<html>", QueryResult)
    with pytest.raises(TransportError):
        decode_reply(raw({"ok": True, "result": {"mode": "hybrid"}}), QueryResult)


def test_topology_from_default_settings_has_the_production_names():
    assert Topology() == topology_of(Settings())


def test_topology_from_prefixed_settings_equals_the_prefixed_topology():
    """Settings whose exchange, queue prefix and audit exchange carry a prefix name the same
    entities as Topology().with_prefix(prefix)."""
    prefix = "t1234."
    settings = Settings(
        embedder="hashing",
        exchange=prefix + "legion.apollo",
        queue_prefix=prefix + "legion.apollo",
        audit_exchange=prefix + "llm.audit",
    )
    assert Topology().with_prefix(prefix) == topology_of(settings)


def test_writeback_metadata_splits_into_arguments_and_context():
    arguments = writeback_arguments(
        {"tags": ["bgp"], "research_tools": ["web_search"], "context": {"ticket": "n/a"}}
    )
    assert ["bgp"] == arguments["tags"]
    assert "observation" == arguments["content_type"]
    assert {"ticket": "n/a", "research_tools": ["web_search"]} == arguments["context"]


def test_actions_of_commands_are_consistent():
    assert "related_entries" == ACTIONS[RelatedEntries]
    assert RelatedEntries is COMMANDS["related_entries"] is COMMANDS["traverse"]


async def test_rpc_requests_carry_an_exact_whole_second_deadline():
    """The deadline header is an int: AMQP tables carry Python floats as 32-bit floats, which
    at today's epoch rounds by ~128 s and made live requests look expired."""
    import time

    from apollo_app import RemoteClient
    from apollo_app.wire.envelope import DEADLINE_HEADER
    from apollo_domain.errors import RpcTimeout

    sent = []

    class CapturingBus:
        async def request(self, message, *, timeout, repliers=None):  # noqa: ASYNC109
            sent.append(message)
            raise RpcTimeout("nobody is listening")

    client = RemoteClient(CapturingBus(), agent_id="claude-1", rpc_timeout=7.0)
    before = time.time()
    with pytest.raises(RpcTimeout):
        await client.query_knowledge(query="anything at all")
    deadline = sent[0].headers[DEADLINE_HEADER]
    assert int is type(deadline)
    assert before + 7.0 <= deadline <= time.time() + 8.0
