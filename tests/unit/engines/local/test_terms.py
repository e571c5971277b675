"""The derived keyword index's terms and scores are FTS5's: term for term, and bm25 to the last bit."""

from __future__ import annotations

import random
import sqlite3

import pytest

from engines.local.schema import FTS_TOKENIZER
from engines.local.search import fts_query
from engines.local.terms import Tokenizer, bm25, fts_totals, idf

# Stems, folded case and diacritics, scripts without spaces, punctuation, digits, underscores and odd spaces.
PIECES = [
    "deploying",
    "deployment",
    "deploys",
    "Café",
    "naïve",
    "running",
    "runs",
    "x",
    "the",
    "ünïcode",
    "Straße",
    "ΑΒΓ",
    "日本語",
    "abc_def",
    "a1b2",
    "(quoted),",
    "end.",
    "U.S.A.",
    "don't",
    "e-mail",
    "x\xa0y",
    "tab\there",
    "ŒUVRE",
    "İstanbul",
    "ﬁne",
    "ＡＢＣ",
    "123,456",
    "3.14",
]


def texts(rng: random.Random, count: int) -> list[str]:
    return [" ".join(rng.choices(PIECES, k=rng.randint(1, 60))) for _ in range(count)]


@pytest.fixture
def fts() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute(f"CREATE VIRTUAL TABLE passage_text USING fts5 (text, content = '', tokenize = '{FTS_TOKENIZER}')")
    conn.execute("CREATE VIRTUAL TABLE vocab USING fts5vocab (passage_text, 'instance')")
    return conn


def test_terms_are_those_fts5_indexes(fts: sqlite3.Connection) -> None:
    corpus = texts(random.Random(1), 200)
    fts.executemany("INSERT INTO passage_text (rowid, text) VALUES (?, ?)", enumerate(corpus))
    indexed: list[dict[str, int]] = [{} for _ in corpus]
    for doc, term in fts.execute("SELECT doc, term FROM vocab"):
        indexed[doc][term] = indexed[doc].get(term, 0) + 1
    tokenizer = Tokenizer(remembered=5)  # small: the remembered pieces are dropped and cut again
    first, again = tokenizer.counts(corpus), tokenizer.counts(corpus)
    assert [dict(found) for found in first] == indexed
    assert again == first


def test_a_query_word_is_one_term_or_none() -> None:
    tokenizer = Tokenizer()
    assert tokenizer.term_of("Deploying") == tokenizer.term_of("deploys") == "deploi"
    assert tokenizer.term_of("café") == "cafe"
    assert tokenizer.term_of("abc_def") is None  # two tokens: FTS5 reads a phrase
    assert tokenizer.term_of("...") is None


def test_bm25_is_fts5s_to_the_last_bit(fts: sqlite3.Connection) -> None:
    rng = random.Random(2)
    corpus = texts(rng, 400)
    fts.executemany("INSERT INTO passage_text (rowid, text) VALUES (?, ?)", enumerate(corpus, start=1))
    totals = fts_totals(fts)
    assert (totals.rows, totals.tokens) == (len(corpus), fts.execute("SELECT count(*) FROM vocab").fetchone()[0])
    counts = Tokenizer().counts(corpus)
    compared = 0
    for query in (["deploying", "cafe", "runs"], ["the", "x"], ["straße", "日本語", "a1b2", "fine"]):
        terms = [Tokenizer().term_of(w) for w in query]
        count = "SELECT count(*) FROM passage_text WHERE passage_text MATCH ?"
        held = [fts.execute(count, (fts_query([w]),)).fetchone()[0] for w in query]
        idfs = [idf(totals.rows, n) for n in held]
        sql = "SELECT rowid, bm25(passage_text) FROM passage_text WHERE passage_text MATCH ? ORDER BY rowid"
        for rowid, score in fts.execute(sql, (fts_query(query),)):
            found = dict(counts[rowid - 1])
            length = sum(found.values())
            assert bm25(idfs, [found.get(t or "", 0) for t in terms], length, totals.average_length) == score
            compared += 1
    assert compared > 300


def test_a_term_counted_in_more_rows_than_there_are_is_held_by_every_row() -> None:
    assert idf(100, 101) == idf(100, 100) == 1e-6
