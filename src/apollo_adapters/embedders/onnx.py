"""A sentence-transformers model run by ONNX Runtime, exported from the local weights.

Needs the ``onnx`` extra (``onnxruntime``, ``onnx``, ``tokenizers``). The first use of a
model folder exports its transformer to an ONNX graph with ``torch.onnx.export`` (torch
and transformers, from the ``sentence`` extra, are needed for that step only) and keeps
it in ``cache_dir``; later uses load the graph from there. Nothing is ever downloaded.

The pipeline is the model folder's own: its ``tokenizer.json`` (truncated at the
folder's ``max_seq_length``), the transformer, then the pooling and normalization its
``modules.json`` lists (mean pooling over the attention mask, L2 normalization for the
packaged all-MiniLM-L6-v2). In fp32 the vectors are the PyTorch model's (cosine ≥ 0.99
per text, in practice 1.0 to float rounding), so the embedder declares the same
``model_id`` and a store made with either opens with the other. ``quantize="int8"``
runs a dynamically quantized copy (per-channel int8 weights of the matrix products):
2.5 times as fast on one text, cosine 0.99 with the fp32 vectors on average (0.97 at
worst), so it declares its own ``model_id`` (``<model>+int8``) and a store keeps the
vectors of one or the other (``benchmarks/embedder_bench.py`` measures both).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from apollo_domain.errors import ConfigurationError, EmbeddingError

from .floors import model_relevance_floor
from .sentence import default_model_path, model_id_of

#: The quantizations the embedder runs (None: the exported fp32 graph).
QUANTIZATIONS = ("int8",)
#: Bumped when the exported graph changes, so a cached graph of an older export is redone.
EXPORT_VERSION = 1
_OPSET = 17
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def default_threads() -> int:
    """The intra-op threads of a session by default: every core but one, left to the
    server (at least one)."""
    return max(1, (os.cpu_count() or 1) - 1)


class OnnxEmbedder:
    """Embeds with ONNX Runtime; vectors are pooled and normalized as the model folder says.

    Construction exports the graph when ``cache_dir`` has none for this model folder
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
                "onnxruntime is not installed (pip install 'apollo-knowledge[onnx]')",
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
        self._lock = threading.Lock()

    @classmethod
    async def load(cls, model: str | Path | None = None, **options: Any) -> OnnxEmbedder:
        """Construct in a worker thread, so exporting or loading does not block the loop."""
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
        try:
            (hidden,) = self._session.run(["last_hidden_state"], feeds)
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
    """The ONNX graph of the model folder ``model`` in ``cache_dir``, exported (and
    quantized) first when not there yet. The file's name carries a fingerprint of the
    folder's files (names, sizes, modification times) and of the export, so a changed
    model is exported again. Files are written under a temporary name, then renamed: a
    reader never sees half a graph, and two processes exporting at once both succeed."""
    fingerprint = _fingerprint(model)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(
            "cache_dir", f"cannot create the ONNX cache folder {str(cache_dir)!r}: {exc}"
        ) from exc
    stem = f"{model_id_of(model)}-{fingerprint}"
    fp32 = cache_dir / f"{stem}.onnx"
    if not fp32.exists():
        _atomically(fp32, lambda target: _export(model, target))
    if quantize is None:
        return fp32
    quantized = cache_dir / f"{stem}-{quantize}.onnx"
    if not quantized.exists():
        _atomically(quantized, lambda target: _quantize(fp32, target))
    return quantized


def _fingerprint(model: Path) -> str:
    digest = hashlib.sha256(f"export-{EXPORT_VERSION}-opset-{_OPSET}".encode())
    for file in sorted(p for p in model.rglob("*") if p.is_file()):
        stat = file.stat()
        digest.update(f"{file.relative_to(model)}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]


def _atomically(target: Path, write: Any) -> None:
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(handle)
    try:
        write(Path(temporary))
        os.replace(temporary, target)
    finally:
        Path(temporary).unlink(missing_ok=True)


def _export(model: Path, target: Path) -> None:
    """Export the folder's transformer (``last_hidden_state`` from the three BERT inputs,
    batch and sequence dynamic) with the TorchScript exporter."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise ConfigurationError(
            "model",
            "exporting the ONNX graph needs torch and transformers (pip install"
            " 'apollo-knowledge[sentence]'), once; or copy an exported graph into the cache",
        ) from exc
    try:
        transformer = AutoModel.from_pretrained(str(model), local_files_only=True).eval()
    except Exception as exc:
        raise ConfigurationError("model", f"cannot load {str(model)!r}: {exc}") from exc

    class _LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, *inputs: Any) -> Any:
            return self.transformer(**dict(zip(_INPUTS, inputs, strict=True))).last_hidden_state

    sample = torch.ones((2, 8), dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _LastHiddenState(),
            (sample, sample, torch.zeros_like(sample)),
            str(target),
            input_names=list(_INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes={name: axes for name in (*_INPUTS, "last_hidden_state")},
            opset_version=_OPSET,
            dynamo=False,
        )


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
