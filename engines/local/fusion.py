"""How hybrid search combines the keyword and the vector ranking: weighted reciprocal rank fusion.

An item at rank r of a ranking earns weight / (k + r) from it, and items are ordered by what they
earn from both. Ranks need no calibration between BM25 scores and cosines; the weights decide how
far a weak vector ranking may pull a good keyword result down, which plain fusion (equal weights,
k = 60) let it do: with lexical hashed vectors, hybrid scored well below keyword alone.

The weights were chosen on development queries of two collections (`bench/search_quality.py
--tune`: half of NFCorpus's queries and 500 tldr-pages known-item queries; the figures to quote are
the other, held-out halves'): per embedder, the best mean nDCG@10 over both among the settings that
do not fall below keyword alone on either. The vector ranking gets a fraction of the keyword
ranking's weight, the larger the better the embedder, and a small k lets the first few ranks of
either ranking lead.

An item whose vector does not exist yet (still in the backlog) is ranked as if the vector ranking
agreed with the keyword one, so fusion neither buries nor favours what was just stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from engines.local.embed import Embedder, HashingEmbedder
from engines.local.search import Ranked


@dataclass(frozen=True, slots=True)
class Fusion:
    """The weights of a fusion: each ranking's, and the rank offset k."""

    keyword: float
    vector: float
    k: int


EQUAL = Fusion(keyword=1.0, vector=1.0, k=60)
"""Plain reciprocal rank fusion, for merging rankings of equal standing (vector and keyword fallback)."""

SEMANTIC = Fusion(keyword=1.0, vector=0.4, k=5)
"""For embedders that measure meaning (the static model, sentence models, endpoints). With the static
embedder on the development queries: nDCG@10 0.3534 / 0.5781 (NFCorpus / tldr), keyword alone 0.3533 / 0.5585."""

LEXICAL = Fusion(keyword=1.0, vector=0.2, k=5)
"""For embedders that measure word overlap (hashed n-grams), whose ranking mostly repeats keyword's:
0.3535 / 0.5654 on the same queries."""


def fusion_for(embedder: Embedder) -> Fusion:
    """The weights hybrid search gives `embedder`'s ranking."""
    return LEXICAL if isinstance(embedder, HashingEmbedder) else SEMANTIC


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
