"""One ranked read's ranking, by mode, with the keyword fallback for what has no vector yet.

- keyword: BM25 alone.
- vector: the vector ranking of embedded items; items still waiting for their vectors are merged
  in by their keyword rank (reciprocal rank fusion of the two, so the scores are then fused ones).
- hybrid: normalised score fusion of both rankings (`fusion`), the vector ranking read with the
  query's vector moved towards keyword's best items; an item without vectors scored by keyword alone.

When the file's vectors are another embedder's (a process changed it after this one opened it),
vector and hybrid reads are keyword reads. Either way `keyword_only` counts the items ranked by
keyword in place of vectors, so the engine can say so.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from engines.contract import FetchMode
from engines.local import pending
from engines.local.fusion import Fusion, feedback_query, fuse, fuse_ranks
from engines.local.postings import Postings
from engines.local.search import Ranked, TermCounts, keyword_ranking, vector_ranking
from engines.local.vectors import VectorIndex
from engines.local.where import Where


@dataclass(frozen=True, slots=True)
class Ranking:
    """The ranked items, best first, and how many of them stand on keyword because they lack vectors."""

    ranked: list[Ranked]
    keyword_only: int = 0
    foreign_vectors: bool = False


@dataclass(frozen=True, slots=True)
class RankRequest:
    """What one ranked read asks: its query (and the query's vector, for vector and hybrid) and depth."""

    where: Where
    query: str
    mode: FetchMode
    vector: NDArray[np.float32] | None
    want: int


@dataclass(frozen=True, slots=True)
class Rankers:
    """What ranking reads with: the engine's vector copy, term counts, similarity floor, fusion weights, and the
    words' scores kept while the index is at rest (None: FTS5 scores every query)."""

    vectors: VectorIndex
    counts: TermCounts
    min_similarity: float
    fusion: Fusion
    postings: Postings | None = None


def rank(conn: sqlite3.Connection, req: RankRequest, rankers: Rankers) -> Ranking:
    """The ranking of `req` over what `conn` sees."""
    keyword: list[Ranked] | None = None

    def by_keyword() -> list[Ranked]:
        nonlocal keyword
        if keyword is None:
            keyword = keyword_ranking(conn, req.where, req.query, req.want, rankers.counts, rankers.postings)
        return keyword

    if req.mode is FetchMode.KEYWORD or req.vector is None:
        return Ranking(by_keyword())
    waiting: set[int] = set()
    # Before the vectors are loaded: a passage saved in between then counts twice, never not at all
    # (the backlog stores a vector and drops its passage from the queue in one transaction).
    if pending.has_pending(conn):
        # Only a file with a backlog needs the keyword ranking of a vector read: it stands in for vectors.
        waiting = pending.pending_items(conn, [hit.item_seq for hit in by_keyword()])
    snapshot = rankers.vectors.refresh(conn)
    if snapshot is None:
        found = by_keyword()
        return Ranking(found, keyword_only=len(found), foreign_vectors=True)
    if req.mode is FetchMode.VECTOR:
        found = vector_ranking(conn, snapshot, req.where, req.vector, rankers.min_similarity, req.want)
        if not waiting:
            return Ranking(found)
        stand_ins = [hit for hit in by_keyword() if hit.item_seq in waiting]
        return Ranking(fuse_ranks(stand_ins, found, req.want), keyword_only=len(stand_ins))
    words = by_keyword()
    best = [hit.passage for hit in words[: rankers.fusion.feedback_items]]
    query = feedback_query(req.vector, snapshot.vectors_of(best), rankers.fusion) if best else req.vector
    found = vector_ranking(conn, snapshot, req.where, query, rankers.min_similarity, req.want)
    fused = fuse(words, found, req.want, rankers.fusion, waiting, rankers.min_similarity)
    return Ranking(fused, keyword_only=sum(1 for hit in fused if hit.item_seq in waiting))
