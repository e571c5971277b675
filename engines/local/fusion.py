"""How hybrid search combines the keyword and the vector ranking: weighted reciprocal rank fusion.

An item at rank r of a ranking earns weight / (k + r) from it, and items are ordered by what they
earn from both. Ranks need no calibration between BM25 scores and cosines; the weights decide how
far a weak vector ranking may pull a good keyword result down, which plain fusion (equal weights,
k = 60) let it do: with lexical hashed vectors, hybrid scored well below keyword alone.

The weights were chosen on the development half of NFCorpus's queries (`bench/search_quality.py
--tune` grid-searches them there; the figures to quote are the held-out half's and another
collection's): for the static and the hashing embedder alike, the best fusion gives the vector
ranking a tenth to a fifth of the keyword ranking's weight, with a small k that lets the first few
ranks of either ranking lead. One setting serves every embedder; a stronger model (MiniLM, an
endpoint) may deserve more weight, which was not measured here.

An item whose vector does not exist yet (still in the backlog) is ranked as if the vector ranking
agreed with the keyword one, so fusion neither buries nor favours what was just stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from engines.local.search import Ranked


@dataclass(frozen=True, slots=True)
class Fusion:
    """The weights of a fusion: each ranking's, and the rank offset k."""

    keyword: float
    vector: float
    k: int


EQUAL = Fusion(keyword=1.0, vector=1.0, k=60)
"""Plain reciprocal rank fusion, for merging rankings of equal standing (vector and keyword fallback)."""

HYBRID = Fusion(keyword=1.0, vector=0.1, k=5)
"""What hybrid search uses: the best setting on NFCorpus's development queries (nDCG@10 0.3562 with
the static embedder, against 0.3533 for keyword alone; 0.3534 with the hashing one)."""


def fuse(keyword: list[Ranked], vector: list[Ranked], want: int, weights: Fusion, unembedded: set[int]) -> list[Ranked]:
    """The `want` best items of both rankings; an item keeps the passage its keyword ranking chose, if any.

    `unembedded` names items without vectors yet: their keyword rank stands for both rankings.
    """
    scores: dict[int, float] = {}
    passage: dict[int, int] = {}
    for rank, hit in enumerate(vector, start=1):
        scores[hit.item_seq] = weights.vector / (weights.k + rank)
        passage[hit.item_seq] = hit.passage
    both = weights.keyword + weights.vector
    for rank, hit in enumerate(keyword, start=1):
        share = both if hit.item_seq in unembedded and hit.item_seq not in scores else weights.keyword
        scores[hit.item_seq] = scores.get(hit.item_seq, 0.0) + share / (weights.k + rank)
        passage[hit.item_seq] = hit.passage
    ordered = sorted(scores, key=lambda seq: (-scores[seq], seq))
    return [Ranked(seq, passage[seq], scores[seq]) for seq in ordered[:want]]
