"""The state store on SQLite, for embedded mode: one file beside the memory file (WAL, several processes).

Its tables and the migration of older files are in `worker.state.sqlite_layout`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from engines.contract import ConfigError, Error
from sources import SourceEntry
from worker.records import DeadLetter, ManifestEntry, SyncReport
from worker.state.base import UnitState
from worker.state.sqlite_layout import prepare

_UPSERT_UNIT = (
    "INSERT OR REPLACE INTO manifest (source_id, unit_id, version, sha256, item_ids, stale, deleted) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)


class SqliteStateStore:
    """`StateStore` on one SQLite file. Safe to share between threads and processes."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        path = Path(path)
        self.path = path
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA busy_timeout = 60000")
            with self._write() as conn:
                prepare(conn, path)
        except (sqlite3.DatabaseError, OSError) as err:
            raise ConfigError(f"cannot open state file {path}: {err}") from err
        except Error:
            self._conn.close()
            raise

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _read(self, sql: str, params: Iterable[object] = ()) -> list[tuple[object, ...]]:
        with self._lock:
            return self._conn.execute(sql, tuple(params)).fetchall()

    # -- source registry --------------------------------------------------------------------------

    def put_source(self, entry: SourceEntry) -> None:
        with self._write() as conn:
            conn.execute("INSERT OR REPLACE INTO sources (id, body) VALUES (?, ?)", (entry.id, entry.model_dump_json()))

    def get_source(self, source_id: str) -> SourceEntry | None:
        rows = self._read("SELECT body FROM sources WHERE id = ?", (source_id,))
        return SourceEntry.model_validate_json(str(rows[0][0])) if rows else None

    def list_sources(self) -> list[SourceEntry]:
        return [SourceEntry.model_validate_json(str(r[0])) for r in self._read("SELECT body FROM sources ORDER BY id")]

    def remove_source(self, source_id: str) -> None:
        with self._write() as conn:
            for table, column in (("sources", "id"), ("manifest", "source_id"), ("dead_letters", "source_id")):
                conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (source_id,))
            conn.execute("DELETE FROM runs WHERE source_id = ?", (source_id,))

    # -- manifests ----------------------------------------------------------------------------------

    def unit_states(self, source_id: str) -> dict[str, UnitState]:
        rows = self._read(
            "SELECT unit_id, version, deleted, stale != '[]' FROM manifest WHERE source_id = ?", (source_id,)
        )
        return {str(u): UnitState(str(v), bool(d), bool(h)) for u, v, d, h in rows}

    def manifest_entries(self, source_id: str, unit_ids: Iterable[str]) -> dict[str, ManifestEntry]:
        wanted = list(dict.fromkeys(unit_ids))
        found: dict[str, ManifestEntry] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            rows = self._read(
                "SELECT unit_id, version, sha256, item_ids, stale, deleted FROM manifest "
                f"WHERE source_id = ? AND unit_id IN ({','.join('?' * len(chunk))})",
                (source_id, *chunk),
            )
            found.update((str(row[0]), _entry(row)) for row in rows)
        return found

    def commit(self, source_id: str, entries: Mapping[str, ManifestEntry | None]) -> None:
        removed = [(source_id, unit) for unit, entry in entries.items() if entry is None]
        written = [_row(source_id, unit, entry) for unit, entry in entries.items() if entry is not None]
        with self._write() as conn:
            conn.executemany("DELETE FROM manifest WHERE source_id = ? AND unit_id = ?", removed)
            conn.executemany(_UPSERT_UNIT, written)

    # -- dead letters -------------------------------------------------------------------------------

    def add_dead_letter(self, letter: DeadLetter) -> None:
        with self._write() as conn:
            row = conn.execute("SELECT body FROM dead_letters WHERE key = ?", (letter.key,)).fetchone()
            if row is not None:
                attempts = DeadLetter.model_validate_json(row[0]).attempts + 1
                letter = letter.model_copy(update={"attempts": attempts})
            conn.execute(
                "INSERT OR REPLACE INTO dead_letters (key, source_id, unit_id, at, body) VALUES (?, ?, ?, ?, ?)",
                (letter.key, letter.source_id, letter.unit_id, letter.at.isoformat(), letter.model_dump_json()),
            )

    def dead_letters(self, source_id: str | None = None, limit: int = 1000) -> list[DeadLetter]:
        if source_id is None:
            rows = self._read("SELECT body FROM dead_letters ORDER BY at DESC LIMIT ?", (limit,))
        else:
            rows = self._read(
                "SELECT body FROM dead_letters WHERE source_id = ? ORDER BY at DESC LIMIT ?", (source_id, limit)
            )
        return [DeadLetter.model_validate_json(str(r[0])) for r in rows]

    def clear_dead_letters(self, source_id: str, unit_ids: Iterable[str]) -> None:
        rows = [(source_id, unit) for unit in unit_ids]
        if rows:
            with self._write() as conn:
                conn.executemany("DELETE FROM dead_letters WHERE source_id = ? AND unit_id = ?", rows)

    def purge_dead_letters(self, source_id: str | None = None) -> int:
        with self._write() as conn:
            if source_id is None:
                return conn.execute("DELETE FROM dead_letters").rowcount
            return conn.execute("DELETE FROM dead_letters WHERE source_id = ?", (source_id,)).rowcount

    # -- runs ---------------------------------------------------------------------------------------

    def record_sync(self, report: SyncReport) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO runs (source_id, body) VALUES (?, ?)",
                (report.source_id, report.model_dump_json()),
            )

    def last_sync(self, source_id: str) -> SyncReport | None:
        rows = self._read("SELECT body FROM runs WHERE source_id = ?", (source_id,))
        return SyncReport.model_validate_json(str(rows[0][0])) if rows else None


def _row(source_id: str, unit_id: str, entry: ManifestEntry) -> tuple[object, ...]:
    return (
        source_id,
        unit_id,
        entry.version,
        entry.sha256,
        json.dumps(entry.item_ids),
        json.dumps(entry.stale),
        int(entry.deleted),
    )


def _entry(row: tuple[object, ...]) -> ManifestEntry:
    _, version, sha256, item_ids, stale, deleted = row
    return ManifestEntry(
        version=str(version),
        sha256=None if sha256 is None else str(sha256),
        item_ids=json.loads(str(item_ids)),
        stale=json.loads(str(stale)),
        deleted=bool(deleted),
    )
