"""The bounds table on every store: each row's over-limit input is refused with a
ValidationError naming the field, and writes nothing; content identity folds every
default-ignorable code point; content must show something; domains fold like tags; an
``as_of`` past the representable range is bad input, not a crash."""

from __future__ import annotations

import pytest

from apollo_app import Principal, ValidationError
from apollo_domain import bounds as b
from apollo_domain import commands as c
from apollo_domain.model import Outcome, Role
from tests.bounds_cases import CASES, FIELD_CASES, Case
from tests.support import footprint

ADMIN = Principal("bounds-admin", role=Role.ADMIN)


def test_every_bound_has_an_over_limit_case() -> None:
    """A new row of the table needs its over-limit input here (and so on every edge)."""
    assert [bound.name for bound in b.BOUNDS] == list(CASES)


@pytest.mark.parametrize("case", FIELD_CASES, ids=lambda case: case.id)
async def test_an_over_limit_input_is_refused_naming_the_field(make_apollo, case: Case):
    """Never truncated nor cut: refused before anything is written, on both stores."""
    apollo = await make_apollo()
    await apollo.client("claude-seed").store_knowledge(content="Kafka partitions order data")
    before = await footprint(apollo)
    with pytest.raises(ValidationError) as caught:
        await apollo.client("claude-bounds", ADMIN).run(case.command())
    assert case.field == caught.value.field, caught.value.message
    assert len(caught.value.message) < 500  # the input is never echoed back whole
    assert before == await footprint(apollo)


async def test_source_fields_at_their_bounds_are_stored_whole(make_apollo):
    apollo = await make_apollo()
    client = apollo.client("a" * b.AGENT_ID.limit)
    result = await client.store_knowledge(
        content="bounded source fields",
        source_provider="p" * b.PROVIDER.limit,
        source_channel="c" * b.CHANNEL.limit,
        submitted_by="s" * b.SUBMITTED_BY.limit,
        submitted_from="f" * b.SUBMITTED_FROM.limit,
        context={"k": "x" * (b.CONTEXT_BYTES.limit - len('{"k":""}'))},
    )
    entry = await apollo.get_entry(result.entry_id)
    source = entry.source
    assert (
        "a" * b.AGENT_ID.limit,
        "p" * b.PROVIDER.limit,
        "c" * b.CHANNEL.limit,
        "s" * b.SUBMITTED_BY.limit,
        "f" * b.SUBMITTED_FROM.limit,
    ) == (
        source.agent_id,
        source.provider,
        source.channel,
        source.submitted_by,
        source.submitted_from,
    )
    assert b.CONTEXT_BYTES.limit - 8 == len(entry.source_context["k"])


# ----------------------------------------------------------------------- content identity


@pytest.mark.parametrize(
    "mark",
    ["\u00ad", "\u034f", "\ufe0f", "\u061c", "\u180e", "\u2064", "\U000e0020"],
    ids=["soft-hyphen", "cgj", "variation-selector", "alm", "mvs", "invisible-plus", "tag"],
)
async def test_a_writers_own_text_with_a_default_ignorable_mark_is_deduplicated(
    make_apollo, mark: str
):
    """The copy is the same entry (``exact duplicate``), not a new one."""
    apollo = await make_apollo()
    client = apollo.client("claude-writer")
    text = "Kafka partitions keep messages in order"
    first = await client.store_knowledge(content=text)
    copy = await client.store_knowledge(content=text.replace("in order", f"in or{mark}der"))
    assert (Outcome.CREATED, Outcome.DEDUPLICATED) == (first.outcome, copy.outcome)
    assert first.entry_id == copy.entry_id
    assert 1 == (await apollo.stats()).total


@pytest.mark.parametrize("content", ["\u200b\u200d\ufeff", "\u00ad\u034f", " \u2060\t\ufe0f"])
async def test_content_that_shows_nothing_is_refused(make_apollo, content: str):
    apollo = await make_apollo()
    before = await footprint(apollo)
    with pytest.raises(ValidationError) as caught:
        await apollo.client("claude-invisible").store_knowledge(content=content)
    assert "content" == caught.value.field
    assert before == await footprint(apollo)


async def test_a_full_width_domain_is_its_ascii_domain(make_apollo):
    apollo = await make_apollo()
    result = await apollo.client("claude-wide").store_knowledge(
        content="Kafka keeps offsets per consumer group", knowledge_domain="ｋａｆｋａ"
    )
    assert "kafka" == (await apollo.get_entry(result.entry_id)).knowledge_domain


# ------------------------------------------------------------------------------- as_of


@pytest.mark.parametrize(
    "as_of", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "9999-12-31T23:00-01:00"]
)
async def test_an_as_of_past_the_representable_range_is_refused(make_apollo, as_of: str):
    """A zone that shifts the last (or first) representable day past its edge used to
    overflow (a 500 on HTTP)."""
    apollo = await make_apollo()
    await apollo.client("claude-graph").store_knowledge(content="Dana Wu works at Initech")
    with pytest.raises(ValidationError) as caught:
        await apollo.run(c.GetEntityHistory(name="Initech", as_of=as_of))
    assert "as_of" == caught.value.field


@pytest.mark.parametrize(
    "command",
    [
        c.GetAgentProfile(target_agent_id="x" * (b.AGENT_ID.limit + 1)),
        c.GetSource(target_agent_id="x" * (b.AGENT_ID.limit + 1)),
        c.LabelSource(target_agent_id="x" * (b.AGENT_ID.limit + 1), label="troll"),
        c.UnlabelSource(target_agent_id="x" * (b.AGENT_ID.limit + 1)),
        c.EraseAgent(target_agent_id="x" * (b.AGENT_ID.limit + 1)),
    ],
    ids=lambda command: type(command).__name__,
)
async def test_an_agent_a_command_is_about_is_bounded_like_any_agent_id(make_apollo, command):
    """No source has an agent id over the bound, so none is looked up, labelled or erased:
    refused like an agent id anywhere else, and nothing is written."""
    apollo = await make_apollo()
    before = await footprint(apollo)
    with pytest.raises(ValidationError) as caught:
        await apollo.run(command, principal=ADMIN)
    assert "agent_id" == caught.value.field
    assert before == await footprint(apollo)


async def test_an_expertise_domain_is_bounded_like_a_domain(make_apollo):
    apollo = await make_apollo()
    with pytest.raises(ValidationError) as caught:
        await apollo.run(c.GetExpertise(domain="d" * (b.DOMAIN.limit + 1)))
    assert "domain" == caught.value.field


async def test_a_gas_events_caller_is_bounded_like_an_agent_id(make_apollo):
    """The event's ``caller`` attributes its deposits: over the bound it is refused naming
    ``caller`` (it used to be cut to 100 characters), and nothing is deposited."""
    apollo = await make_apollo()
    before = await footprint(apollo)
    event = {
        "request_id": "r-caller",
        "response_content": "Kafka partitions keep messages in order",
        "caller": {"agent_id": "x" * (b.AGENT_ID.limit + 1)},
    }
    with pytest.raises(ValidationError) as caught:
        await apollo.run(c.ProcessGasEvent(event=event), principal=ADMIN)
    assert "caller" == caught.value.field
    assert before == await footprint(apollo)


async def test_a_context_keeps_only_text_a_store_can_hold(make_apollo):
    """NUL characters and lone surrogates in a library caller's context are dropped, keys
    included (PostgreSQL's JSON cannot hold them: it used to fail the ingest)."""
    apollo = await make_apollo()
    result = await apollo.client("claude-ctx").store_knowledge(
        content="a context with unstorable text",
        context={"k\x00": "a\ud800b\x00c", "list": ["\udc00x"]},
    )
    entry = await apollo.get_entry(result.entry_id)
    assert {"k": "abc", "list": ["x"]} == dict(entry.source_context)
