"""The keyword index's terms and BM25, exactly as FTS5 computes them, for an index derived from it.

Terms come from FTS5 itself: texts are put through an in-memory FTS5 table with the file's tokenizer
(`schema.FTS_TOKENIZER`) and read back from its vocabulary, so a derived index holds, term for term, what
`passage_text` holds (case folding, diacritics, Porter stemming), with no second tokenizer to keep in step.

Scores follow FTS5's bm25() (sqlite's fts5_aux.c) operation for operation, so they equal its results to the
last bit: idf = log((N - n + 0.5) / (n + 0.5)), 1e-6 where that is not positive; each phrase adds
idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)), in the query's order; k1 = 1.2, b = 0.75; the
result is negated (lower is better). N and the tokens over all rows are FTS5's own, from its averages record.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

from engines.local.migrations import FTS_TOKENIZER

K1 = 1.2
B = 0.75
_AVERAGES_ROWID = 1  # FTS5_AVERAGES_ROWID: the row count and each column's token count, as varints

TermCounts = list[tuple[str, int]]
"""A text's terms and how often each occurs, in term order."""


class Tokenizer:
    """Texts as the file's FTS5 tokenizer cuts them; safe to share between threads (one at a time inside).

    FTS5's unicode61 never makes a token across whitespace, so a text's terms are those of its
    whitespace-separated pieces, and a piece ("deploys," or "(café)") is put through FTS5 once and remembered:
    a text then costs a split and a lookup a piece (FTS5's own vocabulary read costs 2 ms a 700-character text).
    """

    def __init__(self, remembered: int = 1_000_000) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._conn.execute(
            f"CREATE VIRTUAL TABLE scratch USING fts5 (text, content = '', tokenize = '{FTS_TOKENIZER}')"
        )
        self._conn.execute("CREATE VIRTUAL TABLE scratch_terms USING fts5vocab (scratch, 'instance')")
        self._lock = threading.Lock()
        self._remembered = remembered
        self._pieces: dict[str, tuple[str, ...]] = {}

    def counts(self, texts: Sequence[str]) -> list[TermCounts]:
        """Each text's terms with their frequencies, in term order; their sum is the text's length as FTS5
        measures it."""
        return [sorted(Counter(terms).items()) for terms in self.terms(texts)]

    def terms(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's terms, one per token FTS5 makes of it (in the order of its pieces)."""
        split = [text.split() for text in texts]
        with self._lock:
            pieces = self._pieces
            new = {piece for pieces_of in split for piece in pieces_of if piece not in pieces}
            if new:
                if len(pieces) + len(new) > self._remembered:
                    pieces.clear()
                pieces.update(self._cut(list(new)))
            return [list(chain.from_iterable(map(pieces.__getitem__, pieces_of))) for pieces_of in split]

    def _cut(self, pieces: list[str]) -> dict[str, tuple[str, ...]]:
        """The terms of each piece, as FTS5 makes them (in no particular order)."""
        terms: list[list[str]] = [[] for _ in pieces]
        self._conn.execute("BEGIN")
        try:
            self._conn.executemany("INSERT INTO scratch (rowid, text) VALUES (?, ?)", enumerate(pieces))
            for doc, term in self._conn.execute("SELECT doc, term FROM scratch_terms"):
                terms[doc].append(term)
            self._conn.execute("INSERT INTO scratch (scratch) VALUES ('delete-all')")
        finally:
            self._conn.execute("COMMIT")
        return {piece: tuple(found) for piece, found in zip(pieces, terms, strict=True)}

    def term_of(self, word: str) -> str | None:
        """The one term a query word stands for; None when it is no term, or several (FTS5 reads a phrase)."""
        (terms,) = self.counts([word])
        return terms[0][0] if len(terms) == 1 and terms[0][1] == 1 else None

    def close(self) -> None:
        with self._lock:
            self._conn.close()


@dataclass(frozen=True, slots=True)
class Totals:
    """FTS5's row count and token count over all rows: what its bm25() reads N and the average length from."""

    rows: int
    tokens: int

    @property
    def average_length(self) -> float:
        return float(self.tokens) / float(self.rows) if self.rows else 0.0


def fts_totals(conn: sqlite3.Connection) -> Totals:
    """The totals of `passage_text`, read from its averages record."""
    row = conn.execute("SELECT block FROM passage_text_data WHERE id = ?", (_AVERAGES_ROWID,)).fetchone()
    if row is None or not row[0]:
        return Totals(0, 0)
    blob: bytes = row[0]
    rows, at = varint(blob, 0)
    tokens = 0
    while at < len(blob):  # one count per column; `passage_text` has one
        column, at = varint(blob, at)
        tokens += column
    return Totals(rows, tokens)


def varint(blob: bytes, at: int) -> tuple[int, int]:
    """SQLite's variable-length integer at `at` (7 bits a byte, big end first, the 9th byte whole), and where the
    next one starts."""
    value = 0
    for n in range(8):
        byte = blob[at + n]
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value, at + n + 1
    return (value << 8) | blob[at + 8], at + 9


def idf(rows: int, holding: int) -> float:
    """FTS5's inverse document frequency of a term held by `holding` of `rows` rows (`holding` counted from the
    derived index and FTS5's tail may pass `rows` for a moment: it is then held by every row)."""
    holding = min(holding, rows)
    value = math.log((rows - holding + 0.5) / (holding + 0.5))
    return value if value > 0.0 else 1e-6


def bm25(idfs: Sequence[float], frequencies: Sequence[int], length: int, average_length: float) -> float:
    """FTS5's bm25() of one row: `frequencies` of the query's phrases in it, in the query's order."""
    score = 0.0
    for weight, tf in zip(idfs, frequencies, strict=True):
        freq = float(tf)
        score += weight * ((freq * (K1 + 1.0)) / (freq + K1 * (1 - B + B * length / average_length)))
    return -1.0 * score
