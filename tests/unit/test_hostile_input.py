"""Hostile input is refused early with a ValidationError naming the field, and bounded where
it cannot be refused: nesting, tag and domain lengths, query text, relation confidences,
secrets in text, the hashing embedder's memory and its use of the event loop."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
from collections.abc import Sequence
from typing import Any
from uuid import uuid4

import numpy as np
import numpy.typing as npt
import pytest

from apollo_adapters.embedders import HashingEmbedder
from apollo_adapters.embedders.hashing import CACHE_BYTES, CACHED_WORD_CHARS
from apollo_app.error_policy import message_of
from apollo_app.logs import RedactingFormatter
from apollo_app.settings import Settings
from apollo_app.wire.codec import decode_json
from apollo_app.wire.envelope import decode_command, decode_gas_event
from apollo_domain.errors import TransportError, ValidationError
from apollo_domain.gas_rules import (
    FactDeposit,
    ProposedRelation,
    RelationVerdict,
    gate_relation,
    valid_confidence,
)
from apollo_domain.limits import MAX_QUERY_CHARS
from apollo_domain.model import AccessScope, Outcome
from apollo_domain.normalize import (
    MAX_TAG_CHARS,
    normalize_domain,
    normalize_domain_filter,
    normalize_tag_filter,
    normalize_tags,
)
from apollo_domain.secrets import redact
from apollo_domain.services.query import query_text
from apollo_domain.validation import MAX_JSON_DEPTH, check_depth
from tests.support import nested

# --------------------------------------------------------------------------- nesting


def test_a_value_may_nest_exactly_the_bound_and_no_deeper() -> None:
    """Level 1 is the value itself; MAX_JSON_DEPTH levels pass, one more is refused."""
    check_depth("context", nested(MAX_JSON_DEPTH))
    with pytest.raises(ValidationError) as caught:
        check_depth("context", nested(MAX_JSON_DEPTH + 1))
    assert ("context", f"is nested more than {MAX_JSON_DEPTH} levels deep") == (
        caught.value.field,
        caught.value.message,
    )


def test_lists_count_as_levels_and_a_value_containing_itself_is_refused() -> None:
    check_depth("event", {"messages": [[[1]]]})
    with pytest.raises(ValidationError):
        check_depth("event", nested(MAX_JSON_DEPTH + 1, kind=list))
    looped: dict[str, Any] = {}
    looped["self"] = looped
    with pytest.raises(ValidationError) as caught:
        check_depth("context", looped)
    assert "context" == caught.value.field


def deep_body(levels: int) -> bytes:
    """``{"content": "c", "context": <levels deep>}`` as JSON text, built without
    recursion (json.dumps itself cannot encode the deepest ones)."""
    return b'{"content":"c","context":' + b'{"a":' * levels + b"1" + b"}" * levels + b"}"


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH + 1, 485, 969])
def test_a_deep_http_body_names_the_member_that_nests_too_deeply(levels: int) -> None:
    with pytest.raises(ValidationError) as caught:
        decode_json(deep_body(levels))
    assert "context" == caught.value.field


def test_a_body_too_deep_for_the_json_parser_still_names_the_member() -> None:
    """Past the parser's own stack the text is scanned for where the bound is crossed."""
    with pytest.raises(ValidationError) as caught:
        decode_json(deep_body(100_000))
    assert "context" == caught.value.field
    with pytest.raises(ValidationError) as caught:
        decode_json(b"[" * 100_000 + b"]" * 100_000)
    assert "body[0]" == caught.value.field


def test_an_http_body_member_may_nest_exactly_the_bound() -> None:
    document = decode_json(deep_body(MAX_JSON_DEPTH))
    check_depth("context", document["context"])


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH + 1, 969])
def test_a_deep_bus_payload_names_the_payload_field(levels: int) -> None:
    """Payload fields are named as every other payload error names them: ``context``."""
    envelope = (
        b'{"v":1,"action":"ingest","payload":{"content":"c","context":'
        + b'{"a":' * levels
        + b"1"
        + b"}" * levels
        + b"}}"
    )
    with pytest.raises(ValidationError) as caught:
        decode_command(envelope)
    assert "context" == caught.value.field


def test_a_bus_payload_field_may_nest_exactly_the_bound() -> None:
    body = {"v": 1, "action": "ingest", "payload": {"content": "c", "context": nested(32)}}
    command = decode_command(json.dumps(body).encode())
    assert nested(32) == command.context  # type: ignore[attr-defined]


def test_a_deep_gas_event_names_the_event() -> None:
    event = {"request_id": "r", "messages": [nested(MAX_JSON_DEPTH)]}
    with pytest.raises(ValidationError) as caught:
        decode_gas_event(json.dumps(event).encode())
    assert "event" == caught.value.field
    decode_gas_event(json.dumps({"request_id": "r", "routing": nested(31)}).encode())


# --------------------------------------------------------------------------- tags, domains


def test_a_tag_may_be_as_long_as_the_bound_after_normalization() -> None:
    longest = "a" * MAX_TAG_CHARS
    assert (longest,) == normalize_tags([longest])
    assert (longest,) == normalize_tags(["!" * 500 + longest + "?" * 500])  # dropped chars
    with pytest.raises(ValidationError) as caught:
        normalize_tags(["ok", "b" * (MAX_TAG_CHARS + 1)])
    assert "tags" == caught.value.field
    assert "tag 1 is 65 characters long" in caught.value.message


def test_thousands_of_random_letters_are_not_a_tag_nor_a_domain() -> None:
    letters = "".join(chr(ord("a") + (i * 7919) % 26) for i in range(2_700))
    with pytest.raises(ValidationError) as tag:
        normalize_tags([letters])
    with pytest.raises(ValidationError) as domain:
        normalize_domain(letters, ())
    assert ("tags", "knowledge_domain") == (tag.value.field, domain.value.field)


def test_tags_and_domains_must_be_text() -> None:
    with pytest.raises(ValidationError) as tag:
        normalize_tags(["python", ["nested"]])
    with pytest.raises(ValidationError) as domain:
        normalize_domain(42, ())
    assert ("tags", "knowledge_domain") == (tag.value.field, domain.value.field)


def test_a_filter_that_normalizes_to_nothing_is_refused() -> None:
    """Dropping it would return unfiltered results."""
    with pytest.raises(ValidationError) as tags:
        normalize_tag_filter(["!!!", "   "])
    with pytest.raises(ValidationError) as domain:
        normalize_domain_filter("???")
    with pytest.raises(ValidationError) as empty:
        normalize_domain_filter("")
    assert ["tags", "knowledge_domain", "knowledge_domain"] == [
        e.value.field for e in (tags, domain, empty)
    ]


def test_absent_filters_filter_nothing() -> None:
    assert (None, None, None) == (
        normalize_tag_filter(None),
        normalize_tag_filter([]),
        normalize_domain_filter(None),
    )
    assert (("python",), "data-science") == (
        normalize_tag_filter(["Python", "!!"]),
        normalize_domain_filter("Data Science"),
    )


# --------------------------------------------------------------------------- query text


def test_query_text_is_bounded() -> None:
    assert "x" * MAX_QUERY_CHARS == query_text("x" * MAX_QUERY_CHARS)
    with pytest.raises(ValidationError) as caught:
        query_text("x" * (MAX_QUERY_CHARS + 1))
    assert "query" == caught.value.field


# --------------------------------------------------------------------------- GAS relations


@pytest.mark.parametrize("confidence", [math.nan, math.inf, -math.inf, 4.2, 1.0001, -0.1])
def test_a_relation_confidence_outside_the_unit_interval_is_skipped(confidence: float) -> None:
    """It would become the edge weight (an activation of 4.2): skipped, never persisted."""
    source, target = uuid4(), uuid4()
    deposit = FactDeposit(0, Outcome.CREATED, source, AccessScope.GLOBAL)
    decision = gate_relation(
        ProposedRelation(0, target, "depends_on", confidence),
        {0: deposit},
        AccessScope.GLOBAL,
        set(),
        confidence_gate=0.7,
    )
    assert RelationVerdict.SKIP is decision.verdict
    assert not valid_confidence(confidence)


def test_confidences_in_the_unit_interval_are_valid() -> None:
    assert all(valid_confidence(c) for c in (0, 0.0, 0.7, 1, 1.0))
    assert not any(valid_confidence(c) for c in (True, "0.9", None))


# --------------------------------------------------------------------------- secrets


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "http://bob:hunter2pass@llm.internal:8080/v1 failed",
            "http://***@llm.internal:8080/v1 failed",
        ),
        ("amqp://guest:guest@127.0.0.1:5672/apollo", "amqp://***@127.0.0.1:5672/apollo"),
        (
            "https://api.example/v1?api_key=abc123&model=x",
            "https://api.example/v1?api_key=***&model=x",
        ),
        ("Authorization: Bearer sk-live-0123456789", "Authorization: Bearer ***"),
        ("needs a bearer token", "needs a bearer token"),
        ("mail bob@example.org", "mail bob@example.org"),
    ],
)
def test_redact_masks_credentials_in_text(text: str, expected: str) -> None:
    assert expected == redact(text)


def test_redact_masks_the_secrets_it_is_given() -> None:
    assert "key *** rejected" == redact("key sk-abcdef rejected", ["sk-abcdef", None, "x"])


def test_settings_never_show_their_secrets() -> None:
    settings = Settings(
        embedder="hashing",
        llm_url="http://bob:hunter2pass@llm.internal/v1",
        llm_api_key="sk-abcdef",
        amqp_url="amqp://apollo:rabbitpass@mq/",
        database_url="postgresql://apollo:pgpass@db/apollo",
        api_tokens={"tok-secret-1": "alice"},
    )
    shown = repr(settings)
    for secret in ("hunter2pass", "sk-abcdef", "rabbitpass", "pgpass", "tok-secret-1"):
        assert secret not in shown
    assert {"sk-abcdef", "tok-secret-1"} == set(settings.secrets)


def test_log_lines_and_tracebacks_are_redacted() -> None:
    formatter = RedactingFormatter(secrets=["sk-abcdef"])
    try:
        raise RuntimeError("POST http://bob:hunter2pass@llm/v1 with key sk-abcdef")
    except RuntimeError:
        record = logging.LogRecord(
            "apollo", logging.ERROR, __file__, 1, "calling %s", ("http://u:p4ss@h/",), None
        )
        import sys

        record.exc_info = sys.exc_info()
    line = formatter.format(record)
    assert "hunter2pass" not in line and "sk-abcdef" not in line and "p4ss" not in line
    assert "calling http://***@h/" in line and "RuntimeError" in line


def test_errors_shown_to_callers_never_show_credentials() -> None:
    """What an HTTP response or an RPC reply says about a failure is redacted too."""
    shown = message_of(TransportError(f"http://bob:{'hunter2pass'}@llm/v1 failed"))
    assert "http://***@llm/v1 failed" == shown


# --------------------------------------------------------------------------- embedder


def _random_words(count: int, length: int) -> str:
    rng = np.random.default_rng(7)
    letters = rng.integers(0, 26, size=(count, length))
    return " ".join("".join(chr(97 + c) for c in row) for row in letters)


def test_the_word_cache_is_bounded_by_memory_not_by_count() -> None:
    """Long words are never cached; many distinct short words fill at most CACHE_BYTES."""
    embedder = HashingEmbedder()
    embedder.embed_sync([_random_words(200, CACHED_WORD_CHARS + 1)])
    assert 0 == embedder.cached_bytes
    for _ in range(3):
        embedder.embed_sync([_random_words(60_000, 8)])
        assert 0 < embedder.cached_bytes <= CACHE_BYTES


def test_embedding_with_a_full_cache_gives_the_same_vectors() -> None:
    text = _random_words(50, 6)
    fresh = HashingEmbedder().embed_sync([text])
    warmed = HashingEmbedder()
    warmed.embed_sync([_random_words(60_000, 8)])
    assert np.array_equal(fresh, warmed.embed_sync([text]))


class _ObservedHashing(HashingEmbedder):
    """Records the thread each batch is hashed on, and holds the first batch until told."""

    def __init__(self) -> None:
        super().__init__(dimension=8)
        self.threads: list[int] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed_sync(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.threads.append(threading.get_ident())
        self.entered.set()
        assert self.release.wait(10), "never released"
        return super().embed_sync(texts)


async def test_hashing_runs_off_the_event_loop() -> None:
    """While a batch is being hashed, the event loop keeps serving other work."""
    embedder = _ObservedHashing()
    pending = asyncio.ensure_future(embedder.embed(["a long text"]))
    assert await asyncio.to_thread(embedder.entered.wait, 10)
    await asyncio.sleep(0)  # the loop is free: this returns while the hashing is held
    embedder.release.set()
    (vector,) = await pending
    assert 8 == len(vector)
    assert threading.get_ident() not in embedder.threads


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b'{"a":' + b"9" * 5_000 + b"}", "more than 4,300 digits"),
        (b'{"a":1e999}', "too large to represent"),
        (b'{"a":[-1e999]}', "too large to represent"),
    ],
)
def test_json_numbers_nobody_can_hold_are_refused_without_server_internals(
    raw: bytes, fragment: str
) -> None:
    """A 5,000-digit integer used to be refused with Python's own advice
    (``sys.set_int_max_str_digits``); ``1e999`` used to be read as an infinity."""
    with pytest.raises(ValidationError) as caught:
        decode_json(raw)
    assert fragment in caught.value.message
    assert "sys." not in caught.value.message


def test_json_numbers_at_the_digit_bound_are_read() -> None:
    assert [int("9" * 4_300), 1.5, -12] == decode_json(b"[" + b"9" * 4_300 + b",1.5,-12]")


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ('{"content":"x","access_scope":"private","access_scope":"global"}', "access_scope"),
        ('{"context":{"a":{"b":[1,{"c":1,"c":2}]}}}', "c"),
        ('[{"k":1,"k":1}]', "k"),
        ('{"a\\u0000":1,"a":2}', "a"),  # one key once NUL is stripped
    ],
)
def test_a_key_given_twice_at_any_depth_is_refused_naming_it(raw: str, key: str) -> None:
    with pytest.raises(ValidationError, match=f"body: holds the key '{key}' more than once"):
        decode_json(raw)


def test_the_same_key_in_sibling_objects_is_not_a_duplicate() -> None:
    assert decode_json('{"a":{"k":1},"b":{"k":2}}') == {"a": {"k": 1}, "b": {"k": 2}}


def test_a_bus_command_with_a_key_given_twice_is_refused() -> None:
    raw = (
        b'{"v":1,"action":"store","action":"delete",'
        b'"payload":{"content":"x","access_scope":"private"}}'
    )
    with pytest.raises(ValidationError, match="'action' more than once"):
        decode_command(raw)
