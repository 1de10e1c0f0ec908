"""Automatic writeback: which LLM responses are kept, and where they go (docs/architecture.md,
"The use cases")."""

from __future__ import annotations

from typing import Any

import pytest
from attrs import frozen
from hypothesis import given
from hypothesis import strategies as st

from apollo_domain.writeback import (
    RESEARCH_TOOLS,
    STORE_ROUTE,
    VECTORIZE_ROUTE,
    WritebackDecision,
    evaluate_writeback,
)

LONG = "BGP selects routes by local preference before AS path length, then origin type."
EXACTLY_50 = "x" * 50
NON_RESEARCH_TOOLS = ("apollo_query", "apollo_store", "send_message", "write_file", "think")


@frozen
class Tool:
    name: str


@frozen
class Response:
    content: str
    tools: tuple[Tool, ...] = ()
    tool_calls: tuple[Any, ...] = ()
    embedding: tuple[float, ...] | None = None


def qualifies(response: Any) -> bool:
    return evaluate_writeback(response).qualifies


# -- where tool calls are found ---------------------------------------------------------


@pytest.mark.parametrize(
    "response",
    [
        Response(LONG, tools=(Tool("read_file"),)),
        {"content": LONG, "tools": [Tool("web_search")]},
        {"content": LONG, "tools": [{"name": "search_files"}]},
        {":content": LONG, ":tools": [{":name": "search_content"}]},
        {"content": LONG, "tools": [{"name": ":run_command"}]},
        {"content": LONG, "tools": [{"tool": "web_fetch"}]},
        {"content": LONG, "tools": [{"tool_name": "read_file"}]},
        {"content": LONG, "tools": ["read_file"]},
        {"content": LONG, "tool_calls": [{"function": {"name": "web_search"}}]},
        {"content": LONG, "tool_calls": [{"type": "function", "function": {"name": "read_file"}}]},
        Response(LONG, tool_calls=({"function": {"name": "run_command"}},)),
        {"content": LONG, "enrichments": {"tool_history": [{"name": "web_fetch"}]}},
        {"content": LONG, "enrichments": {"tools": [{"name": "search_files"}]}},
        {":content": LONG, ":enrichments": {":tool_history": [{":tool": "read_file"}]}},
        {"content": LONG, "tool_history": [{"name": "search_content"}]},
    ],
    ids=[
        "typed-response-typed-tool",
        "dict-response-typed-tool",
        "string-keyed-dict",
        "symbol-keyed-dict",
        "symbol-tool-name",
        "tool-key",
        "tool-name-key",
        "bare-tool-name",
        "openai-tool-calls",
        "openai-tool-calls-typed",
        "typed-response-tool-calls",
        "enrichment-tool-history",
        "enrichment-tools",
        "symbol-keyed-enrichment-history",
        "top-level-tool-history",
    ],
)
def test_a_research_tool_call_anywhere_qualifies(response: Any) -> None:
    """Long enough content plus a research tool call, in any of the accepted shapes."""
    assert qualifies(response)


def test_research_tools_are_listed_once_in_first_seen_order() -> None:
    """The decision names the research tools used, deduplicated, non-research ones left out."""
    response = {
        "content": LONG,
        "tools": [Tool("web_search"), {"name": "apollo_query"}],
        "tool_calls": [{"function": {"name": "read_file"}}, {"function": {"name": "web_search"}}],
        "enrichments": {"tool_history": [{"name": "run_command"}]},
    }
    expected = WritebackDecision(
        True,
        "research-backed response",
        ("web_search", "read_file", "run_command"),
        VECTORIZE_ROUTE,
    )
    assert expected == evaluate_writeback(response)


# -- what never qualifies ---------------------------------------------------------------


@pytest.mark.parametrize("tool", NON_RESEARCH_TOOLS)
def test_a_non_research_tool_alone_never_qualifies(tool: str) -> None:
    """Apollo's own context (or any other non-research tool) does not make research."""
    response = {
        "content": LONG,
        "tools": [{"name": tool}],
        "tool_calls": [{"function": {"name": tool}}],
        "enrichments": {"tool_history": [{"name": tool}]},
    }
    assert (False, ()) == (qualifies(response), evaluate_writeback(response).research_tools)


@given(
    st.lists(st.sampled_from(NON_RESEARCH_TOOLS) | st.text(max_size=12), max_size=6),
    st.text(min_size=50, max_size=200),
)
def test_without_research_tools_nothing_qualifies(tools: list[str], content: str) -> None:
    """Whatever the content, a response with no research tool call never qualifies."""
    response = {
        "content": content,
        "tools": [{"name": t} for t in tools if t.strip().removeprefix(":") not in RESEARCH_TOOLS],
    }
    assert not qualifies(response)


def test_no_tools_at_all_does_not_qualify() -> None:
    """A long answer from the model's own knowledge is not written back."""
    assert not qualifies({"content": LONG})


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (EXACTLY_50, True),
        ("x" * 49, False),
        (f"   {'x' * 49}   ", False),
        ("", False),
        (None, False),
    ],
    ids=["exactly-50", "49", "49-padded", "empty", "missing"],
)
def test_content_needs_fifty_characters(content: str | None, expected: bool) -> None:
    """At least 50 characters of content (after stripping), even with a research call."""
    response = {"content": content, "tools": [{"name": "read_file"}]}
    assert expected == qualifies(response)


@given(st.text(max_size=49), st.sampled_from(sorted(RESEARCH_TOOLS)))
def test_short_content_never_qualifies(content: str, tool: str) -> None:
    """Under 50 characters never qualifies, research or not."""
    assert not qualifies({"content": content, "tools": [{"name": tool}]})


@given(
    st.text(min_size=50).filter(lambda t: len(t.strip()) >= 50),
    st.sampled_from(sorted(RESEARCH_TOOLS)),
)
def test_long_content_with_any_research_tool_qualifies(content: str, tool: str) -> None:
    """Each of the six research tools qualifies a long enough response."""
    assert qualifies({"content": content, "tool_calls": [{"function": {"name": tool}}]})


# -- routing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("embedding", "expected"),
    [
        ([0.1, 0.2, 0.3], STORE_ROUTE),
        ((0.5,) * 4, STORE_ROUTE),
        (None, VECTORIZE_ROUTE),
        ([], VECTORIZE_ROUTE),
    ],
    ids=["list", "tuple", "none", "empty"],
)
def test_route_follows_embedding_presence(embedding: object, expected: str) -> None:
    """Already embedded → writeback-store; otherwise → writeback-vectorize."""
    response = {"content": LONG, "tools": [{"name": "read_file"}], "embedding": embedding}
    assert expected == evaluate_writeback(response).route


def test_a_typed_response_with_an_embedding_routes_to_store() -> None:
    """The embedding attribute of a typed response counts too."""
    response = Response(LONG, tools=(Tool("read_file"),), embedding=(0.1, 0.2))
    assert STORE_ROUTE == evaluate_writeback(response).route


def test_a_response_without_an_embedding_key_is_vectorized() -> None:
    """No embedding key at all → vectorize."""
    assert VECTORIZE_ROUTE == evaluate_writeback({"content": LONG, "tools": ["read_file"]}).route


def test_non_qualifying_responses_have_no_route() -> None:
    """Only qualifying responses are routed anywhere."""
    decision = evaluate_writeback({"content": LONG, "embedding": [0.1]})
    assert (False, None) == (decision.qualifies, decision.route)
