"""Automatic writeback: which LLM responses are worth keeping (docs/architecture.md, "The use
cases")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from attrs import frozen

RESEARCH_TOOLS = frozenset(
    {"read_file", "search_files", "search_content", "run_command", "web_search", "web_fetch"}
)
MIN_CONTENT_CHARS = 50
STORE_ROUTE = "writeback.store"
VECTORIZE_ROUTE = "writeback.vectorize"


@frozen
class WritebackDecision:
    qualifies: bool
    reason: str
    research_tools: tuple[str, ...] = ()
    route: str | None = None  # STORE_ROUTE (already embedded) or VECTORIZE_ROUTE


def response_field(obj: Any, name: str) -> Any:
    """``obj.name``, ``obj["name"]`` or ``obj[":name"]`` (symbol-keyed), else None: a field
    of an LLM response however the caller's client shapes it (typed object or dict)."""
    if isinstance(obj, Mapping):
        for key in (name, f":{name}"):
            if key in obj:
                return obj[key]
        return None
    return getattr(obj, name, None)


def _tool_name(tool: Any) -> str | None:
    if isinstance(tool, str):
        return tool
    name = (
        response_field(tool, "name")
        or response_field(tool, "tool")
        or response_field(tool, "tool_name")
    )
    if name is None:
        function = response_field(tool, "function")
        if function is not None:
            name = response_field(function, "name")
    return str(name).strip().removeprefix(":") if name else None


def _as_list(value: Any) -> Iterable[Any]:
    if value is None or isinstance(value, str | bytes | Mapping):
        return [value] if isinstance(value, Mapping) else []
    try:
        return list(value)
    except TypeError:
        return []


def research_tool_calls(response: Any) -> tuple[str, ...]:
    """Research tool names found in the response's typed tools or keyed dicts (``tools``),
    its ``tool_calls``, and the enrichment tool history; in first-seen order."""
    names: list[str] = []
    sources: list[Any] = [response_field(response, "tools"), response_field(response, "tool_calls")]
    enrichments = response_field(response, "enrichments")
    if enrichments is not None:
        sources.append(response_field(enrichments, "tool_history"))
        sources.append(response_field(enrichments, "tools"))
    sources.append(response_field(response, "tool_history"))
    for source in sources:
        for tool in _as_list(source):
            name = _tool_name(tool)
            if name in RESEARCH_TOOLS and name not in names:
                names.append(name)
    return tuple(names)


def evaluate_writeback(
    response: Any, *, min_content_chars: int = MIN_CONTENT_CHARS
) -> WritebackDecision:
    """A response qualifies when its content has at least ``min_content_chars`` characters
    and it made at least one research tool call. Apollo's own context never qualifies a
    response. Qualifying responses route to writeback-store when they carry an embedding,
    else to writeback-vectorize."""
    content = response_field(response, "content")
    text = content.strip() if isinstance(content, str) else ""
    if len(text) < min_content_chars:
        return WritebackDecision(False, f"content shorter than {min_content_chars} characters")
    tools = research_tool_calls(response)
    if not tools:
        return WritebackDecision(False, "no research tool call")
    embedding = response_field(response, "embedding")
    has_embedding = embedding is not None and len(embedding) > 0
    route = STORE_ROUTE if has_embedding else VECTORIZE_ROUTE
    return WritebackDecision(True, "research-backed response", tools, route)


__all__ = [
    "MIN_CONTENT_CHARS",
    "RESEARCH_TOOLS",
    "STORE_ROUTE",
    "VECTORIZE_ROUTE",
    "WritebackDecision",
    "evaluate_writeback",
    "research_tool_calls",
    "response_field",
]


#: Writeback ``metadata`` keys that become ingest arguments of the same name.
WRITEBACK_ARGUMENTS = (
    "content_type",
    "tags",
    "knowledge_domain",
    "source_provider",
    "source_channel",
    "access_scope",
    "submitted_by",
    "submitted_from",
)


def writeback_arguments(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The ingest arguments of a writeback message's ``metadata``: the
    :data:`WRITEBACK_ARGUMENTS` it holds, and a context made of the ``context`` object (if
    any) plus every unrecognised key."""
    arguments = {name: metadata[name] for name in WRITEBACK_ARGUMENTS if name in metadata}
    arguments.setdefault("content_type", "observation")
    extra = metadata.get("context")
    context = dict(extra) if isinstance(extra, Mapping) else {}
    context.update(
        (key, value)
        for key, value in metadata.items()
        if key not in WRITEBACK_ARGUMENTS and key != "context"
    )
    arguments["context"] = context
    return arguments
