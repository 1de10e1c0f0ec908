"""The text splitter port: the statements a text or conversation is made of (``store_text``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..episodes import Statement, Turn


@runtime_checkable
class TextSplitter(Protocol):
    """Splits the turns of a text into statements, in order (docs/texts.md).

    ``split`` returns :class:`~apollo_domain.episodes.Statement` values whose ``turn`` is
    the index of the turn each came from (its speaker and time are that turn's). Raises only
    :class:`~apollo_domain.errors.ApolloError` types: ``store_text`` stores nothing when
    the split fails (a language model that times out, fails or answers what cannot be
    used: :class:`~apollo_domain.errors.TransportError`).
    """

    async def split(self, turns: Sequence[Turn]) -> list[Statement]: ...


__all__ = ["TextSplitter"]
