"""Word scores kept while the keyword index is at rest: exactly FTS5's ranking, and only for the state read."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from engines.contract import Document, FetchMode, FetchRequest, ForgetTarget, MemoryMeta, MetaFilter
from engines.local import HashingEmbedder, LocalEngine
from engines.local.postings import Postings
from engines.local.search import fts_query

WORDS = [f"w{n}" for n in range(300)]
ITEMS = 600


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def zipf_text(rng: random.Random, words: int) -> str:
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    return " ".join(rng.choices(WORDS, weights=weights, k=words))


@pytest.fixture(scope="module")
def memory_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file of items whose passages share Zipf-distributed words, so that scores tie and posting lists overlap."""
    path = tmp_path_factory.mktemp("postings") / "memory.sqlite3"
    rng = random.Random(3)

    async def fill() -> None:
        engine = LocalEngine(path, embedder=HashingEmbedder())
        try:
            for start in range(0, ITEMS, 100):
                batch = [
                    Document.from_text(zipf_text(rng, rng.randint(3, 120)), meta=MemoryMeta(folder=f"/f{n % 3}"))
                    for n in range(start, start + 100)
                ]
                await engine.store_many(batch)
        finally:
            engine.close()

    asyncio.run(fill())
    return path


@pytest.fixture
def conn(memory_file: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(f"file:{memory_file}?mode=ro", uri=True)
    yield connection
    connection.close()


def fts_top(conn: sqlite3.Connection, words: list[str], limit: int) -> list[tuple[int, float]]:
    """What the keyword ranking asked FTS5 before the scores were kept."""
    sql = "SELECT rowid, bm25(passage_text) AS rank FROM passage_text WHERE passage_text MATCH ? ORDER BY rank, rowid "
    return [(int(r), float(s)) for r, s in conn.execute(sql + "LIMIT ?", (fts_query(words), limit))]


def settled(clock: Clock, **options: int) -> Postings:
    return Postings(settle_s=1.0, clock=clock, **options)


def kept_top(postings: Postings, conn: sqlite3.Connection, words: list[str], limit: int) -> list[tuple[int, float]]:
    """The kept scores' answer: a word is read whole at its second query in a state."""
    postings.top(conn, words, limit)
    found = postings.top(conn, words, limit)
    assert found is not None
    return found


def test_kept_scores_rank_exactly_as_fts5(conn: sqlite3.Connection) -> None:
    clock = Clock()
    postings = settled(clock)
    assert postings.top(conn, ["w1"], 10) is None  # the index was just seen: not yet at rest
    clock.now += 1.0
    rng = random.Random(5)
    for _ in range(150):
        words = rng.sample(WORDS[:60], rng.randint(1, 4)) + rng.sample(WORDS, rng.randint(0, 2))
        for limit in (1, 7, 100, 2_000):
            assert kept_top(postings, conn, words, limit) == fts_top(conn, words, limit), (words, limit)
    assert kept_top(postings, conn, ["nowhere"], 10) == []
    assert postings.size > 0


def test_a_word_is_read_whole_only_at_its_second_query(conn: sqlite3.Connection) -> None:
    clock = Clock()
    postings = settled(clock)
    postings.top(conn, ["w1"], 10)
    clock.now += 1.0
    assert postings.top(conn, ["w2", "w3"], 10) is None  # asked once: FTS5 answers
    assert postings.size == 0
    assert postings.top(conn, ["w2", "w4"], 10) is None  # w4 is new: the whole query goes to FTS5
    assert postings.top(conn, ["w2", "w3"], 10) == fts_top(conn, ["w2", "w3"], 10)
    assert postings.size == len(fts_top(conn, ["w2"], 10**6)) + len(fts_top(conn, ["w3"], 10**6))


def test_a_write_forgets_the_scores_until_the_index_is_at_rest_again(memory_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "copy.sqlite3"
    source = sqlite3.connect(memory_file)
    copy = sqlite3.connect(path)
    source.backup(copy)
    source.close()
    copy.close()
    clock = Clock()
    postings = settled(clock)
    clock.now += 1.0

    async def write(action: str) -> None:
        engine = LocalEngine(path, embedder=HashingEmbedder())
        try:
            if action == "store":
                await engine.store(Document.from_text("w1 w1 w1 w2 a fresh passage"))
            else:
                await engine.forget(ForgetTarget.by_filter(MetaFilter(folder="/f1")))
        finally:
            engine.close()

    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        postings.top(conn, ["w1", "w2"], 50)  # sets the mark of the copy
        clock.now += 1.0
        before = kept_top(postings, conn, ["w1", "w2"], 50)
        assert before == fts_top(conn, ["w1", "w2"], 50)
        for action in ("store", "forget"):
            asyncio.run(write(action))
            assert postings.top(conn, ["w1", "w2"], 50) is None
            assert postings.size == 0
            clock.now += 1.0
            after = kept_top(postings, conn, ["w1", "w2"], 50)
            assert after == fts_top(conn, ["w1", "w2"], 50) != before
            before = after


def test_a_connection_reading_an_older_state_never_sets_the_kept_one_back(memory_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "copy.sqlite3"
    with sqlite3.connect(memory_file) as source, sqlite3.connect(path) as copy:
        source.backup(copy)
    old = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    old.execute("BEGIN")
    old.execute("SELECT count(*) FROM passages").fetchone()  # holds its snapshot
    clock = Clock()
    postings = settled(clock)

    async def store() -> None:
        engine = LocalEngine(path, embedder=HashingEmbedder())
        try:
            await engine.store(Document.from_text("w3 w4 newer"))
        finally:
            engine.close()

    asyncio.run(store())
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as new:
        assert postings.top(new, ["w3"], 5) is None
        clock.now += 1.0
        kept = kept_top(postings, new, ["w3"], 5)
        assert postings.top(old, ["w3"], 5) is None  # FTS5 answers it, from its own snapshot
        assert postings.top(new, ["w3"], 5) == kept  # still kept: the old reader did not reset it
    old.execute("ROLLBACK")
    old.close()


def test_memory_is_capped_least_recently_used_first(conn: sqlite3.Connection) -> None:
    common = len(fts_top(conn, ["w0"], 100_000))
    clock = Clock()
    postings = settled(clock, max_postings=common + 10)
    assert postings.top(conn, ["w0"], 5) is None
    clock.now += 1.0
    assert kept_top(postings, conn, ["w0"], 5) == fts_top(conn, ["w0"], 5)
    assert kept_top(postings, conn, ["w1"], 5) == fts_top(conn, ["w1"], 5)  # w0 dropped to make room
    assert postings.size <= common + 10
    small = Postings(max_postings=common - 1, settle_s=0.0)
    read_whole: list[str] = []
    conn.set_trace_callback(lambda sql: read_whole.append(sql) if "bm25" in sql and "LIMIT" not in sql else None)
    try:
        for _ in range(4):
            assert small.top(conn, ["w0"], 5) is None  # one word over the cap: never kept
    finally:
        conn.set_trace_callback(None)
    assert len(read_whole) == 1  # and read whole once, not again at every query
    assert small.size == 0


async def test_the_engine_ranks_the_same_with_kept_scores(memory_file: Path) -> None:
    engine = LocalEngine(memory_file, embedder=HashingEmbedder())
    try:
        rankers = engine._rankers
        assert isinstance(rankers.postings, Postings)
        queries = ["w1 w7 w40", "w2", "w0 w3", "w5 w9 w11 w290"]
        requests = [FetchRequest(query=q, mode=FetchMode.KEYWORD, limit=20) for q in queries]
        requests.append(FetchRequest(query="w1 w7", mode=FetchMode.KEYWORD, limit=5, filter=MetaFilter(folder="/f2")))
        kept_at_first = [[h.id for h in (await engine.fetch(r)).hits] for r in requests]
        rankers.postings._since -= 10.0  # at rest: from the second query of each word on, the kept scores answer
        for request in requests:
            await engine.fetch(request)
        kept = [[h.id for h in (await engine.fetch(r)).hits] for r in requests]
        assert rankers.postings.size > 0
        assert kept == kept_at_first
    finally:
        engine.close()
