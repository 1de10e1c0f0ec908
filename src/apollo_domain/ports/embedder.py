"""The embedder port: texts to vectors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors. All vectors of one store share ``model_id`` and ``dimension``.

    ``embed`` returns one vector per text, in order, each of length ``dimension``.
    Raises :class:`EmbeddingError` on failure.

    An embedder may also declare ``relevance_floor`` (a float, or None): the cosine under
    which its query matches say nothing, calibrated per model; and ``relevance_rule`` (a
    mapping of retrieval settings, or None): the rest of its relevance rule, the standout
    and the floor of a store of a few entries (:mod:`apollo_domain.retrieval`). The
    composition root makes them the retrieval settings' unless a floor is configured.
    """

    model_id: str
    dimension: int

    async def embed(self, texts: Sequence[str]) -> list[Sequence[float]]: ...


__all__ = ["Embedder"]
