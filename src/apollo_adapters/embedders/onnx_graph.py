"""The ONNX graph of a BERT encoder, assembled from its safetensors weights with numpy.

No torch, no transformers, no safetensors package: the weights file is read as the format
defines it (an 8-byte little-endian header length, a JSON header naming each tensor's
dtype, shape and byte range, then the raw little-endian tensors), and the encoder is
written node by node with ``onnx.helper``, as ``transformers``' ``BertModel`` computes it:

- embeddings: word + absolute position + token type, then LayerNorm;
- each layer: multi-head self-attention (scaled dot products plus the additive attention
  mask, ``(1 - mask) * float32.min`` as BERT adds it), output projection, residual and
  LayerNorm; then the feed-forward block with exact (erf) GELU, residual and LayerNorm;
- output: ``last_hidden_state`` (batch, tokens, hidden), which the embedder pools.

Sizes and the LayerNorm epsilon come from the folder's ``config.json``. Opset 17 (its
``LayerNormalization``). The weight matrices are stored transposed for ``MatMul``, so
ONNX Runtime's dynamic int8 quantization of the matrix products applies to the graph.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from apollo_domain.errors import ConfigurationError

#: Bumped whenever the graph this module writes changes, so cached graphs are rebuilt.
BUILDER_VERSION = 2
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "last_hidden_state"
#: The largest safetensors header read (the format itself caps it at 100 MB).
_MAX_HEADER = 100_000_000
_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}
_ACTIVATIONS = ("gelu",)


def read_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    """Every tensor of the safetensors file ``path`` (memory-mapped, read-only), by name.
    A file that does not follow the format (header, dtypes, byte ranges) is a
    ``ConfigurationError`` naming it."""

    def refuse(why: str) -> ConfigurationError:
        return ConfigurationError("model", f"{str(path)!r} is not a safetensors file: {why}")

    try:
        with path.open("rb") as file:
            (length,) = struct.unpack("<Q", file.read(8))
            if not 0 < length <= _MAX_HEADER:
                raise refuse(f"header length {length}")
            header = json.loads(file.read(length))
    except (OSError, struct.error, ValueError) as exc:
        raise refuse(str(exc)) from exc
    if not isinstance(header, dict):
        raise refuse("the header is not a JSON object")
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + length)
    tensors: dict[str, npt.NDArray[Any]] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = np.dtype(_DTYPES[entry["dtype"]]).newbyteorder("<")
            shape = tuple(int(n) for n in entry["shape"])
            start, end = (int(n) for n in entry["data_offsets"])
        except (KeyError, TypeError, ValueError) as exc:
            raise refuse(f"tensor {name!r}: {exc!r}") from exc
        if not 0 <= start <= end <= data.size or end - start != dtype.itemsize * math.prod(shape):
            raise refuse(f"tensor {name!r} has byte range {start}..{end} for shape {shape}")
        tensors[name] = data[start:end].view(dtype).reshape(shape)
    return tensors


class _Config:
    """The sizes of a BERT encoder, from its ``config.json``."""

    def __init__(self, path: Path) -> None:
        try:
            config = json.loads((path / "config.json").read_text())
            self.hidden = int(config["hidden_size"])
            self.heads = int(config["num_attention_heads"])
            self.layers = int(config["num_hidden_layers"])
            self.eps = float(config.get("layer_norm_eps", 1e-12))
            activation = str(config.get("hidden_act", "gelu"))
            kind = str(config.get("model_type", "bert"))
            positions = str(config.get("position_embedding_type", "absolute"))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigurationError(
                "model", f"cannot read the encoder's sizes from {str(path)!r}: {exc!r}"
            ) from exc
        if kind != "bert" or positions != "absolute" or activation not in _ACTIVATIONS:
            raise ConfigurationError(
                "model",
                f"{str(path)!r}: the ONNX graph builder knows BERT encoders with absolute"
                f" positions and exact GELU; this one is {kind!r} with {positions!r}"
                f" positions and {activation!r}",
            )
        if self.heads < 1 or self.hidden % self.heads:
            raise ConfigurationError(
                "model", f"{str(path)!r}: {self.hidden} hidden units in {self.heads} heads"
            )


class _Graph:
    """Nodes and initializers being written, with fresh names."""

    def __init__(self, weights: Mapping[str, npt.NDArray[Any]], prefix: str) -> None:
        from onnx import helper, numpy_helper

        self.helper = helper
        self.numpy_helper = numpy_helper
        self.weights = weights
        self.prefix = prefix
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def fresh(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def weight(self, name: str, *, transpose: bool = False) -> str:
        """The model's tensor ``name`` as an initializer (float32; transposed for MatMul)."""
        key = self.prefix + name
        if key not in self.weights:
            raise ConfigurationError("model", f"the weights have no tensor {key!r}")
        array = np.asarray(self.weights[key], dtype=np.float32)
        if transpose:
            array = array.T
        return self.constant(name, np.ascontiguousarray(array))

    def constant(self, name: str, array: npt.NDArray[Any]) -> str:
        self.initializers.append(self.numpy_helper.from_array(array, name))
        return name

    def node(self, op: str, inputs: list[str], hint: str | None = None, **attributes: Any) -> str:
        output = self.fresh(hint or op.lower())
        # named after its output: profiles and error messages can point at the node
        self.nodes.append(self.helper.make_node(op, inputs, [output], name=output, **attributes))
        return output

    def linear(self, x: str, name: str) -> str:
        product = self.node("MatMul", [x, self.weight(f"{name}.weight", transpose=True)])
        return self.node("Add", [product, self.weight(f"{name}.bias")])

    def layer_norm(self, x: str, name: str, eps: float) -> str:
        return self.node(
            "LayerNormalization",
            [x, self.weight(f"{name}.weight"), self.weight(f"{name}.bias")],
            axis=-1,
            epsilon=eps,
        )


def build_bert_graph(model: Path) -> Any:
    """The ``onnx.ModelProto`` of the BERT encoder in the model folder ``model``
    (``config.json`` + ``model.safetensors``): inputs :data:`INPUTS` (int64, batch and
    tokens dynamic), output :data:`OUTPUT`."""
    from onnx import TensorProto, helper

    config = _Config(model)
    weights = read_safetensors(model / "model.safetensors")
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
    graph = _Graph(weights, prefix)
    head = config.hidden // config.heads

    one = graph.constant("one", np.array(1.0, dtype=np.float32))
    lowest = graph.constant("lowest", np.array(np.finfo(np.float32).min, dtype=np.float32))
    scale = graph.constant("scale", np.array(1.0 / math.sqrt(head), dtype=np.float32))
    half = graph.constant("half", np.array(0.5, dtype=np.float32))
    root_two = graph.constant("root_two", np.array(math.sqrt(2.0), dtype=np.float32))
    split_heads = graph.constant("split_heads", np.array([0, 0, config.heads, head], np.int64))
    merge_heads = graph.constant("merge_heads", np.array([0, 0, config.hidden], np.int64))
    zero = graph.constant("zero", np.array(0, dtype=np.int64))
    step = graph.constant("step", np.array(1, dtype=np.int64))
    second = graph.constant("second", np.array(1, dtype=np.int64))
    mask_axes = graph.constant("mask_axes", np.array([1, 2], dtype=np.int64))

    # Embeddings: word + position (0..tokens-1) + token type, then LayerNorm.
    shape = graph.node("Shape", ["input_ids"])
    tokens = graph.node("Gather", [shape, second], "tokens")
    positions = graph.node("Range", [zero, tokens, step], "positions")
    words = graph.node("Gather", [graph.weight("embeddings.word_embeddings.weight"), "input_ids"])
    placed = graph.node(
        "Gather", [graph.weight("embeddings.position_embeddings.weight"), positions]
    )
    kinds = graph.node(
        "Gather", [graph.weight("embeddings.token_type_embeddings.weight"), "token_type_ids"]
    )
    summed = graph.node("Add", [graph.node("Add", [words, placed]), kinds])
    x = graph.layer_norm(summed, "embeddings.LayerNorm", config.eps)

    # The additive mask: 0 where a token is attended to, float32's lowest where padded.
    mask = graph.node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    blocked = graph.node("Mul", [graph.node("Sub", [one, mask]), lowest])
    additive = graph.node("Unsqueeze", [blocked, mask_axes], "additive_mask")

    for index in range(config.layers):
        layer = f"encoder.layer.{index}"

        def heads(x: str, projection: str, order: list[int], layer: str = layer) -> str:
            split = graph.node("Reshape", [graph.linear(x, f"{layer}.{projection}"), split_heads])
            return graph.node("Transpose", [split], perm=order)

        query = heads(x, "attention.self.query", [0, 2, 1, 3])
        key = heads(x, "attention.self.key", [0, 2, 3, 1])
        value = heads(x, "attention.self.value", [0, 2, 1, 3])
        scores = graph.node("Mul", [graph.node("MatMul", [query, key]), scale])
        probabilities = graph.node("Softmax", [graph.node("Add", [scores, additive])], axis=-1)
        context = graph.node(
            "Transpose", [graph.node("MatMul", [probabilities, value])], perm=[0, 2, 1, 3]
        )
        merged = graph.node("Reshape", [context, merge_heads])
        attended = graph.linear(merged, f"{layer}.attention.output.dense")
        x = graph.layer_norm(
            graph.node("Add", [attended, x]), f"{layer}.attention.output.LayerNorm", config.eps
        )
        inner = graph.linear(x, f"{layer}.intermediate.dense")
        erf = graph.node("Erf", [graph.node("Div", [inner, root_two])])
        gelu = graph.node("Mul", [graph.node("Mul", [inner, half]), graph.node("Add", [erf, one])])
        out = graph.linear(gelu, f"{layer}.output.dense")
        x = graph.layer_norm(graph.node("Add", [out, x]), f"{layer}.output.LayerNorm", config.eps)

    graph.nodes.append(helper.make_node("Identity", [x], [OUTPUT]))
    axes = ["batch", "tokens"]
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, axes) for name in INPUTS]
    output = helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, [*axes, config.hidden])
    body = helper.make_graph(
        graph.nodes, "bert_encoder", inputs, [output], initializer=graph.initializers
    )
    proto = helper.make_model(
        body,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="apollo",
        producer_version=str(BUILDER_VERSION),
    )
    proto.ir_version = 8  # what ONNX Runtime 1.17 and later read
    return proto


def write_bert_graph(model: Path, target: Path) -> None:
    """Build the encoder of ``model`` and save it (one file, weights inside) to ``target``."""
    import onnx

    proto = build_bert_graph(model)
    onnx.checker.check_model(proto)
    onnx.save_model(proto, str(target))


__all__ = [
    "BUILDER_VERSION",
    "INPUTS",
    "OPSET",
    "OUTPUT",
    "build_bert_graph",
    "read_safetensors",
    "write_bert_graph",
]
