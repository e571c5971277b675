"""Passage vectors and the queue of passages still waiting for one, as the SQL that stores and embeds run.

`settings.embedder` names the embedder every row of `passage_vectors` came from, so the vectors of
one file are never a mix. Storing an item queues its passages in `pending_vectors` (or, for the
few embedded on the spot, writes their vectors at once); the backlog claims queued passages in
batches, embeds them outside any transaction, and saves the vectors only if the file still names
its embedder. A claim lapses after a while, so a process that died mid-batch leaves its passages to
whichever process looks next.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable

from engines.local.database import write_transaction
from engines.local.embed import Vectors

EMBEDDER_KEY = "embedder"
DELETIONS_KEY = "deletions"
WRITTEN_KEY = "written_at_ms"
PROMISED_KEY = "promised_items"
PROMISES = 64
"""Promised items remembered, the latest kept."""
PROMISED_PASSAGES = 16
"""Passages one read embeds for promises, at most: under a second of MiniLM on two cores. A promised book of
300 pages has its first 16 embedded by the next read and the rest by the backlog (keyword ranks them meanwhile),
so no read waits for a whole book."""
_CHUNK = 500  # values per IN (...) list, well under SQLite's bound on parameters

PassageSpan = tuple[int, int, int, str]
"""A claimed passage: its rowid, its span in its item's source text, and the item's stored body."""


def bump_deletions(conn: sqlite3.Connection) -> None:
    """Tell every process's vector copy that vectors were removed (call inside the write)."""
    conn.execute(
        "INSERT INTO settings (key, value) VALUES (?, '1') "
        "ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
        (DELETIONS_KEY,),
    )


def deletions(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM settings WHERE key = ?", (DELETIONS_KEY,)).fetchone()
    return int(row[0]) if row else 0


def recorded_embedder(conn: sqlite3.Connection) -> str | None:
    """The identity of the embedder whose vectors the file holds; None while it names none."""
    row = conn.execute("SELECT value FROM settings WHERE key = ?", (EMBEDDER_KEY,)).fetchone()
    return str(row[0]) if row else None


def admits(conn: sqlite3.Connection, identity: str) -> bool:
    """Whether vectors of `identity` belong in this file; the first embedder to write names itself."""
    found = recorded_embedder(conn)
    if found is None:
        conn.execute("INSERT INTO settings (key, value) VALUES (?, ?)", (EMBEDDER_KEY, identity))
        return True
    return found == identity


def adopt(conn: sqlite3.Connection, identity: str) -> tuple[str | None, int]:
    """Make `identity` the file's embedder: another's vectors are dropped and every passage is queued
    for new ones. Returns the embedder replaced (None if there was none or it was this one) and the
    number of passages queued."""
    with write_transaction(conn):
        found = recorded_embedder(conn)
        if found is None or found == identity:
            admits(conn, identity)
            return None, 0
        conn.execute("DELETE FROM passage_vectors")
        queued = conn.execute("INSERT OR IGNORE INTO pending_vectors (passage) SELECT rowid FROM passages").rowcount
        conn.execute("UPDATE settings SET value = ? WHERE key = ?", (identity, EMBEDDER_KEY))
        bump_deletions(conn)
    return found, queued


def queue(conn: sqlite3.Connection, rowids: Iterable[int]) -> None:
    """Queue passages for vectors (inside the write that stores them)."""
    conn.executemany("INSERT INTO pending_vectors (passage) VALUES (?)", ((r,) for r in rowids))


def insert_vectors(conn: sqlite3.Connection, rows: Iterable[tuple[int, bytes]]) -> None:
    conn.executemany("INSERT OR IGNORE INTO passage_vectors (passage, vector) VALUES (?, ?)", rows)


def mark_written(conn: sqlite3.Connection) -> None:
    """Note when items were last stored or removed (inside the write), so every process's backlog can
    yield to the ingestion and clean-up going on."""
    conn.execute(
        "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (WRITTEN_KEY, str(int(time.time() * 1000))),
    )


def last_written(conn: sqlite3.Connection) -> int:
    """When some process last stored or removed items, in milliseconds since the epoch (0: never)."""
    row = conn.execute("SELECT value FROM settings WHERE key = ?", (WRITTEN_KEY,)).fetchone()
    return int(row[0]) if row else 0


def promise(conn: sqlite3.Connection, seq: int) -> None:
    """Promise item `seq`'s vectors to the next vector read (inside the write that stored it): the contract lets
    ranked reads lag for all but the last item of a store call. The latest `PROMISES` promises are kept, of items
    with passages still queued; a read keeps them all (`promised`), the backlog usually first."""
    held = [s for s in _promises(conn) if s != seq and _waiting(conn, s)]
    conn.execute(
        "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (PROMISED_KEY, json.dumps([*held[-(PROMISES - 1) :], seq])),
    )


def promised(conn: sqlite3.Connection, limit: int = PROMISED_PASSAGES) -> list[PassageSpan]:
    """Up to `limit` passages of promised items still waiting for their vectors (claimed or not), the latest
    item's first; usually none."""
    seqs = _promises(conn)
    if not seqs:
        return []
    marks = ",".join("?" * len(seqs))
    rows: list[PassageSpan] = conn.execute(
        "SELECT p.rowid, p.start, p.stop, i.body FROM passages p CROSS JOIN items i ON i.seq = p.item_seq "
        f"WHERE p.item_seq IN ({marks}) AND EXISTS (SELECT 1 FROM pending_vectors q WHERE q.passage = p.rowid) "
        "ORDER BY p.item_seq DESC, p.rowid LIMIT ?",
        (*seqs, limit),
    ).fetchall()
    return rows


def _promises(conn: sqlite3.Connection) -> list[int]:
    row = conn.execute("SELECT value FROM settings WHERE key = ?", (PROMISED_KEY,)).fetchone()
    return [int(s) for s in json.loads(row[0])] if row else []


def _waiting(conn: sqlite3.Connection, seq: int) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM passages p JOIN pending_vectors q ON q.passage = p.rowid WHERE p.item_seq = ?)",
        (seq,),
    ).fetchone()
    return bool(row[0])


def has_pending(conn: sqlite3.Connection) -> bool:
    return bool(conn.execute("SELECT EXISTS (SELECT 1 FROM pending_vectors)").fetchone()[0])


def pending_count(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM pending_vectors").fetchone()[0])


def claimable(conn: sqlite3.Connection, now_ms: int) -> bool:
    """Whether some queued passage is claimed by nobody (a read: looking costs no write lock)."""
    row = conn.execute("SELECT EXISTS (SELECT 1 FROM pending_vectors WHERE claimed_until < ?)", (now_ms,))
    return bool(row.fetchone()[0])


def claim(conn: sqlite3.Connection, owner: str, now_ms: int, hold_ms: int, limit: int) -> list[PassageSpan]:
    """Claim up to `limit` unclaimed queued passages, oldest first, until `now_ms + hold_ms`."""
    with write_transaction(conn):
        rowids = [
            r[0]
            for r in conn.execute(
                "UPDATE pending_vectors SET claimed_until = ?, claimed_by = ? WHERE passage IN "
                "(SELECT passage FROM pending_vectors WHERE claimed_until < ? ORDER BY passage LIMIT ?) "
                "RETURNING passage",
                (now_ms + hold_ms, owner, now_ms, limit),
            )
        ]
        if not rowids:
            return []
        marks = ",".join("?" * len(rowids))
        # CROSS JOIN keeps SQLite on the passages named instead of walking the items.
        return conn.execute(
            "SELECT p.rowid, p.start, p.stop, i.body FROM passages p CROSS JOIN items i ON i.seq = p.item_seq "
            f"WHERE p.rowid IN ({marks}) ORDER BY p.item_seq, p.rowid",
            rowids,
        ).fetchall()


def release(conn: sqlite3.Connection, owner: str) -> None:
    """Hand back what `owner` claimed, so another process need not wait for the claims to lapse."""
    with write_transaction(conn):
        conn.execute("UPDATE pending_vectors SET claimed_until = 0, claimed_by = NULL WHERE claimed_by = ?", (owner,))


def save(conn: sqlite3.Connection, identity: str, rowids: list[int], vectors: Vectors) -> int | None:
    """Store the vectors of passages still queued (a passage forgotten meanwhile is skipped); None,
    and nothing stored, when the file now names another embedder."""
    with write_transaction(conn):
        if not admits(conn, identity):
            return None
        row_of = {rowid: n for n, rowid in enumerate(rowids)}
        still: list[int] = []
        for start in range(0, len(rowids), _CHUNK):
            chunk = rowids[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            still += [
                r[0]
                for r in conn.execute(
                    f"DELETE FROM pending_vectors WHERE passage IN ({marks}) RETURNING passage", chunk
                )
            ]
        insert_vectors(conn, ((rowid, vectors[row_of[rowid]].tobytes()) for rowid in still))
    return len(still)


def pending_items(conn: sqlite3.Connection, seqs: list[int]) -> set[int]:
    """Which of these items have a passage still waiting for its vector."""
    found: set[int] = set()
    for start in range(0, len(seqs), _CHUNK):
        chunk = seqs[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT DISTINCT p.item_seq FROM passages p WHERE p.item_seq IN ({marks}) "
            "AND EXISTS (SELECT 1 FROM pending_vectors q WHERE q.passage = p.rowid)",
            chunk,
        )
        found.update(r[0] for r in rows)
    return found
