"""Vector search over pgvector's HNSW index, and the queue of passages still waiting for their vectors.

A ranked read asks the index for the passages nearest the query (cosine), keeps each item's best, and checks the
items against the read's filter. The index is approximate and knows nothing of filters, so when too few of its
nearest pass the filter it is read deeper, and then, for a selective filter, the admitted items' passages are
scored exactly instead (a sequential scan of what the filter admits, the HNSW index set aside).

The queue is claimed with `FOR UPDATE SKIP LOCKED`: every process embedding for the database takes a batch
nobody else holds, embeds it while its transaction holds the rows, and saves the vectors and drops the batch from
the queue in that transaction. A process that dies mid-batch loses its connection, which releases its rows to the
next claimer; no passage's vector is ever stored twice. The claim also takes a key-share lock on the passages, so
a removal of their items waits for the batch instead of deadlocking with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import psycopg
from numpy.typing import NDArray
from pgvector import Vector

from engines.local.embed import Vectors
from engines.local.rows import indexed_texts
from engines.local.search import Ranked
from engines.local.where import Where
from engines.postgres.sql import sql_of
from engines.postgres.writes import save_vectors

CANDIDATES = 64
"""The fewest passages asked of the HNSW index for one read."""
DEEPEST = 1_000
"""The most asked of it (pgvector's largest `hnsw.ef_search`): past this the filter is applied first."""

_NEAREST = (
    "SELECT v.passage, p.item_seq, 1 - (v.embedding <=> %s) AS cosine FROM passage_vectors v "
    "JOIN passages p ON p.id = v.passage ORDER BY v.embedding <=> %s LIMIT %s"
)
_FILTERED = (
    "SELECT v.passage, p.item_seq, 1 - (v.embedding <=> %s) AS cosine FROM passage_vectors v "
    "JOIN passages p ON p.id = v.passage JOIN items i ON i.seq = p.item_seq WHERE ({where}) "
    "ORDER BY v.embedding <=> %s, v.passage LIMIT %s"
)
_CLAIM = (
    "SELECT q.passage, p.start, p.stop, i.body FROM pending_vectors q JOIN passages p ON p.id = q.passage "
    "JOIN items i ON i.seq = p.item_seq {among} ORDER BY q.passage LIMIT %s "
    "FOR UPDATE OF q SKIP LOCKED FOR KEY SHARE OF p SKIP LOCKED"
)


def vector_ranking(
    conn: psycopg.Connection, where: Where, query: NDArray[np.float32], threshold: float, want: int
) -> list[Ranked]:
    """Items whose best embedded passage's cosine with `query` reaches `threshold`, best first."""
    depth = max(CANDIDATES, want * 4)
    while True:
        conn.execute(f"SET LOCAL hnsw.ef_search = {min(depth, DEEPEST)}")
        rows = conn.execute(_NEAREST, (query, query, min(depth, DEEPEST))).fetchall()
        best = _best_per_item(rows, threshold)
        admitted = _admitted(conn, where, [r.item_seq for r in best])
        ranked = [r for r in best if r.item_seq in admitted][:want]
        exhausted = len(rows) < min(depth, DEEPEST) or (rows and float(rows[-1][2]) < threshold)
        if len(ranked) >= want or exhausted:
            return ranked
        if depth >= DEEPEST:
            return _filtered_first(conn, where, query, threshold, want)
        depth *= 4


def _best_per_item(rows: list[tuple[int, int, float]], threshold: float) -> list[Ranked]:
    seen: set[int] = set()
    best: list[Ranked] = []
    for passage, seq, cosine in rows:
        score = float(cosine)
        # NaN (an all-zero vector) compares false, so it is never a hit.
        if not score >= threshold or seq in seen:
            continue
        seen.add(seq)
        best.append(Ranked(int(seq), int(passage), score))
    return best


def _admitted(conn: psycopg.Connection, where: Where, seqs: list[int]) -> set[int]:
    if not seqs:
        return set()
    clause, params = sql_of(where)
    rows = conn.execute(f"SELECT i.seq FROM items i WHERE i.seq = ANY(%s) AND ({clause})", (seqs, *params))
    return {row[0] for row in rows}


def _filtered_first(
    conn: psycopg.Connection, where: Where, query: NDArray[np.float32], threshold: float, want: int
) -> list[Ranked]:
    """For a selective filter: score the admitted items' passages exactly (the HNSW index set aside)."""
    clause, params = sql_of(where)
    conn.execute("SET LOCAL enable_indexscan = off")
    limit = max(want * 4, CANDIDATES)
    while True:
        rows = conn.execute(_FILTERED.format(where=clause), (query, *params, query, limit)).fetchall()
        best = _best_per_item(rows, threshold)
        if len(best) >= want or len(rows) < limit or float(rows[-1][2]) < threshold:
            return best[:want]
        limit *= 4


def vectors_of(conn: psycopg.Connection, passages: list[int]) -> Vectors:
    """The stored vectors of those of `passages` that have one."""
    rows = conn.execute(
        "SELECT embedding FROM passage_vectors WHERE passage = ANY(%s)", (passages,), binary=True
    ).fetchall()
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    found: list[Vector] = [row[0] for row in rows]
    return np.stack([vector.to_numpy() for vector in found]).astype(np.float32, copy=False)


def has_pending(conn: psycopg.Connection) -> bool:
    row = conn.execute("SELECT EXISTS (SELECT 1 FROM pending_vectors)").fetchone()
    return bool(row and row[0])


RATE_WINDOW_S = 60
"""The backlog's rate is measured over the vectors stored in the last minute, by every process."""
MIN_SPAN_S = 5.0
"""No rate is told before those vectors span this long: a batch or two say little of the pace."""


@dataclass(frozen=True)
class VectorProgress:
    """The database's vector backlog: passages waiting, and vectors stored a second over the last minute (None
    until that is known)."""

    waiting: int
    rate_per_s: float | None


def progress(conn: psycopg.Connection) -> VectorProgress:
    row = conn.execute(
        "SELECT (SELECT count(*) FROM pending_vectors), count(*), extract(epoch FROM now() - min(stored_at)) "
        f"FROM passage_vectors WHERE stored_at > now() - interval '{RATE_WINDOW_S} seconds'"
    ).fetchone()
    waiting, recent, span = row if row else (0, 0, None)
    rate = recent / float(span) if recent and span is not None and float(span) >= MIN_SPAN_S else None
    return VectorProgress(int(waiting), rate)


def pending_count(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM pending_vectors").fetchone()
    return int(row[0]) if row else 0


def pending_items(conn: psycopg.Connection, seqs: list[int]) -> set[int]:
    """Those of the items `seqs` with passages still waiting for vectors."""
    if not seqs:
        return set()
    rows = conn.execute(
        "SELECT DISTINCT p.item_seq FROM pending_vectors q JOIN passages p ON p.id = q.passage "
        "WHERE p.item_seq = ANY(%s)",
        (seqs,),
    )
    return {row[0] for row in rows}


Claimed = list[tuple[int, str]]
"""Claimed passages: (passage id, the text its vector is computed from)."""


def claim(conn: psycopg.Connection, limit: int, among: list[int] | None = None) -> Claimed:
    """Claim up to `limit` queued passages nobody else holds (`among` only those, when given), inside the caller's
    transaction, which holds them until it ends."""
    if among is not None:
        rows = conn.execute(_CLAIM.format(among="WHERE q.passage = ANY(%s)"), (among, limit)).fetchall()
    else:
        rows = conn.execute(_CLAIM.format(among=""), (limit,)).fetchall()
    return list(indexed_texts(rows))


def finish(conn: psycopg.Connection, passages: list[int], vectors: Vectors) -> None:
    """Save the claimed passages' vectors and take them off the queue (inside the claiming transaction)."""
    save_vectors(conn, passages, vectors)
    conn.execute("DELETE FROM pending_vectors WHERE passage = ANY(%s)", (passages,))


__all__ = [
    "Claimed",
    "VectorProgress",
    "claim",
    "finish",
    "has_pending",
    "pending_count",
    "pending_items",
    "progress",
    "vector_ranking",
    "vectors_of",
]
