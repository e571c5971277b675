"""The local engine's writes, each one SQLite transaction run on the engine's thread."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator

from engines.contract import ConfigError, ItemId
from engines.local.database import write_transaction
from engines.local.embed import Vectors
from engines.local.rows import ITEM_COLUMNS, ITEM_MARKS, PreparedItem
from engines.local.vectors import bump_deletions
from engines.local.where import Where

EMBEDDER_KEY = "embedder"
_CHUNK = 500  # ids per IN (...) list, well under SQLite's bound on parameters

_INSERT_ITEM = f"INSERT INTO items ({ITEM_COLUMNS}) VALUES ({ITEM_MARKS}) ON CONFLICT (tenant, id) DO NOTHING"
_INSERT_PASSAGE = (
    "INSERT INTO passages (item_seq, piece, page_first, page_last, section, vector) VALUES (?, ?, ?, ?, ?, ?)"
)


def chunks(values: list[int] | list[str], size: int = _CHUNK) -> Iterator[list[int] | list[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def check_embedder(conn: sqlite3.Connection, identity: str, path: str, *, record: bool) -> None:
    """Refuse to mix vectors of another embedder; with `record`, name this one on first use."""
    row = conn.execute("SELECT value FROM settings WHERE key = ?", (EMBEDDER_KEY,)).fetchone()
    if row is None:
        if record:
            conn.execute("INSERT OR IGNORE INTO settings (key, value) VALUES (?, ?)", (EMBEDDER_KEY, identity))
    elif row[0] != identity:
        raise ConfigError(
            f"memory file {path} was indexed with embedder {row[0]} but this engine uses {identity}; "
            "configure the same embedder, or use a new data directory"
        )


def held_ids(conn: sqlite3.Connection, tenant: str, ids: Iterable[ItemId]) -> set[ItemId]:
    unique = list(dict.fromkeys(ids))
    held: set[ItemId] = set()
    for chunk in chunks(unique):
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(f"SELECT id FROM items WHERE tenant = ? AND id IN ({marks})", (tenant, *chunk))
        held.update(r[0] for r in rows)
    return held


def insert_items(conn: sqlite3.Connection, prepared: list[PreparedItem], vectors: Vectors) -> set[ItemId]:
    """Insert the items in one transaction; returns the ids actually inserted (the rest were held,
    perhaps written by another process since they were looked up)."""
    inserted: set[ItemId] = set()
    row = 0
    with write_transaction(conn):
        for prep in prepared:
            cursor = conn.execute(_INSERT_ITEM, prep.values)
            if cursor.rowcount == 0:
                row += len(prep.passages)
                continue
            seq = cursor.lastrowid
            inserted.add(prep.id)
            conn.executemany("INSERT INTO item_tags (item_seq, tag) VALUES (?, ?)", [(seq, t) for t in prep.tags])
            for passage in prep.passages:
                pages = passage.pages or (None, None)
                values = (seq, passage.piece, *pages, passage.section, vectors[row].tobytes())
                rowid = conn.execute(_INSERT_PASSAGE, values).lastrowid
                conn.execute("INSERT INTO passage_text (rowid, text) VALUES (?, ?)", (rowid, passage.text))
                row += 1
    return inserted


def delete_where(conn: sqlite3.Connection, where: Where) -> list[tuple[str, str]]:
    """Remove every item `where` selects, in one transaction; returns each removed item's (ns, kind)."""
    with write_transaction(conn):
        rows = conn.execute(f"SELECT i.seq, i.ns, i.kind FROM items i WHERE {where.sql()}", where.params).fetchall()
        _delete_seqs(conn, [r[0] for r in rows])
    return [(ns, kind) for _, ns, kind in rows]


def delete_ids(conn: sqlite3.Connection, tenant: str, ids: list[ItemId]) -> int:
    """Remove the tenant's items with these ids, wherever they are, in one transaction."""
    with write_transaction(conn):
        seqs: list[int] = []
        for chunk in chunks(ids):
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(f"SELECT seq FROM items WHERE tenant = ? AND id IN ({marks})", (tenant, *chunk))
            seqs.extend(r[0] for r in rows)
        _delete_seqs(conn, seqs)
    return len(seqs)


def _delete_seqs(conn: sqlite3.Connection, seqs: list[int]) -> None:
    if not seqs:
        return
    for chunk in chunks(seqs):
        marks = ",".join("?" * len(chunk))
        # FTS5 rows are not covered by the foreign keys' cascade, so they go first, explicitly.
        conn.execute(
            f"DELETE FROM passage_text WHERE rowid IN (SELECT rowid FROM passages WHERE item_seq IN ({marks}))",
            chunk,
        )
        conn.execute(f"DELETE FROM items WHERE seq IN ({marks})", chunk)
    bump_deletions(conn)
