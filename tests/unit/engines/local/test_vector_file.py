"""The vector file beside a memory file: rankings exact against a brute-force scan of SQLite's vectors, removed
passages never returned, and the file rebuilt, cut back or compacted as SQLite (the source of truth) says.

The memory files here are filled through SQL (random unit vectors of 16 dimensions, blocks of 512 rows), so
each test stays well under a second; test_engine.py and the conformance suite run the engine over the file.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from engines.local.database import connect, write_transaction
from engines.local.pending import admits, adopt, bump_deletions
from engines.local.vector_file import HEADER_BYTES, MappedFile
from engines.local.vectors import VectorIndex
from engines.local.vectors import __name__ as vectors_module

IDENTITY = "test-embedder"
DIMENSIONS = 16
BLOCK = 512


def add(conn: sqlite3.Connection, items: int, rng: np.random.Generator, tag: str = "") -> list[int]:
    """Store `items` items of 1 to 3 passages each, with vectors; their seqs."""
    seqs = []
    with write_transaction(conn):
        admits(conn, IDENTITY)
        for _ in range(items):
            seq = conn.execute(
                "INSERT INTO items (tenant, id, kind, ns, source_kind, body) VALUES ('', ?, 'note', '', 'api', '{}') "
                "RETURNING seq",
                (f"{tag}{rng.integers(1 << 62)}",),
            ).fetchone()[0]
            seqs.append(seq)
            for piece in range(int(rng.integers(1, 4))):
                rowid = conn.execute(
                    "INSERT INTO passages (item_seq, piece, start, stop) VALUES (?, ?, 0, 1) RETURNING rowid",
                    (seq, piece),
                ).fetchone()[0]
                vector = rng.normal(size=DIMENSIONS).astype(np.float32)
                vector /= np.linalg.norm(vector)
                conn.execute("INSERT INTO passage_vectors (passage, vector) VALUES (?, ?)", (rowid, vector.tobytes()))
    return seqs


def remove(conn: sqlite3.Connection, seqs: list[int]) -> None:
    with write_transaction(conn):
        conn.executemany("DELETE FROM items WHERE seq = ?", [(s,) for s in seqs])
        bump_deletions(conn)


def brute_force(conn: sqlite3.Connection, query: np.ndarray, depth: int) -> list[tuple[int, int]]:
    """Every item by its best passage in SQLite: highest float32 cosine first, ties by the lower rowid."""
    rows = conn.execute(
        "SELECT p.item_seq, p.rowid, v.vector FROM passage_vectors v JOIN passages p ON p.rowid = v.passage"
    ).fetchall()
    matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), DIMENSIONS)
    scores = (matrix @ query).tolist()
    order = sorted(range(len(rows)), key=lambda n: (-scores[n], rows[n][1]))
    seen: set[int] = set()
    best = []
    for n in order:
        if rows[n][0] not in seen:
            seen.add(rows[n][0])
            best.append((rows[n][0], rows[n][1]))
    return best[:depth]


def ranked(index: VectorIndex, conn: sqlite3.Connection, query: np.ndarray, depth: int) -> list[tuple[int, int]]:
    snapshot = index.refresh(conn)
    assert snapshot is not None
    items, rowids, _ = snapshot.best_per_item(query, -1.0, depth)
    return list(zip(items.tolist(), rowids.tolist(), strict=True))


def assert_exact(index: VectorIndex, conn: sqlite3.Connection, rng: np.random.Generator) -> None:
    for _ in range(3):
        query = rng.normal(size=DIMENSIONS).astype(np.float32)
        query /= np.linalg.norm(query)
        for depth in (1, 10, 200):
            assert ranked(index, conn, query, depth) == brute_force(conn, query, depth)


def file_seqs(path: Path) -> list[int]:
    mapped = MappedFile(path)
    count = mapped.count()
    return np.concatenate([b.seqs for b in mapped.blocks(count)] or [np.zeros(0, np.int64)])[:count].tolist()


def sqlite_seqs(conn: sqlite3.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT seq FROM passage_vectors ORDER BY seq")]


@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    return connect(tmp_path / "m.sqlite3")


def test_rankings_are_exact_as_vectors_arrive_across_blocks(conn: sqlite3.Connection, tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    index = VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK)
    for batch in (5, 300, 400):  # about 1,400 passages: three blocks, the last one part full
        add(conn, batch, rng)
        assert_exact(index, conn, rng)
    assert file_seqs(tmp_path / "m.sqlite3-vectors") == sqlite_seqs(conn)
    # A second process's view maps the same file and ranks the same.
    assert_exact(VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK), conn, rng)


def test_removed_items_are_never_returned_and_many_are_compacted_away(
    conn: sqlite3.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(2)
    index, other = (VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK) for _ in range(2))
    seqs = add(conn, 600, rng)
    assert_exact(index, conn, rng)
    assert_exact(other, conn, rng)
    path = tmp_path / "m.sqlite3-vectors"
    inode = path.stat().st_ino
    remove(conn, seqs[::10])  # a tenth: kept in the file, filtered out
    assert_exact(index, conn, rng)
    assert path.stat().st_ino == inode
    monkeypatch.setattr(f"{vectors_module}.COMPACT_MIN_ROWS", 0)
    remove(conn, seqs[1::2])  # more than a quarter removed: the file is rewritten without them
    assert_exact(index, conn, rng)
    assert path.stat().st_ino != inode
    assert file_seqs(path) == sqlite_seqs(conn)
    add(conn, 50, rng)
    assert_exact(other, conn, rng)  # it still mapped the old file: it moves to the new one
    assert file_seqs(path) == sqlite_seqs(conn)


def test_a_missing_vector_file_is_built_then_rebuilt_with_a_warning(
    conn: sqlite3.Connection, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(3)
    add(conn, 200, rng)  # a memory file from before vector files: vectors in SQLite only
    path = tmp_path / "m.sqlite3-vectors"
    index = VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK)
    with caplog.at_level(logging.INFO):
        assert_exact(index, conn, rng)
    built = [r for r in caplog.records if str(path) in r.getMessage() and "rebuilding" in r.getMessage()]
    assert [r.levelno for r in built] == [logging.INFO]  # what a migration is: expected, so no warning
    caplog.clear()
    path.unlink()
    add(conn, 20, rng)
    with caplog.at_level(logging.WARNING):
        assert_exact(index, conn, rng)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1
    assert "missing (deleted)" in warned[0]
    assert "rebuilding it from the memory file's" in warned[0]
    assert file_seqs(path) == sqlite_seqs(conn)


def test_a_torn_tail_is_never_read_and_is_overwritten(conn: sqlite3.Connection, tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    add(conn, 120, rng)  # fewer than 512 passages: one block
    index = VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK)
    assert_exact(index, conn, rng)
    path = tmp_path / "m.sqlite3-vectors"
    count = MappedFile(path).count()
    assert count < BLOCK - 40
    # A writer killed after writing rows (here: garbage, and one more block) but before committing their count.
    block_bytes = BLOCK * (24 + DIMENSIONS * 4)
    with path.open("r+b") as file:
        file.truncate(HEADER_BYTES + 3 * block_bytes)
        file.seek(HEADER_BYTES + count * 8)  # the seqs past the count
        file.write(np.arange(10**9, 10**9 + 40, dtype=np.int64).tobytes())
        file.seek(HEADER_BYTES + BLOCK * 24 + count * DIMENSIONS * 4)
        file.write(np.full(40 * DIMENSIONS, 9.0, dtype=np.float32).tobytes())
    assert_exact(VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK), conn, rng)
    add(conn, 30, rng)
    assert_exact(index, conn, rng)
    assert file_seqs(path) == sqlite_seqs(conn)
    assert path.stat().st_size == HEADER_BYTES + block_bytes  # cut back to the blocks its rows need


@pytest.mark.parametrize("damage", ["cut", "header", "disorder"])
def test_a_damaged_vector_file_is_rebuilt_with_a_warning(
    conn: sqlite3.Connection, tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    rng = np.random.default_rng(5)
    add(conn, 400, rng)
    assert_exact(VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK), conn, rng)
    path = tmp_path / "m.sqlite3-vectors"
    with path.open("r+b") as file:
        if damage == "cut":
            file.truncate(HEADER_BYTES + 1000)
        elif damage == "header":
            file.write(b"garbage!")
        else:
            file.seek(HEADER_BYTES + 8 * 10)
            file.write(np.zeros(5, dtype=np.int64).tobytes())  # pages a disk lost: zeros among the seqs
    with caplog.at_level(logging.WARNING):
        assert_exact(VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK), conn, rng)
    assert [r for r in caplog.records if r.levelno == logging.WARNING and "rebuilding" in r.getMessage()]
    assert file_seqs(path) == sqlite_seqs(conn)


def test_another_embedders_vectors_are_not_searched_and_the_new_ones_rebuild_the_file(
    conn: sqlite3.Connection, tmp_path: Path
) -> None:
    rng = np.random.default_rng(6)
    add(conn, 100, rng)
    old = VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK)
    assert_exact(old, conn, rng)
    adopt(conn, "another-embedder")  # drops every vector and queues every passage again
    assert old.refresh(conn) is None
    new = VectorIndex("another-embedder", DIMENSIONS, block_rows=BLOCK)
    snapshot = new.refresh(conn)
    assert snapshot is not None
    assert len(snapshot.rowids) == 0
    assert MappedFile(tmp_path / "m.sqlite3-vectors").header.identity == "another-embedder"


def test_a_copied_memory_file_gets_its_own_vector_file(conn: sqlite3.Connection, tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    add(conn, 100, rng)
    assert_exact(VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK), conn, rng)
    copy = tmp_path / "copy"
    copy.mkdir()
    conn.execute(f"VACUUM INTO '{copy / 'm.sqlite3'}'")
    (copy / "m.sqlite3-vectors").write_bytes((tmp_path / "m.sqlite3-vectors").read_bytes())
    other = connect(copy / "m.sqlite3")
    remove(other, [r[0] for r in other.execute("SELECT seq FROM items LIMIT 30")])
    add(other, 10, rng)
    assert_exact(VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK), other, rng)
    assert file_seqs(copy / "m.sqlite3-vectors") == sqlite_seqs(other)


def appender(path: str, seed: int, rounds: int) -> str:
    """One process of the test below: stores, removes and searches in turn; what went wrong, or ''."""
    conn = connect(Path(path))
    rng = np.random.default_rng(seed)
    index = VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK)
    mine: list[int] = []
    for round_ in range(rounds):
        mine += add(conn, int(rng.integers(1, 40)), rng, tag=f"p{seed}-")
        if round_ % 5 == 4:
            remove(conn, mine[:3])
            mine = mine[3:]
        snapshot = index.refresh(conn)
        assert snapshot is not None
        seen = snapshot.rowids if snapshot.live is None else snapshot.rowids[snapshot.live]
        if len(np.unique(seen)) != len(seen):
            return f"round {round_}: a passage twice"
        items = set(snapshot.items.tolist() if snapshot.live is None else snapshot.items[snapshot.live].tolist())
        if not set(mine) <= items:
            return f"round {round_}: {len(set(mine) - items)} of this process's items missing"
    return ""


def test_two_processes_appending_and_reading_one_file_stay_exact(conn: sqlite3.Connection, tmp_path: Path) -> None:
    path = str(tmp_path / "m.sqlite3")
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.starmap(appender, [(path, 10, 30), (path, 11, 30)])
    assert results == ["", ""]
    seqs = file_seqs(tmp_path / "m.sqlite3-vectors")
    assert len(set(seqs)) == len(seqs)
    assert set(sqlite_seqs(conn)) <= set(seqs)
    assert_exact(VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK), conn, np.random.default_rng(12))
    assert not list(tmp_path.glob("*.tmp"))
    assert os.path.exists(f"{path}-vectors.lock")


def test_a_removal_that_took_no_vector_leaves_every_row_live(conn: sqlite3.Connection) -> None:
    rng = np.random.default_rng(8)
    seqs = add(conn, 100, rng)
    index = VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK)
    assert_exact(index, conn, rng)
    with write_transaction(conn):  # an item stored without vectors yet, then removed: the counter moves
        bump_deletions(conn)
    snapshot = index.refresh(conn)
    assert snapshot is not None
    assert snapshot.live is None
    remove(conn, seqs[:5])
    snapshot = index.refresh(conn)
    assert snapshot is not None
    assert snapshot.live is not None
    assert not set(snapshot.items[snapshot.live].tolist()) & set(seqs[:5])
    assert_exact(index, conn, rng)


def test_a_vector_file_left_by_a_removed_memory_file_is_not_taken_for_the_new_ones(
    conn: sqlite3.Connection, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(9)
    add(conn, 100, rng)
    assert_exact(VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK), conn, rng)
    # A memory file made anew where one was removed, which got the old one's inode back (ext4 reuses them): its
    # seqs start over, so only the vectors tell the old file's rows from its own.
    fresh = tmp_path / "new"
    fresh.mkdir()
    other = connect(fresh / "m.sqlite3")
    add(other, 100, rng)
    stale = bytearray((tmp_path / "m.sqlite3-vectors").read_bytes())
    stale[16:24] = (fresh / "m.sqlite3").stat().st_ino.to_bytes(8, "little")
    (fresh / "m.sqlite3-vectors").write_bytes(bytes(stale))
    with caplog.at_level(logging.WARNING):
        assert_exact(VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK), other, rng)
    assert [r for r in caplog.records if "another memory file" in r.getMessage()]
    assert file_seqs(fresh / "m.sqlite3-vectors") == sqlite_seqs(other)


def test_a_database_in_memory_gets_a_private_vector_file() -> None:
    conn = connect(Path(":memory:"))
    rng = np.random.default_rng(10)
    add(conn, 50, rng)
    assert_exact(VectorIndex(IDENTITY, DIMENSIONS, block_rows=BLOCK), conn, rng)
