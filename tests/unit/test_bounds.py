"""The bounds table itself: its rows, the errors they raise, the docs/concepts.md list written from
it,
and the size of a message checked before anything parses it."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from apollo_app.cli.ingest import parse_line
from apollo_app.facade.client import store_many_command
from apollo_app.wire.codec import make_converter
from apollo_app.wire.envelope import (
    decode_command,
    decode_gas_event,
    encode_command,
    encode_gas_event,
)
from apollo_domain.bounds import (
    BOUNDS,
    CONTENT,
    JSON_DEPTH,
    MESSAGE,
    STORE_MANY,
    TAG_COUNT,
    Unit,
)
from apollo_domain.commands import StoreKnowledge
from apollo_domain.errors import ValidationError
from apollo_domain.services.entity_reads import parse_instant
from apollo_domain.validation import shown
from tests.docs_pages import page_path

CONCEPTS = page_path("concepts")
_LISTED = re.compile(r"<!-- bounds:begin[^>]*-->\n(.*?)\n\s*<!-- bounds:end -->", re.DOTALL)


def test_the_readme_lists_exactly_the_table() -> None:
    """The bounds list of docs/concepts.md is the table, row for row (regenerate it from
    ``Bound.describe`` when a row changes)."""
    found = _LISTED.search(CONCEPTS.read_text(encoding="utf-8"))
    assert found is not None, "docs/concepts.md lost its bounds list markers"
    listed = [line.strip().removeprefix("- ") for line in found.group(1).splitlines()]
    assert [bound.describe() for bound in BOUNDS] == listed


def test_rows_are_named_once_and_limits_are_positive() -> None:
    assert len(BOUNDS) == len({bound.name for bound in BOUNDS})
    assert all(bound.limit > 0 and bound.field for bound in BOUNDS)


@pytest.mark.parametrize(
    ("bound", "measure", "message"),
    [
        (CONTENT, 100_001, "is 100,001 characters long; at most 100,000 characters"),
        (TAG_COUNT, 11, "has 11 items; at most 10 items are allowed (tag_count)"),
        (MESSAGE, 3_000_000, "is 3,000,000 bytes; at most 2,097,152 bytes are allowed"),
        (JSON_DEPTH, 33, "is nested more than 32 levels deep"),
    ],
)
def test_an_over_limit_measure_names_the_field_and_the_bound(bound, measure, message) -> None:
    bound.check(bound.limit)  # at the limit: allowed
    with pytest.raises(ValidationError) as caught:
        bound.check(measure)
    assert bound.field == caught.value.field
    assert message in caught.value.message


def test_every_unit_reads_in_an_error() -> None:
    for bound in BOUNDS:
        error = bound.exceeded(bound.limit + 1)
        assert str(bound.limit) in error.message.replace(",", "")
        assert bound.unit is Unit.LEVELS or f"({bound.name})" in error.message


@pytest.mark.parametrize("decode", [decode_command, decode_gas_event])
def test_a_bus_message_over_the_bound_is_refused_before_it_is_parsed(decode) -> None:
    """Not even JSON: the size is what is refused, so no parser ever sees it."""
    with pytest.raises(ValidationError) as caught:
        decode(b"\xff" * (MESSAGE.limit + 1))
    assert MESSAGE.field == caught.value.field


def test_a_cli_line_over_the_bound_is_refused_before_it_is_parsed() -> None:
    with pytest.raises(ValueError, match=r"^message: is 2,097,153 bytes"):
        parse_line("{" * (MESSAGE.limit + 1))


@pytest.mark.parametrize(
    "text", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "9999-12-31T23:30-00:31"]
)
def test_an_instant_a_zone_shifts_out_of_range_is_a_validation_error(text: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_instant("as_of", text)
    assert "as_of" == caught.value.field


def test_the_edges_of_the_range_in_utc_are_instants() -> None:
    assert 9999 == parse_instant("as_of", "9999-12-31T23:59:59+00:00").year  # type: ignore[union-attr]
    assert 1 == parse_instant("as_of", "0001-01-01T00:00:00").year  # type: ignore[union-attr]


def test_echoed_input_is_clipped() -> None:
    assert len(shown("x" * 1_000_000)) < 70
    assert "'abc'" == shown("abc")


def test_a_timestamp_field_a_zone_shifts_out_of_range_is_refused_by_the_codec() -> None:
    with pytest.raises(ValueError, match="representable range"):
        make_converter(forbid_extra_keys=True, round_scores=False).structure(
            "9999-12-31T23:59:59-14:00", datetime
        )


def test_a_client_refuses_a_message_over_the_bound_before_publishing_it() -> None:
    """Client mode refuses what the service would dead-letter, before it is sent."""
    with pytest.raises(ValidationError) as caught:
        encode_command(StoreKnowledge(content="x" * MESSAGE.limit))
    assert MESSAGE.field == caught.value.field
    with pytest.raises(ValidationError) as caught:
        encode_gas_event({"request_id": "r", "response_content": "x" * MESSAGE.limit})
    assert MESSAGE.field == caught.value.field


def test_a_bulk_store_over_the_bound_is_refused_before_anything_is_built() -> None:
    with pytest.raises(ValidationError) as caught:
        store_many_command([{"content": f"item {i}"} for i in range(STORE_MANY.limit + 1)])
    assert "items" == caught.value.field


@given(st.sampled_from(BOUNDS), st.integers(min_value=-3, max_value=3))
def test_a_bound_allows_its_limit_and_refuses_anything_above(bound, offset: int) -> None:
    measure = bound.limit + offset
    if offset > 0:
        event("over the limit: refused")
        with pytest.raises(ValidationError) as caught:
            bound.check(measure)
        assert bound.field == caught.value.field
    else:
        event("at or under the limit: allowed")
        bound.check(measure)
