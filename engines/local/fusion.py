"""How hybrid search combines the keyword and the vector ranking: normalised score fusion, with feedback.

Each ranking's scores are scaled to [0, 1] against its own best hit: a BM25 score over the best
one's, a cosine from the similarity floor (the least a vector hit may score) to the best one's.
An item earns `(1 - vector) * keyword + vector * vector` of its two scaled scores; one a ranking
did not find adds nothing from it. Scaling by the best hit alone, not by the worst one read,
leaves an item's score independent of how deep the rankings were read.

Before the vector ranking is read, the query's vector is moved towards the vectors of keyword's
best few items (pseudo-relevance feedback, Rocchio's rule): words the query shares with the
best matches pull it towards the meaning of those matches, which a static embedding of three
words often misses. That feedback is what hybrid search reads with; the vector mode itself reads
the query's own vector.

The weights were chosen on development queries of two collections (`bench/search_quality.py
--tune`: half of NFCorpus's queries and 500 tldr-pages known-item queries; the figures to quote
are the other, held-out halves'): per embedder, the best mean nDCG@10 over both among the
settings that do not fall below keyword alone on either. Weighted reciprocal rank fusion (the
previous rule), min-max and z-score scaling were measured beside them and did less well.

An item whose vector does not exist yet (still in the backlog) is scored as if the vector
ranking agreed with the keyword one, so fusion neither buries nor favours what was just stored.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from engines.local.embed import Embedder, HashingEmbedder
from engines.local.minilm import MiniLMEmbedder
from engines.local.search import Ranked


@dataclass(frozen=True, slots=True)
class Fusion:
    """Hybrid search's weights: the vector ranking's share of an item's score (keyword has the rest),
    and how many of keyword's best items feed the query's vector, with what weight (0: no feedback)."""

    vector: float
    feedback_items: int
    feedback_weight: float


SEMANTIC = Fusion(vector=0.6, feedback_items=3, feedback_weight=1.0)
"""For embedders that measure meaning (the static model, sentence models, endpoints). With the static
embedder on the development queries: nDCG@10 0.3713 / 0.5891 (NFCorpus / tldr), keyword alone
0.3533 / 0.5585, weighted reciprocal rank fusion (vector 0.4, k 5) 0.3534 / 0.5781."""

MINILM = Fusion(vector=0.7, feedback_items=3, feedback_weight=0.5)
"""For all-MiniLM-L6-v2, the default, whose vectors rank as well as keyword alone or better: a larger vector share
and lighter feedback. On the development queries: 0.3978 / 0.6321 (NFCorpus / tldr), where `SEMANTIC`'s weights
gave it 0.3990 / 0.6070 and keyword alone 0.3533 / 0.5585."""

LEXICAL = Fusion(vector=0.2, feedback_items=3, feedback_weight=1.5)
"""For embedders that measure word overlap (hashed n-grams), whose ranking mostly repeats keyword's:
0.3665 / 0.5742 on the same queries (reciprocal rank fusion, vector 0.2, k 5: 0.3535 / 0.5654)."""

RRF_K = 60
"""Reciprocal rank fusion's rank offset, for merging rankings of equal standing (`fuse_ranks`)."""


def fusion_for(embedder: Embedder) -> Fusion:
    """The weights hybrid search gives `embedder`'s ranking."""
    if isinstance(embedder, HashingEmbedder):
        return LEXICAL
    return MINILM if isinstance(embedder, MiniLMEmbedder) else SEMANTIC


def feedback_query(query: NDArray[np.float32], best: NDArray[np.float32], weights: Fusion) -> NDArray[np.float32]:
    """`query` moved towards the mean of `best` (unit rows: the vectors of keyword's best items),
    by `weights.feedback_weight` of a unit step; unit length again."""
    if not len(best) or weights.feedback_weight <= 0:
        return query
    centre = best.mean(axis=0)
    size = float(np.linalg.norm(centre))
    if size == 0:
        return query
    moved = query + (weights.feedback_weight / size) * centre
    length = float(np.linalg.norm(moved))
    return (moved / length).astype(np.float32) if length > 0 else query


def fuse(
    keyword: list[Ranked],
    vector: list[Ranked],
    want: int,
    weights: Fusion,
    unembedded: set[int],
    floor: float,
) -> list[Ranked]:
    """The `want` best items of both rankings by their scaled scores (see the module's docstring); an
    item keeps the passage its keyword ranking chose, if any. `floor` is the least cosine a vector hit
    may have. `unembedded` names items without vectors yet: their keyword score stands for both."""
    scores: dict[int, float] = {}
    passage: dict[int, int] = {}
    if vector:
        span = vector[0].score - floor
        for hit in vector:
            scaled = (hit.score - floor) / span if span > 0 else 1.0
            scores[hit.item_seq] = weights.vector * scaled
            passage[hit.item_seq] = hit.passage
    top = keyword[0].score if keyword else 0.0
    for hit in keyword:
        scaled = hit.score / top if top > 0 else 1.0
        share = 1.0 if hit.item_seq in unembedded and hit.item_seq not in scores else 1.0 - weights.vector
        scores[hit.item_seq] = scores.get(hit.item_seq, 0.0) + share * scaled
        passage[hit.item_seq] = hit.passage
    return _best(scores, passage, want)


def fuse_ranks(first: list[Ranked], second: list[Ranked], want: int) -> list[Ranked]:
    """Plain reciprocal rank fusion (equal weights, k = 60) of two rankings of equal standing: the
    vector mode merges the keyword stand-ins for items without vectors with the vector ranking so."""
    scores: dict[int, float] = {}
    passage: dict[int, int] = {}
    for ranking in (second, first):
        for rank, hit in enumerate(ranking, start=1):
            scores[hit.item_seq] = scores.get(hit.item_seq, 0.0) + 1.0 / (RRF_K + rank)
            passage[hit.item_seq] = hit.passage
    return _best(scores, passage, want)


def _best(scores: dict[int, float], passage: dict[int, int], want: int) -> list[Ranked]:
    ordered = sorted(scores, key=lambda seq: (-scores[seq], seq))
    return [Ranked(seq, passage[seq], scores[seq]) for seq in ordered[:want]]
