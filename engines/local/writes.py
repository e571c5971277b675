"""The local engine's writes, each one SQLite transaction run on the engine's thread."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterable, Iterator

from engines.contract import ItemId
from engines.local import pending
from engines.local.database import write_transaction
from engines.local.rows import ITEM_COLUMNS, ITEM_MARKS, Chunk, indexed_texts
from engines.local.where import SQLValue, Where

_CHUNK = 500  # ids per IN (...) list, well under SQLite's bound on parameters
_ANALYZE_FROM_ITEMS = 1_000

_INSERT_ITEM = f"INSERT INTO items (seq, {ITEM_COLUMNS}) VALUES (?, {ITEM_MARKS})"
_INSERT_PASSAGE = (
    "INSERT INTO passages (rowid, item_seq, piece, start, stop, page_first, page_last, section) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


_UNINDEX = "INSERT INTO passage_text (passage_text, rowid, text) VALUES ('delete', ?, ?)"


def chunks(values: list[int] | list[str], size: int = _CHUNK) -> Iterator[list[int] | list[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def held_ids(conn: sqlite3.Connection, tenant: str, ids: Iterable[ItemId]) -> set[ItemId]:
    unique = list(dict.fromkeys(ids))
    held: set[ItemId] = set()
    for chunk in chunks(unique):
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(f"SELECT id FROM items WHERE tenant = ? AND id IN ({marks})", (tenant, *chunk))
        held.update(r[0] for r in rows)
    return held


class _Numbers:
    """The next item and passage numbers of one write transaction, and what it has written so far."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.seq = _next(conn, "items")
        self.rowid = _next(conn, "passages")
        self.inserted: set[ItemId] = set()
        self.queued = False
        self.last_queued: int | None = None  # the seq of the last item inserted with passages queued


def insert_items(
    conn: sqlite3.Connection, tenant: str, chunks: Iterable[Chunk], embedder: str, promise: bool = False
) -> tuple[set[ItemId], bool]:
    """Insert the chunks' items in one transaction; returns the ids actually inserted (the rest were held,
    perhaps written by another process since they were looked up, or came earlier in the same call), and
    whether passages were queued for the backlog.

    `chunks` may still be being prepared on the caller's thread (`feed.Feed`): the write lock is taken
    once the first chunk is there, and each chunk is inserted as it comes, so the caller's Python
    work overlaps SQLite's (which runs without the GIL). A chunk's `vectors` are stored with its items
    when the file's vectors are `embedder`'s; every other passage is queued for the backlog. Rows are
    numbered here: the write lock is held, so no other writer can take those numbers. With `promise`, the
    last item inserted with queued passages is promised to the next vector read (`pending.promise`).
    """
    stream = iter(chunks)
    first = next(stream, None)
    if first is None:
        return set(), False
    with write_transaction(conn):
        admitted = pending.admits(conn, embedder)  # else another process's embedder owns the file now
        numbers = _Numbers(conn)
        for chunk in itertools.chain((first,), stream):
            _insert_chunk(conn, tenant, chunk, admitted, numbers)
        if numbers.queued:
            pending.mark_written(conn)
        if promise and numbers.last_queued is not None:
            pending.promise(conn, numbers.last_queued)
    refresh_statistics(conn, numbers.seq - 1)
    return numbers.inserted, numbers.queued


def _insert_chunk(conn: sqlite3.Connection, tenant: str, chunk: Chunk, admitted: bool, numbers: _Numbers) -> None:
    held = held_ids(conn, tenant, [p.id for p in chunk.items if p.id not in numbers.inserted])
    held.update(numbers.inserted)
    items: list[tuple[SQLValue, ...]] = []
    tags: list[tuple[int, str]] = []
    passages: list[tuple[SQLValue, ...]] = []
    texts: list[tuple[int, str]] = []
    embedded: list[tuple[int, bytes]] = []
    queued: list[int] = []
    seq, rowid = numbers.seq, numbers.rowid
    for prep in chunk.items:
        if prep.id in held:
            continue
        held.add(prep.id)
        numbers.inserted.add(prep.id)
        items.append((seq, *prep.values))
        tags.extend((seq, tag) for tag in prep.tags)
        rows = chunk.vectors.get(prep.id) if admitted else None
        for n, passage in enumerate(prep.passages):
            pages = passage.pages or (None, None)
            passages.append((rowid, seq, passage.piece, passage.start, passage.stop, *pages, passage.section))
            texts.append((rowid, passage.text))
            if rows is None:
                queued.append(rowid)
                numbers.last_queued = seq
            else:
                embedded.append((rowid, rows[n].tobytes()))
            rowid += 1
        seq += 1
    numbers.seq, numbers.rowid = seq, rowid
    conn.executemany(_INSERT_ITEM, items)
    if tags:
        conn.executemany("INSERT INTO item_tags (item_seq, tag) VALUES (?, ?)", tags)
    conn.executemany(_INSERT_PASSAGE, passages)
    conn.executemany("INSERT INTO passage_text (rowid, text) VALUES (?, ?)", texts)
    if embedded:
        pending.insert_vectors(conn, embedded)
    if queued:
        pending.queue(conn, queued)
        numbers.queued = True


ANALYZED_KEY = "analyzed_at_seq"


def refresh_statistics(conn: sqlite3.Connection, last_seq: int) -> None:
    """Re-measure the tables for SQLite's planner each time the store has doubled.

    Without statistics SQLite guesses, and guessed wrong at 50,000 items: an unfiltered listing
    walked a whole index and sorted it (17 ms a page instead of 0.5 ms). A sampled ANALYZE costs
    about 20 ms there, so doing it at every doubling is free in the long run.
    """
    row = conn.execute("SELECT value FROM settings WHERE key = ?", (ANALYZED_KEY,)).fetchone()
    analyzed = int(row[0]) if row else 0
    if last_seq < max(2 * analyzed, _ANALYZE_FROM_ITEMS):
        return
    conn.execute("PRAGMA analysis_limit = 10000")
    conn.execute("ANALYZE")
    conn.execute("INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)", (ANALYZED_KEY, str(last_seq)))


def _next(conn: sqlite3.Connection, table: str) -> int:
    """The next number of an AUTOINCREMENT table: never one used before, even by a removed row."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
    return (int(row[0]) if row else 0) + 1


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
        # The contentless index forgets a row only when told the exact text it indexed.
        rows = conn.execute(
            "SELECT p.rowid, p.start, p.stop, i.body FROM passages p CROSS JOIN items i ON i.seq = p.item_seq "
            f"WHERE p.item_seq IN ({marks}) ORDER BY p.item_seq",
            chunk,
        )
        conn.executemany(_UNINDEX, list(indexed_texts(rows)))
        conn.execute(f"DELETE FROM items WHERE seq IN ({marks})", chunk)
    pending.bump_deletions(conn)
    pending.mark_written(conn)
