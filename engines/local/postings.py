"""One engine's handle on the keyword index derived from its memory file (`keyword_index`), and its catch-up.

FTS5 scores every posting of every query word: 239 ms at the 95th percentile for three words at 300,000
passages. The derived index skips postings, so an engine searches it once the file holds `INDEX_FROM_PASSAGES`
passages (below that FTS5 alone answers within a few milliseconds, and no index is written beside the file).

A thread of the engine (started by the first search of a file that large, stopped by `close()`), at a lower
priority, brings the index up to the file: when a search finds passages
above the watermark, and at least every `ROUND_S`. It waits while the file is being written (a backfill goes at
FTS5's pace, not slowed by indexing; FTS5 answers for the tail meanwhile) unless the last catch-up is
`STALE_S` old. An index deleted from disk, or found torn, is rebuilt with a warning; searches use FTS5 until it
is back.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections import OrderedDict
from pathlib import Path

import tantivy

from engines.local import keyword_index
from engines.local.keyword_index import Marks, View, directory_of, passage_seq, read_marks
from engines.local.pending import WRITTEN_KEY, deletions
from engines.local.terms import Tokenizer

logger = logging.getLogger(__name__)

INDEX_FROM_PASSAGES = 20_000
"""Passages from which the derived index is built and searched."""
ROUND_S = 1.0
QUIET_S = 2.0
"""How long the file must have gone unwritten before a catch-up starts."""
STALE_S = 60.0
"""A catch-up older than this runs even while writes go on."""
RETRY_S = 30.0
_NICENESS = 10
_WORDS = 100_000


class Postings:
    """The derived keyword index of one engine's file; safe to share between its reading threads."""

    def __init__(self, *, index_from: int | None = None, quiet_s: float | None = None) -> None:
        self._index_from = INDEX_FROM_PASSAGES if index_from is None else index_from
        self._quiet_s = QUIET_S if quiet_s is None else quiet_s
        self._lock = threading.Lock()
        self._tokenizer = Tokenizer()
        self._terms: OrderedDict[str, str | None] = OrderedDict()
        self._state: _State | None = None
        self._closed = False

    def view(self, conn: sqlite3.Connection) -> View | None:
        """The index as it stands, for a search on `conn`; None while FTS5 alone should answer (a small file,
        an index not built yet, or one being rebuilt)."""
        state = self._started(conn)
        if state is None:
            return None
        return state.view()

    def term_of(self, word: str) -> str | None:
        """The term a query word stands for in the index (None: several, or none; FTS5 then answers)."""
        with self._lock:
            if word in self._terms:
                self._terms.move_to_end(word)
                return self._terms[word]
        term = self._tokenizer.term_of(word)
        with self._lock:
            self._terms[word] = term
            if len(self._terms) > _WORDS:
                self._terms.popitem(last=False)
        return term

    def wake(self) -> None:
        """A search saw passages above the watermark: catch up now rather than at the next round."""
        with self._lock:
            state = self._state
        if state is not None:
            state.wake.set()

    def wait_caught_up(self, conn: sqlite3.Connection, timeout_s: float = 60.0) -> bool:
        """Wait until the index holds the file's passages, and no removed one (for tests and benchmarks); True at
        once for a file FTS5 answers alone (too small for an index)."""
        if self._started(conn) is None:
            return True
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            view = self.view(conn)
            if view is not None and view.marks == Marks(passage_seq(conn), deletions(conn)):
                return True
            self.wake()
            time.sleep(0.05)
        return False

    def close(self) -> None:
        """Stop the catch-up thread (a catch-up under way finishes its batch first)."""
        with self._lock:
            self._closed = True
            state, self._state = self._state, None
        if state is not None:
            state.stop()

    def _started(self, conn: sqlite3.Connection) -> _State | None:
        with self._lock:
            if self._state is not None or self._closed:
                return self._state
        path = _file_of(conn)
        # A small file is FTS5's alone: no index and no thread (until it grows, or another process built one).
        if path is None or (passage_seq(conn) < self._index_from and not directory_of(path).exists()):
            return None
        state = _State(path, self._index_from, self._quiet_s)
        with self._lock:
            if self._state is None and not self._closed:
                self._state = state
                state.start()
                weakref.finalize(self, state.stopping.set)
            elif self._state is not state:
                return self._state
        return state


def _file_of(conn: sqlite3.Connection) -> Path | None:
    for _, name, file in conn.execute("PRAGMA database_list"):
        if name == "main":
            return Path(file) if file else None
    return None


class _State:
    """The index of one file: the searcher in use, and the thread that catches it up."""

    def __init__(self, path: Path, index_from: int, quiet_s: float) -> None:
        self.path = path
        self.directory = directory_of(path)
        self.wake = threading.Event()
        # Its own: a search never waits for a catch-up's batch to cut a query word.
        self._tokenizer = Tokenizer()
        self._index_from = index_from
        self._quiet_s = quiet_s
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._index: tantivy.Index | None = None
        self._seen: tuple[int, int] | None = None  # the marks file's (inode, mtime) last read
        self._view: View | None = None
        self._missing_said = False
        self._thread = threading.Thread(target=self._run, name="tm-local-keyword", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(30.0)

    def view(self) -> View | None:
        try:
            stat = (self.directory / "watermark.json").stat()
        except OSError:
            # Absent (not built yet, or removed from disk: the catch-up says so as it rebuilds it).
            with self._lock:
                had = self._view is not None
                self._index = self._view = None
                self._seen = None
            if had:
                self.wake.set()
            return None
        seen = (stat.st_ino, stat.st_mtime_ns)
        with self._lock:
            if seen == self._seen:
                return self._view
        # Marks first, then the searcher: the searcher then holds at least what the marks say (a newer commit
        # may hold more, which the tail's FTS5 read finds again; the ranking keeps one of each passage).
        marks = read_marks(self.directory)
        if marks is None:
            return None
        try:
            with self._lock:
                index = self._index
            if index is None:
                index = keyword_index.open_index(self.directory)
            index.reload()
            view = View(index.searcher(), marks)
        except ValueError:
            self.wake.set()
            return None
        with self._lock:
            self._index, self._view, self._seen = index, view, seen
        return view

    def _run(self) -> None:
        with contextlib.suppress(AttributeError, OSError):  # lower priority where the platform allows
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _NICENESS)
        conn: sqlite3.Connection | None = None
        last = time.monotonic()
        try:
            while not self.stopping.is_set():
                self.wake.wait(ROUND_S)
                self.wake.clear()
                if self.stopping.is_set() or not self.path.exists():
                    return
                try:
                    if conn is None:
                        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=60)
                    if self._due(conn, time.monotonic() - last):
                        self._catch_up(conn)
                        last = time.monotonic()
                except Exception:
                    # A full disk, a file being replaced, a bug: FTS5 answers meanwhile; try again later.
                    if self.stopping.is_set():
                        return
                    logger.exception(
                        "keyword index %s: catching up failed; trying again in %.0f s", self.directory, RETRY_S
                    )
                    self.stopping.wait(RETRY_S)
        finally:
            if conn is not None:
                conn.close()

    def _due(self, conn: sqlite3.Connection, since_last: float) -> bool:
        seq = passage_seq(conn)
        marks = read_marks(self.directory)
        if marks is None:
            if seq < self._index_from:
                return False
        elif marks.rowid >= seq and marks.deletions == deletions(conn):
            return False
        if since_last >= STALE_S:
            return True
        row = conn.execute("SELECT value FROM settings WHERE key = ?", (WRITTEN_KEY,)).fetchone()
        written_ms = int(row[0]) if row else 0
        return time.time() * 1000 - written_ms >= self._quiet_s * 1000

    def _catch_up(self, conn: sqlite3.Connection) -> None:
        before = read_marks(self.directory)
        if before is None and not self._missing_said:
            self._missing_said = True
            state = "torn or of another format" if self.directory.exists() else "missing"
            logger.warning(
                "keyword index %s is %s: rebuilding it from %s (FTS5 answers keyword searches meanwhile)",
                self.directory,
                state,
                self.path,
            )
        started = time.monotonic()
        marks = keyword_index.catch_up(conn, self.directory, self._tokenizer)
        if marks is not None and before is None:
            logger.info(
                "keyword index %s built up to passage %d in %.1f s",
                self.directory,
                marks.rowid,
                time.monotonic() - started,
            )
        if marks is not None:
            self._missing_said = False


__all__ = ["INDEX_FROM_PASSAGES", "Marks", "Postings", "View"]
