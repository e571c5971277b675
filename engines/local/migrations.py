"""The local engine's forward migrations: each step moves a memory file from version n to n + 1.

Steps run inside the transaction that opens the file (`schema.ensure_schema`), so a file is
either migrated whole or left as it was. Append only: a shipped step is never edited, since
files in the field went through it as it was.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from engines.local.rows import indexed_texts

FTS_AUTOMERGE = 8
"""How many index segments of one size the FTS index lets pile up before merging them.

Each store call writes one small segment. FTS5's default (4) merges so eagerly that merging
was a third of a store's cost at 50,000 items; at 8 a store is about 10% faster and queries
measured the same, as a query's cost is in scoring postings, not in visiting segments.
"""

FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
"""Words folded (case, diacritics) then Porter-stemmed, so "deploying" finds "deployment" and "deploys"."""

_REINDEX_BATCH = 2_000


def statements(script: str) -> list[str]:
    """The statements of an SQL script, comments removed, to run one by one (executescript() would
    commit the open transaction first)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [stmt.strip() for stmt in "\n".join(lines).split(";") if stmt.strip()]


def _v2_merge_less(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO passage_text (passage_text, rank) VALUES ('automerge', ?)", (FTS_AUTOMERGE,))


def _v3_stemmed(conn: sqlite3.Connection) -> None:
    """Rebuild the keyword index with Porter stemming.

    The index is contentless, so its text is rebuilt from each stored item (as a hit shows it),
    which is also what lets a stemmed index replace an unstemmed one without keeping any copy.
    """
    conn.execute("DROP TABLE passage_vocab")
    conn.execute("DROP TABLE passage_text")
    conn.execute(f"CREATE VIRTUAL TABLE passage_text USING fts5 (text, content = '', tokenize = '{FTS_TOKENIZER}')")
    conn.execute("CREATE VIRTUAL TABLE passage_vocab USING fts5vocab (passage_text, 'row')")
    _v2_merge_less(conn)
    rows = conn.execute(
        "SELECT p.rowid, p.start, p.stop, i.body FROM passages p JOIN items i ON i.seq = p.item_seq "
        "ORDER BY p.item_seq, p.rowid"
    )
    insert = "INSERT INTO passage_text (rowid, text) VALUES (?, ?)"
    batch: list[tuple[int, str]] = []
    for entry in indexed_texts(rows):
        batch.append(entry)
        if len(batch) == _REINDEX_BATCH:
            conn.executemany(insert, batch)
            batch.clear()
    conn.executemany(insert, batch)
    # One segment instead of hundreds: the rebuilt index is then as fast to query as a grown one.
    conn.execute("INSERT INTO passage_text (passage_text) VALUES ('optimize')")


_V4_TABLES = """
CREATE TABLE passage_vectors (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,  -- arrival order: vector copies load rows above a mark
    passage  INTEGER NOT NULL UNIQUE REFERENCES passages (rowid) ON DELETE CASCADE,
    vector   BLOB NOT NULL                       -- float32, of the embedder named in settings
);
CREATE TABLE pending_vectors (
    passage        INTEGER PRIMARY KEY REFERENCES passages (rowid) ON DELETE CASCADE,
    claimed_until  INTEGER NOT NULL DEFAULT 0,   -- milliseconds since the epoch; 0: nobody's
    claimed_by     TEXT
);
"""


def _v4_vectors_apart(conn: sqlite3.Connection) -> None:
    """Vectors move out of `passages` into a table of their own, beside a queue of passages still
    without one: items are then stored (and keyword-searchable) before their vectors exist."""
    for statement in statements(_V4_TABLES):
        conn.execute(statement)
    conn.execute("INSERT INTO passage_vectors (passage, vector) SELECT rowid, vector FROM passages ORDER BY rowid")
    conn.execute("ALTER TABLE passages DROP COLUMN vector")


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _v2_merge_less,
    2: _v3_stemmed,
    3: _v4_vectors_apart,
}
"""Each entry moves a file from version n to n + 1."""
