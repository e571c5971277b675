"""The state store on SQLite, for embedded mode: one file beside the memory file (WAL, several processes).

Its connection is `worker.state.sqlite_file`'s, its tables and the migration of older files are in
`worker.state.sqlite_layout`, and the leases kept in the same file in `worker.state.sqlite_leases`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping

from engines.contract import ItemId
from sources import SourceEntry
from worker.erasure.request import UNFINISHED, ErasureReceipt, ErasureRequest, Tombstone
from worker.records import DeadLetter, ManifestEntry, SyncReport
from worker.state.base import UnitState
from worker.state.sqlite_file import StateFile
from worker.state.sqlite_leases import SqliteLeases

_UPSERT_UNIT = (
    "INSERT OR REPLACE INTO manifest (source_id, unit_id, version, sha256, item_ids, stale, deleted) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)


class SqliteStateStore:
    """`StateStore` on one SQLite file. Safe to share between threads and processes."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._file = StateFile(path)
        self.path = self._file.path
        self._write = self._file.write
        self._read = self._file.read
        self._leases = SqliteLeases(self._file)

    def close(self) -> None:
        self._file.close()

    def leases(self) -> SqliteLeases:
        return self._leases

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

    def item_ids(self, source_id: str) -> list[ItemId]:
        # SQLite unpacks the JSON arrays: parsing one per unit in Python was most of a 10,000-unit erasure's time.
        rows = self._read(
            "SELECT j.value FROM manifest m, json_each(m.item_ids) j WHERE m.source_id = ?1 "
            "UNION ALL SELECT j.value FROM manifest m, json_each(m.stale) j WHERE m.source_id = ?1",
            (source_id,),
        )
        return list(dict.fromkeys(str(row[0]) for row in rows))

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

    # -- erasures -----------------------------------------------------------------------------------

    def open_erasure(self, request: ErasureRequest) -> ErasureReceipt:
        with self._write() as conn:
            row = conn.execute(
                "SELECT body FROM erasures WHERE key = ? AND status != 'failed' ORDER BY requested_at LIMIT 1",
                (request.target.key,),
            ).fetchone()
            if row is not None:
                return ErasureReceipt.model_validate_json(row[0])
            receipt = ErasureReceipt.of(request)
            conn.execute(_UPSERT_ERASURE, _erasure_row(receipt))
        return receipt

    def get_erasure(self, erasure_id: str) -> ErasureReceipt | None:
        rows = self._read("SELECT body FROM erasures WHERE id = ?", (erasure_id,))
        return ErasureReceipt.model_validate_json(str(rows[0][0])) if rows else None

    def put_erasure(self, receipt: ErasureReceipt) -> None:
        with self._write() as conn:
            conn.execute(_UPSERT_ERASURE, _erasure_row(receipt))

    def unfinished_erasures(self) -> list[ErasureReceipt]:
        marks = ",".join("?" * len(UNFINISHED))
        rows = self._read(
            f"SELECT body FROM erasures WHERE status IN ({marks}) ORDER BY requested_at, id", sorted(UNFINISHED)
        )
        return [ErasureReceipt.model_validate_json(str(r[0])) for r in rows]

    def recent_erasures(self, limit: int = 100) -> list[ErasureReceipt]:
        rows = self._read("SELECT body FROM erasures ORDER BY requested_at DESC, id DESC LIMIT ?", (limit,))
        return [ErasureReceipt.model_validate_json(str(r[0])) for r in rows]

    def put_tombstone(self, tombstone: Tombstone) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO tombstones (scope, erasure_id, body) VALUES (?, ?, ?)",
                (tombstone.scope, tombstone.erasure_id, tombstone.model_dump_json()),
            )

    def tombstones(self, scopes: Iterable[str]) -> list[Tombstone]:
        wanted = list(dict.fromkeys(scopes))
        found: list[Tombstone] = []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            rows = self._read(
                f"SELECT body FROM tombstones WHERE scope IN ({','.join('?' * len(chunk))}) ORDER BY scope, erasure_id",
                chunk,
            )
            found.extend(Tombstone.model_validate_json(str(r[0])) for r in rows)
        return found


_UPSERT_ERASURE = "INSERT OR REPLACE INTO erasures (id, key, status, requested_at, body) VALUES (?, ?, ?, ?, ?)"


def _erasure_row(receipt: ErasureReceipt) -> tuple[object, ...]:
    at = receipt.requested_at.isoformat()
    return (receipt.id, receipt.target.key, receipt.status, at, receipt.model_dump_json())


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
