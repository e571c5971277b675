"""Reading the five sections of a v1 workspace in key order, a page a query (spec legacy-import §5).

Each section yields `(section, key, item)` for the rows that become items, in ascending key order, starting
after the key it is given. A row that maps to nothing moves the scan on and is counted in `ReadStats` with
its reason. Paging binds the last key read exactly as SQLite returned it, and refuses to go on when a page
does not move past it, so a damaged key (bad UTF-8, a blob) can cost a resume some replays, never a loop.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from engines.contract import StoreItem
from pipeline.legacy_checkpoint import Checkpoint, ChunkKey
from pipeline.legacy_errors import LegacySqliteError
from pipeline.legacy_mapping import (
    ChunkText,
    DocRow,
    FacetRow,
    Mapped,
    Origin,
    Skip,
    TurnRow,
    chunk_group_item,
    conversation_item,
    document_item,
    learning_item,
    profile_item,
)
from pipeline.legacy_schema import ChunkStore, MainStore, Opened
from pipeline.legacy_values import is_blank, text_of

MAX_CONTENT_FILE_BYTES = 64 * 1024 * 1024
"""A chunk's content file larger than this is not read (its row's preview is used), so a hostile workspace
cannot make a worker hold an unbounded file in memory."""

Key = str | ChunkKey
Read = tuple[str, Key, StoreItem]


@dataclass
class ReadStats:
    """What the sections read so far: rows that belong to a section, and rows skipped, by section and reason."""

    rows: int = 0
    skipped: Counter[tuple[str, Skip]] = field(default_factory=Counter)

    @property
    def skipped_rows(self) -> int:
        return sum(self.skipped.values())


def read_sections(opened: Opened, after: Checkpoint, page_size: int, stats: ReadStats) -> Iterator[Read]:
    """Every section in order, each from after its key in `after`."""
    origin = Origin(str(opened.path))
    main, chunks = opened.main, opened.chunks
    if main is not None:
        yield from _memory_docs(main, "documents", after.documents, page_size, stats, origin, document_item)
    if chunks is not None:
        yield from _chunk_groups(chunks, after.chunks, page_size, stats, origin)
    if main is not None:
        yield from _conversations(main, after.conversations, page_size, stats, origin)
        yield from _memory_docs(main, "learnings", after.learnings, page_size, stats, origin, learning_item)
        yield from _profile(main, after.profile, page_size, stats, origin)


def _memory_docs(
    main: MainStore,
    section: str,
    after: str | None,
    page_size: int,
    stats: ReadStats,
    origin: Origin,
    mapping: Callable[[DocRow, Origin], Mapped],
) -> Iterator[Read]:
    sql = f"SELECT {main.doc_columns} FROM memory_docs {_after_one('document_id')}"
    for row in _scan(main.conn, sql, after, page_size):
        mapped = _mapped(mapping, DocRow(*row), origin)
        yield from _account(section, row[0], mapped, stats)


def _conversations(
    main: MainStore, after: str | None, page_size: int, stats: ReadStats, origin: Origin
) -> Iterator[Read]:
    sql = f"SELECT DISTINCT session_id FROM episodic_log {_after_one('session_id')}"
    turns_sql = f"SELECT {main.turn_columns} FROM episodic_log WHERE session_id = ? ORDER BY timestamp, id"
    for (session_id,) in _scan(main.conn, sql, after, page_size):
        rows = [TurnRow(*row) for row in _query(main.conn, turns_sql, (session_id,))]
        session = text_of(session_id) or ""
        mapped = _mapped(conversation_item, session, rows, origin)
        stats.rows += len(rows)
        dropped = sum(1 for row in rows if is_blank(text_of(row.content)))
        yield from _account_group("conversations", session, mapped, len(rows), dropped, stats)


def _profile(main: MainStore, after: str | None, page_size: int, stats: ReadStats, origin: Origin) -> Iterator[Read]:
    sql = f"SELECT {main.facet_columns} FROM user_profile {_after_one('facet_id')}"
    for row in _scan(main.conn, sql, after, page_size):
        mapped = _mapped(profile_item, FacetRow(*row), origin)
        yield from _account("profile", row[0], mapped, stats)


def _chunk_groups(
    store: ChunkStore, after: ChunkKey | None, page_size: int, stats: ReadStats, origin: Origin
) -> Iterator[Read]:
    chunks_sql = (
        f"SELECT {store.chunk_columns} FROM mem_tree_chunks WHERE source_kind = ? AND source_id = ? "
        "ORDER BY seq_in_source, id"
    )
    for kind, source in _scan_pairs(store.conn, after, page_size):
        rows = _query(store.conn, chunks_sql, (kind, source))
        texts = [ChunkText(_chunk_text(store.content_dir, row[4], row[3]), row[1], row[2]) for row in rows]
        key = ChunkKey(source_kind=text_of(kind) or "", source_id=text_of(source) or "")
        mapped = _mapped(chunk_group_item, key.source_kind, key.source_id, texts, origin)
        stats.rows += len(rows)
        dropped = sum(1 for chunk in texts if is_blank(chunk.text))
        yield from _account_group("chunks", key, mapped, len(rows), dropped, stats)


def _account(section: str, raw_key: Any, mapped: Mapped, stats: ReadStats) -> Iterator[Read]:
    """Count a row of one-row sections; yield its item (a row of the other section is not counted)."""
    if mapped is None:
        return
    stats.rows += 1
    if isinstance(mapped, Skip):
        stats.skipped[section, mapped] += 1
        return
    yield section, text_of(raw_key) or "", mapped


def _account_group(section: str, key: Key, mapped: Mapped, rows: int, blank: int, stats: ReadStats) -> Iterator[Read]:
    """Count a group's blank rows; yield its item, or count its other rows under the reason it made none."""
    if blank:
        stats.skipped[section, Skip.BLANK] += blank
    if isinstance(mapped, Skip):
        if mapped is not Skip.BLANK and rows > blank:
            stats.skipped[section, mapped] += rows - blank
    elif mapped is not None:
        yield section, key, mapped


def _mapped(mapping: Callable[..., Mapped], *args: Any) -> Mapped:
    # A value no model accepts (whatever a hostile writer managed) skips its row; it never stops the import.
    try:
        return mapping(*args)
    except ValueError:
        return Skip.UNSTORABLE


def _after_one(key: str) -> str:
    return f"WHERE {key} IS NOT NULL AND (? IS NULL OR {key} > ?) ORDER BY {key} LIMIT ?"


def _scan(conn: sqlite3.Connection, sql: str, after: str | None, page_size: int) -> Iterator[Sequence[Any]]:
    """The rows of a one-key section, a page a query; the key is each row's first column."""
    cursor: Any = after
    while True:
        rows = _query(conn, sql, (cursor, cursor, page_size))
        if rows:
            _check_progress(cursor, rows[0][0], sql)
        yield from rows
        if len(rows) < page_size:
            return
        cursor = rows[-1][0]


def _scan_pairs(conn: sqlite3.Connection, after: ChunkKey | None, page_size: int) -> Iterator[tuple[Any, Any]]:
    sql = (
        "SELECT DISTINCT source_kind, source_id FROM mem_tree_chunks "
        "WHERE source_kind IS NOT NULL AND source_id IS NOT NULL "
        "AND (? IS NULL OR source_kind > ? OR (source_kind = ? AND source_id > ?)) "
        "ORDER BY source_kind, source_id LIMIT ?"
    )
    kind: Any = after.source_kind if after is not None else None
    source: Any = after.source_id if after is not None else None
    while True:
        rows = _query(conn, sql, (kind, kind, kind, source, page_size))
        if rows and kind is not None:
            _check_progress((kind, source), (rows[0][0], rows[0][1]), sql)
        yield from ((row[0], row[1]) for row in rows)
        if len(rows) < page_size:
            return
        kind, source = rows[-1]


def _query(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> list[Any]:
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.Error as err:
        raise LegacySqliteError(f"reading the v1 workspace failed: {err}") from err


def _check_progress(cursor: Any, first: Any, sql: str) -> None:
    """Refuse a page that does not start past the key before it (keys compared as SQLite orders them)."""
    if cursor is not None and _order(first) <= _order(cursor):
        table = sql.split(" FROM ", 1)[1].split(" ", 1)[0]
        raise LegacySqliteError(f"{table} keys do not sort as text (a damaged key near {text_of(first)!r})")


def _order(value: Any) -> tuple[Any, ...]:
    """A key as SQLite sorts it: numbers, then text, then blobs; a pair by its parts."""
    if isinstance(value, tuple):
        return tuple(_order(part) for part in value)
    rank = 0 if isinstance(value, int | float) else 1 if isinstance(value, str) else 2
    return (rank, value)


def _chunk_text(content_dir: Path, content_path: Any, content: Any) -> str | None:
    """The chunk's file under `memory_tree/content/` when its row names one safely, else its row's text."""
    named = _content_file(content_dir, content_path)
    if named is not None:
        try:
            if named.stat().st_size <= MAX_CONTENT_FILE_BYTES:
                return named.read_bytes().decode("utf-8")
        except (OSError, ValueError):
            pass  # the row's own text is the fallback the spec gives
    return text_of(content)


def _content_file(content_dir: Path, content_path: Any) -> Path | None:
    """The regular file a plain relative `content_path` names inside `content_dir`, or None."""
    if not isinstance(content_path, str) or is_blank(content_path) or "\\" in content_path:
        return None
    relative = PurePosixPath(content_path)
    if relative.is_absolute() or ".." in relative.parts:
        return None
    try:
        base = content_dir.resolve()
        target = (base / relative).resolve()
        return target if target.is_relative_to(base) and target.is_file() else None
    except (OSError, RuntimeError, ValueError):
        return None
