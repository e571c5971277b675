"""One ranked read's ranking in PostgreSQL, by mode, with the keyword stand-in for what has no vector yet.

The modes and the fusion are the local engine's (`engines.local.ranking`, `engines.local.fusion`), shared rather
than copied: keyword is BM25 alone; vector is the HNSW ranking, with items still waiting for their vectors merged
in by their keyword rank (reciprocal rank fusion); hybrid fuses both rankings' scaled scores, the vector ranking
read with the query moved towards keyword's best items, an item without vectors scored by keyword alone.
"""

from __future__ import annotations

import numpy as np
import psycopg
from numpy.typing import NDArray

from engines.contract import FetchMode
from engines.local.fusion import Fusion, feedback_query, fuse, fuse_ranks
from engines.local.ranking import Ranking
from engines.local.search import Ranked
from engines.local.where import Where
from engines.postgres import vectors
from engines.postgres.keyword import KeywordStats, keyword_ranking


def rank(
    conn: psycopg.Connection,
    stats: KeywordStats,
    where: Where,
    query: str,
    mode: FetchMode,
    vector: NDArray[np.float32] | None,
    want: int,
    fusion: Fusion,
    floor: float,
) -> Ranking:
    """The ranking of `query` in `mode` over the items `where` admits, `want` deep."""
    keyword: list[Ranked] | None = None

    def by_keyword() -> list[Ranked]:
        nonlocal keyword
        if keyword is None:
            keyword = keyword_ranking(conn, stats, where, query, want)
        return keyword

    if mode is FetchMode.KEYWORD or vector is None:
        return Ranking(by_keyword())
    waiting: set[int] = set()
    if vectors.has_pending(conn):
        waiting = vectors.pending_items(conn, [hit.item_seq for hit in by_keyword()])
    if mode is FetchMode.VECTOR:
        found = vectors.vector_ranking(conn, where, vector, floor, want)
        if not waiting:
            return Ranking(found)
        stand_ins = [hit for hit in by_keyword() if hit.item_seq in waiting]
        return Ranking(fuse_ranks(stand_ins, found, want), keyword_only=len(stand_ins))
    words = by_keyword()
    best = [hit.passage for hit in words[: fusion.feedback_items]]
    moved = vector
    if best:
        known = vectors.vectors_of(conn, best)
        if len(known):
            moved = feedback_query(vector, known, fusion)
    found = vectors.vector_ranking(conn, where, moved, floor, want)
    fused = fuse(words, found, want, fusion, waiting, floor)
    return Ranking(fused, keyword_only=sum(1 for hit in fused if hit.item_seq in waiting))


__all__ = ["rank"]
