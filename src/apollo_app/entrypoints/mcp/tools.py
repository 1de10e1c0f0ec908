"""The MCP tools, generated from the action record and the commands' fields.

Each action the record marks as an MCP tool becomes one tool: its name is the action's
(the client method's), its description the action's summary and the command's docstring,
its input schema the command's fields (their ``schema`` metadata documents each; fields
with a default are optional and show it), its output schema the command's result type, and
its annotations the record's read-only, destructive and idempotent hints. Nothing here is
written per tool: a new command in the record gets its tool.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any, get_args, get_origin

import attrs
from attrs import frozen

from apollo_domain import commands as c
from apollo_domain.actions import ACTIONS, Action, Bus
from apollo_domain.model import Entry, Evidence
from apollo_domain.results import Dispatch, EvidenceView

from ..http.operations import OPERATIONS
from ..http.schema import JsonSchema, SchemaBook

#: Result items shown through a view, as the HTTP API shows them: evidence with whether
#: each source counts as independent.
VIEWS: Mapping[type, type] = {Evidence: EvidenceView}
#: Fields no edge shows (an entry's embedding: a few thousand numbers nobody reads).
HIDDEN_RESULT_FIELDS = frozenset({"embedding"})
#: The key a list result is returned under when the HTTP API has none for its command.
DEFAULT_LIST_KEY = "results"
_DEFS = "#/$defs/"


@frozen
class Tool:
    """One MCP tool: an action of the record with its generated schemas."""

    action: Action
    name: str
    command: type[c.Command[Any]]
    description: str
    input_schema: JsonSchema
    output_schema: JsonSchema
    #: For a list result: the key of the object it is returned under.
    list_key: str | None
    read_only: bool
    destructive: bool
    idempotent: bool


#: Who may call a tool, as the list of docs/mcp.md says it.
_WHO = {"read": "any role", "write": "writers, gateways, admins", "admin": "admins"}


def describe(tool: Tool) -> str:
    """One line of the tool list of docs/mcp.md: the name, who may call it, its hints, what it
    does."""
    effect = "writes" if tool.action.mutates else "reads, leaves a trace"
    hints = [
        "read-only" if tool.read_only else effect,
        *(["destructive"] if tool.destructive else []),
        *(["idempotent"] if tool.idempotent else []),
    ]
    access = _WHO[tool.action.access.value]
    return f"`{tool.name}` ({access}; {', '.join(hints)}): {tool.action.summary}"


def mcp_actions() -> tuple[Action, ...]:
    """The actions of the record that are MCP tools, in the record's order."""
    return tuple(action for action in ACTIONS.values() if action.tool)


def bus_actions() -> tuple[Action, ...]:
    """The tool actions a client in client mode (no database, ``APOLLO_AMQP_URL``) carries
    out over the bus: those whose command travels on it, and the bulk store (published
    item by item)."""
    return tuple(
        action
        for action in mcp_actions()
        if action.bus in (Bus.INGEST, Bus.QUERY) or action.command is c.StoreMany
    )


def tools_of(actions: Sequence[Action], *, published: bool = False) -> tuple[Tool, ...]:
    """The tool of each action. ``published``: mutations return the :class:`Dispatch` of
    the message that carries them (client mode), not the use case's result."""
    return tuple(_tool(action, published=published) for action in actions)


def _tool(action: Action, *, published: bool) -> Tool:
    kind: type[c.Command[Any]] = action.command
    result = c.result_type(kind)
    if published and action.mutates:  # what the message that carries it says
        result = list[Dispatch] if get_origin(result) is list else Dispatch
    output, key = output_schema(kind, result)
    return Tool(
        action=action,
        name=action.name,
        command=kind,
        description=_description(action.summary, kind),
        input_schema=input_schema(kind),
        output_schema=output,
        list_key=key,
        read_only=action.read_only,
        destructive=action.destructive,
        idempotent=action.idempotent,
    )


def _description(summary: str, kind: type[c.Command[Any]]) -> str:
    """The command's documentation, its paragraphs each on one line (the summary first)."""
    text = inspect.getdoc(kind) or ""
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
    if not paragraphs or paragraphs[0].startswith(kind.__name__ + "("):
        return summary
    return "\n\n".join(paragraphs)


def input_schema(kind: type[c.Command[Any]]) -> JsonSchema:
    """The JSON schema of a command's fields as tool arguments: required are those without
    a default; unknown arguments are refused."""
    book = SchemaBook(ref_prefix=_DEFS, closed=True)
    book.schema_of(kind)
    for component_kind in _attrs_classes(kind):
        _show_defaults(book.components.get(component_kind.__name__), component_kind)
    return _standalone(book, kind.__name__)


def output_schema(kind: type[c.Command[Any]], result: Any) -> tuple[JsonSchema, str | None]:
    """The JSON schema of a tool's structured content for a command whose use case returns
    ``result``, and the key a list result is returned under (None: not a list)."""
    book = SchemaBook(ref_prefix=_DEFS)
    if get_origin(result) is list:
        (item,) = get_args(result)
        key = list_key(kind)
        items = book.schema_of(VIEWS.get(item, item))
        schema: JsonSchema = {
            "type": "object",
            "properties": {key: {"type": "array", "items": items}},
            "required": [key],
        }
        plain: JsonSchema = _plain(schema, book.components, ())
        return plain, key
    omit = HIDDEN_RESULT_FIELDS if result is Entry else frozenset()
    book.schema_of(result, omit=omit)
    return _standalone(book, result.__name__), None


def list_key(kind: type[c.Command[Any]]) -> str:
    """The key the HTTP API returns this command's list under (``related``, ``entities``,
    ...), so both edges answer with the same object; else :data:`DEFAULT_LIST_KEY`."""
    for op in OPERATIONS:
        if op.command is kind and isinstance(op.ok[2], tuple):
            key: str = op.ok[2][0]
            return key
    return DEFAULT_LIST_KEY


def _standalone(book: SchemaBook, root: str) -> JsonSchema:
    """The ``root`` component as a schema of its own, written out in full: every ``$ref``
    replaced by what it names and a nullable scalar as a list of types. Clients read it
    without resolving references (several agent frameworks cannot), and the SDK's client,
    which checks every result against it, does so in half the time."""
    plain: JsonSchema = _plain(book.components[root], book.components, ())
    return plain


def _plain(schema: Any, components: Mapping[str, JsonSchema], seen: tuple[str, ...]) -> Any:
    if isinstance(schema, list):
        return [_plain(item, components, seen) for item in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(_DEFS):
        name = ref.removeprefix(_DEFS)
        if name in seen:
            raise TypeError(f"{name} refers to itself: a tool schema is written out in full")
        return _plain(components[name], components, (*seen, name))
    plain = {key: _plain(value, components, seen) for key, value in schema.items()}
    branches = plain.get("anyOf")
    if isinstance(branches, list) and all(_bare_type(b) for b in branches):
        del plain["anyOf"]
        plain["type"] = [branch["type"] for branch in branches]
    return plain


def _bare_type(schema: Any) -> bool:
    return isinstance(schema, dict) and set(schema) == {"type"} and isinstance(schema["type"], str)


def _attrs_classes(kind: type) -> list[type]:
    """``kind`` and the attrs classes its fields hold (a bulk command's items)."""
    found: list[type] = []

    def visit(value: Any) -> None:
        if isinstance(value, type) and attrs.has(value):
            if value in found:
                return
            found.append(value)
            attrs.resolve_types(value)
            for attribute in attrs.fields(value):
                visit(attribute.type)
        for arg in get_args(value):
            visit(arg)

    visit(kind)
    return found


def _show_defaults(component: JsonSchema | None, kind: type) -> None:
    """Each optional field's schema shows its default (a factory's is not a constant)."""
    if not component:
        return
    for attribute in attrs.fields(kind):
        default = attribute.default
        if default is attrs.NOTHING or isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            continue
        prop = component["properties"].get(attribute.name)
        if prop is not None:
            prop.setdefault("default", list(default) if isinstance(default, tuple) else default)


__all__ = [
    "DEFAULT_LIST_KEY",
    "HIDDEN_RESULT_FIELDS",
    "VIEWS",
    "Tool",
    "bus_actions",
    "describe",
    "input_schema",
    "list_key",
    "mcp_actions",
    "output_schema",
    "tools_of",
]


if __name__ == "__main__":  # docs/mcp.md's tool list: python -m apollo_app.entrypoints.mcp.tools
    for listed in tools_of(mcp_actions()):
        print(f"  - {describe(listed)}")
