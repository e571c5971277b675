"""An in-memory copy of the passages' vectors, kept in step with the file, searched with numpy.

Other processes write the same file, so before each search the copy loads the passages added
since it last looked, and drops removed ones when the file's deletion counter has moved.
"""

from __future__ import annotations

import sqlite3

import numpy as np
from numpy.typing import NDArray

DELETIONS_KEY = "deletions"


def bump_deletions(conn: sqlite3.Connection) -> None:
    """Tell every process's vector copy that passages were removed (call inside the write)."""
    conn.execute(
        "INSERT INTO settings (key, value) VALUES (?, '1') "
        "ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
        (DELETIONS_KEY,),
    )


def _deletions(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM settings WHERE key = ?", (DELETIONS_KEY,)).fetchone()
    return int(row[0]) if row else 0


class VectorIndex:
    """Passage vectors with their passage rowids and item seqs, grown in place as rows arrive."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self._size = 0
        self._rowids = np.zeros(1024, dtype=np.int64)
        self._items = np.zeros(1024, dtype=np.int64)
        self._matrix = np.zeros((1024, dimensions), dtype=np.float32)
        self._loaded_upto = 0
        self._deletions = -1

    def refresh(self, conn: sqlite3.Connection) -> None:
        deletions = _deletions(conn)
        if deletions != self._deletions:
            self._drop_removed(conn)
            self._deletions = deletions
        rows = conn.execute(
            "SELECT rowid, item_seq, vector FROM passages WHERE rowid > ? ORDER BY rowid",
            (self._loaded_upto,),
        ).fetchall()
        if rows:
            self._append(rows)

    def _drop_removed(self, conn: sqlite3.Connection) -> None:
        live = np.fromiter((r[0] for r in conn.execute("SELECT rowid FROM passages")), dtype=np.int64)
        keep = np.isin(self._rowids[: self._size], live, assume_unique=True)
        kept = int(keep.sum())
        self._rowids[:kept] = self._rowids[: self._size][keep]
        self._items[:kept] = self._items[: self._size][keep]
        self._matrix[:kept] = self._matrix[: self._size][keep]
        self._size = kept

    def _append(self, rows: list[tuple[int, int, bytes]]) -> None:
        self._reserve(self._size + len(rows))
        end = self._size + len(rows)
        self._rowids[self._size : end] = [r[0] for r in rows]
        self._items[self._size : end] = [r[1] for r in rows]
        block = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32)
        self._matrix[self._size : end] = block.reshape(len(rows), self.dimensions)
        self._size = end
        self._loaded_upto = int(rows[-1][0])

    def _reserve(self, needed: int) -> None:
        capacity = len(self._rowids)
        if needed <= capacity:
            return
        while capacity < needed:
            capacity *= 2
        self._rowids = np.resize(self._rowids, capacity)
        self._items = np.resize(self._items, capacity)
        matrix = np.zeros((capacity, self.dimensions), dtype=np.float32)
        matrix[: self._size] = self._matrix[: self._size]
        self._matrix = matrix

    def best_per_item(
        self, query: NDArray[np.float32], threshold: float, among: NDArray[np.int64] | None = None
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float32]]:
        """Items whose best passage scores at least `threshold`, best first: (item seqs, passage
        rowids, cosines). `among` restricts the search to those item seqs."""
        items = self._items[: self._size]
        scores = self._matrix[: self._size] @ query
        mask = scores >= threshold
        if among is not None:
            mask &= np.isin(items, among)
        chosen = np.flatnonzero(mask)
        order = chosen[np.argsort(-scores[chosen], kind="stable")]
        _, first = np.unique(items[order], return_index=True)
        best = order[np.sort(first)]
        return items[best], self._rowids[: self._size][best], scores[best]
