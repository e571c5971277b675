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

import os
import sqlite3
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from engines.contract import FetchMode
from engines.local import pending
from engines.local.fusion import Fusion, feedback_query, fuse, fuse_ranks
from engines.local.postings import Postings
from engines.local.search import Ranked, TermCounts, VectorHits, keyword_ranking, vector_candidates, vector_ranking
from engines.local.vectors import Snapshot, VectorIndex
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


OVERLAP_FROM = 65_536
"""Passages with vectors from which a hybrid read scans the vectors while it reads keyword's deep ranking (below,
the scan takes a few milliseconds: not worth a second keyword read)."""

# A pool of its own: its task's scan waits on `vectors`' scan helpers, which must never wait behind it.
_OVERLAP = ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="tm-local-overlap")


def _fed(vector: NDArray[np.float32], snapshot: Snapshot, words: list[Ranked], fusion: Fusion) -> NDArray[np.float32]:
    """The query's vector moved towards those of keyword's best items (`fusion.feedback_query`)."""
    best = [hit.passage for hit in words[: fusion.feedback_items]]
    return feedback_query(vector, snapshot.vectors_of(best), fusion) if best else vector


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
    first: Future[VectorHits] | None = None
    if len(snapshot.rowids) >= OVERLAP_FROM and keyword is None:
        # A large file: keyword's best few alone first, for the feedback, then the vector scan on another thread
        # while keyword's deep read goes on here (on two cores the two overlap, as the deep read repeats the few).
        few = keyword_ranking(
            conn, req.where, req.query, rankers.fusion.feedback_items, rankers.counts, rankers.postings
        )
        query = _fed(req.vector, snapshot, few, rankers.fusion)
        first = _OVERLAP.submit(vector_candidates, snapshot, query, rankers.min_similarity, req.want)
        words = by_keyword()
    else:
        words = by_keyword()
        query = _fed(req.vector, snapshot, words, rankers.fusion)
    found = vector_ranking(
        conn, snapshot, req.where, query, rankers.min_similarity, req.want, None if first is None else first.result()
    )
    fused = fuse(words, found, req.want, rankers.fusion, waiting, rankers.min_similarity)
    return Ranking(fused, keyword_only=sum(1 for hit in fused if hit.item_seq in waiting))
