"""An LRU cache in front of any embedder, keyed by sha256(model id + text)."""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np

from apollo_domain.errors import EmbeddingError
from apollo_domain.ports import Embedder


class CachingEmbedder:
    """Remembers up to ``max_entries`` vectors; only the misses of a call reach ``inner``,
    in one batch (each distinct text once). ``hits`` and ``misses`` count texts.

    The inner embedder's output is checked: a wrong count or dimension raises
    :class:`EmbeddingError` and nothing is cached.
    """

    def __init__(self, inner: Embedder, max_entries: int = 10_000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.inner = inner
        self.max_entries = max_entries
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        #: The inner embedder's calibrated relevance floor, if it declares one.
        self.relevance_floor: float | None = getattr(inner, "relevance_floor", None)
        #: And the rest of its relevance rule.
        self.relevance_rule: Mapping[str, float] | None = getattr(inner, "relevance_rule", None)
        self.hits = 0
        self.misses = 0
        self._vectors: OrderedDict[bytes, tuple[float, ...]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._vectors)

    def __repr__(self) -> str:
        return f"CachingEmbedder({self.inner!r}, max_entries={self.max_entries})"

    async def embed(self, texts: Sequence[str]) -> list[Sequence[float]]:
        keys = [self._key(text) for text in texts]
        found: dict[bytes, tuple[float, ...]] = {}
        missing: dict[bytes, str] = {}
        for key, text in zip(keys, texts, strict=True):
            vector = self._vectors.get(key)
            if vector is not None:
                self._vectors.move_to_end(key)
                found[key] = vector
                self.hits += 1
            else:
                missing.setdefault(key, text)
                self.misses += 1
        if missing:
            vectors = await self.inner.embed(list(missing.values()))
            fresh = self._checked(vectors, len(missing))
            for key, vector in zip(missing, fresh, strict=True):
                found[key] = vector
                self._remember(key, vector)
        return [found[key] for key in keys]

    def clear(self) -> None:
        self._vectors.clear()

    def _key(self, text: str) -> bytes:
        raw = f"{self.model_id}\0{text}".encode("utf-8", "surrogatepass")
        return hashlib.sha256(raw).digest()

    def _remember(self, key: bytes, vector: tuple[float, ...]) -> None:
        self._vectors[key] = vector
        self._vectors.move_to_end(key)
        while len(self._vectors) > self.max_entries:
            self._vectors.popitem(last=False)

    def _checked(self, vectors: object, expected: int) -> list[tuple[float, ...]]:
        if isinstance(vectors, np.ndarray) and vectors.ndim == 2:
            vectors = list(vectors)
        if not isinstance(vectors, Sequence) or len(vectors) != expected:
            got = len(vectors) if isinstance(vectors, Sequence) else type(vectors).__name__
            raise EmbeddingError(f"{self.model_id}: expected {expected} vectors, got {got}")
        checked: list[tuple[float, ...]] = []
        for vector in vectors:
            if isinstance(vector, np.ndarray):
                vector = vector.tolist()
            try:
                values = tuple(vector)
                total = sum(values, 0.0)
            except (TypeError, ValueError) as exc:
                raise EmbeddingError(f"{self.model_id}: a vector is not numeric") from exc
            if not math.isfinite(total):
                raise EmbeddingError(f"{self.model_id}: a vector is not finite")
            if len(values) != self.dimension:
                raise EmbeddingError(
                    f"{self.model_id}: expected dimension {self.dimension}, got {len(values)}"
                )
            checked.append(values)
        return checked


__all__ = ["CachingEmbedder"]
