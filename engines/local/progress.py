"""How fast vectors are being stored, kept in the memory file so that any process can tell in one read.

After each batch it saves, a process's backlog stamps the file with the time and the file's count of vectors
ever stored (the AUTOINCREMENT sequence of `passage_vectors`, which every process's saves advance). The stamps
of the last minute sit in `settings`, so `read` gives, in any process (a one-shot `tinymemory status` too), the
passages waiting, the vectors stored so far and the rate over the last minute, without sampling twice.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from dataclasses import dataclass

from engines.local.database import write_transaction
from engines.local.pending import pending_count

logger = logging.getLogger(__name__)

STAMPS_KEY = "vector_stamps"
WINDOW_MS = 60_000
"""The rate is measured over the stamps of the last minute: what "recent" means for an ETA."""
MIN_SPAN_MS = 5_000
"""No rate is told before the stamps span this long: one batch or two say little of the pace."""
_GAP_MS = 1_000  # stamps kept at least this far apart (the newest excepted): at most ~60 in the window

Stamp = tuple[int, int]
"""When vectors were saved (milliseconds since the epoch) and the file's count of vectors stored by then."""


@dataclass(frozen=True)
class VectorProgress:
    """The vector backlog of a whole memory file, every process's work counted.

    `waiting`: passages waiting for their vectors. `embedded`: vectors stored since the file was made (it only
    grows: a forgotten item's vectors stay counted). `rate_per_s`: vectors stored a second over the last minute,
    None until stamps span `MIN_SPAN_MS` of it (a backlog that just began, or none saved in the last minute)."""

    waiting: int
    embedded: int
    rate_per_s: float | None


def stamp(conn: sqlite3.Connection) -> None:
    """Note that vectors were just saved. Never raises for the file: a stamp missed blurs the rate, no more."""
    try:
        with write_transaction(conn):
            now = _now_ms()
            kept = [s for s in _stamps(conn) if now - WINDOW_MS <= s[0] <= now]  # a clock set back drops the rest
            if len(kept) >= 2 and now - kept[-2][0] < _GAP_MS:
                kept.pop()
            kept.append((now, stored(conn)))
            conn.execute(
                "INSERT INTO settings (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (STAMPS_KEY, json.dumps(kept)),
            )
    except sqlite3.Error as err:
        logger.debug("could not stamp the vector progress: %s", err)


def stored(conn: sqlite3.Connection) -> int:
    """Vectors stored in the file since it was made, by every process."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'passage_vectors'").fetchone()
    return int(row[0]) if row else 0


def read(conn: sqlite3.Connection) -> VectorProgress:
    """The file's vector backlog now (a read: it takes no write lock and starts no embedding)."""
    return VectorProgress(waiting=pending_count(conn), embedded=stored(conn), rate_per_s=rate(_stamps(conn), _now_ms()))


def rate(stamps: list[Stamp], now_ms: int) -> float | None:
    """Vectors stored a second from the oldest stamp of the last minute until `now_ms`.

    Measured up to now, not to the newest stamp, so a lane that stopped shows a falling rate, never a stale one;
    the batch being embedded is then left out, a small share of a minute."""
    recent = [s for s in stamps if now_ms - WINDOW_MS <= s[0] <= now_ms]
    if len(recent) < 2 or now_ms - recent[0][0] < MIN_SPAN_MS:
        return None
    return max(0, recent[-1][1] - recent[0][1]) * 1000 / (now_ms - recent[0][0])


def _stamps(conn: sqlite3.Connection) -> list[Stamp]:
    row = conn.execute("SELECT value FROM settings WHERE key = ?", (STAMPS_KEY,)).fetchone()
    if not row:
        return []
    try:
        return [(int(at), int(count)) for at, count in json.loads(row[0])]
    except (ValueError, TypeError):  # not this module's shape: the next stamp starts afresh
        return []


def _now_ms() -> int:
    # Wall time, not monotonic: the stamps are compared across processes.
    return int(time.time() * 1000)
