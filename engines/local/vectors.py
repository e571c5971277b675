"""An in-memory copy of the passages' vectors, kept in step with the file, searched with numpy.

Other processes write the same file, so before each search the copy loads the passages added
since it last looked, and drops removed ones when the file's deletion counter has moved.

Several reading threads search one copy at once. Refreshing is serialised by a lock and hands
each search a snapshot (the arrays up to the size then): rows are appended past every snapshot's
end, and dropping rows builds new arrays, so a snapshot is never changed under a search.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The passages loaded at one refresh: rowids, item seqs and unit vectors, row for row."""

    rowids: NDArray[np.int64]
    items: NDArray[np.int64]
    matrix: NDArray[np.float32]

    def best_per_item(
        self, query: NDArray[np.float32], threshold: float, depth: int, among: NDArray[np.int64] | None = None
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float32]]:
        """The best `depth` items whose best passage scores at least `threshold`, best first: (item seqs,
        passage rowids, cosines). `among` restricts the search to those item seqs.

        Only the best passages are sorted: a window a few times `depth` deep is taken with a partial
        sort, and widened while several passages of one item leave it short of `depth` items.
        """
        scores = self.matrix @ query
        mask = scores >= threshold
        if among is not None:
            mask &= np.isin(self.items, among)
        chosen = np.flatnonzero(mask)
        window = min(len(chosen), max(depth * 2, 64))
        while True:
            partial = window < len(chosen)
            top = chosen[np.argpartition(-scores[chosen], window - 1)[:window]] if partial else chosen
            order = top[np.argsort(-scores[top], kind="stable")]
            _, first = np.unique(self.items[order], return_index=True)
            best = order[np.sort(first)][:depth]
            if len(best) >= depth or window >= len(chosen):
                return self.items[best], self.rowids[best], scores[best]
            window = min(len(chosen), window * 4)


class VectorIndex:
    """Passage vectors with their passage rowids and item seqs, grown in place as rows arrive."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self._lock = threading.Lock()
        self._size = 0
        self._rowids = np.zeros(1024, dtype=np.int64)
        self._items = np.zeros(1024, dtype=np.int64)
        self._matrix = np.zeros((1024, dimensions), dtype=np.float32)
        self._loaded_upto = 0
        self._deletions = -1

    def refresh(self, conn: sqlite3.Connection) -> Snapshot:
        """Bring the copy up to what `conn` sees, and the snapshot to search."""
        with self._lock:
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
            size = self._size
            return Snapshot(self._rowids[:size], self._items[:size], self._matrix[:size])

    def _drop_removed(self, conn: sqlite3.Connection) -> None:
        live = np.fromiter((r[0] for r in conn.execute("SELECT rowid FROM passages")), dtype=np.int64)
        keep = np.isin(self._rowids[: self._size], live, assume_unique=True)
        # New arrays (boolean indexing copies): a search may still be reading the old ones.
        self._rowids = self._rowids[: self._size][keep]
        self._items = self._items[: self._size][keep]
        self._matrix = self._matrix[: self._size][keep]
        self._size = len(self._rowids)

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
        capacity = max(capacity, 1024)
        while capacity < needed:
            capacity *= 2
        rowids = np.zeros(capacity, dtype=np.int64)
        items = np.zeros(capacity, dtype=np.int64)
        matrix = np.zeros((capacity, self.dimensions), dtype=np.float32)
        rowids[: self._size] = self._rowids[: self._size]
        items[: self._size] = self._items[: self._size]
        matrix[: self._size] = self._matrix[: self._size]
        self._rowids, self._items, self._matrix = rowids, items, matrix
