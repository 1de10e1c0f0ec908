"""The JSON codec of every edge: a private cattrs converter, strict JSON encoding and decoding.

``make_converter(...)`` turns Apollo's attrs values into JSON-ready dicts (UUIDs as strings,
datetimes as ISO 8601 UTC, enums as their values, sets and tuples as lists) and structures
JSON bodies back into attrs classes *strictly*: a string is never coerced into a number nor a
number into a string, a list must be a JSON array, an object a JSON object. Every edge (HTTP
bodies, message bus bodies) builds its own converter here; the global converter is never used.
"""

from __future__ import annotations

import enum
import json
import math
import re
import types
from collections.abc import Callable, Mapping, Sequence, Set
from datetime import UTC, datetime
from typing import Any, Final, Union, get_args, get_origin
from uuid import UUID

import attrs
import cattrs
from cattrs.errors import IterableValidationError, IterableValidationNote

from apollo_domain.errors import ValidationError
from apollo_domain.results import SCORE_DIGITS, reported
from apollo_domain.validation import MAX_JSON_DEPTH, shown

StructureHook = Callable[[Any, Any], Any]

#: The numbers Apollo computes are sent as its results report them (the rule's one home:
#: :func:`apollo_domain.results.reported`): ``0.58``, not ``0.5800000000000001``.
rounded = reported


def make_converter(*, forbid_extra_keys: bool, round_scores: bool) -> cattrs.Converter:
    """A fresh converter for one JSON edge, each choice explicit. ``forbid_extra_keys``:
    unknown fields of a structured value are refused (what an edge reads from callers) or
    ignored (replies, read tolerantly). ``round_scores`` (what the edges send, not what they
    read): the ``float`` fields of Apollo's values are :func:`rounded`, while free-form
    objects (``Mapping[str, Any]``: the caller's context) keep their numbers."""
    converter = _converter(forbid_extra_keys)
    if round_scores:
        free_form = _converter(forbid_extra_keys)
        converter.register_unstructure_hook(float, rounded)
        converter.register_unstructure_hook_func(_is_free_form, free_form.unstructure)
    return converter


def _is_free_form(kind: Any) -> bool:
    origin = get_origin(kind)
    return origin in (dict, Mapping) and get_args(kind)[1:] == (Any,)


def _converter(forbid_extra_keys: bool) -> cattrs.Converter:
    converter = cattrs.Converter(
        forbid_extra_keys=forbid_extra_keys,
        unstruct_collection_overrides={Set: list, Sequence: list, Mapping: dict},
    )
    converter.register_unstructure_hook(UUID, str)
    converter.register_structure_hook(UUID, _structure_uuid)
    converter.register_unstructure_hook(datetime, format_datetime)
    converter.register_structure_hook(datetime, _structure_datetime)
    converter.register_structure_hook(str, _structure_str)
    converter.register_structure_hook(bool, _structure_bool)
    converter.register_structure_hook(int, _structure_int)
    converter.register_structure_hook(float, _structure_float)
    converter.register_structure_hook_func(
        lambda t: isinstance(t, type) and issubclass(t, enum.Enum), _structure_enum
    )
    converter.register_structure_hook_factory(_is_union, _union_hook)
    converter.register_structure_hook_factory(_is_homogeneous_collection, _collection_hook)
    converter.register_structure_hook_factory(_is_dict, _mapping_hook)
    return converter


# --------------------------------------------------------------------------- JSON text


def encode_json(value: Any) -> bytes:
    """Compact UTF-8 JSON; NaN and infinities are refused (they are not JSON)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def decode_json(raw: bytes | str, *, name: str = "body", field_steps: int = 1) -> Any:
    """Parse strict JSON. Malformed text, invalid UTF-8, NaN or infinities raise
    :class:`ValidationError` naming ``name``. An object that holds one key twice (at any
    depth) is refused, naming the key: parsers disagree on which value wins, so a body
    that one reader sees as ``private`` another could see as ``global``. Strings lose NUL
    characters and lone surrogates: text no store can hold.

    Nesting is bounded while decoding, so no document can exhaust the stack: each member
    ``field_steps`` steps below the root (a body's fields with 1, a bus envelope's payload
    fields with 2, the document itself with 0) may nest objects and arrays
    :data:`~apollo_domain.validation.MAX_JSON_DEPTH` levels deep, like any caller value.
    A deeper one raises :class:`ValidationError` naming it (``context``,
    ``payload.context``)."""
    limit = MAX_JSON_DEPTH + field_steps
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes | bytearray) else raw
        value = json.loads(
            text,
            parse_constant=_refuse_constant,
            parse_float=_finite,
            parse_int=_integer,
            object_pairs_hook=_unique_object,
        )
    except UnicodeDecodeError as exc:
        raise ValidationError(name, f"is not valid UTF-8: {exc.reason}") from None
    except json.JSONDecodeError as exc:
        raise ValidationError(name, f"is not valid JSON: {exc}") from None
    except RecursionError:  # deeper than the parser's stack: find where, from the text
        path = _too_deep_in_text(text, limit)
        raise ValidationError(_path_name(name, path[:field_steps]), _TOO_DEEP) from None
    except ValueError as exc:
        raise ValidationError(name, str(exc)) from None
    try:
        return _scrub(value, 1, limit)
    except _TooDeep as exc:
        raise ValidationError(_path_name(name, exc.path[::-1][:field_steps]), _TOO_DEEP) from None
    except DuplicateKey as exc:  # two keys that are one once cleaned ("a\u0000" and "a")
        raise ValidationError(name, str(exc)) from None


_TOO_DEEP = f"is nested more than {MAX_JSON_DEPTH} levels deep"


class _TooDeep(Exception):
    """Raised at the first container past the bound; each enclosing container adds its key
    (or index) to ``path`` on the way out, innermost first."""

    def __init__(self) -> None:
        super().__init__()
        self.path: list[str | int] = []


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},:]')


def _too_deep_in_text(text: str, limit: int) -> list[str | int]:
    """The path (keys and indices, outermost first) to the first container of the JSON
    ``text`` below level ``limit``, found by scanning tokens (no recursion)."""
    steps: list[str | int] = []  # per open container: the key or index of its current member
    expecting_key = False
    for token in _TOKEN.finditer(text):
        mark = token.group()
        if mark in ("{", "["):
            if len(steps) >= limit:
                return steps
            steps.append("" if mark == "{" else 0)
            expecting_key = mark == "{"
        elif mark in ("}", "]"):
            if steps:
                steps.pop()
            expecting_key = False
        elif mark == ",":
            if steps and isinstance(steps[-1], int):
                steps[-1] += 1
            else:
                expecting_key = True
        elif mark == ":":
            expecting_key = False
        elif expecting_key and steps:
            steps[-1] = _key(mark)
    return []


def _key(token: str) -> str:
    try:
        return str(json.loads(token))
    except ValueError:
        return token[1:-1]


def _path_name(name: str, steps: Sequence[str | int]) -> str:
    """``context``, ``payload.context``, ``messages[0]``; ``name`` for no steps."""
    text = ""
    for step in steps:
        if isinstance(step, int):
            text = f"{text or name}[{step}]"
        else:
            text = f"{text}.{step}" if text else step
    return text or name


class DuplicateKey(ValueError):
    """A JSON object holds ``key`` more than once."""

    def __init__(self, key: str) -> None:
        super().__init__(f"holds the key {shown(key)} more than once")
        self.key = key


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members as a dict, refusing a key given twice."""
    members = dict(pairs)
    if len(members) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return members


def refuse_duplicate_keys(raw: bytes | str) -> None:
    """Raise :class:`DuplicateKey` if the JSON text ``raw`` holds an object with a key given
    twice; text that is not JSON (or too deep to parse) is left to its own reader."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes | bytearray) else raw
        json.loads(text, object_pairs_hook=_unique_object)
    except DuplicateKey:
        raise
    except (ValueError, RecursionError):
        return


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"is not valid JSON: {name} is not a JSON number")


def _finite(text: str) -> float:
    """A JSON number with a fraction or exponent; one too large for a float (``1e999``)
    would be an infinity, which JSON has not."""
    number = float(text)
    if not math.isfinite(number):
        raise ValueError("holds a number too large to represent")
    return number


#: The most digits a JSON integer may have (Python's own bound on reading integers).
MAX_INTEGER_DIGITS: Final = 4_300


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise ValueError(f"holds an integer of more than {MAX_INTEGER_DIGITS:,} digits")
    return int(text)


def _scrub(value: Any, depth: int, limit: int) -> Any:
    """Clean every string of a decoded value at level ``depth``, refusing containers
    below level ``limit``."""
    if isinstance(value, str):
        return _clean_text(value)
    if isinstance(value, list):
        if depth > limit:
            raise _TooDeep
        items = []
        for index, item in enumerate(value):
            try:
                items.append(_scrub(item, depth + 1, limit))
            except _TooDeep as exc:
                exc.path.append(index)
                raise
        return items
    if isinstance(value, dict):
        if depth > limit:
            raise _TooDeep
        members = {}
        for key, item in value.items():
            clean = _clean_text(key)
            if clean in members:
                raise DuplicateKey(clean)
            try:
                members[clean] = _scrub(item, depth + 1, limit)
            except _TooDeep as exc:
                exc.path.append(key)
                raise
        return members
    return value


def _clean_text(text: str) -> str:
    if text.isascii():
        return text.replace("\x00", "")
    return text.encode("utf-8", "ignore").decode("utf-8").replace("\x00", "")


# --------------------------------------------------------------------------- scalar hooks


def format_datetime(value: datetime) -> str:
    """ISO 8601 in UTC (naive datetimes are taken to be UTC already)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _structure_str(value: Any, _: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"must be a string, got {json_type(value)}")
    return value


def _structure_bool(value: Any, _: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"must be a boolean, got {json_type(value)}")
    return value


def _structure_int(value: Any, _: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise TypeError(f"must be an integer, got {json_type(value)}")
    return value


def _structure_float(value: Any, _: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"must be a number, got {json_type(value)}")
    try:
        number = float(value)
    except OverflowError:
        raise ValueError("is too large") from None
    if not math.isfinite(number):
        raise ValueError("must be a finite number")
    return number


def _structure_uuid(value: Any, _: Any) -> UUID:
    if isinstance(value, UUID):
        return value
    if not isinstance(value, str):
        raise TypeError(f"must be a UUID string, got {json_type(value)}")
    try:
        return UUID(value)
    except ValueError:
        raise ValueError(f"must be a UUID, got {shown(value)}") from None


def _structure_datetime(value: Any, _: Any) -> datetime:
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"must be an ISO 8601 timestamp, got {shown(value)}") from None
    else:
        raise TypeError(f"must be an ISO 8601 timestamp string, got {json_type(value)}")
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    try:  # a zone that shifts the first or last representable day past its edge
        return parsed.astimezone(UTC)
    except OverflowError:
        raise ValueError("is outside the representable range") from None


def _structure_enum(value: Any, kind: type[enum.Enum]) -> enum.Enum:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(str(m.value) for m in kind)
        raise ValueError(f"must be one of {allowed}, got {shown(value)}") from None


# --------------------------------------------------------------------------- generic hooks


def _is_union(kind: Any) -> bool:
    return get_origin(kind) in (Union, types.UnionType)


def _union_hook(kind: Any, converter: cattrs.Converter) -> StructureHook:
    """Members are tried in declaration order; ``None`` only matches null."""
    members = get_args(kind)
    nullable = type(None) in members
    hooks = [(m, converter.get_structure_hook(m)) for m in members if m is not type(None)]

    def structure(value: Any, _: Any) -> Any:
        if value is None:
            if nullable:
                return None
            raise TypeError(f"must not be null (expected {describe_type(kind)})")
        failures: list[Exception] = []
        for member, hook in hooks:
            try:
                return hook(value, member)
            except Exception as exc:
                failures.append(exc)
        if len(failures) == 1:
            raise failures[0]
        raise TypeError(f"must be {describe_type(kind)}, got {json_type(value)}")

    return structure


def _is_homogeneous_collection(kind: Any) -> bool:
    origin = get_origin(kind) or kind
    if origin in (str, bytes) or not isinstance(origin, type):
        return False
    if origin is tuple:
        args = get_args(kind)
        return not args or (len(args) == 2 and args[1] is Ellipsis)
    return issubclass(origin, list | set | frozenset) or origin in (Sequence, Set)


def _collection_hook(kind: Any, converter: cattrs.Converter) -> StructureHook:
    origin = get_origin(kind) or kind
    args = get_args(kind)
    item = args[0] if args else Any
    build: Callable[[list[Any]], Any]
    if origin is tuple or origin is Sequence:
        build = tuple
    elif origin in (frozenset, Set):
        build = frozenset
    elif origin is set:
        build = set
    else:
        build = list
    item_hook = None if item is Any else converter.get_structure_hook(item)

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, list | tuple):
            raise TypeError(f"must be a list, got {json_type(value)}")
        if item_hook is None:
            return build(list(value))
        out: list[Any] = []
        errors: list[Exception] = []
        for index, element in enumerate(value):
            try:
                out.append(item_hook(element, item))
            except Exception as exc:
                exc.__notes__ = [
                    *getattr(exc, "__notes__", []),
                    IterableValidationNote(f"Structuring {kind} @ index {index}", index, item),
                ]
                errors.append(exc)
        if errors:
            raise IterableValidationError(f"While structuring {kind!r}", errors, kind)
        return build(out)

    return structure


def _is_dict(kind: Any) -> bool:
    origin = get_origin(kind) or kind
    return isinstance(origin, type) and (issubclass(origin, dict) or origin is Mapping)


def _mapping_hook(kind: Any, converter: cattrs.Converter) -> StructureHook:
    args = get_args(kind)
    value_type = args[1] if len(args) == 2 else Any
    value_hook = None if value_type is Any else converter.get_structure_hook(value_type)

    def structure(value: Any, _: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise TypeError(f"must be an object, got {json_type(value)}")
        if value_hook is None:
            return {str(k): v for k, v in value.items()}
        return {str(k): value_hook(v, value_type) for k, v in value.items()}

    return structure


def describe_type(kind: Any) -> str:
    """A reader's name for a field type: ``a string``, ``a list of strings``, ..."""
    if _is_union(kind):
        members = [m for m in get_args(kind) if m is not type(None)]
        return " or ".join(describe_type(m) for m in members)
    origin = get_origin(kind) or kind
    names = {str: "a string", int: "an integer", float: "a number", bool: "a boolean"}
    if origin in names:
        return names[origin]
    if origin is UUID:
        return "a UUID"
    if origin is datetime:
        return "an ISO 8601 timestamp"
    if _is_dict(kind):
        return "an object"
    if _is_homogeneous_collection(kind):
        args = get_args(kind)
        inner = describe_type(args[0]) if args else "values"
        return f"a list of {inner.removeprefix('a ').removeprefix('an ')}s"
    if attrs.has(origin):
        return "an object"
    return getattr(origin, "__name__", str(origin))


__all__ = [
    "SCORE_DIGITS",
    "DuplicateKey",
    "decode_json",
    "describe_type",
    "encode_json",
    "format_datetime",
    "json_type",
    "make_converter",
    "refuse_duplicate_keys",
    "rounded",
]
