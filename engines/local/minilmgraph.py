"""MiniLM's graph rebuilt from onnxruntime's fused BERT kernels, with the shipped model's own weights.

The shipped file is PyTorch's export of the model: each attention is a dozen nodes (reshapes,
transposes, scaled products, a softmax guarded by IsNaN and Where), which onnxruntime's optimiser
does not recognise as attention, nor its GELU as one; a tenth of a run went to the guards alone.
This module writes the same network as onnxruntime's contrib operators run it (com.microsoft,
CPU kernels): per layer one `Attention` (query, key and value in one product, the padding masked by
length), `SkipLayerNormalization` (residual, bias and norm in one pass) and `BiasGelu`.

The weights are the shipped file's: its int8 matrices times their per-column scales, exactly as its
Cast and Mul nodes compute them, so the vectors stay the model's (cosine >= 0.999 on every passage of
`bench/embedding.py`). A weight is known by the bias added after it, which the export names
(`encoder.layer.3.attention.self.query.bias`), so the builder does not depend on the export's node order.

The word-embedding table (30,522 rows, half the model's weights) stays int8 with its per-row scales: only
the rows a batch looks up are cast and scaled, as the shipped graph does after its Gather. A float32 table
would hold 35 MB more in every process that embeds, and onnxruntime's `EmbedLayerNormalization` takes only
a float32 one, so the embedding is a Gather, an Add of the positions and a `LayerNormalization`.

The graph's inputs are int32 `input_ids` and `attention_mask` (each row's ones first: padding on the
right, as the embedder pads); its output is `last_hidden_state`, as the shipped model's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from numpy.typing import NDArray

from engines.local import onnxproto
from engines.local.onnxproto import FLOAT, INT32, node, value_info

NUM_HEADS = 12
"""all-MiniLM-L6-v2's attention heads (its config.json): the weights alone do not say how they are split."""

EPSILON = 1e-12
"""The layer norms' epsilon, as the shipped model's LayerNormalization nodes have it."""

OPSET = 17
_CONTRIB = "com.microsoft"

Weights = dict[str, NDArray[Any]]
"""Tensors by name: float32, but for an int8 matrix's own entry (`<name>:int8`, with `<name>:scale`)."""

_INT8, _SCALE = ":int8", ":scale"


class GraphError(onnxproto.ModelFormatError):
    """The model file is not the BERT export this builder knows (a layer's weight or bias is missing)."""


def write_fused(source: Path, out: BinaryIO) -> None:
    """Write the fused graph of the model in `source` to `out` (a ModelFormatError when it is not that model).
    Peak memory: the float weights and the file's bytes, about 200 MB for MiniLM."""
    weights = named_weights(onnxproto.read_model(source.read_bytes()))
    model, initializers = _build(weights)
    del weights  # the initializers hold what the graph uses
    onnxproto.write_model(out, model, initializers.items())


def named_weights(model: Any) -> Weights:
    """Every float tensor of the model by its PyTorch name: initializers, dequantised int8 matrices (each
    also as its int8 matrix and scales, `<name>:int8` and `<name>:scale`), and each matrix multiplied before a
    named bias, named for its module (`...query.weight`)."""
    graph = model.graph
    stored = {init.name: onnxproto.to_array(init) for init in graph.initializer}
    values: Weights = {name: array for name, array in stored.items() if array.dtype == np.float32}
    cast = {n.output[0]: n.input[0] for n in graph.node if n.op_type == "Cast" and n.input[0] in stored}
    for made in graph.node:
        # Dequantisation: Mul(Cast(int8 matrix), scale), computed in float32 as onnxruntime does.
        if made.op_type == "Mul" and made.input[0] in cast and made.input[1] in stored:
            quantised, scale = stored[cast[made.input[0]]], stored[made.input[1]]
            values[made.output[0]] = quantised.astype(np.float32) * scale
            values[made.output[0] + _INT8], values[made.output[0] + _SCALE] = quantised, scale
    adds = {n.input[0]: n for n in graph.node if n.op_type == "Add" and len(n.input) == 2}
    for made in graph.node:
        after = adds.get(made.output[0]) if made.op_type == "MatMul" else None
        if after is not None and after.input[1].endswith(".bias") and made.input[1] in values:
            values[after.input[1].removesuffix(".bias") + ".weight"] = values[made.input[1]]
    return values


def _build(weights: Weights) -> tuple[Any, Weights]:
    """The fused model (without its initializers) and its initializers, by name."""
    prefix = _prefix(weights)
    layers = 0
    while f"{prefix}encoder.layer.{layers}.output.dense.weight" in weights:
        layers += 1
    if layers == 0:
        raise GraphError("no encoder layer's weights were found")
    model = onnxproto.Model(ir_version=8, producer_name="tinymemory")
    model.opset_import.add(domain="", version=OPSET)
    model.opset_import.add(domain=_CONTRIB, version=1)
    graph = model.graph
    graph.name = "minilm-fused"
    initializers: Weights = {}

    def weight(name: str) -> str:
        """`name`, its tensor now one of the graph's initializers."""
        initializers[name] = _tensor(weights, name)
        return name

    embeddings = f"{prefix}embeddings."
    # Token type 0 is every passage's: its row is added to the positions' once, here, instead of per token.
    initializers["positions"] = (
        _tensor(weights, embeddings + "position_embeddings.weight")
        + _tensor(weights, embeddings + "token_type_embeddings.weight")[0]
    )
    graph.node.extend(_embedding(embeddings, weights, initializers, weight))
    for index in range(layers):
        graph.node.extend(_layer(f"{prefix}encoder.layer.{index}.", index, weights, initializers, weight))
    graph.node[-1].output[0] = "last_hidden_state"
    graph.input.extend([value_info(n, INT32, ["batch", "sequence"]) for n in ("input_ids", "attention_mask")])
    hidden = weights[embeddings + "LayerNorm.weight"].shape[0]
    graph.output.append(value_info("last_hidden_state", FLOAT, ["batch", "sequence", hidden]))
    return model, initializers


def _embedding(at: str, weights: Weights, initializers: Weights, weight: Callable[[str], str]) -> list[Any]:
    """The nodes from `input_ids` and `attention_mask` to `hidden_0` (the embedded tokens, normalised) and
    `lengths` (each row's tokens, which `Attention` masks by)."""
    table = at + "word_embeddings.weight"
    scales = weights.get(table + _SCALE)
    if table + _INT8 in weights and scales is not None and scales.shape == (weights[table].shape[0], 1):
        # Per-row scales: a looked-up row is cast and scaled alone, as the shipped graph computes it.
        initializers["words:int8"], initializers["words:scale"] = weights[table + _INT8], scales
        looked_up = [
            node("Gather", ["words:int8", "input_ids"], ["word_rows:int8"]),
            node("Cast", ["word_rows:int8"], ["word_rows:float"], to=FLOAT),
            node("Gather", ["words:scale", "input_ids"], ["word_scales"]),
            node("Mul", ["word_rows:float", "word_scales"], ["words"]),
        ]
    else:
        looked_up = [node("Gather", [weight(table), "input_ids"], ["words"])]
    initializers["axis:1"] = np.array([1], dtype=np.int64)
    initializers["start:0"] = np.array([0], dtype=np.int64)
    initializers["end:2"] = np.array([2], dtype=np.int64)
    return [
        *looked_up,
        # The first `sequence` rows of the positions' table, added to every row of the batch.
        node("Shape", ["input_ids"], ["shape"]),
        node("Slice", ["shape", "axis:1", "end:2"], ["sequence"]),
        node("Slice", ["positions", "start:0", "sequence", "start:0"], ["positions_used"]),
        node("Add", ["words", "positions_used"], ["embedded"]),
        node("LayerNormalization", ["embedded", weight(at + "LayerNorm.weight"), weight(at + "LayerNorm.bias")],
             ["hidden_0"], axis=-1, epsilon=EPSILON),
        node("ReduceSum", ["attention_mask", "axis:1"], ["lengths"], keepdims=0),
    ]  # fmt: skip


def _layer(at: str, index: int, weights: Weights, initializers: Weights, weight: Callable[[str], str]) -> list[Any]:
    """One encoder layer's nodes, from `hidden_{index}` to `hidden_{index + 1}`."""
    into, mid, out = f"hidden_{index}", f"attended_{index}", f"hidden_{index + 1}"
    parts = [f"{at}attention.self.{part}" for part in ("query", "key", "value")]
    # Query, key and value packed side by side: one product instead of three.
    initializers[f"{at}qkv.weight"] = np.concatenate([_tensor(weights, p + ".weight") for p in parts], axis=1)
    initializers[f"{at}qkv.bias"] = np.concatenate([_tensor(weights, p + ".bias") for p in parts])
    norm = {"epsilon": EPSILON}
    return [
        node("Attention", [into, f"{at}qkv.weight", f"{at}qkv.bias", "lengths"], [f"context_{index}"], _CONTRIB,
             num_heads=NUM_HEADS),
        node("MatMul", [f"context_{index}", weight(f"{at}attention.output.dense.weight")], [f"projected_{index}"]),
        node("SkipLayerNormalization",
             [f"projected_{index}", into, weight(f"{at}attention.output.LayerNorm.weight"),
              weight(f"{at}attention.output.LayerNorm.bias"), weight(f"{at}attention.output.dense.bias")],
             [mid], _CONTRIB, **norm),
        node("MatMul", [mid, weight(f"{at}intermediate.dense.weight")], [f"widened_{index}"]),
        node("BiasGelu", [f"widened_{index}", weight(f"{at}intermediate.dense.bias")], [f"activated_{index}"],
             _CONTRIB),
        node("MatMul", [f"activated_{index}", weight(f"{at}output.dense.weight")], [f"narrowed_{index}"]),
        node("SkipLayerNormalization",
             [f"narrowed_{index}", mid, weight(f"{at}output.LayerNorm.weight"), weight(f"{at}output.LayerNorm.bias"),
              weight(f"{at}output.dense.bias")],
             [out], _CONTRIB, **norm),
    ]  # fmt: skip


def _tensor(weights: Weights, name: str) -> NDArray[np.float32]:
    if name not in weights:
        raise GraphError(f"the model has no {name}")
    return weights[name]


def _prefix(weights: Weights) -> str:
    """What the export put before `embeddings.` (`inner.` for a wrapped module, or nothing)."""
    suffix = "embeddings.word_embeddings.weight"
    for name in weights:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    raise GraphError("the model has no word embeddings")
