"""A deterministic, model-free embedder: signed feature hashing of words and trigrams.

Features of the lowercased text (split into word tokens, which also collapses
whitespace and drops punctuation):

- word unigrams (weight ``UNIGRAM_WEIGHT``),
- word bigrams (weight ``BIGRAM_WEIGHT``),
- character trigrams of each space-padded word (weight ``TRIGRAM_WEIGHT`` each), so
  inflections and typos stay close.

Unigrams and trigrams are hashed with BLAKE2b (stable across processes and machines,
unlike ``hash()``); a bigram's hash mixes its two words' BLAKE2b keys with SplitMix64.
The low 63 bits pick the dimension, the top bit the sign. Rows are L2-normalized float32.
Per-word features are cached (bounded by an estimate of their memory, ``CACHE_BYTES``;
words longer than ``CACHED_WORD_CHARS`` are never cached), bigrams are computed in numpy,
so embedding runs at tens of thousands of short texts per second on one core. The async
:meth:`HashingEmbedder.embed` hashes in a worker thread, so a long text never blocks the
event loop.

A text without any word character (``"!!!"``) is hashed as its stripped self; an empty
or whitespace-only text embeds to one fixed unit vector (the reserved feature
``EMPTY_FEATURE``), so every output is a unit vector and equal inputs embed equally.
"""

from __future__ import annotations

import asyncio
import re
import sys
import threading
from collections.abc import Sequence
from hashlib import blake2b

import numpy as np
import numpy.typing as npt

from .floors import HASHING_RELEVANCE_FLOORS

UNIGRAM_WEIGHT = 1.0
BIGRAM_WEIGHT = 0.8
TRIGRAM_WEIGHT = 0.35
EMPTY_FEATURE = "\x00empty"

#: The memory the per-word feature cache may hold (an estimate); when full it starts over.
CACHE_BYTES = 32 * 1024 * 1024
#: Longer words (identifiers, hashes, junk) are hashed every time, never cached.
CACHED_WORD_CHARS = 40

_WORD = re.compile(r"\w+")
# The memory of one cached feature: a list slot plus an int (index) or a float (weight).
_FEATURE_BYTES = 2 * 8 + sys.getsizeof(2**62) + sys.getsizeof(1.0)
_ENTRY_BYTES = 300  # dict slot, tuple, key int and the two lists' headers

# A word's 64-bit key plus its features (unigram and trigrams) as index / signed weight lists.
_Features = tuple[int, list[int], list[float]]


#: The model id of a hashing embedder is this, then its dimension.
MODEL_ID_PREFIX = "apollo-hashing-v1-"


class HashingEmbedder:
    """Signed feature hashing into ``dimension`` floats. No model, no I/O, deterministic.

    ``embed_sync`` is the fast path (a numpy matrix, blocking); ``embed`` runs it in a
    worker thread for the :class:`~apollo_domain.ports.Embedder` port and returns lists of
    floats. Safe to call from several threads at once.
    """

    def __init__(self, dimension: int = 384) -> None:
        if dimension < 2:
            raise ValueError("dimension must be at least 2")
        self.dimension = dimension
        self.model_id = f"{MODEL_ID_PREFIX}{dimension}"
        #: The cosine under which a query's match says nothing (None: not calibrated for
        #: this dimension).
        self.relevance_floor: float | None = HASHING_RELEVANCE_FLOORS.get(dimension)
        self._words: dict[str, _Features] = {}
        self._cached_bytes = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"HashingEmbedder(dimension={self.dimension})"

    @property
    def cached_bytes(self) -> int:
        """The estimated memory of the per-word feature cache (at most ``CACHE_BYTES``)."""
        return self._cached_bytes

    async def embed(self, texts: Sequence[str]) -> list[Sequence[float]]:
        if not texts:
            return []
        matrix: list[Sequence[float]] = (await asyncio.to_thread(self.embed_sync, texts)).tolist()
        return matrix

    def embed_sync(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One L2-normalized float32 row per text, shape ``(len(texts), dimension)``."""
        with self._lock:
            return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        count = len(texts)
        dimension = self.dimension
        if count == 0:
            return np.zeros((0, dimension), dtype=np.float32)
        indices: list[int] = []
        weights: list[float] = []
        feature_counts: list[int] = []
        word_keys: list[int] = []
        word_counts: list[int] = []
        cache = self._words
        word_features = self._word_features
        for text in texts:
            start = len(indices)
            lowered = text.lower()
            words = _WORD.findall(lowered)
            if not words:
                stripped = " ".join(lowered.split())
                words = [stripped] if stripped else [EMPTY_FEATURE]
            for word in words:
                key, word_indices, word_weights = cache.get(word) or word_features(word)
                word_keys.append(key)
                indices.extend(word_indices)
                weights.extend(word_weights)
            feature_counts.append(len(indices) - start)
            word_counts.append(len(words))
        rows = np.arange(count, dtype=np.int64)
        flat = [np.repeat(rows * dimension, feature_counts) + np.asarray(indices, np.int64)]
        values = [np.asarray(weights, dtype=np.float64)]
        bigrams = self._bigrams(np.asarray(word_keys, dtype=np.uint64), rows, word_counts)
        if bigrams is not None:
            flat.append(bigrams[0])
            values.append(bigrams[1])
        dense = np.bincount(
            np.concatenate(flat), weights=np.concatenate(values), minlength=count * dimension
        )
        matrix = dense.reshape(count, dimension)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        # A zero row needs features cancelling exactly; give it the empty text's vector
        # rather than emit a zero vector.
        zero = norms[:, 0] == 0.0
        if zero.any():
            matrix[zero] = self._empty_row()
            norms[zero] = 1.0
        normalized: npt.NDArray[np.float32] = (matrix / norms).astype(np.float32)
        return normalized

    def _bigrams(
        self, keys: npt.NDArray[np.uint64], rows: npt.NDArray[np.int64], word_counts: list[int]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]] | None:
        """Flat (row · dimension + index) positions and signed weights of the word bigrams.

        A bigram's hash mixes its two words' BLAKE2b keys with SplitMix64 in uint64
        arithmetic: stable everywhere, and no per-bigram Python work.
        """
        if len(keys) < 2:
            return None
        owner = np.repeat(rows, word_counts)
        same_text = owner[:-1] == owner[1:]
        if not same_text.any():
            return None
        mixed = _splitmix64((keys[:-1][same_text] * _GOLDEN) ^ keys[1:][same_text])
        index = ((mixed & _LOW_63) % np.uint64(self.dimension)).astype(np.int64)
        sign = np.where(mixed >> np.uint64(63), -BIGRAM_WEIGHT, BIGRAM_WEIGHT)
        return owner[:-1][same_text] * self.dimension + index, sign

    def _empty_row(self) -> npt.NDArray[np.float64]:
        row = np.zeros(self.dimension, dtype=np.float64)
        value = _digest(EMPTY_FEATURE)
        row[(value & 0x7FFF_FFFF_FFFF_FFFF) % self.dimension] = -1.0 if value >> 63 else 1.0
        return row

    def _word_features(self, word: str) -> _Features:
        """The word's key (for bigrams) and its unigram and trigram features, cached unless
        the word is long; a cache that would outgrow ``CACHE_BYTES`` starts over."""
        dimension = self.dimension
        key = _digest("w:" + word)
        indices = [(key & 0x7FFF_FFFF_FFFF_FFFF) % dimension]
        weights = [-UNIGRAM_WEIGHT if key >> 63 else UNIGRAM_WEIGHT]
        padded = f" {word} "
        for i in range(len(padded) - 2):
            value = _digest("c:" + padded[i : i + 3])
            indices.append((value & 0x7FFF_FFFF_FFFF_FFFF) % dimension)
            weights.append(-TRIGRAM_WEIGHT if value >> 63 else TRIGRAM_WEIGHT)
        features = (key, indices, weights)
        if len(word) <= CACHED_WORD_CHARS:
            cost = _ENTRY_BYTES + sys.getsizeof(word) + len(indices) * _FEATURE_BYTES
            if self._cached_bytes + cost > CACHE_BYTES:
                self._words.clear()
                self._cached_bytes = 0
            self._words[word] = features
            self._cached_bytes += cost
        return features


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_LOW_63 = np.uint64(0x7FFF_FFFF_FFFF_FFFF)


def _splitmix64(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    result: npt.NDArray[np.uint64] = z ^ (z >> np.uint64(31))
    return result


def _digest(feature: str) -> int:
    """A feature's stable 64-bit hash: low 63 bits pick the index, the top bit the sign."""
    return int.from_bytes(
        blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little"
    )


__all__ = ["HashingEmbedder"]
