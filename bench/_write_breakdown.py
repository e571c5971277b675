"""Where `store_many`'s time goes against the bare SQLite+FTS5 floor: `engine_local.py --breakdown`.

The engine's write is two halves that overlap (`engines/local/feed.py`): the caller's Python prepares each item
(its id and wire JSON, its row, its passages) while the writing thread inserts the items prepared before. Each
half is timed here alone, on one thread, batch by batch in turn with the floor on the same texts:
  preparing     `feed.prepared_item` of every item of the batch (its id and wire JSON, then `rows.prepare`);
  SQL           `writes.insert_items` of the prepared batch into a fresh engine file (the engine's schema,
                pragmas and statements, vectors queued for the backlog as with MiniLM);
  SQL, bare     the same into a file whose items table has no secondary index (what no filter could use
                then): how near the floor the rows themselves can come.
A half's ratio is floor time / its time: `store_many` can reach a ratio only if both halves do.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from engines.contract import Document
from engines.local.database import connect
from engines.local.engine import DEFAULT_PASSAGE_CHARS
from engines.local.feed import prepared_item
from engines.local.rows import Chunk, PreparedItem
from engines.local.schema import ensure_schema
from engines.local.writes import insert_items

TENANT = "default"
BATCH = 100
QUEUED_EMBEDDER = "bench-queued"  # not the file's embedder: every passage is queued, as MiniLM's are
PARTS = ("floor", "preparing", "SQL", "SQL, bare")


class _EngineFile:
    """A fresh engine file written with the engine's own statements; `bare` drops the items' secondary indexes."""

    def __init__(self, path: Path, bare: bool) -> None:
        self.conn = connect(path)
        ensure_schema(self.conn, str(path))
        if bare:
            names = self.conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'items' AND sql IS NOT NULL"
            ).fetchall()
            for (name,) in names:
                self.conn.execute(f"DROP INDEX {name}")

    def insert(self, prepared: list[PreparedItem]) -> None:
        chunks = [Chunk(prepared[start : start + 20], {}) for start in range(0, len(prepared), 20)]
        insert_items(self.conn, TENANT, chunks, QUEUED_EMBEDDER, promise=True)


def _one_run(docs: list[Document], folder: Path, floor_type: type) -> dict[str, float]:
    stamp = time.perf_counter_ns()
    floor = floor_type(folder / f"floor-{stamp}.sqlite3")
    full = _EngineFile(folder / f"full-{stamp}.sqlite3", bare=False)
    bare = _EngineFile(folder / f"bare-{stamp}.sqlite3", bare=True)
    spent = dict.fromkeys(PARTS, 0.0)
    for start in range(0, len(docs), BATCH):
        batch = docs[start : start + BATCH]
        began = time.perf_counter()
        floor.store([doc.body.value for doc in batch])
        prepared_at = time.perf_counter()
        prepared = [prepared_item(TENANT, doc, DEFAULT_PASSAGE_CHARS) for doc in batch]
        full_at = time.perf_counter()
        full.insert(prepared)
        bare_at = time.perf_counter()
        bare.insert(prepared)
        ended = time.perf_counter()
        spent["floor"] += prepared_at - began
        spent["preparing"] += full_at - prepared_at
        spent["SQL"] += bare_at - full_at
        spent["SQL, bare"] += ended - bare_at
    for conn in (floor.conn, full.conn, bare.conn):
        conn.close()
    return spent


def print_breakdown(corpora: dict[str, list[Document]], floor_type: type, repeats: int) -> None:
    """Each half's µs a document and its ratio against the floor, summed over `repeats` interleaved runs."""
    for name, docs in corpora.items():
        total = dict.fromkeys(PARTS, 0.0)
        with tempfile.TemporaryDirectory(prefix="tm-bench-breakdown-") as tmp:
            for _ in range(repeats):
                for part, seconds in _one_run(docs, Path(tmp), floor_type).items():
                    total[part] += seconds
        per_doc = {part: seconds / (len(docs) * repeats) * 1e6 for part, seconds in total.items()}
        halves = "  ".join(
            f"{part} {per_doc[part]:.1f} µs (ratio {per_doc['floor'] / per_doc[part]:.2f})" for part in PARTS[1:]
        )
        print(f"breakdown {name}: floor {per_doc['floor']:.1f} µs a doc  {halves}", flush=True)
