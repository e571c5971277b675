"""Keeping the vector file (`vector_file`) in step with the memory file: append, rebuild, compact.

Whichever process first sees vectors in SQLite that the vector file lacks appends them, holding an
exclusive `flock` on a lock file beside it, so rows are appended once each, in seq order, whatever the
number of processes. It reads them inside its own read transaction: SQLite has one writer at a time and
`passage_vectors.seq` only grows, so a transaction that sees seq n sees every row below n still there,
and appending what it sees above the file's watermark loses nothing.

A file that is missing (deleted, or a data directory older than vector files), damaged, of another
embedder or derived from another memory file is rebuilt from SQLite under the same lock, into a
temporary file renamed over it: a process still reading the old one keeps its mapping. So is a file
whose removed rows have grown to a large share (compaction, copied from the old file's live rows).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from engines.local.vector_file import FileWriter, Header, MappedFile, Rows, UnreadableError

logger = logging.getLogger(__name__)

BATCH_ROWS = 4_096
"""Rows read from SQLite and written per step of an append or a rebuild (6 MB of vectors at 384 dimensions)."""

BUILT = b"built\n"
"""The lock file's content once a vector file was built beside it (empty before)."""


def memory_file(conn: sqlite3.Connection) -> Path | None:
    """The memory file `conn` reads; None for a database with no file (in memory)."""
    for _, name, file in conn.execute("PRAGMA database_list"):
        if name == "main" and file:
            return Path(file)
    return None


def vector_path(memory: Path) -> Path:
    """The vector file beside a memory file: `<memory file>-vectors`, as SQLite names its own files."""
    return memory.with_name(f"{memory.name}-vectors")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the vector file's lock: one writer at a time across the host's processes. The lock file is
    opened on each call, so a forked child never shares its parent's lock."""
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def watermark(seqs: NDArray[np.int64]) -> int:
    """The last seq of rows read from a vector file; UnreadableError unless they rise strictly (zeros
    where rows should be: a disk that lost writes)."""
    if len(seqs) and (seqs[0] <= 0 or np.any(np.diff(seqs) <= 0)):
        raise UnreadableError("its rows are out of order")
    return int(seqs[-1]) if len(seqs) else 0


def problem(conn: sqlite3.Connection, path: Path, expected: Header) -> tuple[str, bool] | None:
    """Why the file at `path` cannot be appended to as it is (and whether that deserves a warning); None
    when it can. `expected` names the embedder, dimensions and memory file it must have."""
    try:
        mapped = MappedFile(path)
        blocks = mapped.blocks(mapped.count())
        watermark(np.concatenate([block.seqs for block in blocks] or [np.zeros(0, np.int64)])[: mapped.count()])
    except FileNotFoundError:
        # A vector file once built leaves a mark in its lock file, which is never removed.
        if Path(f"{path}.lock").read_bytes():
            return "missing (deleted)", True
        return "not there yet (a new memory file, or one older than vector files)", False
    except (UnreadableError, OSError) as err:
        return f"unreadable ({err})", True
    found = mapped.header
    if found.identity != expected.identity:
        return f"of embedder {found.identity}, not {expected.identity}", False
    if found.dimensions != expected.dimensions:
        return f"of {found.dimensions} dimensions, not {expected.dimensions}", True
    if found.database != expected.database or not agrees(conn, mapped, mapped.count()):
        return "derived from another memory file (a copy, or one replaced)", True
    return None


def agrees(conn: sqlite3.Connection, mapped: MappedFile, rows: int) -> bool:
    """Whether the first `rows` rows of the file are this memory file's: the first, middle and last, read back
    from SQLite, hold the same passages and vector bytes. A memory file deleted and made anew can get the old
    one's inode back, and its seqs start over; its vectors are other ones."""
    block_rows = mapped.header.block_rows
    blocks = mapped.blocks(rows)
    for row in sorted({0, rows // 2, rows - 1}) if rows else ():
        block = blocks[row // block_rows]
        at = row % block_rows
        found = conn.execute(
            "SELECT passage, vector FROM passage_vectors WHERE seq = ?", (int(block.seqs[at]),)
        ).fetchone()
        # A vector removed since cannot tell: the others do.
        if found is not None and (found[0] != block.rowids[at] or found[1] != block.matrix[at].tobytes()):
            return False
    return True


def sync(conn: sqlite3.Connection, path: Path, expected: Header, deletions: int, checked: int | None) -> None:
    """Bring the file at `path` up to what `conn`'s transaction sees (the caller holds the lock): rebuild it
    when it is unusable, else append the vectors above its watermark. `deletions` is the file's deletion
    counter in that transaction; `checked` the inode of a file the caller has found usable already."""
    found = None if checked is not None and _inode(path) == checked else problem(conn, path, expected)
    if found is not None:
        reason, warn = found
        held = int(conn.execute("SELECT count(*) FROM passage_vectors").fetchone()[0])
        level = (logging.WARNING if warn else logging.INFO) if held else logging.DEBUG
        logger.log(level, "vector file %s is %s: rebuilding it from the memory file's %d vectors", path, reason, held)
        rebuild(path, expected, deletions, from_sqlite(conn, 0, expected.dimensions))
        return
    writer = FileWriter(path)
    try:
        for rows in from_sqlite(conn, writer.last_seq(), expected.dimensions):
            writer.append(rows)
    finally:
        writer.close()


def clear_stale(path: Path) -> None:
    """Remove the temporary files of rebuilds whose process was killed (the caller holds the lock)."""
    for stale in path.parent.glob(f"{path.name}.*.tmp"):
        stale.unlink(missing_ok=True)


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def from_sqlite(conn: sqlite3.Connection, after: int, dimensions: int) -> Iterator[Rows]:
    """The vectors above seq `after` that `conn` sees, in seq order, a batch at a time."""
    cursor = conn.execute(
        "SELECT v.seq, p.rowid, p.item_seq, v.vector FROM passage_vectors v CROSS JOIN passages p "
        "ON p.rowid = v.passage WHERE v.seq > ? ORDER BY v.seq",
        (after,),
    )
    while batch := cursor.fetchmany(BATCH_ROWS):
        matrix = np.frombuffer(b"".join(r[3] for r in batch), dtype=np.float32).reshape(len(batch), dimensions)
        yield Rows(
            np.fromiter((r[0] for r in batch), np.int64, len(batch)),
            np.fromiter((r[1] for r in batch), np.int64, len(batch)),
            np.fromiter((r[2] for r in batch), np.int64, len(batch)),
            matrix,
        )


def rebuild(path: Path, header: Header, deletions: int, rows: Iterator[Rows]) -> None:
    """Write a new file of `rows` and put it in place of `path` (the caller holds the lock)."""
    clear_stale(path)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    writer = FileWriter(
        temporary, Header(header.dimensions, header.block_rows, header.database, 0, -1, header.identity)
    )
    try:
        for batch in rows:
            writer.append(batch)
        writer.mark_clean(deletions)
    except BaseException:
        writer.close()
        temporary.unlink(missing_ok=True)
        raise
    writer.close()
    temporary.replace(path)
    Path(f"{path}.lock").write_bytes(BUILT)


def compact(path: Path, mapped: MappedFile, live: NDArray[np.bool_], deletions: int) -> bool:
    """Rewrite the file without the rows `live` marks dead (the caller holds the lock); rows past `live`
    (appended after the caller looked) are kept. False when the file was replaced meanwhile."""
    if _inode(path) != mapped.inode:
        return False
    count = mapped.count()
    rebuild(path, mapped.header, deletions, _kept(mapped, live, count))
    return True


def _kept(mapped: MappedFile, live: NDArray[np.bool_], count: int) -> Iterator[Rows]:
    rows = mapped.header.block_rows
    for index, block in enumerate(mapped.blocks(count)):
        start = index * rows
        size = min(rows, count - start)
        keep = np.ones(size, dtype=np.bool_)
        known = live[start : start + size]
        keep[: len(known)] = known
        yield Rows(
            block.seqs[:size][keep], block.rowids[:size][keep], block.items[:size][keep], block.matrix[:size][keep]
        )
