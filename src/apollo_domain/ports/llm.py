"""The language model port behind GAS (knowledge from LLM audit events)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class GasLanguageModel(Protocol):
    """The language model behind GAS (knowledge from LLM audit events).

    - ``comprehend`` → ``[{content, content_type}]`` facts stated by the response.
    - ``relate`` → ``[{relation_type, confidence}]`` from ``fact`` to ``candidate``.
    - ``synthesize`` → ``[{content, content_type, source_indices}]`` over the facts.
    - ``anticipate`` → questions the facts suggest will be asked next.
    """

    async def comprehend(
        self, messages: Sequence[Mapping[str, Any]], response: str
    ) -> list[Mapping[str, Any]]: ...

    async def relate(self, fact: str, candidate: str) -> list[Mapping[str, Any]]: ...

    async def synthesize(self, facts: Sequence[str]) -> list[Mapping[str, Any]]: ...

    async def anticipate(self, facts: Sequence[str]) -> list[str]: ...


__all__ = ["GasLanguageModel"]
