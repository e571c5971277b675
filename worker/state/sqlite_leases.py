"""Leases on SQLite, for embedded mode: the `LeaseStore` of `worker.redis.leases`, in the state file's
`leases` table, so every process sharing the data directory (`tinymemory up`, a second command) sees them.

A row is (name, token, shared, expires_at in wall-clock seconds). An exclusive lease is a name with one
unexpired row; a shared one any number of rows. Lapsed rows count as absent and are swept as names are
taken, so a holder that died lets go when its time runs out, as a Redis key's TTL does.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable

from worker.state.sqlite_file import StateFile

_EXCLUSIVE, _SHARED = 0, 1


class SqliteLeases:
    """Named leases in one state file; safe to share between threads and processes. `clock` is for tests."""

    def __init__(self, file: StateFile, clock: Callable[[], float] = time.time) -> None:
        self._file = file
        self._clock = clock

    def acquire(self, name: str, ttl_s: float) -> str | None:
        token, now = secrets.token_hex(16), self._clock()
        with self._file.write() as conn:
            conn.execute("DELETE FROM leases WHERE name = ? AND expires_at <= ?", (name, now))
            if conn.execute("SELECT 1 FROM leases WHERE name = ? AND shared = ?", (name, _EXCLUSIVE)).fetchone():
                return None
            conn.execute("INSERT INTO leases VALUES (?, ?, ?, ?)", (name, token, _EXCLUSIVE, now + _seconds(ttl_s)))
        return token

    def release(self, name: str, token: str) -> bool:
        return self._drop(name, token, _EXCLUSIVE)

    def extend(self, name: str, token: str, ttl_s: float) -> bool:
        return self._push(name, token, _EXCLUSIVE, ttl_s)

    def held(self, name: str) -> bool:
        rows = self._file.read(
            "SELECT 1 FROM leases WHERE name = ? AND shared = ? AND expires_at > ?", (name, _EXCLUSIVE, self._clock())
        )
        return bool(rows)

    def join(self, name: str, ttl_s: float) -> str:
        token, now = secrets.token_hex(16), self._clock()
        with self._file.write() as conn:
            conn.execute("DELETE FROM leases WHERE name = ? AND expires_at <= ?", (name, now))
            conn.execute("INSERT INTO leases VALUES (?, ?, ?, ?)", (name, token, _SHARED, now + _seconds(ttl_s)))
        return token

    def renew(self, name: str, token: str, ttl_s: float) -> bool:
        if self._push(name, token, _SHARED, ttl_s):
            return True
        with self._file.write() as conn:  # it had lapsed: held again from now on
            conn.execute(
                "INSERT OR REPLACE INTO leases VALUES (?, ?, ?, ?)",
                (name, token, _SHARED, self._clock() + _seconds(ttl_s)),
            )
        return False

    def leave(self, name: str, token: str) -> None:
        self._drop(name, token, _SHARED)

    def holders(self, name: str) -> set[str]:
        rows = self._file.read(
            "SELECT token FROM leases WHERE name = ? AND shared = ? AND expires_at > ?", (name, _SHARED, self._clock())
        )
        return {str(row[0]) for row in rows}

    def _drop(self, name: str, token: str, shared: int) -> bool:
        with self._file.write() as conn:
            gone = conn.execute(
                "DELETE FROM leases WHERE name = ? AND token = ? AND shared = ? AND expires_at > ?",
                (name, token, shared, self._clock()),
            ).rowcount
            conn.execute("DELETE FROM leases WHERE name = ? AND token = ?", (name, token))  # lapsed: swept
        return gone > 0

    def _push(self, name: str, token: str, shared: int, ttl_s: float) -> bool:
        now = self._clock()
        with self._file.write() as conn:
            pushed = conn.execute(
                "UPDATE leases SET expires_at = ? WHERE name = ? AND token = ? AND shared = ? AND expires_at > ?",
                (now + _seconds(ttl_s), name, token, shared, now),
            ).rowcount
        return pushed > 0


def _seconds(ttl_s: float) -> float:
    if not ttl_s > 0 or math.isinf(ttl_s):
        raise ValueError(f"a lease needs a finite positive ttl, got {ttl_s!r} seconds")
    return ttl_s
