"""Hostile input on every store: refused with a ValidationError naming the field, nothing
written, and the same answer from the in-memory and the PostgreSQL store. Plus the bounds
that shape results: traversal cap, archived entries never boosted, full-precision
confidences."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence, Set

import attrs
import pytest

from apollo_app import Status, ValidationError
from apollo_domain.commands import DeprecateEntry
from apollo_domain.limits import MAX_QUERY_CHARS, MAX_RELATED
from apollo_domain.normalize import BIDI_CONTROLS, MAX_TAG_CHARS
from apollo_domain.policy import ConfidencePolicy
from apollo_domain.traversal import DECAY_PER_HOP
from apollo_domain.validation import MAX_JSON_DEPTH
from tests.support import KeyedEmbedder, ScriptedLLM, at_cosine, footprint, nested

RANDOM_LETTERS = "".join(chr(ord("a") + (i * 7919) % 26) for i in range(2_700))


async def _refused(apollo, call) -> str:
    """The field the ValidationError of ``call()`` names; asserts nothing was written."""
    before = await footprint(apollo)
    with pytest.raises(ValidationError) as caught:
        await call()
    assert before == await footprint(apollo)
    return caught.value.field


# --------------------------------------------------------------------------- ingest bounds


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"tags": [RANDOM_LETTERS]}, "tags"),
        ({"tags": ["python", "x" * (MAX_TAG_CHARS + 1)]}, "tags"),
        ({"knowledge_domain": RANDOM_LETTERS}, "knowledge_domain"),
        ({"context": nested(MAX_JSON_DEPTH + 1)}, "context"),
        ({"context": nested(969)}, "context"),
    ],
)
async def test_an_ingest_with_an_unindexable_or_too_deep_field_is_refused(
    make_apollo, arguments, field
):
    """A tag or domain of thousands of letters would break a database index (the
    PostgreSQL store used to answer 503); a deep context would exhaust the stack. Both
    stores refuse them before anything is written."""
    apollo = await make_apollo()
    client = apollo.client("claude-hostile")
    assert field == await _refused(
        apollo, lambda: client.store_knowledge(content="hostile input", **arguments)
    )


async def test_the_longest_tag_domain_and_context_are_stored_as_given(make_apollo):
    apollo = await make_apollo()
    tag, domain = "t" * MAX_TAG_CHARS, "d" * MAX_TAG_CHARS
    result = await apollo.client("claude-bounds").store_knowledge(
        content="bounded but allowed",
        tags=[tag, "Padded!!!" + "?" * 200],
        knowledge_domain=domain,
        context=nested(MAX_JSON_DEPTH),
    )
    entry = await apollo.get_entry(result.entry_id)
    assert ((tag, "padded"), domain) == (entry.tags, entry.knowledge_domain)
    assert nested(MAX_JSON_DEPTH) == dict(entry.source_context)
    assert 64 == len(entry.content_hash)  # the unique index keys on a fixed-size hash


async def test_a_long_content_hashes_to_the_same_fixed_size_key(make_apollo):
    apollo = await make_apollo()
    result = await apollo.client("claude-long").store_knowledge(content="word " * 19_999)
    assert 64 == len((await apollo.get_entry(result.entry_id)).content_hash)


async def test_bidirectional_controls_are_neither_stored_nor_returned(make_apollo):
    """An override that shows the text's end before its start ("Trojan Source") is
    removed; the direction marks and right-to-left letters are kept; content of nothing
    but such controls is refused as invisible."""
    apollo = await make_apollo()
    client = apollo.client("claude-bidi")
    result = await client.store_knowledge(
        content="grant \u202euser\u202c to \u2067שלום\u2069 \u200fread\u200e"
    )
    entry = await apollo.get_entry(result.entry_id)
    assert "grant user to שלום \u200fread\u200e" == entry.content
    field = await _refused(
        apollo, lambda: client.store_knowledge(content="\u202a\u202b\u202d\u2066\u2068")
    )
    assert "content" == field


def _strings(value: object) -> list[str]:
    """Every string in ``value`` (attrs values, mappings, sequences), keys included."""
    if isinstance(value, str):
        return [value]
    if attrs.has(type(value)):
        return _strings(attrs.asdict(value, recurse=False))
    if isinstance(value, Mapping):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, Sequence | Set):
        return [s for item in value for s in _strings(item)]
    return []


TROJAN = "grant \u202euser\u202c to \u2067שלום\u2069 \u200fread\u200e"
TROJAN_STORED = "grant user to שלום \u200fread\u200e"


async def test_no_stored_string_keeps_a_bidirectional_control(make_apollo):
    """Context keys and values at any depth, tags, domain, source fields and the
    deprecation reason (in the entry and in the access log) go through the one cleaning
    path: the controls go, the direction marks and right-to-left letters stay."""
    apollo = await make_apollo()
    client = apollo.client("claude-bidi\u202e")
    result = await client.store_knowledge(
        content="bidirectional controls in every field",
        tags=["kafka\u202e", "\u2066ops\u2069"],
        knowledge_domain="infra\u202b",
        context={"note\u202e": TROJAN, "deep": [{"k": [TROJAN, 1]}], "n": 2},
        source_provider="claude\u202d",
        source_channel="chan\u2068nel\u2069",
    )
    entry = await apollo.get_entry(result.entry_id)
    assert ("kafka", "ops") == entry.tags
    assert "infra" == entry.knowledge_domain
    assert ("claude-bidi", "claude", "channel") == (
        entry.source.agent_id,
        entry.source.provider,
        entry.source.channel,
    )
    assert {"note": TROJAN_STORED, "deep": [{"k": [TROJAN_STORED, 1]}], "n": 2} == {
        k: v for k, v in entry.source_context.items() if k in ("note", "deep", "n")
    }
    await client.deprecate_entry(result.entry_id, reason=f"because {TROJAN}")
    archived = await apollo.get_entry(result.entry_id)
    assert f"because {TROJAN_STORED}" == archived.source_context["deprecation_reason"]
    async with apollo.store.unit_of_work() as uow:
        logged = await uow.access_log.for_agent("claude-bidi")
    every = _strings(archived) + _strings(logged)
    assert any("\u200f" in text for text in every)  # the marks are kept
    assert [] == [text for text in every if BIDI_CONTROLS.search(text)]


async def test_context_keys_that_become_one_once_cleaned_are_refused(make_apollo):
    """``{"a\u202e": 1, "a": 2}`` would silently keep one value once the control goes."""
    apollo = await make_apollo()
    client = apollo.client("claude-keys")
    for context in ({"a\u202e": 1, "a": 2}, {"x": {"b\u2066": 1, "b\u2069": 2}}):

        def store(given=context):
            return client.store_knowledge(content="two keys", context=given)

        assert "context" == await _refused(apollo, store)


# --------------------------------------------------------------------------- query bounds


async def _seeded(make_apollo):
    embedder = KeyedEmbedder(16)
    apollo = await make_apollo(embedder=embedder)
    base = embedder.basis(0)
    embedder.set("query about kafka", base)
    ids = []
    for i, text in enumerate(["kafka orders partitions", "kafka replicates logs"]):
        embedder.set(text, at_cosine(base, 0.9 - i / 10, i + 1))
        result = await apollo.client(f"agent-{i}").store_knowledge(content=text, tags=["kafka"])
        ids.append(result.entry_id)
    return apollo, ids


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"tags": ["!!!", "   "]}, "tags"),
        ({"knowledge_domain": "???"}, "knowledge_domain"),
        ({"knowledge_domain": ""}, "knowledge_domain"),
        ({"query": "kafka " * (MAX_QUERY_CHARS // 6 + 1)}, "query"),
    ],
)
async def test_a_query_with_a_filter_that_normalizes_to_nothing_or_too_long_is_refused(
    make_apollo, arguments, field
):
    """Dropping such a filter used to return unfiltered results (and boost them)."""
    apollo, _ = await _seeded(make_apollo)
    reader = apollo.client("reader")
    query = {"query": "query about kafka", **arguments}
    assert field == await _refused(apollo, lambda: reader.query_knowledge(**query))


async def test_archived_entries_are_returned_but_never_boosted_counted_or_logged(make_apollo):
    apollo, (first, second) = await _seeded(make_apollo)
    await apollo.run(DeprecateEntry(entry_id=str(first), reason="superseded"))
    archived = await apollo.get_entry(first)
    async with apollo.store.unit_of_work() as uow:
        logged = await uow.access_log.count("query")

    result = await apollo.client("reader").query_knowledge(
        query="query about kafka", status=["archived", "candidate"], min_confidence=0
    )
    by_id = {view.id: view for view in result.entries}
    assert {first, second} == set(by_id)
    assert archived.confidence == by_id[first].confidence
    after = await apollo.get_entry(first)
    assert (archived.confidence, archived.access_count) == (after.confidence, after.access_count)
    assert Status.ARCHIVED is after.status
    boosted = await apollo.get_entry(second)
    assert (0.52, 1) == (boosted.confidence, boosted.access_count)
    async with apollo.store.unit_of_work() as uow:
        assert logged + 1 == await uow.access_log.count("query")  # the candidate's row only


# --------------------------------------------------------------------------- precision


async def test_confidence_round_trips_at_full_precision(make_apollo):
    """0.5 + 0.02 is stored and read back as exactly 0.52, not 0.5199999...; so is a
    policy's initial confidence and a relation's weight."""
    apollo, (first, second) = await _seeded(make_apollo)
    await apollo.client("reader").query_knowledge(query="query about kafka", min_confidence=0)
    assert 0.52 == (await apollo.get_entry(first)).confidence
    precise = await make_apollo(policy=ConfidencePolicy(initial_confidence=0.52))
    stored = await precise.client("claude-precise").store_knowledge(content="precise")
    assert 0.52 == (await precise.get_entry(stored.entry_id)).confidence
    await apollo.client("curator").link_entries(first, second, "depends_on", 0.52)
    (related,) = await apollo.client("curator").related_entries(first, depth=1)
    assert DECAY_PER_HOP * 0.52 == related.activation


# --------------------------------------------------------------------------- traversal cap


async def test_a_traversal_returns_at_most_the_cap_highest_activation_first(make_apollo):
    apollo = await make_apollo(embedder=KeyedEmbedder(64))
    client = apollo.client("claude-graph")
    root = (await client.store_knowledge(content="the hub entry")).entry_id
    results = await client.store_many(
        [{"content": f"spoke number {i} of the hub"} for i in range(MAX_RELATED + 20)]
    )
    spokes = [r.entry_id for r in results]
    assert None not in spokes
    weights = [1.0 - i / 200 for i in range(len(spokes))]
    for spoke, weight in zip(spokes, weights, strict=True):
        await client.link_entries(root, spoke, "has_a", weight)

    related = await apollo.client("reader").related_entries(root, depth=1)
    assert spokes[:MAX_RELATED] == [r.id for r in related]
    assert all(a.activation >= b.activation for a, b in itertools.pairwise(related))


# --------------------------------------------------------------------------- GAS


@pytest.mark.parametrize("confidence", [math.nan, 4.2, -0.5, "very"])
async def test_gas_relations_with_an_invalid_confidence_are_skipped_and_counted(
    make_apollo, confidence
):
    """An LLM's NaN or 4.2 would become an edge weight (activation 4.2): never stored."""
    embedder = KeyedEmbedder(16)
    base = embedder.basis(0)
    embedder.set("OSPF is a link-state protocol.", base)
    embedder.set("IS-IS is a link-state protocol.", at_cosine(base, 0.5, 1))
    llm = ScriptedLLM(default_relation={"relation_type": "similar_to", "confidence": confidence})
    apollo = await make_apollo(embedder=embedder, llm=llm)
    existing = await apollo.client("claude-kb").store_knowledge(
        content="OSPF is a link-state protocol."
    )
    result = await apollo.process_gas_event(
        {"request_id": "req-nan", "response_content": "IS-IS is a link-state protocol."}
    )
    assert (1, 0, 0) == (
        result.deposited["relations_skipped"],
        result.deposited["relations"],
        result.deposited["relations_failed"],
    )
    assert 0 == (await apollo.stats()).total_relations
    assert [] == await apollo.client("reader").related_entries(existing.entry_id)


async def test_a_gas_event_with_an_unindexable_request_id_or_too_deep_is_refused(make_apollo):
    apollo = await make_apollo()
    long_id = {"request_id": "r" * 256, "response_content": "anything"}
    deep = {"request_id": "r-1", "response_content": "anything", "routing": nested(40)}
    assert "request_id" == await _refused(apollo, lambda: apollo.process_gas_event(long_id))
    assert "event" == await _refused(apollo, lambda: apollo.process_gas_event(deep))
