"""Each query word's BM25 scores, read whole once and kept while the keyword index is at rest.

To answer a top-k query FTS5 scores every passage holding one of its words: 8 ms for three common words at
50,000 passages, most of a keyword read. But BM25 is a sum over the query's words (FTS5's bm25() adds one term per
phrase, with statistics of the whole table), so each word's scores, read once, answer every later query holding
that word by adding arrays: 0.3 ms for the same query, with the same scores to the last bit (the same terms
added in the same order) and the same order (score, then rowid).

Scores move with any write (the passage count, the average length), so the words are kept only for one state of
the index: its mark is the passages' AUTOINCREMENT sequence (every store moves it) and the deletion counter
(every removal moves it), both only ever growing. Words are read whole only once the index has been at rest for
`SETTLE_S`, and each only at its second query in that state (reading a word whole costs about eight times what
FTS5 spends on it in one query): while writes come (a backfill), a query goes to FTS5 as before. A connection
still reading an older state goes to FTS5 too, and never sets the kept state back. Memory is capped at
`MAX_POSTINGS` passages over all words, the least recently used words dropped first; a word holding more is left
to FTS5 in that state.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from engines.local.pending import DELETIONS_KEY

MAX_POSTINGS = 4_000_000
"""Passages kept over all words: 16 bytes each (rowid and score), so 64 MB at most."""
SETTLE_S = 1.0
"""How long the index must be unchanged before words are read whole."""

Mark = tuple[int, int]
Scores = tuple[NDArray[np.int64], NDArray[np.float64]]

_MAX_ASKED = 100_000
_MARK = (
    "SELECT (SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'passages'), "
    "(SELECT coalesce(max(CAST(value AS INTEGER)), 0) FROM settings WHERE key = ?)"
)
_WORD = "SELECT rowid, bm25(passage_text) FROM passage_text WHERE passage_text MATCH ?"


class Postings:
    """Word scores for one engine's reading threads; safe to share between them."""

    def __init__(
        self,
        *,
        max_postings: int = MAX_POSTINGS,
        settle_s: float = SETTLE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max = max_postings
        self._settle_s = settle_s
        self._clock = clock
        self._lock = threading.Lock()
        self._mark: Mark = (-1, -1)
        self._since = 0.0
        self._words: OrderedDict[str, Scores] = OrderedDict()
        self._asked: set[str] = set()
        self._oversized: set[str] = set()
        self._size = 0

    def top(self, conn: sqlite3.Connection, words: list[str], limit: int) -> list[tuple[int, float]] | None:
        """The `limit` best passages holding any of `words` (stemmed as the index stems them), as FTS5 ranks them:
        `(rowid, bm25)`, lowest bm25 first, then lowest rowid. None while the index is not at rest for `conn`:
        the caller asks FTS5."""
        mark = _mark(conn)
        if not words or limit < 1 or not self._at_rest(mark):
            return None
        if not self._admitted(words):
            return None
        found: list[Scores] = []
        for word in dict.fromkeys(words):
            scores = self._scores(conn, word, mark)
            if scores is None:
                return None
            found.append(scores)
        return _best(found, limit)

    def _admitted(self, words: list[str]) -> bool:
        """Whether every word is kept or asked for before in this state, and none is too common to keep. Reading a
        word whole costs about eight times what FTS5 spends on it in one query, so a word asked for once is left to
        FTS5."""
        with self._lock:
            if any(w in self._oversized for w in words):
                return False
            new = [w for w in words if w not in self._words and w not in self._asked]
            if len(self._asked) + len(new) > _MAX_ASKED:
                self._asked.clear()
            self._asked.update(new)
        return not new

    def _at_rest(self, mark: Mark) -> bool:
        with self._lock:
            if mark != self._mark and all(now >= kept for now, kept in zip(mark, self._mark, strict=True)):
                self._mark, self._since = mark, self._clock()
                self._words.clear()
                self._asked.clear()
                self._oversized.clear()
                self._size = 0
            return mark == self._mark and self._clock() - self._since >= self._settle_s

    def _scores(self, conn: sqlite3.Connection, word: str, mark: Mark) -> Scores | None:
        with self._lock:
            kept = self._words.get(word)
            if kept is not None:
                self._words.move_to_end(word)
                return kept
        rows = conn.execute(_WORD, (f'"{word}"',)).fetchall()
        # Each statement reads the file as it is then: a write between the mark and the word leaves the word unkept.
        if _mark(conn) != mark:
            return None
        if len(rows) > self._max:
            with self._lock:
                if mark == self._mark:
                    self._oversized.add(word)
            return None
        table = np.array(rows, dtype=np.float64).reshape(-1, 2)
        scores: Scores = (table[:, 0].astype(np.int64), np.ascontiguousarray(table[:, 1]))
        with self._lock:
            # Kept only for the state it was read in (another thread may have moved the mark since).
            if mark == self._mark and word not in self._words:
                while self._words and self._size + len(rows) > self._max:
                    _, (dropped, _) = self._words.popitem(last=False)
                    self._size -= len(dropped)
                self._words[word] = scores
                self._size += len(rows)
        return scores

    @property
    def size(self) -> int:
        """Passages kept over all words."""
        with self._lock:
            return self._size


def _mark(conn: sqlite3.Connection) -> Mark:
    seq, deletions = conn.execute(_MARK, (DELETIONS_KEY,)).fetchone()
    return int(seq), int(deletions)


def _best(found: list[Scores], limit: int) -> list[tuple[int, float]]:
    """The `limit` lowest summed scores, ties by rowid; each word's terms added in the query's order, as FTS5 adds
    them."""
    if len(found) == 1:
        rowids, scores = found[0]
    else:
        rowids, slot = np.unique(np.concatenate([r for r, _ in found]), return_inverse=True)
        # bincount adds in array order: a passage's terms in the words' order.
        weights = np.concatenate([s for _, s in found])
        scores = np.bincount(slot, weights=weights, minlength=len(rowids)).astype(np.float64, copy=False)
    if len(scores) > limit:
        # Every passage tied with the limit-th score is a candidate, so ties are broken by rowid as FTS5 does.
        cutoff = np.partition(scores, limit - 1)[limit - 1]
        chosen = np.flatnonzero(scores <= cutoff)
    else:
        chosen = np.arange(len(scores))
    order = chosen[np.lexsort((rowids[chosen], scores[chosen]))][:limit]
    return list(zip(rowids[order].tolist(), scores[order].tolist(), strict=True))
