"""Static embeddings shipped inside a Python package: semantic vectors offline, without PyTorch.

A static model is a table of one vector per token; a text's vector is the mean of its tokens'
vectors, normalised, which is how WordLlama embeds. The default is WordLlama's `l2_supercat`
model (256 dimensions over Llama 2's 32,000 tokens), whose wheel carries both the weights and the
tokenizer, so nothing is downloaded, ever. Embedding costs a tokenizer pass and a table lookup:
a few thousand passages a second on one core.

The files are read with `safetensors` and `tokenizers` (WordLlama's own dependencies) rather than
through WordLlama's loader: that loader looks for the shipped tokenizer in the wrong folder and
then tries to download it, and importing WordLlama reconfigures the root logger.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engines.contract import ConfigError
from engines.local.embed import Vectors, encodable, normalise_rows


@dataclass(frozen=True)
class StaticModel:
    """Where a packaged static model's files lie inside the package that ships them."""

    package: str
    weights: str
    tokenizer: str
    tensor: str = "embedding.weight"


MODELS = {
    "wordllama-l2-supercat": StaticModel(
        package="wordllama",
        weights="weights/l2_supercat_256.safetensors",
        tokenizer="tokenizers/l2_supercat_tokenizer_config.json",
    ),
}
DEFAULT_STATIC_MODEL = "wordllama-l2-supercat"

MAX_TOKENS = 8192
"""Tokens of one text that count: a passage is a few hundred, and a huge query must not take gigabytes."""

_ENCODE_TEXTS = 64
_GROUP_TOKENS = 16_384  # tokens gathered at once: a 16 MiB temporary at 256 dimensions


@dataclass(frozen=True)
class _Table:
    vectors: NDArray[np.float32]
    tokenizer: Any  # tokenizers.Tokenizer, configured once and then only read (safe across threads)


_loaded: dict[str, _Table] = {}
_loading = threading.Lock()


def _package_dir(package: str) -> Path:
    # find_spec locates the package without importing it (WordLlama's import has side effects).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            f'the "static" embedder needs the {package} package, which ships its model: pip install {package}'
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _load(name: str) -> _Table:
    """The model's table and tokenizer, read once per process and shared by every engine."""
    with _loading:
        if name in _loaded:
            return _loaded[name]
        model = MODELS[name]
        folder = _package_dir(model.package)
        try:
            safetensors = importlib.import_module("safetensors.numpy")
            tokenizers = importlib.import_module("tokenizers")
            vectors = np.ascontiguousarray(safetensors.load_file(str(folder / model.weights))[model.tensor], np.float32)
            tokenizer = tokenizers.Tokenizer.from_file(str(folder / model.tokenizer))
        except (ImportError, OSError, KeyError, ValueError, RuntimeError) as err:
            raise ConfigError(f"cannot load static model {name} from {folder}: {err}") from err
        tokenizer.no_padding()
        tokenizer.no_truncation()
        _loaded[name] = _Table(vectors, tokenizer)
        return _loaded[name]


class StaticEmbedder:
    """Mean-pooled static token embeddings of a packaged model (semantic similarity, offline, no PyTorch).

    `dimensions` below the model's keeps its first ones: WordLlama trains its vectors so that
    their leading dimensions work on their own (Matryoshka training).
    """

    def __init__(self, model: str = DEFAULT_STATIC_MODEL, dimensions: int | None = None) -> None:
        if model not in MODELS:
            raise ConfigError(f'unknown static model "{model}"; this build ships {", ".join(MODELS)}')
        self._name = model
        self._table = _load(model)
        full = self._table.vectors.shape[1]
        self._dimensions = full if dimensions is None else dimensions
        if not 16 <= self._dimensions <= full:
            raise ConfigError(f"static model {model} has {full} dimensions; ask for 16 to {full}")
        self._vectors = self._table.vectors[:, : self._dimensions]

    @property
    def identity(self) -> str:
        return f"static:{self._name}/{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    async def embed(self, texts: Sequence[str]) -> Vectors:
        return self.embed_sync(texts)

    def embed_sync(self, texts: Sequence[str]) -> Vectors:
        """The same vectors, computed on the calling thread (a tokenizer pass and a lookup)."""
        out = np.zeros((len(texts), self._dimensions), dtype=np.float32)
        if not texts:
            return out
        tokenizer = self._table.tokenizer
        # A few texts' encodings at a time: the tokenizer's objects cost about 100 bytes a token, and one document
        # of 4 MiB of headings (1,400 passages, 1.6 M tokens) held 150 MiB of them at once when encoded whole.
        for start in range(0, len(texts), _ENCODE_TEXTS):
            chunk = texts[start : start + _ENCODE_TEXTS]
            encoded = tokenizer.encode_batch([encodable(t) for t in chunk], add_special_tokens=False)
            self._pool_groups(out[start : start + len(chunk)], [e.ids[:MAX_TOKENS] for e in encoded])
        return normalise_rows(out)

    def _pool_groups(self, out: NDArray[np.float32], ids: list[list[int]]) -> None:
        first = 0
        while first < len(ids):
            last, tokens = first, 0
            while last < len(ids) and (last == first or tokens + len(ids[last]) <= _GROUP_TOKENS):
                tokens += len(ids[last])
                last += 1
            self._pool(out[first:last], ids[first:last])
            first = last

    def _pool(self, out: NDArray[np.float32], ids: list[list[int]]) -> None:
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        if not lengths.any():
            return
        flat = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
        np.clip(flat, 0, len(self._vectors) - 1, out=flat)
        gathered = self._vectors[flat]
        bounds = np.concatenate(([0], np.cumsum(lengths))).tolist()
        # A sum per text, of its own rows: `np.add.reduceat` over the rows did the same 9-33x slower (7 of the
        # 16 s that storing a 4 MiB file of headings took). The mean's division is left to normalising, which
        # removes it anyway.
        for row in np.flatnonzero(lengths).tolist():
            out[row] = gathered[bounds[row] : bounds[row + 1]].sum(axis=0)
