"""Embedders: text to unit-length float32 vectors for the local engine's vector search.

`HashingEmbedder` is always available and deterministic. It hashes the character 3- and 4-grams
of the lowercased text (punctuation folded to spaces) into a fixed number of buckets with a
random sign (the hashing trick). Its cosine similarity therefore measures *lexical* overlap —
shared word pieces, spelling variants, inflections — not meaning. The default embedder is the
packaged static model (`static.py`), which measures meaning; an OpenAI-compatible endpoint or the
local sentence model (the `sentence` extra) are the other semantic ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

Vectors = NDArray[np.float32]
"""A (rows, dimensions) float32 matrix whose rows have unit length (or are all zero)."""

# ASCII letters lowercased, other ASCII punctuation and whitespace folded to a space; bytes of
# non-ASCII characters are kept, so words in any script still form n-grams.
_FOLD = bytes(
    c + 32 if 65 <= c <= 90 else c if (48 <= c <= 57 or 97 <= c <= 122 or c >= 128) else 32 for c in range(256)
)
# Odd multipliers (Knuth's multiplicative hashing): one per n-gram width.
_MULTIPLY_3 = np.uint32(0x9E3779B1)
_MULTIPLY_4 = np.uint32(0x85EBCA77)
_SPACES_3 = np.uint32(0x202020)
_SPACES_4 = np.uint32(0x20202020)


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
    """Signed feature hashing of character 3- and 4-grams (lexical similarity, offline, deterministic)."""

    def __init__(self, dimensions: int = 256) -> None:
        if dimensions < 16 or dimensions & (dimensions - 1):
            raise ValueError("a hashing embedder needs a power of two of at least 16 dimensions")
        self._dimensions = dimensions
        self._shift = np.uint32(33 - dimensions.bit_length())

    @property
    def identity(self) -> str:
        return f"hashing-ngram-v2/{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    async def embed(self, texts: Sequence[str]) -> Vectors:
        return self.embed_sync(texts)

    def embed_sync(self, texts: Sequence[str]) -> Vectors:
        """The same vectors, computed on the calling thread (it is CPU work only)."""
        out = np.zeros((len(texts), self._dimensions), dtype=np.float64)
        blobs = [b" " + text.lower().encode("utf-8", "surrogatepass").translate(_FOLD) + b" " for text in texts]
        for first, last in _groups(blobs):
            self._hash_group(out[first:last], blobs[first:last])
        return normalise_rows(out.astype(np.float32))

    def _hash_group(self, out: NDArray[np.float64], blobs: list[bytes]) -> None:
        # Texts are hashed together so numpy's per-call cost is shared by the group.
        lengths = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=len(blobs))
        data = np.frombuffer(b"".join(blobs), dtype=np.uint8).astype(np.uint32)
        owner = np.repeat(np.arange(len(blobs), dtype=np.uint32), lengths)
        code3 = data[:-2] | (data[1:-1] << 8) | (data[2:] << 16)
        code4 = code3[:-1] | (data[3:] << 24)
        # Keep n-grams inside one text that are not all padding; both widths are counted at once.
        keep3 = (owner[:-2] == owner[2:]) & (code3 != _SPACES_3)
        keep4 = (owner[:-3] == owner[3:]) & (code4 != _SPACES_4)
        hashed = np.concatenate(((code3 * _MULTIPLY_3)[keep3], (code4 * _MULTIPLY_4)[keep4]))
        owners = np.concatenate((owner[:-2][keep3], owner[:-3][keep4]))
        slots = owners * np.uint32(self._dimensions) + (hashed >> self._shift)
        # The bit below the bucket picks the sign, so colliding n-grams cancel out on average.
        signs = 1.0 - 2.0 * ((hashed >> (self._shift - np.uint32(1))) & np.uint32(1))
        out.reshape(-1)[:] = np.bincount(slots, weights=signs, minlength=out.size)


def encodable(text: str) -> str:
    """`text` as a tokenizer takes it: valid Unicode, a lone surrogate (possible in a str) made U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def embeds_quickly(embedder: Embedder) -> bool:
    """Whether vectors cost only a little of this process's time (no model to run, no endpoint): such
    an embedder's vectors are computed as items are stored, not by the backlog."""
    return isinstance(embedder, HashingEmbedder)


# Groups of at most this many bytes keep numpy's temporaries under glibc's mmap threshold (128 KiB):
# larger ones are mapped and unmapped on every call, which made hashing five times slower.
_GROUP_BYTES = 8192


def _groups(blobs: list[bytes]) -> list[tuple[int, int]]:
    """Consecutive ranges of blobs of at most `_GROUP_BYTES` in all (a longer blob stands alone)."""
    groups, first, size = [], 0, 0
    for index, blob in enumerate(blobs):
        if index > first and size + len(blob) > _GROUP_BYTES:
            groups.append((first, index))
            first, size = index, 0
        size += len(blob)
    if first < len(blobs):
        groups.append((first, len(blobs)))
    return groups
