"""Ranked reads over one tenant's admitted items: BM25 keyword and vector rankings.

Each ranking is a list of `Ranked` (item, its best passage, score), one entry per item, best
first. `fusion` combines the two for hybrid search.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from engines.local.keyword_index import View, passage_seq
from engines.local.pending import deletions
from engines.local.postings import Postings
from engines.local.terms import fts_totals, idf
from engines.local.vectors import Snapshot
from engines.local.where import Where
from engines.local.words import search_words

_CHECK_CHUNK = 512
_FIRST_CHECK = 16
_CHECK_ROUNDS = 4
_PRUNE_FROM_PASSAGES = 2_000
_COUNT_MATCHES = "SELECT count(*) FROM passage_text WHERE passage_text MATCH ?"


@dataclass(frozen=True, slots=True)
class Ranked:
    item_seq: int
    passage: int
    score: float


def fts_query(words: list[str]) -> str | None:
    """An FTS5 query matching any of `words` (each quoted, so no word is read as syntax)."""
    return " OR ".join(f'"{w}"' for w in words) or None


class TermCounts:
    """How many passages hold each term, remembered per connection until the file changes.

    Counting a common term walks its whole posting list (1 ms a word at 50,000 passages), and
    queries share their common words. Any commit of any process changes a connection's
    `data_version`, which forgets what that connection's counts remembered. Versions of different
    connections cannot be compared, so each connection (one per reading thread) has counts of its own,
    touched only by its thread.
    """

    def __init__(self, capacity: int = 20_000) -> None:
        self._capacity = capacity
        self._by_conn: dict[int, _Counts] = {}

    def lookup(self, conn: sqlite3.Connection, words: list[str]) -> tuple[int, dict[str, int]]:
        """The number of passages, and how many of them hold each of `words`."""
        counts = self._by_conn.get(id(conn))
        if counts is None:
            counts = self._by_conn.setdefault(id(conn), _Counts())
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != counts.version or len(counts.words) > self._capacity:
            counts.version, counts.words = version, {}
            counts.total = conn.execute("SELECT count(*) FROM passages").fetchone()[0]
        for word in words:
            if word not in counts.words:
                # Counting matches reads the postings once; the fts5vocab table also decodes every
                # position (twice the time), and it would look the word up unfolded ("café").
                match = fts_query([word])
                counts.words[word] = conn.execute(_COUNT_MATCHES, (match,)).fetchone()[0]
        return counts.total, {w: counts.words[w] for w in words}


@dataclass(slots=True)
class _Counts:
    version: int | None = None
    total: int = 0
    words: dict[str, int] = field(default_factory=dict)


def informative_words(conn: sqlite3.Connection, words: list[str], counts: TermCounts) -> list[str]:
    """The words worth searching for: those in at most half of the passages.

    BM25 gives a word in half the passages or more an inverse document frequency of about zero
    (FTS5 clamps it to 1e-6), so it cannot change the ranking, yet scoring its postings is most of
    the cost of a query ("the", "how"). The rarest word is always kept, so a query of common
    words still finds something. A small file is cheap to search whole, and there one shared word
    is often all a passage has.
    """
    if len(words) < 2:
        return words
    total, frequency = counts.lookup(conn, words)
    return _informative(words, total, frequency)


def _informative(words: list[str], total: int, frequency: dict[str, int]) -> list[str]:
    if len(words) < 2 or total < _PRUNE_FROM_PASSAGES:
        return words
    kept = [w for w in words if frequency[w] * 2 <= total]
    return kept or [min(words, key=lambda w: frequency[w])]


def keyword_ranking(
    conn: sqlite3.Connection,
    where: Where,
    query: str,
    want: int,
    counts: TermCounts,
    postings: Postings | None = None,
) -> list[Ranked]:
    """Items whose passages match a word of `query` (stop words aside), by their best passage's BM25 as FTS5
    scores it; from the derived index (`postings`) and FTS5 for the passages above its watermark, where there
    is one, else from FTS5 alone."""
    words = search_words(query)
    derived = None if postings is None else _Derived.of(conn, postings, words)
    words = derived.words if derived is not None else informative_words(conn, words, counts)
    match = fts_query(words)
    if match is None:
        return []
    limit = max(want * 3, 100) if derived is None else want + max(want // 4, 10)
    for _ in range(_CHECK_ROUNDS):
        # Rank in the index alone, then filter the best passages: joining every match to its item
        # before sorting costs several times more when a common word matches most of the file.
        if derived is not None:
            rows = derived.top(conn, match, limit)
        else:
            rows = conn.execute(
                "SELECT rowid, bm25(passage_text) AS rank FROM passage_text WHERE passage_text MATCH ? "
                "ORDER BY rank, rowid LIMIT ?",
                (match, limit),
            ).fetchall()
        ranked = _first_admitted(conn, where, rows, want)
        if len(ranked) >= want or len(rows) < limit:
            return ranked
        limit *= 4
    return _keyword_filtered_first(conn, where, match, want)


@dataclass(slots=True)
class _Derived:
    """A keyword read through the derived index: its words, their terms and FTS5's idfs, and the index's state."""

    view: View
    words: list[str]
    terms: list[str]
    idfs: list[float]
    average_length: float

    @classmethod
    def of(cls, conn: sqlite3.Connection, postings: Postings, words: list[str]) -> _Derived | None:
        """None when FTS5 alone answers: no index yet, or a word that is not one term (FTS5 reads a phrase)."""
        view = postings.view(conn)
        if view is None or not words:
            return None
        terms = [postings.term_of(w) for w in words]
        if any(t is None for t in terms):
            return None
        totals = fts_totals(conn)
        tail = passage_seq(conn) > view.upto
        if tail:
            postings.wake()
        # Removals the index has not heard of yet still count in its frequencies: FTS5 counts then.
        removed = deletions(conn) != view.marks.deletions
        frequency: dict[str, int] = {}
        for word, term in zip(words, terms, strict=True):
            assert term is not None
            if removed:
                frequency[word] = conn.execute(_COUNT_MATCHES, (fts_query([word]),)).fetchone()[0]
                continue
            held = view.frequency(term)
            if tail:
                # The passages above the index's are FTS5's alone (a seek to `upto` in each posting list).
                held += conn.execute(
                    "SELECT count(*) FROM passage_text WHERE passage_text MATCH ? AND rowid > ?",
                    (fts_query([word]), view.upto),
                ).fetchone()[0]
            frequency[word] = held
        kept = _informative(words, totals.rows, frequency)
        chosen = [t for w, t in zip(words, terms, strict=True) if w in kept and t is not None]
        idfs = [idf(totals.rows, frequency[w]) for w in kept]
        return cls(view, kept, chosen, idfs, totals.average_length)

    def top(self, conn: sqlite3.Connection, match: str, limit: int) -> list[tuple[int, float]]:
        """The `limit` best passages `(rowid, bm25)` as FTS5 ranks them: the index's, and FTS5's above it."""
        rows = self.view.top(self.terms, self.idfs, self.average_length, limit)
        if passage_seq(conn) > self.view.upto:
            rows += conn.execute(
                "SELECT rowid, bm25(passage_text) AS rank FROM passage_text WHERE passage_text MATCH ? "
                "AND rowid > ? ORDER BY rank, rowid LIMIT ?",
                (match, self.view.upto, limit),
            ).fetchall()
            rows = sorted(rows, key=lambda r: (r[1], r[0]))[:limit]
        return rows


def _first_admitted(conn: sqlite3.Connection, where: Where, rows: list[tuple[int, float]], want: int) -> list[Ranked]:
    """The first `want` items, in the order of their best passages among `rows` (rowid, bm25), that `where`
    admits. The rows are checked a few at a time, as a filter that admits most items needs only the first few."""
    ranked: list[Ranked] = []
    seen: set[int] = set()
    start, step = 0, max(want * 2, _FIRST_CHECK)
    while start < len(rows) and len(ranked) < want:
        chunk = rows[start : start + step]
        owners = _admitted_owners(conn, where, [rowid for rowid, _ in chunk])
        for rowid, rank in chunk:
            seq = owners.get(rowid)
            if seq is not None and seq not in seen:
                seen.add(seq)
                ranked.append(Ranked(seq, rowid, -float(rank)))
        start, step = start + len(chunk), step * 2
    return ranked[:want]


def _admitted_owners(conn: sqlite3.Connection, where: Where, rowids: list[int]) -> dict[int, int]:
    """The item of each passage whose item the filter admits."""
    owners: dict[int, int] = {}
    # CROSS JOIN keeps SQLite on the passages named (by rowid) instead of scanning the tenant's index.
    for start in range(0, len(rowids), _CHECK_CHUNK):
        chunk = rowids[start : start + _CHECK_CHUNK]
        rows = conn.execute(
            "SELECT p.rowid, p.item_seq FROM passages p CROSS JOIN items i ON i.seq = p.item_seq "
            f"WHERE p.rowid IN ({','.join('?' * len(chunk))}) AND {where.sql()}",
            (*chunk, *where.params),
        )
        owners.update(rows)
    return owners


def _keyword_filtered_first(conn: sqlite3.Connection, where: Where, match: str, want: int) -> list[Ranked]:
    """For a selective filter: join every match to its item first, then rank what is admitted."""
    limit = max(want * 3, 100)
    while True:
        rows = conn.execute(
            "SELECT p.item_seq, p.rowid, bm25(passage_text) AS rank "
            "FROM passage_text JOIN passages p ON p.rowid = passage_text.rowid "
            f"JOIN items i ON i.seq = p.item_seq WHERE passage_text MATCH ? AND {where.sql()} "
            "ORDER BY rank, p.rowid LIMIT ?",
            (match, *where.params, limit),
        ).fetchall()
        ranked = _first_per_item((seq, rowid, -rank) for seq, rowid, rank in rows)
        # Several passages of one item can crowd the window; widen it until enough items show.
        if len(ranked) >= want or len(rows) < limit:
            return ranked[:want]
        limit *= 4


def _first_per_item(rows: Iterable[tuple[int, int, float]]) -> list[Ranked]:
    seen: set[int] = set()
    ranked = []
    for seq, rowid, score in rows:
        if seq not in seen:
            seen.add(seq)
            ranked.append(Ranked(seq, rowid, float(score)))
    return ranked


VectorHits = tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float32]]
"""Items, their best passages' rowids and cosines, best first (`Snapshot.best_per_item`)."""


_DEEP = _CHECK_ROUNDS * _CHECK_CHUNK + 1
"""Candidates of a deep vector read: one more than the filter is checked against, so a selective filter shows
(see _admitted_in_order)."""


def _shallow(want: int) -> int:
    # Most filters admit most items, so the best few are read and checked first (sorting thousands of
    # candidates and checking 512 of them was a third of a hybrid read); deeper only when too few pass.
    return min(want * 2 + 1, _DEEP)


def vector_candidates(snapshot: Snapshot, query: NDArray[np.float32], threshold: float, want: int) -> VectorHits:
    """The first candidates `vector_ranking` checks against the filter: numpy's work alone, without the file, so
    it may run on another thread (BLAS lets go of the interpreter) while that thread reads something else."""
    return snapshot.best_per_item(query, threshold, _shallow(want))


def vector_ranking(
    conn: sqlite3.Connection,
    snapshot: Snapshot,
    where: Where,
    query: NDArray[np.float32],
    threshold: float,
    want: int,
    first: VectorHits | None = None,
) -> list[Ranked]:
    """Items whose best embedded passage's cosine with `query` reaches `threshold`, best first; `first` is
    `vector_candidates` of the same arguments, when the caller already has it."""
    items, rowids, scores = first if first is not None else vector_candidates(snapshot, query, threshold, want)
    admitted = _admitted_in_order(conn, where, items, want)
    if admitted is None or (len(admitted) < want and len(items) == _shallow(want) < _DEEP):
        items, rowids, scores = snapshot.best_per_item(query, threshold, _DEEP)
        admitted = _admitted_in_order(conn, where, items, want)
    if admitted is None:
        # The filter is selective: ask SQL for the items it admits and score only those.
        allowed = np.fromiter(
            (r[0] for r in conn.execute(f"SELECT i.seq FROM items i WHERE {where.sql()}", where.params)),
            dtype=np.int64,
        )
        items, rowids, scores = snapshot.best_per_item(query, threshold, want, among=allowed)
        admitted = set(items.tolist())
    ranked: list[Ranked] = []
    for seq, rowid, score in zip(items.tolist(), rowids.tolist(), scores.tolist(), strict=True):
        if seq in admitted:
            ranked.append(Ranked(seq, rowid, score))
            if len(ranked) == want:
                break
    return ranked


def _admitted_in_order(conn: sqlite3.Connection, where: Where, items: NDArray[np.int64], want: int) -> set[int] | None:
    """Check the best candidates against the filter chunk by chunk; None when a few chunks were
    not enough (a selective filter), so the caller narrows by the filter first instead."""
    admitted: set[int] = set()
    for round_ in range(_CHECK_ROUNDS):
        chunk = items[round_ * _CHECK_CHUNK : (round_ + 1) * _CHECK_CHUNK].tolist()
        if not chunk:
            return admitted
        marks = ",".join("?" * len(chunk))
        # NOT INDEXED: look the named items up by seq, never scan the tenant's index for them.
        rows = conn.execute(
            f"SELECT i.seq FROM items i NOT INDEXED WHERE i.seq IN ({marks}) AND {where.sql()}", (*chunk, *where.params)
        )
        admitted.update(r[0] for r in rows)
        if len(admitted) >= want:
            return admitted
    return None if len(items) > _CHECK_ROUNDS * _CHECK_CHUNK else admitted
