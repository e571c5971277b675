"""The local engine's vector file (`engines/local/vector_file.py`) through SIGKILLs: a process back-filling a memory
file (stores, with vector reads between them, which append to the vector file) is killed again and again and
restarted; once its vector file is deleted as well, and once a stale rebuild's temporary file is left beside it.
Afterwards no acknowledged item is lost, every vector is embedded, the vector file holds each of SQLite's vectors
exactly once, and vector rankings equal a brute-force scan of SQLite's float32 vectors.
"""

from __future__ import annotations

import asyncio
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from engines.contract import FetchMode, FetchRequest
from engines.local import HashingEmbedder, LocalEngine
from engines.local.vector_file import MappedFile
from engines.local.vectors import VectorIndex
from tests.reliability.conftest import Figures

pytestmark = [pytest.mark.slow]

KILLS = 5
BATCH = 25
# Stores batches of notes from the number given, printing the count stored after each call returns, with a
# vector read after each store (which appends the new vectors to the vector file).
BACKFILL = """
import asyncio, sys
from engines.contract import Document, FetchMode, FetchRequest, MemoryMeta
from engines.local import HashingEmbedder, LocalEngine

WORDS = "amber basalt cobalt dune ember fjord garnet heath indigo jasper kelp lichen marl nacre ochre".split()

async def main() -> None:
    engine = LocalEngine(sys.argv[1], embedder=HashingEmbedder())
    stored, batch = int(sys.argv[2]), int(sys.argv[3])
    print("ready", stored, flush=True)
    while True:
        docs = [
            Document.from_text(
                " ".join(WORDS[(n * 7 + k) % len(WORDS)] for k in range(30 + n % 50)) + f" serial{n}",
                meta=MemoryMeta(file_path=f"/notes/{n}.md"),
            )
            for n in range(stored, stored + batch)
        ]
        await engine.store_many(docs)
        stored += batch
        print("stored", stored, flush=True)
        await engine.fetch(FetchRequest(query=WORDS[stored % len(WORDS)], mode=FetchMode.VECTOR, limit=5))

asyncio.run(main())
"""


def backfill_until_killed(path: Path, stored: int, batches: int) -> int:
    """Run the back-fill from `stored` and SIGKILL it once it has acknowledged `batches` more store calls (its
    next store or read under way); how many items it acknowledged."""
    child = subprocess.Popen(
        [sys.executable, "-c", BACKFILL, str(path), str(stored), str(BATCH)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.stdout is not None
    acknowledged = stored
    try:
        for line in child.stdout:
            word, count = line.split()
            if word == "stored":
                acknowledged = int(count)
                if acknowledged >= stored + batches * BATCH:
                    break
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        child.stdout.close()
    return acknowledged


def brute_force(conn: sqlite3.Connection, query: np.ndarray, depth: int) -> list[tuple[int, int]]:
    rows = conn.execute(
        "SELECT p.item_seq, p.rowid, v.vector FROM passage_vectors v JOIN passages p ON p.rowid = v.passage"
    ).fetchall()
    matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    scores = (matrix @ query).tolist()
    best: dict[int, tuple[float, int]] = {}
    for (item, rowid, _), score in zip(rows, scores, strict=True):
        if item not in best or (-score, rowid) < (-best[item][0], best[item][1]):
            best[item] = (score, rowid)
    return [(item, rowid) for item, (_, rowid) in sorted(best.items(), key=lambda e: (-e[1][0], e[1][1]))][:depth]


def test_a_backfill_killed_again_and_again_loses_no_vector_and_its_vector_file_catches_up(
    tmp_path: Path, figures: Figures
) -> None:
    path = tmp_path / "memory.sqlite3"
    vectors = Path(f"{path}-vectors")
    rng = random.Random(32)
    acknowledged, started = 0, time.monotonic()
    for kill in range(KILLS):
        if kill == 2:
            vectors.unlink()  # deleted while no process runs: the next one rebuilds it from SQLite
        if kill == 3:
            Path(f"{vectors}.999999.tmp").write_bytes(b"a rebuild killed midway")
        acknowledged = backfill_until_killed(path, acknowledged, rng.randint(2, 6))
    killed_s = time.monotonic() - started

    embedder = HashingEmbedder()
    engine = LocalEngine(path, embedder=embedder)
    try:
        assert asyncio.run(engine.wait_for_vectors(timeout_s=60))
        asyncio.run(engine.fetch(FetchRequest(query="amber", mode=FetchMode.VECTOR, limit=5)))
    finally:
        engine.close()
    conn = sqlite3.connect(path)
    items = conn.execute("SELECT count(*) FROM items").fetchone()[0]
    waiting = conn.execute("SELECT count(*) FROM pending_vectors").fetchone()[0]
    in_sqlite = [r[0] for r in conn.execute("SELECT seq FROM passage_vectors ORDER BY seq")]
    mapped = MappedFile(vectors)
    count = mapped.count()
    in_file = np.concatenate([b.seqs for b in mapped.blocks(count)])[:count].tolist()
    figures(
        f"items acknowledged {acknowledged}, stored {items}; passages waiting {waiting}; vectors in SQLite "
        f"{len(in_sqlite)}, in the vector file {len(in_file)} ({len(in_file) - len(set(in_file))} twice, "
        f"{len(set(in_sqlite) - set(in_file))} missing); {KILLS} kills in {killed_s:.1f} s",
    )
    assert items >= acknowledged
    assert waiting == 0
    assert len(in_file) == len(set(in_file))
    assert set(in_sqlite) <= set(in_file)
    assert not list(tmp_path.glob("*.tmp"))

    index = VectorIndex(embedder.identity, embedder.dimensions)
    conn.isolation_level = None
    for seed in range(3):
        query = np.random.default_rng(seed).normal(size=embedder.dimensions).astype(np.float32)
        query /= np.linalg.norm(query)
        snapshot = index.refresh(conn)
        assert snapshot is not None
        found, rowids, _ = snapshot.best_per_item(query, -1.0, 20)
        assert list(zip(found.tolist(), rowids.tolist(), strict=True)) == brute_force(conn, query, 20)
    conn.close()
