"""The SQLite state file's one connection: opened in WAL mode (several processes share the file), its layout
prepared (`worker.state.sqlite_layout`), and shared by threads under one lock.

The state store and the leases kept in the same file (`worker.state.sqlite_leases`) both run on it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from engines.contract import ConfigError, Error
from worker.state.sqlite_layout import prepare


class StateFile:
    """One connection to the state file at `path`, created and brought to this release's layout on open.

    `write()` is one `BEGIN IMMEDIATE` transaction (rolled back on any error); `read()` one statement.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=60)
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA busy_timeout = 60000")
            with self.write() as conn:
                prepare(conn, self.path)
        except (sqlite3.DatabaseError, OSError) as err:
            raise ConfigError(f"cannot open state file {self.path}: {err}") from err
        except Error:
            self._conn.close()
            raise

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def read(self, sql: str, params: Iterable[object] = ()) -> list[tuple[object, ...]]:
        with self._lock:
            return self._conn.execute(sql, tuple(params)).fetchall()
