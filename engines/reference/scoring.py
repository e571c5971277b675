"""How the reference engine scores an item's text against a query (docs/spec/contract.md §17, "Scoring").

Deliberately simple and exact, so that any engine's tests can predict the reference's ranking:
a keyword share over distinct words, and a 64-bucket character-trigram embedding compared by cosine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engines.contract import FetchMode

VECTOR_THRESHOLD = 0.2
"""The least cosine at which a vector read counts an item as a hit."""

DIMENSIONS = 64

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193
_U32 = 0xFFFFFFFF

Vector = tuple[float, ...]


def words(text: str) -> list[str]:
    """The runs of `str.isalnum()` characters in `text`, lowercased; every other character separates."""
    # Spaces are never alphanumeric, so replacing each separator by one and splitting finds the same runs.
    spaced = "".join(ch if ch.isalnum() else " " for ch in text)
    return [word.lower() for word in spaced.split()]


def keyword(query: str, text: str) -> float:
    """The share of the query's distinct words that occur in `text`; 0.0 when the query has no words."""
    return _share(frozenset(words(query)), frozenset(words(text)))


def embed(text: str) -> Vector:
    """A unit vector of the text's character trigrams, each word padded with one space on both sides.

    Every trigram adds 1 to bucket `fnv1a32(trigram) % 64`, repeats included; a text without words
    embeds as the zero vector.
    """
    counts = [0.0] * DIMENSIONS
    for word in words(text):
        padded = f" {word} "
        for start in range(len(padded) - 2):
            counts[_fnv1a32(padded[start : start + 3]) % DIMENSIONS] += 1.0
    norm = math.sqrt(sum(x * x for x in counts))
    if norm == 0.0:
        return tuple(counts)
    return tuple(x / norm for x in counts)


def cosine(a: Vector, b: Vector) -> float:
    """The dot product; both vectors come from `embed`, so they are unit length or zero."""
    return sum(x * y for x, y in zip(a, b, strict=True))


@dataclass(frozen=True)
class TextFeatures:
    """What scoring needs from one text, computed once (an item's at store, a query's per read)."""

    words: frozenset[str]
    vector: Vector

    @classmethod
    def of(cls, text: str) -> TextFeatures:
        return cls(words=frozenset(words(text)), vector=embed(text))


def score(mode: FetchMode, query: TextFeatures, text: TextFeatures) -> float | None:
    """The score of `text` for `query` in `mode`, or None when the text is not a hit in that mode."""
    lex = _share(query.words, text.words)
    if mode is FetchMode.KEYWORD:
        return lex if lex > 0.0 else None
    cos = cosine(query.vector, text.vector)
    if mode is FetchMode.VECTOR:
        return cos if cos >= VECTOR_THRESHOLD else None
    return (lex + cos) / 2 if lex > 0.0 or cos >= VECTOR_THRESHOLD else None


def _share(wanted: frozenset[str], held: frozenset[str]) -> float:
    if not wanted:
        return 0.0
    return len(wanted & held) / len(wanted)


def _fnv1a32(chars: str) -> int:
    # Over code points, not UTF-8 bytes: the rule is stated per character.
    h = _FNV_OFFSET
    for ch in chars:
        h = ((h ^ ord(ch)) * _FNV_PRIME) & _U32
    return h
