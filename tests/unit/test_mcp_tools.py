"""The MCP tools are the action record's: one tool per action it marks, whose input schema
is its command's fields and whose output schema its result's; every tool reaches its
command; docs/mcp.md lists exactly these tools."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import attrs
import jsonschema
import pytest
from mcp import Client

from apollo_app import Apollo
from apollo_app.entrypoints.mcp import ApolloMcp, local_caller, mcp_actions, tools_of
from apollo_app.entrypoints.mcp.server import IDEMPOTENCY_KEY_META
from apollo_app.entrypoints.mcp.tools import describe
from apollo_domain import commands as c
from apollo_domain.actions import ACTIONS
from apollo_domain.disclosure import AGENT_VIEWS
from apollo_domain.handlers import handle
from apollo_domain.model import Principal
from apollo_domain.services import Caller
from tests.docs_pages import page_path
from tests.mcp_support import ok

MCP_PAGE = page_path("mcp")
_LISTED = re.compile(r"<!-- mcp-tools:begin[^>]*-->\n(.*?)\n\s*<!-- mcp-tools:end -->", re.DOTALL)
TOOLS = tools_of(mcp_actions())
ADMIN = Caller.of("root", Principal("root", role="admin"), edge="mcp")


def test_each_marked_action_has_exactly_one_tool_whose_schema_is_its_command() -> None:
    """Named as the action; properties are the command's fields, each with its documented
    constraints; required are the fields without a default; nothing else is accepted."""
    marked = mcp_actions()
    assert len(marked) == len(TOOLS)
    assert len({t.name for t in TOOLS}) == len(TOOLS)
    for action in marked:
        (tool,) = [t for t in TOOLS if t.command is action.command]
        assert action.name == tool.name
        schema = tool.input_schema
        jsonschema.Draft202012Validator.check_schema(schema)
        assert "object" == schema["type"]
        assert schema["additionalProperties"] is False
        fields = attrs.fields(action.command)
        assert [f.name for f in fields] == list(schema["properties"])
        required = [f.name for f in fields if f.default is attrs.NOTHING]
        assert required == schema["required"]
        for field in fields:
            documented = field.metadata.get("schema", {})
            shown = schema["properties"][field.name]
            for key, value in documented.items():
                if "anyOf" in shown and key not in ("description", "examples"):
                    assert any(b.get(key) == value for b in shown["anyOf"]), (tool.name, key)
                else:
                    assert value == shown[key], (tool.name, field.name, key)


def test_no_tool_for_an_action_the_record_does_not_mark() -> None:
    unmarked = {a.command for a in ACTIONS.values() if not a.tool}
    assert unmarked.isdisjoint({t.command for t in TOOLS})


def test_the_annotations_are_the_records_hints() -> None:
    from apollo_app.entrypoints.mcp.server import _listed

    for tool in TOOLS:
        annotations = _listed(tool).annotations
        assert annotations is not None
        hints = (annotations.read_only_hint, annotations.destructive_hint)
        assert (tool.action.read_only, tool.action.destructive) == hints
        assert tool.action.idempotent is annotations.idempotent_hint
        assert annotations.open_world_hint is False  # Apollo's own store, nothing beyond


def test_the_readme_lists_exactly_the_tools() -> None:
    """The tool list of docs/mcp.md is the record's, line for line (regenerate it with
    ``describe`` when the record changes)."""
    found = _LISTED.search(MCP_PAGE.read_text(encoding="utf-8"))
    assert found is not None, "docs/mcp.md lost its MCP tool list markers"
    listed = [line.strip().removeprefix("- ") for line in found.group(1).splitlines()]
    assert [describe(tool) for tool in TOOLS] == listed


# ---------------------------------------------------------------- every tool reaches its command


@pytest.fixture
async def seeded() -> AsyncIterator[tuple[Apollo, dict[str, str]]]:
    """An in-memory store with two related entries (one of them disputed) that name an
    entity, and the ids the sample arguments use."""
    async with Apollo.in_memory() as apollo:
        writer = apollo.client("ann", Principal("ann"))
        one = await writer.store_knowledge(
            "Alice Chen at Acme Corp keeps the session cache", tags=["cache"]
        )
        two = await writer.store_knowledge("The session cache evicts after 300 s", tags=["cache"])
        await writer.link_entries(one.entry_id, two.entry_id, "depends_on")
        told = await writer.store_text(
            "The build farm compiles with Bazel 7. It runs on four hosts."
        )
        yield (
            apollo,
            {
                "one": str(one.entry_id),
                "two": str(two.entry_id),
                "episode": str(told.episode_id),
            },
        )


def samples(ids: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Arguments for each tool (a new tool must add its own: the test below says so)."""
    return {
        "store_knowledge": {"content": "Kafka retains 7 days", "tags": ["queue"]},
        "store_many": {"items": [{"content": "NATS is at-most-once"}]},
        "store_text": {"text": [{"speaker": "ann", "text": "Redis 7 keeps the rate limits."}]},
        "get_episode": {"episode_id": ids["episode"]},
        "link_entries": {
            "from_entry_id": ids["two"],
            "to_entry_id": ids["one"],
            "relation_type": "supports_by",
            "weight": 0.5,
        },
        "deprecate_entry": {"entry_id": ids["two"], "reason": "moved to Valkey"},
        "resolve_dispute": {"entry_id": ids["one"], "resolution": "accept"},
        "force_decay": {"factor": 0.99},
        "archive_stale": {"days": 30},
        "label_source": {"target_agent_id": "ann", "label": "moderator"},
        "unlabel_source": {"target_agent_id": "ann"},
        "get_source": {"target_agent_id": "ann"},
        "query_knowledge": {"query": "session cache", "min_confidence": 0, "mode": "hybrid"},
        "retrieve": {"query": "session cache", "limit": 3},
        "related_entries": {"entry_id": ids["one"], "depth": 2},
        "get_entry": {"entry_id": ids["one"]},
        "get_evidence": {"entry_id": ids["one"]},
        "get_relations": {"entry_id": ids["one"]},
        "get_expertise": {"domain": "cache"},
        "domains_at_risk": {"min_agents": 2},
        "agent_profile": {"target_agent_id": "ann"},
        "stats": {},
        "entities": {"prefix": "acme"},
        "entity": {"name": "Acme Corp"},
        "entity_history": {"name": "Acme Corp"},
        "related_entities": {"name": "Acme Corp", "depth": 1},
    }


async def test_every_tool_reaches_its_command_and_answers_as_its_output_schema_says(
    seeded: tuple[Apollo, dict[str, str]],
) -> None:
    """Through the SDK's client, in process: each tool's arguments become its command
    (field for field), which the handler table carries out; a success's structured
    content is valid against the tool's output schema."""
    apollo, ids = seeded
    arguments = samples(ids)
    assert {t.name for t in TOOLS} <= set(arguments), "give the new tool sample arguments"
    reached: list[c.Command[Any]] = []

    async def run(caller: Caller, command: c.Command[Any], key: str | None = None) -> Any:
        reached.append(command)
        return await handle(apollo.deps, caller, command)

    edge = ApolloMcp(TOOLS, run, local_caller(ADMIN))
    answered = {}
    async with Client(edge.server()) as client:
        for tool in TOOLS:
            reached.clear()
            given = arguments[tool.name]
            result = await client.call_tool(tool.name, given)
            assert reached, f"{tool.name} reached no command"
            assert tool.command is type(reached[0])
            for name, value in given.items():
                if name != "items":
                    assert _json(getattr(reached[0], name)) == value, (tool.name, name)
            answered[tool.name] = result
            if not result.is_error:
                jsonschema.validate(result.structured_content, tool.output_schema)
                assert result.content[0].text  # type: ignore[union-attr]
    failed = {name: r.structured_content for name, r in answered.items() if r.is_error}
    # The one sample that cannot succeed: the seeded entry is not disputed.
    assert {"resolve_dispute"} == set(failed), failed
    assert "invalid_transition" == failed["resolve_dispute"]["error"]["type"]


async def test_a_tools_text_says_content_status_confidence_id_and_signals(
    seeded: tuple[Apollo, dict[str, str]],
) -> None:
    apollo, ids = seeded

    async def run(caller: Caller, command: c.Command[Any], key: str | None = None) -> Any:
        return await handle(apollo.deps, caller, command)

    edge = ApolloMcp(TOOLS, run, local_caller(ADMIN))
    async with Client(edge.server()) as client:
        found = await client.call_tool(
            "query_knowledge", {"query": "session cache", "min_confidence": 0}
        )
        stored = await ok(client, "store_knowledge", {"content": "Memcached is gone"})
    text = found.content[0].text  # type: ignore[union-attr]
    assert text.startswith("2 entries found (hybrid):")
    line = next(line for line in text.splitlines() if ids["one"] in line)
    assert "Alice Chen at Acme Corp keeps the session cache" in line
    assert "[candidate, confidence 0." in line
    assert "found by vector" in line
    assert "candidate" == stored["status"]


async def test_each_caller_lists_what_the_command_layer_lets_it_run() -> None:
    """Readers see the reads; an anonymous caller over an edge not even the views about
    agents, which the command layer refuses it; an admin sees every tool."""

    async def run(caller: Caller, command: c.Command[Any], key: str | None = None) -> Any:
        raise AssertionError("listing runs nothing")

    def listed_for(caller: Caller) -> Any:
        return Client(ApolloMcp(TOOLS, run, local_caller(caller)).server())

    every = {t.name for t in TOOLS}
    agent_views = {t.name for t in TOOLS if t.command in AGENT_VIEWS}
    reads = {t.name for t in TOOLS if t.action.access.value == "read"}
    callers = {
        "admin": ADMIN,
        "reader": Caller.of("rita", Principal("rita", role="reader"), edge="mcp"),
        "anonymous": Caller.of("http", Principal(None), edge="mcp"),
    }
    seen = {}
    for name, caller in callers.items():
        async with listed_for(caller) as client:
            seen[name] = {tool.name for tool in (await client.list_tools()).tools}
    assert every == seen["admin"]
    assert reads == seen["reader"]
    assert agent_views and agent_views <= reads
    assert seen["anonymous"].isdisjoint(agent_views)
    assert reads - agent_views <= seen["anonymous"]


def _json(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    return value


async def test_a_tools_text_says_how_many_near_duplicates_were_folded() -> None:
    """One source's template stored four times is one result that says three were folded."""
    async with Apollo.in_memory() as apollo:
        writer = apollo.client("eve", Principal("eve"))
        words = ["kafka", "static", "membership", "keeps", "partitions", "stable", "EveCloud"]
        for i in range(4):
            await writer.store_knowledge(" ".join(words[i:] + words[:i]) + f" offer {i}")

        async def run(caller: Caller, command: c.Command[Any], key: str | None = None) -> Any:
            return await handle(apollo.deps, caller, command)

        edge = ApolloMcp(TOOLS, run, local_caller(ADMIN))
        async with Client(edge.server()) as client:
            found = await client.call_tool("query_knowledge", {"query": "kafka static membership"})
    text = found.content[0].text  # type: ignore[union-attr]
    assert text.startswith("1 entry found (hybrid):"), text
    assert "3 near-duplicates of it folded in" in text
    assert 3 == found.structured_content["entries"][0]["folded"]  # type: ignore[index]


# ---------------------------------------------------------------- idempotency keys


async def test_a_mutation_sent_again_with_its_idempotency_key_is_applied_once() -> None:
    """``_meta["apollo/idempotency_key"]``: a repeat changes nothing and answers as the
    first did; another key (or none) applies again; a bulk store's chunks each keep their
    own; a malformed key is refused naming it, before anything is done."""
    async with Apollo.in_memory() as apollo:
        ops = Caller.of("ops", Principal("ops", role="admin"), edge="mcp")
        keys: list[str | None] = []

        async def run(caller: Caller, command: c.Command[Any], key: str | None = None) -> Any:
            keys.append(key)
            return await handle(apollo.deps, caller, command, idempotency_key=key)

        stored = await apollo.client("a").store_knowledge("Decay halves this once")
        async with Client(ApolloMcp(TOOLS, run, local_caller(ops)).server()) as client:
            meta = {IDEMPOTENCY_KEY_META: "decay-2026-12-07"}
            for _ in range(2):
                result = await client.call_tool("force_decay", {"factor": 0.5}, meta=meta)
                assert not result.is_error
            assert 0.5 * 0.5 == pytest.approx((await apollo.get_entry(stored.entry_id)).confidence)
            await client.call_tool("force_decay", {"factor": 0.5}, meta={IDEMPOTENCY_KEY_META: "x"})
            assert 0.5**3 == pytest.approx((await apollo.get_entry(stored.entry_id)).confidence)

            items = [{"content": f"bulk note {i} of the batch"} for i in range(300)]
            bulk = {IDEMPOTENCY_KEY_META: "bulk-1"}
            await client.call_tool("store_many", {"items": items}, meta=bulk)
            again = await client.call_tool("store_many", {"items": items}, meta=bulk)
            assert {"deduplicated"} == {r["outcome"] for r in again.structured_content["results"]}
            assert 301 == (await apollo.stats()).total
            assert ["bulk-1@0", "bulk-1@256"] == [k for k in keys if k and k.startswith("bulk")][:2]

            await client.call_tool("stats", {}, meta={IDEMPOTENCY_KEY_META: "a read"})
            assert None is keys[-1]  # a read changes nothing: no key reaches it
            before = len(keys)
            bad = await client.call_tool(
                "force_decay", {"factor": 0.5}, meta={IDEMPOTENCY_KEY_META: "has space"}
            )
            assert bad.is_error
            assert IDEMPOTENCY_KEY_META in bad.content[0].text  # type: ignore[union-attr]
            assert before == len(keys)
