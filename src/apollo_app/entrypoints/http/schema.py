"""JSON Schema (2020-12, as OpenAPI 3.1 and MCP use it) derived from attrs classes and type
hints."""

from __future__ import annotations

import enum
import types
from collections.abc import Mapping, Sequence, Set
from datetime import datetime
from typing import Any, Union, get_args, get_origin
from uuid import UUID

import attrs

JsonSchema = dict[str, Any]


class SchemaBook:
    """Collects the component schemas that ``schema_of`` refers to by ``$ref`` (under
    ``ref_prefix``: an OpenAPI document's components, or a standalone schema's ``$defs``).

    ``closed`` classes (request bodies) forbid unknown properties and require only the
    fields without a default; a book made ``closed`` treats every class it meets so (inputs
    that nest commands). ``omit`` drops fields an edge never shows (an entry's embedding).
    """

    def __init__(self, *, ref_prefix: str = "#/components/schemas/", closed: bool = False) -> None:
        self.components: dict[str, JsonSchema] = {}
        self.ref_prefix = ref_prefix
        self.closed = closed

    def schema_of(
        self,
        kind: Any,
        *,
        closed: bool = False,
        omit: Set[str] = frozenset(),
        name: str | None = None,
    ) -> JsonSchema:
        if kind is Any:
            return {}
        if kind is type(None):
            return {"type": "null"}
        origin = get_origin(kind)
        if origin in (Union, types.UnionType):
            return {"anyOf": [self.schema_of(member) for member in get_args(kind)]}
        if isinstance(kind, type) and attrs.has(kind):
            return self._component(kind, closed=closed or self.closed, omit=omit, name=name)
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            return {"type": "string", "enum": [str(m.value) for m in kind]}
        scalar = _SCALARS.get(kind)
        if scalar is not None:
            return dict(scalar)
        base = origin or kind
        args = get_args(kind)
        if base in (dict, Mapping):
            values = self.schema_of(args[1]) if len(args) == 2 else {}
            return {"type": "object", "additionalProperties": values or True}
        if base in (list, tuple, set, frozenset, Sequence, Set):
            return {"type": "array", "items": self.schema_of(args[0]) if args else {}}
        raise TypeError(f"no JSON schema for {kind!r}")

    def _component(
        self, kind: type[Any], *, closed: bool, omit: Set[str], name: str | None
    ) -> JsonSchema:
        key = name or kind.__name__
        ref = {"$ref": f"{self.ref_prefix}{key}"}
        if key in self.components:
            return ref
        self.components[key] = {}  # reserve the name: recursive types terminate
        attrs.resolve_types(kind)
        properties: dict[str, JsonSchema] = {}
        required: list[str] = []
        for attribute in attrs.fields(kind):
            if attribute.name in omit:
                continue
            properties[attribute.name] = _annotate(
                self.schema_of(attribute.type), attribute.metadata.get("schema", {})
            )
            if not closed or attribute.default is attrs.NOTHING:
                required.append(attribute.name)
        schema: JsonSchema = {"type": "object", "properties": properties, "required": required}
        if closed:
            schema["additionalProperties"] = False
        doc = (kind.__doc__ or "").strip()
        if doc and not doc.startswith(kind.__name__ + "("):
            schema["description"] = doc.split("\n\n")[0]
        self.components[key] = schema
        return ref


_ANNOTATIONS = frozenset({"description", "examples", "default", "title"})


def _annotate(schema: JsonSchema, extra: JsonSchema) -> JsonSchema:
    """Merge ``extra`` into ``schema``: annotations at the top, constraints into every
    non-null branch of a nullable type (a constraint must not forbid null)."""
    out = dict(schema)
    constraints = {k: v for k, v in extra.items() if k not in _ANNOTATIONS}
    out.update({k: v for k, v in extra.items() if k in _ANNOTATIONS})
    if "anyOf" in out:
        out["anyOf"] = [
            branch if branch.get("type") == "null" else {**branch, **constraints}
            for branch in out["anyOf"]
        ]
    else:
        out.update(constraints)
    return out


_SCALARS: dict[Any, JsonSchema] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    UUID: {"type": "string", "format": "uuid"},
    datetime: {"type": "string", "format": "date-time"},
}

ERROR_SCHEMA: JsonSchema = {
    "type": "object",
    "description": "Every error has this shape.",
    "required": ["error"],
    "additionalProperties": False,
    "properties": {
        "error": {
            "type": "object",
            "required": ["type", "message", "field"],
            "additionalProperties": False,
            "properties": {
                "type": {"type": "string", "description": "Machine-readable error kind."},
                "message": {"type": "string"},
                "field": {
                    "type": ["string", "null"],
                    "description": "The offending field or parameter, when there is one.",
                },
            },
        }
    },
}

__all__ = ["ERROR_SCHEMA", "JsonSchema", "SchemaBook"]
