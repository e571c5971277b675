"""Embedders: text to unit-length float32 vectors for the local engine's vector search.

`HashingEmbedder` is always available and deterministic. It hashes character n-grams of the
lowercased words into a fixed number of buckets (the hashing trick), so its cosine similarity
measures *lexical* overlap — shared word pieces, spelling variants, inflections — not meaning.
For semantic search configure an OpenAI-compatible endpoint or the local sentence model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

Vectors = NDArray[np.float32]
"""A (rows, dimensions) float32 matrix whose rows have unit length (or are all zero)."""

_WORD = re.compile(r"\w+")
# Odd multipliers from well-known integer hash mixers; any fixed odd constants would do.
_MIX = (np.uint32(0x9E3779B1), np.uint32(0x85EBCA77), np.uint32(0xC2B2AE3D), np.uint32(0x27D4EB2F))


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors. `identity` names the model and its dimensions; a memory file
    indexed with one identity is never searched with vectors of another."""

    @property
    def identity(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """One unit-length row per text, in order."""
        ...


def normalise_rows(matrix: NDArray[np.float32]) -> Vectors:
    """Scale each row to unit length; an all-zero row stays zero."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return matrix


class HashingEmbedder:
    """Signed feature hashing of character 3- and 4-grams over lowercased words (lexical, offline)."""

    def __init__(self, dimensions: int = 256) -> None:
        if dimensions < 16 or dimensions & (dimensions - 1):
            raise ValueError("a hashing embedder needs a power of two of at least 16 dimensions")
        self._dimensions = dimensions

    @property
    def identity(self) -> str:
        return f"hashing-ngram-v1/{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    async def embed(self, texts: Sequence[str]) -> Vectors:
        return self.embed_sync(texts)

    def embed_sync(self, texts: Sequence[str]) -> Vectors:
        """The same vectors, computed on the calling thread (it is CPU work only)."""
        dims = self._dimensions
        out = np.zeros(len(texts) * dims, dtype=np.float32)
        if texts:
            # One pass over all texts at once: numpy's per-call cost dominates short texts.
            data, owner = _concatenate(texts)
            for width in (3, 4):
                buckets, signs, rows = _ngram_hashes(data, owner, width)
                slots = rows * dims + (buckets & np.uint32(dims - 1))
                out += np.bincount(slots, weights=signs, minlength=len(out)).astype(np.float32)
        return normalise_rows(out.reshape(len(texts), dims))


def _concatenate(texts: Sequence[str]) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
    """All texts' padded, lowercased words as one byte array, and the text each byte belongs to."""
    # Words are padded with spaces so n-grams at word edges differ from those inside words.
    encoded = [(" " + "  ".join(_WORD.findall(text.lower())) + " ").encode("utf-8") for text in texts]
    lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded))
    data = np.frombuffer(b"".join(encoded), dtype=np.uint8).astype(np.uint32)
    owner = np.repeat(np.arange(len(encoded), dtype=np.int64), lengths)
    return data, owner


def _ngram_hashes(
    data: NDArray[np.uint32], owner: NDArray[np.int64], width: int
) -> tuple[NDArray[np.uint32], NDArray[np.float64], NDArray[np.int64]]:
    """Bucket, sign and owning text of every n-gram of `width` bytes that lies inside one text."""
    count = len(data) - width + 1
    if count <= 0:
        return np.zeros(0, dtype=np.uint32), np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.int64)
    hashed = np.zeros(count, dtype=np.uint32)
    for offset in range(width):
        hashed ^= data[offset : offset + count] * _MIX[offset]
    hashed ^= hashed >> np.uint32(15)
    hashed *= _MIX[3]
    inside = owner[:count] == owner[width - 1 :]
    hashed, rows = hashed[inside], owner[:count][inside]
    # The top bit picks the sign (+1 or -1), so collisions cancel out on average.
    signs = 1.0 - 2.0 * (hashed >> np.uint32(31))
    return hashed, signs, rows
