"""Reading the five sections of a v1 workspace in key order (docs/spec/legacy-import.md §5).

Each section yields `(section, key, item)` for the rows that become items, in ascending key order, starting
after the key it is given. A row that maps to nothing moves the scan on and is counted in `ReadStats` with
its reason. Each section is one pass over its table (`pipeline.legacy.paging`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from engines.contract import StoreItem
from pipeline.legacy.checkpoint import Checkpoint, ChunkKey
from pipeline.legacy.mapping import (
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
    learning_rows_sql,
    profile_item,
)
from pipeline.legacy.paging import Scan, checkpoint_keys, first_rows, groups
from pipeline.legacy.schema import ChunkStore, MainStore, Opened
from pipeline.legacy.values import is_blank, text_of

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
        # Most rows of `memory_docs` are documents: the learnings' scan leaves out what cannot be one.
        only = learning_rows_sql("namespace", main.value("logical_namespace"))
        yield from _memory_docs(main, "learnings", after.learnings, page_size, stats, origin, learning_item, only)
        yield from _profile(main, after.profile, page_size, stats, origin)


def _memory_docs(
    main: MainStore,
    section: str,
    after: str | None,
    page_size: int,
    stats: ReadStats,
    origin: Origin,
    mapping: Callable[[DocRow, Origin], Mapped],
    only: str = "TRUE",
) -> Iterator[Read]:
    scan = Scan(main.conn, "memory_docs", main.doc_columns, ("document_id",), only=only)
    for row in first_rows(scan, after, page_size):
        read = _account(section, row[0], _mapped(mapping, DocRow(*row), origin), stats)
        if read is not None:
            yield read


def _profile(main: MainStore, after: str | None, page_size: int, stats: ReadStats, origin: Origin) -> Iterator[Read]:
    scan = Scan(main.conn, "user_profile", main.facet_columns, ("facet_id",))
    for row in first_rows(scan, after, page_size):
        read = _account("profile", row[0], _mapped(profile_item, FacetRow(*row), origin), stats)
        if read is not None:
            yield read


def _conversations(
    main: MainStore, after: str | None, page_size: int, stats: ReadStats, origin: Origin
) -> Iterator[Read]:
    scan = Scan(main.conn, "episodic_log", f"{main.turn_columns}, session_id", ("session_id",), "timestamp, id")
    for found in groups(scan, None if after is None else checkpoint_keys(after), page_size):
        rows = [TurnRow(*row[:5]) for row in found]
        session = text_of(found[0][5]) or ""
        mapped = _mapped(conversation_item, session, rows, origin)
        stats.rows += len(rows)
        dropped = sum(1 for row in rows if is_blank(text_of(row.content)))
        read = _account_group("conversations", session, mapped, len(rows), dropped, stats)
        if read is not None:
            yield read


def _chunk_groups(
    store: ChunkStore, after: ChunkKey | None, page_size: int, stats: ReadStats, origin: Origin
) -> Iterator[Read]:
    columns = f"{store.chunk_columns}, source_kind, source_id"
    scan = Scan(store.conn, "mem_tree_chunks", columns, ("source_kind", "source_id"), "seq_in_source, id")
    start = None if after is None else checkpoint_keys(after.source_kind, after.source_id)
    for rows in groups(scan, start, page_size):
        texts = [ChunkText(_chunk_text(store.content_dir, row[4], row[3]), row[1], row[2]) for row in rows]
        key = ChunkKey(source_kind=text_of(rows[0][5]) or "", source_id=text_of(rows[0][6]) or "")
        mapped = _mapped(chunk_group_item, key.source_kind, key.source_id, texts, origin)
        stats.rows += len(rows)
        dropped = sum(1 for chunk in texts if is_blank(chunk.text))
        read = _account_group("chunks", key, mapped, len(rows), dropped, stats)
        if read is not None:
            yield read


# Called once a row, so they return rather than yield: a generator a row cost more than the counting.


def _account(section: str, raw_key: Any, mapped: Mapped, stats: ReadStats) -> Read | None:
    """Count a row of one-row sections; its item, if any (a row of the other section is not counted)."""
    if mapped is None:
        return None
    stats.rows += 1
    if isinstance(mapped, Skip):
        stats.skipped[section, mapped] += 1
        return None
    return section, text_of(raw_key) or "", mapped


def _account_group(section: str, key: Key, mapped: Mapped, rows: int, blank: int, stats: ReadStats) -> Read | None:
    """Count a group's blank rows; its item, or None with its other rows counted under the reason it made none."""
    if blank:
        stats.skipped[section, Skip.BLANK] += blank
    if isinstance(mapped, Skip):
        if mapped is not Skip.BLANK and rows > blank:
            stats.skipped[section, mapped] += rows - blank
        return None
    return None if mapped is None else (section, key, mapped)


def _mapped(mapping: Callable[..., Mapped], *args: Any) -> Mapped:
    # A value no model accepts (whatever a hostile writer managed) skips its row; it never stops the import.
    try:
        return mapping(*args)
    except ValueError:
        return Skip.UNSTORABLE


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
