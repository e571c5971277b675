"""The vector file: a copy of the passages' vectors beside the memory file, memory-mapped by every process.

SQLite's `passage_vectors` stays the source of truth; this file is derived from it, so any process can
rebuild it. Each process maps it read-only, so the host's processes share one copy in the page cache
instead of each holding its own. Writers append with `pwrite` under the file's lock (`vector_sync`).

Layout: a 4 KiB header, then blocks of `block_rows` rows. A block holds its rows' `passage_vectors.seq`
values, passage rowids and item seqs (int64 each), then their float32 vectors, so each block's vectors
are one contiguous matrix that BLAS multiplies at memory speed, and a block is mapped once and kept while
later rows fill the blocks after it. Rows are in seq order (arrival order), so the last row's seq is the
file's watermark.

The header's row count is the commit point: a writer extends the file, writes rows past the count, and
only then writes the count. A writer killed midway leaves rows past the count, which nobody reads and the
next append overwrites (a torn tail); the file is cut back to the blocks it needs when next appended to.
The header also names the embedder of the vectors and the memory file's inode (a copied or replaced
memory file has another), and `clean_at`: the file's deletion counter (`pending.deletions`) at which
every row was known live, so a process opening a file with nothing removed since need not check.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

MAGIC = b"TMVECT01"
HEADER_BYTES = 4096
BLOCK_ROWS = 16_384
"""Rows per block: 25 MB of vectors at 384 dimensions. A multiple of 512, so every block starts on a page."""

_HEADER = struct.Struct("<8sIIQqqH")  # magic, dimensions, block rows, memory file's inode, count, clean_at, name length
_COUNT_AT = 24
_CLEAN_AT = 32
_META = 3  # int64 columns per row: seq, passage rowid, item seq


class UnreadableError(Exception):
    """The vector file is not one this process can use (damaged, or of another shape): rebuild it."""


@dataclass(frozen=True, slots=True)
class Header:
    """What a vector file says of itself."""

    dimensions: int
    block_rows: int
    database: int
    """The inode of the memory file it was derived from."""
    count: int
    clean_at: int
    identity: str
    """The embedder whose vectors it holds."""

    def block_bytes(self) -> int:
        return block_bytes(self.block_rows, self.dimensions)

    def size_for(self, rows: int) -> int:
        """The file size that holds `rows` rows: whole blocks."""
        return HEADER_BYTES + -(-rows // self.block_rows) * self.block_bytes()

    def encode(self) -> bytes:
        name = self.identity.encode()
        fixed = _HEADER.pack(
            MAGIC, self.dimensions, self.block_rows, self.database, self.count, self.clean_at, len(name)
        )
        if len(fixed) + len(name) > HEADER_BYTES:
            raise ValueError(f"embedder name too long for a vector file: {self.identity[:80]}...")
        return (fixed + name).ljust(HEADER_BYTES, b"\0")


def block_bytes(block_rows: int, dimensions: int) -> int:
    return block_rows * (_META * 8 + dimensions * 4)


def decode(raw: bytes, size: int) -> Header:
    """The header of a file of `size` bytes whose first bytes are `raw`; UnreadableError when it is not one."""
    if len(raw) < HEADER_BYTES:
        raise UnreadableError(f"{len(raw)} bytes, shorter than its header")
    magic, dimensions, rows, database, count, clean_at, length = _HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise UnreadableError("not a vector file of this version")
    if rows <= 0 or rows % 512 or dimensions <= 0 or count < 0 or _HEADER.size + length > HEADER_BYTES:
        raise UnreadableError("its header is damaged")
    header = Header(dimensions, rows, database, count, clean_at, raw[_HEADER.size : _HEADER.size + length].decode())
    if size < header.size_for(count):
        raise UnreadableError(f"{size} bytes, too short for the {count} rows its header counts")
    return header


@dataclass(frozen=True, slots=True)
class Block:
    """One block's columns, mapped (read-only views of the file): every row of the block, filled or not."""

    seqs: NDArray[np.int64]
    rowids: NDArray[np.int64]
    items: NDArray[np.int64]
    matrix: NDArray[np.float32]


class MappedFile:
    """A vector file mapped for reading. Blocks are mapped as rows reach them, each once; a file replaced on
    disk (rebuilt, compacted) stays readable through this mapping until it is dropped."""

    def __init__(self, path: Path) -> None:
        with path.open("rb") as file:
            stat = os.fstat(file.fileno())
            self.inode = stat.st_ino
            self._header_map = mmap.mmap(file.fileno(), HEADER_BYTES, access=mmap.ACCESS_READ)
            self.header = decode(self._header_map[:HEADER_BYTES], stat.st_size)
        self.path = path
        self._blocks: list[Block] = []

    def count(self) -> int:
        """Rows committed now (other processes append while this one reads)."""
        return int(struct.unpack_from("<q", self._header_map, _COUNT_AT)[0])

    def clean_at(self) -> int:
        return int(struct.unpack_from("<q", self._header_map, _CLEAN_AT)[0])

    def blocks(self, rows: int) -> list[Block]:
        """The blocks holding the first `rows` rows (mapping those not mapped yet)."""
        needed = -(-rows // self.header.block_rows)
        if needed > len(self._blocks):
            with self.path.open("rb") as file:
                # The path may name a newer file by now: map this one's blocks only if it still is this one.
                if os.fstat(file.fileno()).st_ino != self.inode:
                    raise UnreadableError("replaced while being read")
                while len(self._blocks) < needed:
                    self._blocks.append(self._map(file.fileno(), len(self._blocks)))
        return self._blocks[:needed]

    def _map(self, fd: int, index: int) -> Block:
        header = self.header
        rows, size = header.block_rows, header.block_bytes()
        try:
            region = mmap.mmap(fd, size, access=mmap.ACCESS_READ, offset=HEADER_BYTES + index * size)
        except ValueError as err:  # shorter than its count says: cut by hand, or a disk that lost writes
            raise UnreadableError(f"block {index} is cut short") from err
        meta = np.frombuffer(region, dtype=np.int64, count=_META * rows).reshape(_META, rows)
        matrix = np.frombuffer(region, dtype=np.float32, offset=_META * 8 * rows).reshape(rows, header.dimensions)
        return Block(meta[0], meta[1], meta[2], matrix)


@dataclass(frozen=True, slots=True)
class Rows:
    """Rows to write, in seq order."""

    seqs: NDArray[np.int64]
    rowids: NDArray[np.int64]
    items: NDArray[np.int64]
    matrix: NDArray[np.float32]

    def __len__(self) -> int:
        return len(self.seqs)


class FileWriter:
    """Appends to a vector file, as the one writer (the caller holds the file's lock)."""

    def __init__(self, path: Path, create: Header | None = None) -> None:
        """Open the file at `path`, or create it with header `create` (its count must be 0)."""
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create is not None else 0)
        self._fd = os.open(path, flags, 0o644)
        try:
            if create is not None:
                os.pwrite(self._fd, create.encode(), 0)
                self.header = create
            else:
                self.header = decode(os.pread(self._fd, HEADER_BYTES, 0), os.fstat(self._fd).st_size)
        except BaseException:
            os.close(self._fd)
            raise
        self.count = self.header.count

    def close(self) -> None:
        os.close(self._fd)

    def append(self, rows: Rows) -> None:
        """Write `rows` after the committed ones, then commit them (the count last)."""
        if not len(rows):
            return
        header, start = self.header, self.count
        end = start + len(rows)
        size = header.size_for(end)
        if os.fstat(self._fd).st_size != size:  # grow by whole blocks; cut a torn tail's extra block back
            os.ftruncate(self._fd, size)
        done = 0
        while done < len(rows):
            block, offset = divmod(start + done, header.block_rows)
            take = min(len(rows) - done, header.block_rows - offset)
            base = HEADER_BYTES + block * header.block_bytes()
            part = slice(done, done + take)
            for column, values in enumerate((rows.seqs, rows.rowids, rows.items)):
                at = base + (column * header.block_rows + offset) * 8
                os.pwrite(self._fd, np.ascontiguousarray(values[part], dtype=np.int64).tobytes(), at)
            at = base + _META * 8 * header.block_rows + offset * header.dimensions * 4
            os.pwrite(self._fd, np.ascontiguousarray(rows.matrix[part], dtype=np.float32).tobytes(), at)
            done += take
        os.pwrite(self._fd, struct.pack("<q", end), _COUNT_AT)
        self.count = end

    def last_seq(self) -> int:
        """The seq of the last committed row (0: none)."""
        if not self.count:
            return 0
        block, offset = divmod(self.count - 1, self.header.block_rows)
        raw = os.pread(self._fd, 8, HEADER_BYTES + block * self.header.block_bytes() + offset * 8)
        return int(struct.unpack("<q", raw)[0])

    def mark_clean(self, deletions: int) -> None:
        """Record that every row is live as of the file's deletion counter `deletions`."""
        os.pwrite(self._fd, struct.pack("<q", deletions), _CLEAN_AT)
