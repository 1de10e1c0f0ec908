"""Causal tokens (:mod:`apollo_domain.causal`): their text, their order, and the scope a
call's commits raise."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from apollo_domain.causal import (
    MAX_POSITION,
    MAX_TOKEN_LENGTH,
    CausalToken,
    causal_scope,
    current_scope,
    format_token,
    latest,
    parse_token,
)
from tests.strategies import causal_tokens, token_texts


@given(causal_tokens)
def test_a_token_reads_back_as_itself(token: CausalToken) -> None:
    """Its text is bounded and canonical: the token it was written from, read again."""
    text = format_token(token)
    assert len(text) <= MAX_TOKEN_LENGTH
    assert token == parse_token(text)


@given(token_texts | st.integers() | st.none() | st.binary(max_size=20))
def test_anything_a_caller_sends_is_a_token_or_none_never_an_error(sent: object) -> None:
    """Garbage is no token; what reads as one writes back as the very same text."""
    token = parse_token(sent)
    event("a token" if token is not None else "no token")
    if token is not None:
        assert sent == format_token(token)


@given(causal_tokens, causal_tokens)
def test_tokens_order_as_their_positions_and_latest_keeps_the_furthest(
    a: CausalToken, b: CausalToken
) -> None:
    assert (a < b) == (a.position < b.position)
    assert max(a.position, b.position) == latest(a, None, b).position  # type: ignore[union-attr]
    event("equal" if a == b else "different")


def test_near_misses_are_no_token() -> None:
    """Upper case, leading zeros, another version, a trailing newline, past 64 bits."""
    for sent in ["C1.FF", "c1.0ff", "c2.ff", "c1.ff\n", "c1.", "c1.1" + "0" * 16, " c1.ff"]:
        assert parse_token(sent) is None, sent
    assert CausalToken(MAX_POSITION) == parse_token("c1." + "f" * 16)
    assert CausalToken(0) == parse_token("c1.0")


def test_a_position_out_of_range_is_refused() -> None:
    for position in (-1, MAX_POSITION + 1):
        with pytest.raises(ValueError, match="causal position"):
            CausalToken(position)


async def test_a_scope_starts_at_what_was_presented_and_only_rises() -> None:
    """A commit heard back late never lowers the scope; tasks the call starts share it;
    outside the call there is no scope."""
    assert current_scope() is None
    with causal_scope("c1.10") as scope:
        assert CausalToken(0x10) == scope.seen
        scope.observe(CausalToken(0x20))

        async def background() -> None:
            current = current_scope()
            assert current is scope
            current.observe(CausalToken(0x18))  # heard back after the later one

        await asyncio.create_task(background())
        assert "c1.20" == scope.token
    assert current_scope() is None
    with causal_scope("not a token") as fresh:
        assert (None, None) == (fresh.seen, fresh.token)
