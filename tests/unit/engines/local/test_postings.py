"""The keyword index derived from the memory file (tantivy): FTS5's ranking exactly, every stored item at once, no
removed item ever, and an index that is rebuilt when it is lost, torn or behind."""

from __future__ import annotations

import asyncio
import logging
import random
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import tantivy

from engines.contract import Document, FetchMode, FetchRequest, ForgetTarget, MemoryMeta
from engines.local import HashingEmbedder, LocalEngine, keyword_index, postings
from engines.local.keyword_index import Marks, directory_of, read_marks, write_marks
from engines.local.postings import Postings
from engines.local.search import TermCounts, keyword_ranking
from engines.local.terms import Tokenizer
from engines.local.where import Where

WORDS = [f"w{n}" for n in range(300)]
ITEMS = 600


def zipf_text(rng: random.Random, words: int) -> str:
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    return " ".join(rng.choices(WORDS, weights=weights, k=words))


def documents(rng: random.Random, count: int) -> list[Document]:
    return [
        Document.from_text(zipf_text(rng, rng.randint(3, 400)), meta=MemoryMeta(folder=f"/f{n % 3}"))
        for n in range(count)
    ]


@pytest.fixture(autouse=True)
def index_small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postings, "INDEX_FROM_PASSAGES", 0)
    monkeypatch.setattr(postings, "QUIET_S", 0.0)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """A file of items whose passages share Zipf-distributed words (lengths 3 to 400, so tantivy's one-byte lengths
    round), so that scores tie and posting lists overlap."""
    file = tmp_path / "memory.sqlite3"
    rng = random.Random(3)

    async def fill() -> None:
        engine = LocalEngine(file, embedder=HashingEmbedder())
        try:
            for _ in range(ITEMS // 100):
                await engine.store_many(documents(rng, 100))
        finally:
            engine.close()

    asyncio.run(fill())
    return file


@pytest.fixture
def conn(path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(path, isolation_level=None)
    yield connection
    connection.close()


@pytest.fixture
def derived(conn: sqlite3.Connection) -> Iterator[Postings]:
    handle = Postings()
    assert handle.wait_caught_up(conn, 60)
    yield handle
    handle.close()


def queries(seed: int, count: int = 60) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(WORDS[: rng.choice((20, 80, 300))], rng.randint(1, 4))) for _ in range(count)]


def tenant() -> Where:
    where = Where()
    where.add("i.tenant = ?", "")
    return where


def both(conn: sqlite3.Connection, handle: Postings, query: str, want: int = 10) -> tuple[list[int], list[int]]:
    """The ranking through the derived index, and FTS5's alone: (item, passage) pairs."""
    found = keyword_ranking(conn, tenant(), query, want, TermCounts(), handle)
    fts = keyword_ranking(conn, tenant(), query, want, TermCounts(), None)
    assert [r.score for r in found] == [r.score for r in fts]
    return [r.passage for r in found], [r.passage for r in fts]


def test_the_derived_index_ranks_as_fts5_does(conn: sqlite3.Connection, derived: Postings) -> None:
    view = derived.view(conn)
    assert view is not None and view.marks.rowid == ITEMS
    for query in queries(1):
        for want in (1, 10, 40):
            ours, theirs = both(conn, derived, query, want)
            assert ours == theirs, query
            assert ours


def test_items_stored_after_the_watermark_are_found_at_once(path: Path, conn: sqlite3.Connection) -> None:
    handle = Postings(quiet_s=3600.0)  # the index stays behind while writes come
    assert handle.wait_caught_up(conn, 60)

    async def more() -> None:
        engine = LocalEngine(path, embedder=HashingEmbedder())
        try:
            await engine.store_many([Document.from_text(f"w0 w1 fresh{n} fresh{n}") for n in range(30)])
            await engine.store_many(documents(random.Random(5), 100))
        finally:
            engine.close()

    asyncio.run(more())
    try:
        view = handle.view(conn)
        assert view is not None and view.marks.rowid == ITEMS  # not caught up: FTS5 answers above it
        ours, theirs = both(conn, handle, "fresh7 w3")
        assert ours == theirs and ours[0] > ITEMS
        for query in queries(2, 30):
            assert both(conn, handle, query)[0] == both(conn, handle, query)[1]
    finally:
        handle.close()


def test_removed_items_never_come_back(path: Path, conn: sqlite3.Connection, derived: Postings) -> None:
    best = {query: both(conn, derived, query, 5)[0] for query in queries(3, 20)}
    doomed = {passage for passages in best.values() for passage in passages[:2]}
    ids = [
        r[0]
        for r in conn.execute(
            f"SELECT i.id FROM items i JOIN passages p ON p.item_seq = i.seq "
            f"WHERE p.rowid IN ({','.join(map(str, doomed))})"
        )
    ]

    async def forget() -> None:
        engine = LocalEngine(path, embedder=HashingEmbedder())
        try:
            assert (await engine.forget(ForgetTarget(ids=ids))).forgotten == len(ids)
        finally:
            engine.close()

    asyncio.run(forget())
    for query in best:  # before the index hears of it
        ours, theirs = both(conn, derived, query, 5)
        assert ours == theirs and not doomed & set(ours)
    assert derived.wait_caught_up(conn, 60)
    view = derived.view(conn)
    assert view is not None and view.searcher.num_docs == ITEMS - len(doomed)
    for query in best:
        ours, theirs = both(conn, derived, query, 5)
        assert ours == theirs and not doomed & set(ours)


def test_a_removed_index_is_rebuilt_with_a_warning_while_fts5_answers(
    conn: sqlite3.Connection, derived: Postings, caplog: pytest.LogCaptureFixture
) -> None:
    directory = directory_of(Path(conn.execute("PRAGMA database_list").fetchone()[2]))
    expected = {query: both(conn, derived, query)[1] for query in queries(4, 10)}
    with caplog.at_level(logging.WARNING, logger="engines.local.postings"):
        shutil.rmtree(directory)
        for query, fts in expected.items():  # meanwhile
            assert both(conn, derived, query)[0] == fts
        assert derived.wait_caught_up(conn, 60)
    assert any("missing: rebuilding" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    assert read_marks(directory) == Marks(ITEMS, 0)
    for query, fts in expected.items():
        assert both(conn, derived, query)[0] == fts


def test_a_torn_index_is_rebuilt(conn: sqlite3.Connection, derived: Postings, caplog: pytest.LogCaptureFixture) -> None:
    directory = directory_of(Path(conn.execute("PRAGMA database_list").fetchone()[2]))
    derived.close()
    (directory / "meta.json").write_text("{ torn")
    with caplog.at_level(logging.WARNING):
        marks = keyword_index.catch_up(conn, directory, Tokenizer())
    assert marks == Marks(ITEMS, 0)
    assert any("unreadable" in r.getMessage() for r in caplog.records)
    again = Postings()
    try:
        for query in queries(5, 10):
            assert both(conn, again, query)[0] == both(conn, again, query)[1]
    finally:
        again.close()


def test_a_crash_between_commit_and_watermark_replays_without_duplicates(conn: sqlite3.Connection) -> None:
    directory = directory_of(Path(conn.execute("PRAGMA database_list").fetchone()[2]))
    tokenizer = Tokenizer()
    assert keyword_index.catch_up(conn, directory, tokenizer) == Marks(ITEMS, 0)
    # As if the process died after tantivy's commit and before the watermark was written.
    write_marks(directory, Marks(ITEMS // 3, 0))
    assert keyword_index.catch_up(conn, directory, tokenizer) == Marks(ITEMS, 0)
    index = keyword_index.open_index(directory)
    index.reload()
    searcher = index.searcher()
    assert searcher.num_docs == ITEMS
    hits = searcher.search(tantivy.Query.all_query(), ITEMS * 2, count=False).hits
    rowids = searcher.fast_field_values("rowid", [address for _, address in hits])
    assert sorted(rowids) == list(range(1, ITEMS + 1))
    handle = Postings()
    try:
        for query in queries(6, 10):
            ours, theirs = both(conn, handle, query, 40)
            assert ours == theirs and len(set(ours)) == len(ours)
    finally:
        handle.close()


def test_a_searcher_ahead_of_its_watermark_counts_each_passage_once(conn: sqlite3.Connection) -> None:
    """A reader between a catch-up's commit and its watermark: the searcher holds every passage, the marks a third.
    FTS5 answers only above what the searcher holds, so no word's frequency counts a passage twice (which once
    made a word held by most passages more frequent than the file's rows: a math domain error in its idf)."""
    directory = directory_of(Path(conn.execute("PRAGMA database_list").fetchone()[2]))
    assert keyword_index.catch_up(conn, directory, Tokenizer()) == Marks(ITEMS, 0)
    write_marks(directory, Marks(ITEMS // 3, 0))
    handle = Postings(quiet_s=3600.0)  # no catch-up moves the marks meanwhile
    try:
        view = handle.view(conn)
        assert view is not None and view.marks.rowid == ITEMS // 3 and view.upto == ITEMS
        common = " ".join(WORDS[:3])  # words most passages hold
        for query in [common, *queries(8, 20)]:
            ours, theirs = both(conn, handle, query, 40)
            assert ours == theirs, query
    finally:
        handle.close()


def test_only_one_process_catches_up_at_a_time(conn: sqlite3.Connection) -> None:
    directory = directory_of(Path(conn.execute("PRAGMA database_list").fetchone()[2]))
    with keyword_index.catch_up_lock(directory) as mine:
        assert mine
        assert keyword_index.catch_up(conn, directory, Tokenizer()) is None
    assert keyword_index.catch_up(conn, directory, Tokenizer()) == Marks(ITEMS, 0)


def test_a_small_file_is_fts5s_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postings, "INDEX_FROM_PASSAGES", 1_000)
    file = tmp_path / "small.sqlite3"

    async def use() -> None:
        engine = LocalEngine(file, embedder=HashingEmbedder())
        try:
            await engine.store_many(documents(random.Random(7), 50))
            page = await engine.fetch(FetchRequest(query="w1 w2", mode=FetchMode.KEYWORD, limit=5))
            assert page.hits
            assert await engine.wait_for_keyword_index(timeout_s=30)  # nothing to wait for: True at once
        finally:
            engine.close()

    asyncio.run(use())
    assert not directory_of(file).exists()


def test_an_engine_waits_for_its_index_and_closing_stops_the_catch_up(path: Path) -> None:
    async def use() -> None:
        engine = LocalEngine(path, embedder=HashingEmbedder())
        try:
            await engine.fetch(FetchRequest(query="w1 w2", mode=FetchMode.KEYWORD, limit=5))
            assert await engine.wait_for_keyword_index(timeout_s=60)
            assert directory_of(path).exists()
        finally:
            engine.close()

    asyncio.run(use())
    assert not [t for t in threading.enumerate() if t.name == "tm-local-keyword"], threading.enumerate()
