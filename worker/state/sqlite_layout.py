"""The SQLite state file's tables, and bringing a file written by an older release forward.

The layout version is the file's `PRAGMA user_version` (`STATE_LAYOUT`). Layout 1 (no version recorded, the
releases before opaque unit versions) kept each unit's size and mtime in columns of its own, and each dead
letter's; layout 2 keeps the reader's version string, which for a folder or file unit is exactly
`size:mtime_ns`, so a migrated manifest matches the next listing and nothing is read again. Layout 3 adds
tables (erasure receipts, tombstones, leases) and changes none, so a layout-2 file only gains them.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Final

from engines.contract import ConfigError
from worker.state.base import STATE_LAYOUT

_MANIFEST: Final = (
    "CREATE TABLE IF NOT EXISTS {table} ("
    " source_id TEXT NOT NULL, unit_id TEXT NOT NULL, version TEXT NOT NULL,"
    " sha256 TEXT, item_ids TEXT NOT NULL, stale TEXT NOT NULL, deleted INTEGER NOT NULL,"
    " PRIMARY KEY (source_id, unit_id)) WITHOUT ROWID"
)

SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS sources (id TEXT PRIMARY KEY, body TEXT NOT NULL)",
    _MANIFEST.format(table="manifest"),
    "CREATE TABLE IF NOT EXISTS dead_letters ("
    " key TEXT PRIMARY KEY, source_id TEXT NOT NULL, unit_id TEXT NOT NULL, at TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS dead_letters_source ON dead_letters (source_id, unit_id)",
    "CREATE INDEX IF NOT EXISTS dead_letters_at ON dead_letters (at)",
    "CREATE TABLE IF NOT EXISTS runs (source_id TEXT PRIMARY KEY, body TEXT NOT NULL)",
    # Layout 3: erasure receipts (kept for good), tombstones (kept for good) and leases.
    "CREATE TABLE IF NOT EXISTS erasures ("
    " id TEXT PRIMARY KEY, key TEXT NOT NULL, status TEXT NOT NULL, requested_at TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS erasures_key ON erasures (key, status)",
    "CREATE INDEX IF NOT EXISTS erasures_status ON erasures (status, requested_at)",
    "CREATE TABLE IF NOT EXISTS tombstones ("
    " scope TEXT NOT NULL, erasure_id TEXT NOT NULL, body TEXT NOT NULL,"
    " PRIMARY KEY (scope, erasure_id)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS leases ("
    " name TEXT NOT NULL, token TEXT NOT NULL, shared INTEGER NOT NULL, expires_at REAL NOT NULL,"
    " PRIMARY KEY (name, token)) WITHOUT ROWID",
)


def prepare(conn: sqlite3.Connection, path: object) -> None:
    """Create the tables of a new file, or migrate an older one; inside the caller's write transaction.

    A file of a newer layout is refused with `ConfigError`, before anything is written.
    """
    layout = conn.execute("PRAGMA user_version").fetchone()[0]
    if layout > STATE_LAYOUT:
        raise ConfigError(
            f"state file {path} has layout {layout}, newer than this release's {STATE_LAYOUT}; "
            "upgrade tinymemory-ingest, or point TINYMEMORY_DATA_DIR elsewhere"
        )
    if layout == 0 and _columns(conn, "manifest") >= {"size", "mtime_ns"}:
        _from_layout_1(conn)
    for statement in SCHEMA:
        conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {STATE_LAYOUT}")


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}


def _from_layout_1(conn: sqlite3.Connection) -> None:
    conn.execute(_MANIFEST.format(table="manifest_v2"))
    conn.execute(
        "INSERT INTO manifest_v2 (source_id, unit_id, version, sha256, item_ids, stale, deleted) "
        "SELECT source_id, unit_id, size || ':' || mtime_ns, sha256, item_ids, stale, deleted FROM manifest"
    )
    conn.execute("DROP TABLE manifest")
    conn.execute("ALTER TABLE manifest_v2 RENAME TO manifest")
    letters = conn.execute("SELECT key, body FROM dead_letters").fetchall()
    conn.executemany("UPDATE dead_letters SET body = ? WHERE key = ?", [(letter_v2(b), k) for k, b in letters])


def letter_v2(body: str) -> str:
    """A layout-1 dead letter's JSON in layout 2: its size and mtime become the unit version it failed at
    (none for a letter that was not pinned, a transient failure or a refusal at listing)."""
    letter = json.loads(body)
    if "size" not in letter and "mtime_ns" not in letter:
        return body  # already layout 2 (a migration cut short, resumed)
    size, mtime_ns = letter.pop("size", None), letter.pop("mtime_ns", None)
    letter["version"] = f"{size}:{mtime_ns}" if size is not None and mtime_ns is not None else None
    return json.dumps(letter, ensure_ascii=False, separators=(",", ":"))
