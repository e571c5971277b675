"""The fused graph computes the shipped model's vectors, from the shipped model's own weights."""

from __future__ import annotations

import importlib
import io
import logging
import random
from pathlib import Path

import numpy as np
import pytest

from engines.local import minilm, minilmgraph, onnxproto
from engines.local.minilm import MiniLMEmbedder, load_tokenizer
from engines.local.onnxproto import FLOAT, node, value_info

WORDS = [
    "deploy",
    "noon",
    "cats",
    "sleep",
    "garage",
    "brakes",
    "flight",
    "lisbon",
    "recipe",
    "lemon",
    "cake",
    "kubectl",
    "pods",
    "tar",
    "archive",
]


def generated_texts() -> list[str]:
    """Texts from a few words to past the model's 256 pieces, with punctuation, digits and other scripts."""
    rng = random.Random(5)
    marks = ["", ",", ".", " 42", "-x"]
    made = [" ".join(rng.choice(WORDS) + rng.choice(marks) for _ in range(n)) for n in (3, 12, 40, 90, 180, 260, 400)]
    return ["x", "东京 été naïve — ok?", "a" * 900, *made]


def plain_vectors(texts: list[str], embedder: MiniLMEmbedder) -> np.ndarray:
    """The shipped file in a default session, each text alone (no padding at all)."""
    onnxruntime = importlib.import_module("onnxruntime")
    session = onnxruntime.InferenceSession(str(embedder.model_file), providers=["CPUExecutionProvider"])
    rows = []
    for encoding in load_tokenizer(embedder.tokenizer_file).encode_batch(texts):
        ids = np.array([encoding.ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        pooled = session.run(None, feeds)[0][0].mean(axis=0)
        rows.append(pooled / np.linalg.norm(pooled))
    return np.array(rows)


def test_the_fused_graph_gives_the_shipped_models_vectors() -> None:
    embedder = MiniLMEmbedder()  # the process's session, as every engine shares it
    texts = generated_texts()
    ours = embedder.embed_sync(texts)  # padded in runs of like length, over two threads
    assert minilm._loaded[str(embedder.model_file)].fused
    cosines = (ours * plain_vectors(texts, embedder)).sum(axis=1)
    assert cosines.min() >= 0.999, cosines


def tiny_model() -> bytes:
    """A valid ONNX file that is not a BERT export: one Identity node."""
    model = onnxproto.Model(ir_version=8)
    model.opset_import.add(domain="", version=17)
    model.graph.node.append(node("Identity", ["x"], ["y"]))
    model.graph.input.append(value_info("x", FLOAT, ["n"]))
    model.graph.output.append(value_info("y", FLOAT, ["n"]))
    out = io.BytesIO()
    onnxproto.write_model(out, model, [("unused.weight", np.ones((2, 3), dtype=np.float32))])
    return out.getvalue()


def test_a_model_that_is_not_the_bert_export_runs_as_it_is(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = tmp_path / "other.onnx"
    source.write_bytes(tiny_model())
    assert onnxproto.to_array(onnxproto.read_model(source.read_bytes()).graph.initializer[0]).shape == (2, 3)
    with pytest.raises(minilmgraph.GraphError, match="word embeddings"):
        minilmgraph.write_fused(source, io.BytesIO())
    onnxruntime = importlib.import_module("onnxruntime")
    with caplog.at_level(logging.INFO, logger="engines.local.minilm"):
        session, fused = minilm._session(onnxruntime, source, "e" * 64, tmp_path / "cache")
    assert not fused and "is not the BERT export" in caplog.text
    assert session.run(None, {"x": np.array([1.5], dtype=np.float32)})[0].tolist() == [1.5]
    assert list((tmp_path / "cache").iterdir()) == []


def test_bytes_that_are_no_model_are_refused() -> None:
    with pytest.raises(onnxproto.ModelFormatError, match="not an ONNX model"):
        onnxproto.read_model(b"\xff\xff\xff not protobuf")
