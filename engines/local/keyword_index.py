"""A keyword index derived from the memory file: tantivy, whose top-k search skips postings (block-max WAND).

SQLite stays the source of truth; this index beside it (`<file>.keyword/`) holds the passages up to a
watermark, and FTS5 answers for those above it (the tail not yet caught up), so an item is keyword-searchable
when `store_many` returns. Its terms are FTS5's own (`terms.Tokenizer`), one per whitespace-separated word of
each document's text, so tantivy's postings are `passage_text`'s, term for term.

Scores are FTS5's to the last bit: tantivy's BM25 differs in its idf (log(1 + ...)) and keeps lengths in one byte
(rounded down, by steps of up to a tenth above 40 tokens), so tantivy only proposes candidates, each query word
boosted by FTS5's idf over tantivy's (tantivy's score then bounds FTS5's from above), and each candidate is scored
again with FTS5's formula (`terms.bm25`) from its exact frequencies (solved from tantivy's scores, `frequencies`)
and length (a fast field). `DEPTH` candidates per passage wanted are read, twice as many when the best exact scores
do not yet beat every score tantivy left unread (with `MARGIN` for the average lengths, counted over slightly
different passages); past that the order is FTS5's among the candidates read. Measured at 300,000 generated
passages, where thousands of passages score within 1% of one another (rounded lengths cannot tell them apart): the
top 10 equal FTS5's for 38 queries of 40 (recall@10 0.985), and a passage ranked in place of FTS5's scored at most
0.7% below it (twice the depth: 39 of 40, for a third more time).

On disk: tantivy's files, and `watermark.json` (the highest passage rowid indexed, and the file's deletion
counter then), written after tantivy's commit. A crash between the two replays the rows above the old
watermark, which are deleted from tantivy before they are added again, so a replay never duplicates. One
process at a time catches up (a non-blocking lock on `<file>.keyword.lock`); the others search what is there.
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import tantivy

from engines.local import pending
from engines.local.frequencies import frequencies
from engines.local.rows import indexed_texts
from engines.local.terms import Tokenizer, bm25

logger = logging.getLogger(__name__)

FORMAT = 2
"""The layout of the index; another one is rebuilt."""
BATCH = 2_000
"""Passages read, tokenised and added at a time."""
COMMIT_EVERY = 50_000
"""Passages between commits during a long catch-up, so its progress is kept and searched."""
MARGIN = 1.02
"""How far tantivy's score may fall below FTS5's for a passage (average lengths counted over other passages)."""
DEPTH = 4
"""Candidates read first, per passage wanted; the most read is `DEPTH * 2` per passage wanted."""

_MARKS = "watermark.json"
_HEAP = 64_000_000
_FIELD = "text"
_EVERY = "every"


def directory_of(path: str | os.PathLike[str]) -> Path:
    return Path(f"{os.fspath(path)}.keyword")


@dataclass(frozen=True, slots=True)
class Marks:
    """What the index holds: every passage with rowid <= `rowid` as of the file's `deletions` counter."""

    rowid: int
    deletions: int


def read_marks(directory: Path) -> Marks | None:
    """The index's marks; None when the index is absent, torn or of another format."""
    try:
        found = json.loads((directory / _MARKS).read_text())
        if found.get("format") != FORMAT:
            return None
        return Marks(int(found["rowid"]), int(found["deletions"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_marks(directory: Path, marks: Marks) -> None:
    """Replace the marks atomically (a reader sees the old file or the new one, never a part)."""
    temporary = directory / f"{_MARKS}.{os.getpid()}"
    with temporary.open("w") as out:
        json.dump({"format": FORMAT, "rowid": marks.rowid, "deletions": marks.deletions}, out)
        out.flush()
        os.fsync(out.fileno())
    temporary.replace(directory / _MARKS)


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_integer_field("rowid", stored=False, indexed=True, fast=True)
    builder.add_unsigned_field("length", stored=False, indexed=False, fast=True)
    builder.add_text_field(_FIELD, stored=False, tokenizer_name="terms", index_option="freq")
    # One term every document holds: its frequency is tantivy's N (removed documents count until merged away).
    builder.add_text_field(_EVERY, stored=False, tokenizer_name="raw", index_option="basic")
    return builder.build()


SCHEMA = _schema()


def open_index(directory: Path, *, create: bool = False) -> tantivy.Index:
    """The tantivy index in `directory` (a new empty one with `create`); raises ValueError when unreadable."""
    if create:
        directory.mkdir(parents=True, exist_ok=True)
    elif not (directory / "meta.json").exists():
        raise ValueError(f"no tantivy index in {directory}")
    index = tantivy.Index(SCHEMA, path=str(directory), reuse=True)
    # Terms arrive already cut and stemmed by FTS5, one per whitespace-separated word.
    index.register_tokenizer("terms", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
    return index


@contextmanager
def catch_up_lock(directory: Path) -> Iterator[bool]:
    """Whether this process may write the index now (a lock beside it, so removing the index keeps it)."""
    fd = os.open(f"{directory}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def passage_seq(conn: sqlite3.Connection) -> int:
    """The highest passage rowid ever given (AUTOINCREMENT: removed ones count)."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'passages'").fetchone()
    return int(row[0]) if row else 0


def catch_up(conn: sqlite3.Connection, directory: Path, tokenizer: Tokenizer) -> Marks | None:
    """Bring the index up to the file; returns the new marks, or None when another process is at it.

    A missing, torn or foreign index is rebuilt from the file (with a warning when it held passages)."""
    with catch_up_lock(directory) as mine:
        if not mine:
            return None
        marks = read_marks(directory)
        index = None
        if marks is not None:
            try:
                index = open_index(directory)
            except ValueError as err:
                logger.warning(
                    "keyword index %s is unreadable (%s): rebuilding it from the memory file", directory, err
                )
                marks = None
        if marks is None:
            if directory.exists():
                shutil.rmtree(directory)
            index = open_index(directory, create=True)
            marks = Marks(0, 0)
        assert index is not None
        return _add_above(conn, directory, index, marks, tokenizer)


def _add_above(
    conn: sqlite3.Connection, directory: Path, index: tantivy.Index, marks: Marks, tokenizer: Tokenizer
) -> Marks:
    deletions = pending.deletions(conn)  # read first: a removal after it moves the counter again
    writer = index.writer(heap_size=_HEAP, num_threads=1)
    if deletions != marks.deletions and marks.rowid:
        _purge(conn, index, writer, marks.rowid)
    # A replay of rows already added (a crash after the commit, before the marks) must not add them twice.
    writer.delete_documents_by_query(
        tantivy.Query.range_query(SCHEMA, "rowid", tantivy.FieldType.Integer, marks.rowid, None, False, True)
    )
    rowid, uncommitted = marks.rowid, 0
    while True:
        rows = conn.execute(
            "SELECT p.rowid, p.start, p.stop, i.body FROM passages p CROSS JOIN items i ON i.seq = p.item_seq "
            "WHERE p.rowid > ? ORDER BY p.rowid LIMIT ?",
            (rowid, BATCH),
        ).fetchall()
        if not rows:
            break
        texts = list(indexed_texts(rows))
        for (passage, _), terms in zip(texts, tokenizer.terms([text for _, text in texts]), strict=True):
            doc = tantivy.Document()
            doc.add_integer("rowid", passage)
            doc.add_unsigned("length", len(terms))
            doc.add_text(_FIELD, " ".join(terms))
            doc.add_text(_EVERY, _EVERY)
            writer.add_document(doc)
        rowid, uncommitted = texts[-1][0], uncommitted + len(texts)
        if uncommitted >= COMMIT_EVERY:
            writer.commit()
            write_marks(directory, Marks(rowid, marks.deletions))
            uncommitted = 0
    writer.commit()
    writer.wait_merging_threads()
    done = Marks(rowid, deletions)
    write_marks(directory, done)
    return done


def _purge(conn: sqlite3.Connection, index: tantivy.Index, writer: tantivy.IndexWriter, upto: int) -> None:
    """Delete from the index the passages the file no longer holds (forgotten, erased, stored again)."""
    index.reload()
    searcher = index.searcher()
    held: set[int] = set()
    if searcher.num_docs:
        hits = searcher.search(tantivy.Query.all_query(), searcher.num_docs, count=False).hits
        held = {int(v) for v in searcher.fast_field_values("rowid", [address for _, address in hits]) if v is not None}
    live = {r[0] for r in conn.execute("SELECT rowid FROM passages WHERE rowid <= ?", (upto,))}
    gone = sorted(held - live)
    for start in range(0, len(gone), 10_000):
        writer.delete_documents_by_query(tantivy.Query.term_set_query(SCHEMA, "rowid", gone[start : start + 10_000]))


class View:
    """One state of the index as a reading thread searches it.

    `upto` is the highest passage rowid its searcher holds: at least the marks' (the marks are read first), more
    when a catch-up committed again since (it adds passages in rowid order, so the searcher holds every passage up
    to it). FTS5 answers for the passages above `upto`, so none is counted or ranked twice."""

    def __init__(self, searcher: tantivy.Searcher, marks: Marks) -> None:
        self.searcher = searcher
        self.marks = marks
        self._whole = searcher.num_docs == searcher.doc_freq(_EVERY, _EVERY)
        last = searcher.search(tantivy.Query.all_query(), 1, count=False, order_by_field="rowid").hits
        self.upto = max([marks.rowid, *(int(key) for key, _ in last)])

    def frequency(self, term: str) -> int:
        """How many indexed passages hold `term` (deleted ones left out)."""
        if self._whole:
            # No deleted document left in any segment: the dictionary's count is exact, and costs no posting read.
            return int(self.searcher.doc_freq(_FIELD, term))
        found = self.searcher.search(_term(term), 1, count=True)
        return int(found.count or 0)  # type: ignore[attr-defined]  # (missing from tantivy's stubs)

    def top(self, terms: list[str], idfs: list[float], average_length: float, limit: int) -> list[tuple[int, float]]:
        """The `limit` best indexed passages by FTS5's bm25 (`(rowid, bm25)`, lowest first, then rowid), for a
        query of `terms` (one a phrase, in the query's order) whose FTS5 idfs are `idfs`."""
        searcher = self.searcher
        total = searcher.doc_freq(_EVERY, _EVERY)
        clauses = []
        for term, weight in zip(terms, idfs, strict=True):
            held = searcher.doc_freq(_FIELD, term)
            if held:
                theirs = max(math.log(1 + (total - held + 0.5) / (held + 0.5)), 1e-9)
                clauses.append((tantivy.Occur.Should, tantivy.Query.boost_query(_term(term), weight / theirs)))
        if not clauses:
            return []
        query = tantivy.Query.boolean_query(clauses)
        wanted = max(limit * DEPTH, 64)
        exact: dict[tuple[int, int], tuple[float, int]] = {}  # by segment and document: scored once
        while True:
            hits = searcher.search(query, wanted, count=False).hits
            new = [address for _, address in hits if (address.segment_ord, address.doc) not in exact]
            rowids = [int(v or 0) for v in searcher.fast_field_values("rowid", new)]
            lengths = [int(v or 0) for v in searcher.fast_field_values("length", new)]
            counted = frequencies(searcher, SCHEMA, _FIELD, terms, new, rowids, lengths, query)
            for address, rowid, length, found in zip(new, rowids, lengths, counted, strict=True):
                score = bm25(idfs, [found.get(term, 0) for term in terms], length, average_length)
                exact[address.segment_ord, address.doc] = (score, rowid)
            scored = sorted(exact.values())
            if len(hits) < wanted:
                return [(rowid, score) for score, rowid in scored[:limit]]
            unread = float(hits[-1][0]) * MARGIN
            certain = sum(1 for score, _ in scored[:limit] if -score > unread)
            # Past the deepest read, a passage tantivy ranked lower still may belong among the best (its rounded
            # length flattered the ones read): the order is then FTS5's among the candidates read.
            if certain >= limit or wanted >= max(limit * DEPTH, 64) * 2:
                return [(rowid, score) for score, rowid in scored[:limit]]
            wanted *= 2


def _term(term: str) -> tantivy.Query:
    return tantivy.Query.term_query(SCHEMA, _FIELD, term)
