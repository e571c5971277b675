"""An in-memory copy of the passages' vectors, kept in step with the file, searched with numpy.

Other processes write the same file, and vectors arrive after their passages (the backlog embeds
them later), so before each search the copy loads the vectors that arrived since it last looked
(in arrival order), and drops removed ones when the file's deletion counter has moved. It loads
only vectors of its own embedder: when the file names another, it has none to search.

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

from engines.local.pending import deletions, recorded_embedder


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
        sort, and widened while several passages of one item leave it short of `depth` items. Equal
        scores go by rowid, and every passage tied with the window's last is in it, so the order is the
        same whatever the depth (a shallow read is the start of a deep one).
        """
        scores = self.matrix @ query
        mask = scores >= threshold
        if among is not None:
            mask &= np.isin(self.items, among)
        chosen = np.flatnonzero(mask)
        window = min(len(chosen), max(depth * 2, 64))
        while True:
            top = chosen
            if window < len(chosen):
                cutoff = -np.partition(-scores[chosen], window - 1)[window - 1]
                top = chosen[scores[chosen] >= cutoff]
            order = top[np.lexsort((self.rowids[top], -scores[top]))]
            _, first = np.unique(self.items[order], return_index=True)
            best = order[np.sort(first)][:depth]
            if len(best) >= depth or window >= len(chosen):
                return self.items[best], self.rowids[best], scores[best]
            window = min(len(chosen), window * 4)

    def vectors_of(self, passages: list[int]) -> NDArray[np.float32]:
        """The vectors of those of `passages` (rowids) that have one in this snapshot."""
        # A pass over the rowids: well under a millisecond at 50,000 passages, for a handful of rowids.
        return self.matrix[np.isin(self.rowids, passages)]


class VectorIndex:
    """Passage vectors of one embedder with their passage rowids and item seqs, grown in place as they arrive."""

    def __init__(self, identity: str, dimensions: int) -> None:
        self.identity = identity
        self.dimensions = dimensions
        self._lock = threading.Lock()
        self._size = 0
        self._seqs = np.zeros(1024, dtype=np.int64)
        self._rowids = np.zeros(1024, dtype=np.int64)
        self._items = np.zeros(1024, dtype=np.int64)
        self._matrix = np.zeros((1024, dimensions), dtype=np.float32)
        self._loaded_upto = 0
        self._deletions = -1

    def refresh(self, conn: sqlite3.Connection) -> Snapshot | None:
        """Bring the copy up to what `conn` sees, and the snapshot to search; None when the file's
        vectors are another embedder's."""
        with self._lock:
            # One read transaction: the embedder named and the vectors loaded come from one moment,
            # so a change of embedder committed in between cannot slip foreign vectors in.
            conn.execute("BEGIN")
            try:
                return self._refresh(conn)
            finally:
                conn.execute("COMMIT")

    def _refresh(self, conn: sqlite3.Connection) -> Snapshot | None:
        if recorded_embedder(conn) not in (None, self.identity):
            return None
        removed = deletions(conn)
        if removed != self._deletions:
            self._drop_removed(conn)
            self._deletions = removed
        rows = conn.execute(
            "SELECT v.seq, p.rowid, p.item_seq, v.vector FROM passage_vectors v CROSS JOIN passages p "
            "ON p.rowid = v.passage WHERE v.seq > ? ORDER BY v.seq",
            (self._loaded_upto,),
        ).fetchall()
        if rows:
            self._append(rows)
        size = self._size
        return Snapshot(self._rowids[:size], self._items[:size], self._matrix[:size])

    def _drop_removed(self, conn: sqlite3.Connection) -> None:
        live = np.fromiter((r[0] for r in conn.execute("SELECT seq FROM passage_vectors")), dtype=np.int64)
        keep = np.isin(self._seqs[: self._size], live, assume_unique=True)
        # New arrays (boolean indexing copies): a search may still be reading the old ones.
        self._seqs = self._seqs[: self._size][keep]
        self._rowids = self._rowids[: self._size][keep]
        self._items = self._items[: self._size][keep]
        self._matrix = self._matrix[: self._size][keep]
        self._size = len(self._rowids)

    def _append(self, rows: list[tuple[int, int, int, bytes]]) -> None:
        self._reserve(self._size + len(rows))
        end = self._size + len(rows)
        self._seqs[self._size : end] = [r[0] for r in rows]
        self._rowids[self._size : end] = [r[1] for r in rows]
        self._items[self._size : end] = [r[2] for r in rows]
        block = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32)
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
        seqs = np.zeros(capacity, dtype=np.int64)
        rowids = np.zeros(capacity, dtype=np.int64)
        items = np.zeros(capacity, dtype=np.int64)
        matrix = np.zeros((capacity, self.dimensions), dtype=np.float32)
        seqs[: self._size] = self._seqs[: self._size]
        rowids[: self._size] = self._rowids[: self._size]
        items[: self._size] = self._items[: self._size]
        matrix[: self._size] = self._matrix[: self._size]
        self._seqs, self._rowids, self._items, self._matrix = seqs, rowids, items, matrix
