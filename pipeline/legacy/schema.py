"""Opening a v1 workspace read-only and telling what it holds (docs/spec/legacy-import.md §2, §4).

The databases are opened through a read-only URI with `query_only` on, so nothing here can write to them.
What the probe finds becomes the select lists the sections read: an absent optional column is read as the
value that means "absent" (`taint` as `internal`, the others as NULL), so the row mappings need no flags.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from pipeline.legacy.errors import LegacyIoError, LegacyNotFound, LegacySqliteError, NotLegacy

MAIN_DB = Path("memory") / "memory.db"
CHUNKS_DB = Path("memory_tree") / "chunks.db"
CONTENT_DIR = Path("memory_tree") / "content"

_REQUIRED = {
    "memory_docs": ("document_id", "namespace", "title", "content", "tags_json", "metadata_json", "updated_at"),
    "episodic_log": ("id", "session_id", "timestamp", "role", "content"),
    "user_profile": ("facet_id", "facet_type", "key", "value", "confidence", "last_seen_at"),
}
_OPTIONAL = (
    "memory_docs.logical_namespace",
    "memory_docs.taint",
    "episodic_log.tool_calls_json",
    "user_profile.state",
    "user_profile.user_state",
    "user_profile.class",
    "user_profile.evidence_refs_json",
)
_CHUNK_COLUMNS = ("id", "source_kind", "source_id", "timestamp_ms", "tags_json", "content", "seq_in_source")


@dataclass(frozen=True)
class MainStore:
    """`memory/memory.db`, opened, and which of v1's optional columns it has."""

    conn: sqlite3.Connection
    present: frozenset[str]

    def column(self, name: str) -> str:
        """`name` to select, or the value that means it is absent (`taint` `internal`, the others NULL)."""
        value = self.value(name)
        return value if name in self.present else f'{value} AS "{name}"'

    def value(self, name: str) -> str:
        """The SQL for an optional column's value in a condition: the column, or what stands in for it."""
        if name in self.present:
            return f'"{name}"'
        return "'internal'" if name == "taint" else "NULL"

    @property
    def doc_columns(self) -> str:
        return (
            f"document_id, namespace, {self.column('logical_namespace')}, title, content, tags_json, "
            f"metadata_json, updated_at, {self.column('taint')}"
        )

    @property
    def turn_columns(self) -> str:
        return f"id, timestamp, role, content, {self.column('tool_calls_json')}"

    @property
    def facet_columns(self) -> str:
        optional = ", ".join(self.column(name) for name in ("state", "user_state", "class", "evidence_refs_json"))
        return f"facet_id, facet_type, key, value, confidence, last_seen_at, {optional}"


@dataclass(frozen=True)
class ChunkStore:
    """`memory_tree/chunks.db`, opened; `content_path` tells whether rows may name a content file."""

    conn: sqlite3.Connection
    content_dir: Path
    chunk_columns: str


@dataclass(frozen=True)
class Opened:
    """What a workspace holds: its canonical path, the main store (absent in a chunks-only one), the chunks."""

    path: Path
    main: MainStore | None
    chunks: ChunkStore | None

    def close(self) -> None:
        for store in (self.main, self.chunks):
            if store is not None:
                store.conn.close()


def open_workspace(path: str | Path) -> Opened:
    """Detect a v1 workspace at `path` and open its databases; `LegacyNotFound` or `NotLegacy` otherwise."""
    try:
        root = Path(path).resolve(strict=True)
    except (OSError, RuntimeError) as err:
        raise LegacyNotFound(f"{path}: no such directory") from err
    if not root.is_dir():
        raise LegacyNotFound(f"{path}: not a directory")
    main = _open_main(root / MAIN_DB) if (root / MAIN_DB).exists() else None
    try:
        chunks = _open_chunks(root)
    except BaseException:
        if main is not None:
            main.conn.close()
        raise
    if main is None and chunks is None:
        raise NotLegacy("memory/memory.db is missing")
    return Opened(root, main, chunks)


def connect_read_only(db: Path) -> sqlite3.Connection:
    """A connection that cannot write: a `mode=ro` URI, then `query_only`."""
    conn = sqlite3.connect(_read_only_uri(db), uri=True, check_same_thread=False)
    try:
        conn.execute("PRAGMA query_only = ON")
    except sqlite3.Error:
        conn.close()
        raise
    return conn


def _read_only_uri(db: Path) -> str:
    """`mode=ro`, and `immutable=1` too for a WAL database that no connection holds open.

    A reader of a WAL database creates its `-wal` and `-shm` side files, and cannot remove them again. A WAL
    database without a `-wal` file was closed cleanly and nobody has it open (the file lives as long as a
    connection does), so its main file holds everything and reading it as immutable leaves the workspace
    exactly as it was. One with a `-wal` file is read normally, so rows still in that log are imported too.
    """
    uri = db.resolve().as_uri() + "?mode=ro"
    wal = db.with_name(db.name + "-wal")
    return uri + "&immutable=1" if _is_wal(db) and not wal.exists() else uri


def _is_wal(db: Path) -> bool:
    # Header bytes 18 and 19 are the file format's write and read versions: 2 means WAL.
    try:
        with db.open("rb") as file:
            header = file.read(20)
    except OSError:
        return False
    return len(header) == 20 and header.startswith(b"SQLite format 3\x00") and header[18] == 2


def _open_main(db: Path) -> MainStore:
    _check_readable(db, "memory/memory.db")
    try:
        conn = connect_read_only(db)
    except sqlite3.Error as err:
        raise LegacySqliteError(f"memory/memory.db cannot be opened: {err}") from err
    try:
        return _probe_main(conn)
    except BaseException:
        conn.close()
        raise


def _probe_main(conn: sqlite3.Connection) -> MainStore:
    try:
        conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as err:
        raise NotLegacy("memory/memory.db is not a SQLite database") from err
    try:
        columns = {table: _columns(conn, table) for table in _REQUIRED}
    except sqlite3.Error as err:
        raise LegacySqliteError(f"memory/memory.db cannot be read: {err}") from err
    for table, required in _REQUIRED.items():
        if columns[table] is None:
            raise NotLegacy(f"table {table} is missing")
        missing = [column for column in required if column not in columns[table]]  # type: ignore[operator]
        if missing:
            raise NotLegacy(f"column {table}.{missing[0]} is missing")
    present = {f"{table}.{name}" for table, names in columns.items() for name in names or ()}
    return MainStore(conn, frozenset(name.split(".")[1] for name in _OPTIONAL if name in present))


def _open_chunks(root: Path) -> ChunkStore | None:
    """The chunk store when `memory_tree/chunks.db` holds a usable `mem_tree_chunks`; else None, silently."""
    db = root / CHUNKS_DB
    if not db.is_file():
        return None
    _check_readable(db, "memory_tree/chunks.db")
    try:
        conn = connect_read_only(db)
    except sqlite3.Error:
        return None
    try:
        columns = _columns(conn, "mem_tree_chunks")
    except sqlite3.Error:
        columns = None
    if columns is None or any(column not in columns for column in _CHUNK_COLUMNS):
        conn.close()
        return None
    content_path = '"content_path"' if "content_path" in columns else 'NULL AS "content_path"'
    selected = f"id, timestamp_ms, tags_json, content, {content_path}"
    return ChunkStore(conn, root / CONTENT_DIR, selected)


def _columns(conn: sqlite3.Connection, table: str) -> set[str] | None:
    """The table's column names, or None when there is no such table."""
    found = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    if found is None:
        return None
    return {row[0] for row in conn.execute("SELECT name FROM pragma_table_info(?)", (table,))}


def _check_readable(db: Path, name: str) -> None:
    # SQLite says "unable to open database file" for any cause; the OS's own reason is the useful one.
    try:
        with db.open("rb"):
            pass
    except OSError as err:
        raise LegacyIoError(f"{name} cannot be read: {err.strerror or err}") from err


def lenient_text(raw: bytes) -> str:
    """Text as a connection's `text_factory` that reads bad UTF-8 with replacement characters."""
    return raw.decode("utf-8", "replace")
