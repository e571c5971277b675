"""A local sentence-embedding model (semantic similarity, offline), behind the `sentence` extra.

Imported only when configured (`embedder.kind = "sentence"`), because sentence-transformers pulls
in PyTorch. The model must be on disk or in the Hugging Face cache; nothing is downloaded at a
search.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from engines.contract import ConfigError
from engines.local.embed import Vectors, normalise_rows


def _load(model_name: str) -> Any:
    try:
        library = importlib.import_module("sentence_transformers")
    except ImportError as err:
        raise ConfigError(
            'the "sentence" embedder needs sentence-transformers: pip install "tinymemory-ingest[sentence]"'
        ) from err
    try:
        return library.SentenceTransformer(model_name)
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot load sentence model {model_name}: {err}") from err


class SentenceEmbedder:
    """Vectors from a sentence-transformers model run in this process."""

    def __init__(self, model_name: str) -> None:
        self._name = model_name
        self._model = _load(model_name)
        # sentence-transformers 6 renamed the method; 3 to 5 only have the old name.
        model = self._model
        dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self._dimensions = int(dimension())

    @property
    def identity(self) -> str:
        return f"sentence:{self._name}/{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dimensions), dtype=np.float32)
        matrix = await asyncio.to_thread(self._model.encode, list(texts), convert_to_numpy=True)
        return normalise_rows(np.asarray(matrix, dtype=np.float32))
