"""The passages' vectors as every process searches them: the vector file, memory-mapped, scanned exactly.

The vectors live in SQLite (`passage_vectors`), and a copy in the vector file beside it (`vector_file`),
which the host's processes share through the page cache instead of each loading its own: a process opening
a file of 300,000 passages maps it and reads 24 bytes a row (seqs, rowids, item seqs), not every vector
(measured at 256 dimensions: 0.08 s to the first snapshot against 7.8 s loading them, and a fresh process's
peak RSS 405 MiB against 1,290 MiB).
Other processes write the file, and vectors arrive after their passages (the backlog embeds them later), so
before each search `refresh` has the vector file catch up with what SQLite shows (`vector_sync`), and loads
the new rows' ids. Only vectors of this process's embedder are searched: when the file names another, none.

Removed vectors stay in the vector file until it is compacted: when the file's deletion counter has moved,
each process marks which of its rows are still in SQLite, and searches only those.

Scores are float32 cosines computed by BLAS over each block's matrix, as they were over one in-memory
matrix, so rankings are exact: every passage is scored, and equal scores go by rowid.

Several reading threads search at once. Refreshing is serialised by a lock and hands each search a
snapshot (the rows up to the size then): rows are appended past every snapshot's end, the id arrays grow
into new arrays, and a replaced vector file stays mapped while a snapshot holds it.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import tempfile
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from engines.contract import UnavailableError
from engines.local.database import read_snapshot
from engines.local.pending import deletions, recorded_embedder
from engines.local.vector_file import BLOCK_ROWS, Header, MappedFile, UnreadableError
from engines.local.vector_sync import agrees, clear_stale, compact, locked, memory_file, sync, vector_path, watermark

logger = logging.getLogger(__name__)

COMPACT_SHARE = 0.25
"""The share of removed rows in the vector file above which it is rewritten without them."""
COMPACT_MIN_ROWS = 4_096
"""Fewer removed rows than this never call for a rewrite."""
_ATTEMPTS = 4
SCAN_THREADS = min(os.cpu_count() or 1, 4)
"""Threads a scan of the vectors is spread over (the caller's and helpers): memory bandwidth, not arithmetic,
bounds a scan, and a few cores reach most of it."""
_SCANS = ThreadPoolExecutor(max_workers=max(SCAN_THREADS - 1, 1), thread_name_prefix="tm-local-scan")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The passages searchable at one refresh: rowids, item seqs and unit vectors, row for row. The vectors
    are one matrix per block of the vector file; `live` marks the rows still in SQLite (None: all)."""

    rowids: NDArray[np.int64]
    items: NDArray[np.int64]
    matrices: tuple[NDArray[np.float32], ...]
    dimensions: int
    live: NDArray[np.bool_] | None = None

    def scores(self, query: NDArray[np.float32]) -> NDArray[np.float32]:
        """The cosine of every row with `query` (unit vectors): float32, block by block; the blocks shared between
        this thread and `SCAN_THREADS - 1` others when there are several (numpy lets go of the interpreter in each
        product): memory bandwidth bounds a scan, and a second core adds some (300,000 x 384: 17 to 19 ms on one
        thread, 14 on two, here).

        Each row's product is `np.vecdot`'s, which sums every row alike: BLAS's matrix-vector product (OpenBLAS
        0.3.31, numpy 2.4) rounds a row differently by its place in the block, so equal vectors scored unequally
        and ties were no longer broken by rowid (and vecdot is no slower: 15 against 22 ms for 300,000 x 384)."""
        query = np.ascontiguousarray(query, dtype=np.float32)
        scores = np.empty(len(self.rowids), dtype=np.float32)
        starts = np.cumsum([0] + [len(matrix) for matrix in self.matrices]).tolist()

        def scan(blocks: range) -> None:
            for n in blocks:
                np.vecdot(self.matrices[n], query, out=scores[starts[n] : starts[n + 1]])

        shares = max(min(SCAN_THREADS, len(self.matrices)), 1)
        helpers = [_SCANS.submit(scan, range(n, len(self.matrices), shares)) for n in range(1, shares)]
        scan(range(0, len(self.matrices), shares))
        for helper in helpers:
            helper.result()
        return scores

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
        scores = self.scores(query)
        keep = self.live
        if among is not None:
            keep = np.isin(self.items, among) if keep is None else keep & np.isin(self.items, among)
        eligible = len(scores)
        if keep is not None:
            scores[~keep] = -np.inf  # below any threshold and any window's cutoff
            eligible = int(np.count_nonzero(keep))
        window = max(depth * 2, 64)
        while True:
            # The window's cutoff from a partial sort of every score: no copy of the hundreds of thousands
            # above the threshold (which cost more than the sort itself).
            cutoff = threshold
            if window < eligible:
                cutoff = max(threshold, float(np.partition(scores, len(scores) - window)[len(scores) - window]))
            top = np.flatnonzero(scores >= cutoff)
            if keep is not None:
                top = top[keep[top]]
            order = top[np.lexsort((self.rowids[top], -scores[top]))]
            _, first = np.unique(self.items[order], return_index=True)
            best = order[np.sort(first)][:depth]
            if len(best) >= depth or cutoff <= threshold:
                return self.items[best], self.rowids[best], scores[best]
            window *= 4

    def vectors_of(self, passages: list[int]) -> NDArray[np.float32]:
        """The vectors of those of `passages` (rowids) that have one in this snapshot."""
        # A pass over the rowids: about a millisecond at 300,000 passages, for a handful of rowids.
        mask = np.isin(self.rowids, passages)
        if self.live is not None:
            mask &= self.live
        rows = np.flatnonzero(mask)
        found = np.empty((len(rows), self.dimensions), dtype=np.float32)
        starts = np.cumsum([0] + [len(matrix) for matrix in self.matrices])
        for n, row in enumerate(rows.tolist()):
            block = int(np.searchsorted(starts, row, side="right")) - 1
            found[n] = self.matrices[block][row - starts[block]]
        return found


class VectorIndex:
    """This process's view of the vector file of one embedder: its mapping, the ids of its rows (grown in
    place as rows arrive) and which rows are still live."""

    def __init__(self, identity: str, dimensions: int, *, block_rows: int = BLOCK_ROWS) -> None:
        self.identity = identity
        self.dimensions = dimensions
        self._block_rows = block_rows
        self._lock = threading.Lock()
        self._path: Path | None = None
        self._database = 0
        self._mapped: MappedFile | None = None
        self._size = 0
        self._seqs = np.zeros(0, dtype=np.int64)
        self._rowids = np.zeros(0, dtype=np.int64)
        self._items = np.zeros(0, dtype=np.int64)
        self._live: NDArray[np.bool_] | None = None
        self._live_at = -1

    def refresh(self, conn: sqlite3.Connection) -> Snapshot | None:
        """Bring the vector file and this view up to what `conn` sees, and the snapshot to search; None
        when the file's vectors are another embedder's."""
        # One read transaction: the embedder named and the vectors searched come from one moment,
        # so a change of embedder committed in between cannot slip foreign vectors in.
        with self._lock, read_snapshot(conn):
            try:
                return self._refresh(conn)
            except OSError as err:
                raise UnavailableError(f"vector file {self._path} cannot be read or written: {err}") from err

    def _refresh(self, conn: sqlite3.Connection) -> Snapshot | None:
        recorded = recorded_embedder(conn)
        if recorded not in (None, self.identity):
            return None
        # The last vector there is, which the file must hold; and the last seq ever given out (removed vectors'
        # too): rows of the file above it came in after this transaction began, and are left out of its snapshot.
        top = int(conn.execute("SELECT max(seq) FROM passage_vectors").fetchone()[0] or 0)
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'passage_vectors'").fetchone()
        horizon = max(top, int(row[0]) if row else 0)
        removed = deletions(conn)
        path = self._path or self._locate(conn)
        for _ in range(_ATTEMPTS):
            if self._caught_up(conn, path, top):
                size = int(np.searchsorted(self._seqs[: self._size], horizon, side="right"))
                live = self._live_rows(conn, removed, size)
                if live is None or not self._compacted(path, live, removed):
                    return self._snapshot(size, live)
            else:
                with locked(path):
                    expected = Header(self.dimensions, self._block_rows, self._database, 0, -1, self.identity)
                    sync(conn, path, expected, removed, self._mapped.inode if self._mapped else None)
        raise UnavailableError(f"vector file {path} keeps changing under this process; try again")

    def _locate(self, conn: sqlite3.Connection) -> Path:
        memory = memory_file(conn)
        if memory is None:  # a database in memory: a vector file of its own in a private folder, gone with it
            folder = tempfile.mkdtemp(prefix="tm-vectors-")
            weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)
            memory = Path(folder) / "memory"
            memory.touch()
        path, self._database = vector_path(memory), memory.stat().st_ino
        with locked(path):
            clear_stale(path)
        self._path = path
        return path

    def _caught_up(self, conn: sqlite3.Connection, path: Path, top: int) -> bool:
        """Whether this view maps the file at `path`, sound and holding every row up to seq `top` (loading
        the ids of rows that arrived since); False when the file must be appended to or rebuilt first."""
        try:
            mapped = self._mapped
            if mapped is None or path.stat().st_ino != mapped.inode:
                mapped = self._map(conn, path)
            self._load(mapped)
        except (FileNotFoundError, UnreadableError):
            self._mapped = None
            return False
        return watermark(self._seqs[self._size - 1 : self._size]) >= top

    def _map(self, conn: sqlite3.Connection, path: Path) -> MappedFile:
        """Map the file at `path` in place of the one mapped; UnreadableError when it is not this memory
        file's, of this embedder."""
        self._mapped = None
        # New arrays: a search may still be reading the old file's through its snapshot.
        self._seqs, self._rowids, self._items = (np.zeros(0, dtype=np.int64) for _ in range(3))
        self._size, self._live_at = 0, -1
        mapped = MappedFile(path)
        header = mapped.header
        if (header.identity, header.dimensions, header.database) != (self.identity, self.dimensions, self._database):
            raise UnreadableError("another embedder's, or another memory file's")
        if not agrees(conn, mapped, mapped.count()):
            raise UnreadableError("its rows are another memory file's")
        self._mapped = mapped
        return mapped

    def _load(self, mapped: MappedFile) -> None:
        """Read the ids of the rows committed since the last look into this process's arrays."""
        count = mapped.count()
        if count <= self._size:
            return
        self._reserve(count)
        rows = mapped.header.block_rows
        for index, block in enumerate(mapped.blocks(count)):
            start, end = max(self._size, index * rows), min(count, (index + 1) * rows)
            if start < end:
                part = slice(start - index * rows, end - index * rows)
                self._seqs[start:end] = block.seqs[part]
                self._rowids[start:end] = block.rowids[part]
                self._items[start:end] = block.items[part]
        watermark(self._seqs[max(self._size - 1, 0) : count])  # rising from the rows loaded before
        self._size = count

    def _live_rows(self, conn: sqlite3.Connection, removed: int, size: int) -> NDArray[np.bool_] | None:
        """Which of the first `size` rows are still in SQLite; None when all are.

        A file rewritten at deletion counter n held only live rows then; while the counter stays at n
        nothing has been removed since, so every row (appended later too) is live. Likewise rows added to a
        mask computed at the counter's current value are live."""
        assert self._mapped is not None
        if removed == self._mapped.clean_at():
            return None
        if self._live_at != removed:
            self._live_at, self._live = removed, None
            # SQLite's vectors are all in the file's first `size` rows: as many means none of those was removed
            # (a count on the small index of passages; the counter also moves for passages not yet embedded).
            if conn.execute("SELECT count(*) FROM passage_vectors").fetchone()[0] != size:
                present = np.fromiter((r[0] for r in conn.execute("SELECT seq FROM passage_vectors")), np.int64)
                self._live = np.isin(self._seqs[:size], present, assume_unique=True)
        elif self._live is not None and len(self._live) < size:
            self._live = np.concatenate([self._live, np.ones(size - len(self._live), dtype=np.bool_)])
        return None if self._live is None else self._live[:size]

    def _compacted(self, path: Path, live: NDArray[np.bool_], removed: int) -> bool:
        """Rewrite the file without its removed rows when they are many; whether it was rewritten."""
        dead = len(live) - int(np.count_nonzero(live))
        if dead < max(COMPACT_MIN_ROWS, COMPACT_SHARE * self._size):
            return False
        assert self._mapped is not None
        with locked(path):
            logger.info("vector file %s: rewriting it without its %d removed rows", path, dead)
            compact(path, self._mapped, live, removed)
        return True

    def _snapshot(self, size: int, live: NDArray[np.bool_] | None) -> Snapshot:
        assert self._mapped is not None
        rows = self._mapped.header.block_rows
        blocks = self._mapped.blocks(size)
        matrices = tuple(block.matrix[: min(rows, size - n * rows)] for n, block in enumerate(blocks))
        return Snapshot(self._rowids[:size], self._items[:size], matrices, self.dimensions, live)

    def _reserve(self, needed: int) -> None:
        """Room for `needed` rows; new arrays when growing, as a search may still be reading the old ones."""
        capacity = len(self._rowids)
        if needed <= capacity:
            return
        capacity = max(capacity, 1024)
        while capacity < needed:
            capacity *= 2
        grown = []
        for old in (self._seqs, self._rowids, self._items):
            new = np.zeros(capacity, dtype=np.int64)
            new[: self._size] = old[: self._size]
            grown.append(new)
        self._seqs, self._rowids, self._items = grown
