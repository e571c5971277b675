"""Champion lists: a word held by many passages is read from the passages where it weighs most, the ranking stays
the local engine's BM25 where the lists' bound proves it, and stores, removals and growth keep the lists true."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from engines.contract import Document, FetchMode, FetchRequest, ForgetTarget, MemoryMeta, MetaFilter
from engines.local import HashingEmbedder, LocalEngine
from engines.local.search import Ranked
from engines.postgres import PostgresEngine, champions, keyword

COMMON_FROM = 40
CHAMPIONS = 20
FILLER = ["harbour", "ferry", "timetable", "pier", "ticket", "crossing", "island", "weather"]


def _text(n: int) -> str:
    """A note holding `alpha` (in 55 of 120: common, yet weighed) a varying number of times, of varying length."""
    alpha = ["alpha"] * (1 + n * 7 % 9) if n % 120 < 55 else []
    filler = [FILLER[(n * 5 + k) % len(FILLER)] for k in range(4 + n * 13 % 61)]
    rare = [f"rare{n % 11}"] if n % 3 == 0 else []
    return " ".join(alpha + filler + rare)


def _docs(first: int, count: int, workspace: str = "main") -> list[Document]:
    return [Document.from_text(_text(n), meta=MemoryMeta(workspace=workspace)) for n in range(first, first + count)]


@pytest.fixture(autouse=True)
def small_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(champions, "COMMON_FROM", COMMON_FROM)
    monkeypatch.setattr(champions, "CHAMPIONS", CHAMPIONS)


@pytest.fixture
def scanned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every term a ranked read scanned in all its passages (a listed word never should be)."""
    seen: list[str] = []
    original = keyword._Scorer.ranked

    def spy(self: keyword._Scorer, terms: list[str], passages: list[int], want: int) -> list[Ranked]:
        seen.extend(terms)
        return original(self, terms, passages, want)

    monkeypatch.setattr(keyword._Scorer, "ranked", spy)
    yield seen


@pytest.fixture
async def engines(postgres_url: str, tmp_path: Path) -> AsyncIterator[tuple[LocalEngine, PostgresEngine]]:
    local = LocalEngine(tmp_path / "memory.sqlite3", embedder=HashingEmbedder(64))
    remote = PostgresEngine(postgres_url, embedder=HashingEmbedder(64))
    for engine in (local, remote):
        await engine.store_many(_docs(0, 100))
        await engine.store_many(_docs(100, 20))
    yield local, remote
    local.close()
    remote.close()


async def _ranked(engine: LocalEngine | PostgresEngine, query: str, limit: int = 5, **filter: str) -> list:
    request = FetchRequest(query=query, mode=FetchMode.KEYWORD, filter=MetaFilter(**filter), limit=limit)
    return [(hit.id, hit.score) for hit in (await engine.fetch(request)).hits]


def _rows(url: str, sql: str, *params: object) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql.encode(), params).fetchall()


def _impacts(url: str, term: str) -> dict[int, float]:
    """Each passage's impact for `term`, computed here from its tsvector's positions and its length."""
    (average,) = _rows(url, "SELECT average FROM common_terms WHERE term = %s", term)[0]
    rows = _rows(
        url,
        "SELECT p.id, p.tokens, cardinality(t.positions) FROM passages p, unnest(p.words) t WHERE t.lexeme = %s",
        term,
    )
    k1, b = 1.2, 0.75
    return {passage: tf / (tf + k1 * (1 - b + b * tokens / average)) for passage, tokens, tf in rows}


def _assert_list_holds_every_passage_above_its_threshold(url: str, term: str) -> None:
    (threshold,) = _rows(url, "SELECT threshold FROM common_terms WHERE term = %s", term)[0]
    listed = {passage for (passage,) in _rows(url, "SELECT passage FROM champions WHERE term = %s", term)}
    above = {passage for passage, impact in _impacts(url, term).items() if impact > threshold + 1e-12}
    assert above <= listed
    assert listed <= set(_impacts(url, term))  # nothing listed that does not hold the word
    with psycopg.connect(url) as conn:
        assert champions.known(conn, [term])[term].passages == len(_impacts(url, term))  # the count kept exact


def _same(expected: list, got: list) -> None:
    assert [item for item, _ in got] == [item for item, _ in expected]
    assert [score for _, score in got] == pytest.approx([score for _, score in expected], rel=1e-6)


async def test_a_common_word_is_read_from_its_list_and_ranks_as_the_local_engine(
    engines: tuple[LocalEngine, PostgresEngine], postgres_url: str, scanned: list[str]
) -> None:
    local, remote = engines
    expected = await _ranked(local, "alpha")
    got = await _ranked(remote, "alpha")
    assert len(expected) == 5
    _same(expected, got)
    assert "alpha" not in scanned
    (held, listed) = _rows(
        postgres_url, "SELECT c.passages, (SELECT count(*) FROM champions h WHERE h.term = c.term) FROM common_terms c"
    )[0]
    assert (held, listed) == (55, CHAMPIONS)
    impacts = sorted(_impacts(postgres_url, "alpha").values(), reverse=True)
    (threshold,) = _rows(postgres_url, "SELECT threshold FROM common_terms")[0]
    assert threshold == pytest.approx(impacts[CHAMPIONS])
    _assert_list_holds_every_passage_above_its_threshold(postgres_url, "alpha")


async def test_a_rare_word_beside_a_common_one_is_scanned_and_the_ranking_stays_exact(
    engines: tuple[LocalEngine, PostgresEngine], scanned: list[str]
) -> None:
    local, remote = engines
    for query in ("alpha rare3", "rare5 alpha"):
        _same(await _ranked(local, query, limit=10), await _ranked(remote, query, limit=10))
    assert "rare3" in scanned and "alpha" not in scanned


async def test_stores_add_their_weighty_passages_to_the_list(
    engines: tuple[LocalEngine, PostgresEngine], postgres_url: str
) -> None:
    local, remote = engines
    await _ranked(remote, "alpha")  # builds the list
    heavy = Document.from_text(" ".join(["alpha"] * 12 + ["pier"]), meta=MemoryMeta(workspace="main"))
    light = Document.from_text("alpha " + " ".join(FILLER * 12), meta=MemoryMeta(workspace="main"))
    receipts = await remote.store_many([heavy, light])
    await local.store_many([heavy, light])
    listed = {
        item
        for (item,) in _rows(
            postgres_url,
            "SELECT i.id FROM champions h JOIN passages p ON p.id = h.passage JOIN items i ON i.seq = p.item_seq",
        )
    }
    assert str(receipts[0].id) in listed and str(receipts[1].id) not in listed
    _assert_list_holds_every_passage_above_its_threshold(postgres_url, "alpha")
    got = await _ranked(remote, "alpha")
    assert got[0][0] == receipts[0].id
    _same(await _ranked(local, "alpha"), got)


async def test_a_filter_that_admits_none_of_the_list_scores_every_passage(
    engines: tuple[LocalEngine, PostgresEngine], postgres_url: str
) -> None:
    local, remote = engines
    await _ranked(remote, "alpha")
    # Long notes with one alpha each weigh least: none is a champion.
    aside = [
        Document.from_text(f"alpha {' '.join(FILLER * (10 + n))}", meta=MemoryMeta(workspace="aside")) for n in range(3)
    ]
    await remote.store_many(aside)
    await local.store_many(aside)
    expected = await _ranked(local, "alpha", workspace="aside")
    assert len(expected) == 3
    _same(expected, await _ranked(remote, "alpha", workspace="aside"))


async def test_removals_take_their_passages_off_the_list_and_drop_an_emptied_one(
    engines: tuple[LocalEngine, PostgresEngine], postgres_url: str
) -> None:
    _, remote = engines
    best = (await _ranked(remote, "alpha"))[0][0]
    await remote.forget(ForgetTarget(ids=[best]))
    left = _rows(
        postgres_url,
        "SELECT count(*) FROM champions h JOIN passages p ON p.id = h.passage JOIN items i ON i.seq = p.item_seq "
        "WHERE i.id = %s",
        str(best),
    )
    assert left == [(0,)]
    assert _rows(postgres_url, "SELECT count(*) FROM champions") == [(CHAMPIONS - 1,)]
    _assert_list_holds_every_passage_above_its_threshold(postgres_url, "alpha")
    await remote.forget(ForgetTarget(filter=MetaFilter(workspace="main")))
    left = "SELECT (SELECT count(*) FROM common_terms), (SELECT count(*) FROM champions), count(*) FROM term_changes"
    assert _rows(postgres_url, left) == [(0, 0, 0)]
    assert await _ranked(remote, "alpha") == []


async def test_a_removal_waits_for_no_build(engines: tuple[LocalEngine, PostgresEngine], postgres_url: str) -> None:
    _, remote = engines
    best = (await _ranked(remote, "alpha"))[0][0]
    with psycopg.connect(postgres_url) as building:  # a build in progress holds the lists' lock
        building.execute("SELECT pg_advisory_xact_lock(%s)", (champions._LOCK,))
        began = time.monotonic()
        report = await asyncio.wait_for(remote.forget(ForgetTarget(ids=[best])), timeout=10)
        waited = time.monotonic() - began
        building.rollback()
    assert report.forgotten == 1 and waited < 5
    _assert_list_holds_every_passage_above_its_threshold(postgres_url, "alpha")


async def test_a_count_is_folded_once_its_changes_pile_up(
    engines: tuple[LocalEngine, PostgresEngine], postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, remote = engines
    monkeypatch.setattr(champions, "FOLD_FROM", 4)
    await _ranked(remote, "alpha")
    for first in range(240, 260, 2):  # churn: the table's size holds, so the list is never built again
        receipts = await remote.store_many(_docs(first, 2))
        await remote.forget(ForgetTarget(ids=[r.id for r in receipts]))
    waiting = "SELECT count(*) FROM term_changes WHERE term = 'alpha'"
    assert _rows(postgres_url, waiting)[0][0] >= 4
    await remote.store_many(_docs(260, 1))  # moves the passages' sequence: the next read counts again
    await _ranked(remote, "alpha")
    assert _rows(postgres_url, waiting) == [(0,)]
    assert _rows(postgres_url, "SELECT counted_of FROM common_terms") == [(120,)]  # folded, not built again
    _assert_list_holds_every_passage_above_its_threshold(postgres_url, "alpha")


async def test_a_list_is_built_again_once_the_table_grew_by_a_quarter(
    engines: tuple[LocalEngine, PostgresEngine], postgres_url: str
) -> None:
    _, remote = engines
    await _ranked(remote, "alpha")
    assert _rows(postgres_url, "SELECT passages, counted_of FROM common_terms") == [(55, 120)]
    await remote.store_many(_docs(120, 40))
    await _ranked(remote, "alpha")
    held = sum(1 for n in range(160) if n % 120 < 55)
    assert _rows(postgres_url, "SELECT passages, counted_of FROM common_terms") == [(held, 160)]
    _assert_list_holds_every_passage_above_its_threshold(postgres_url, "alpha")


async def test_builds_racing_stores_and_removals_keep_the_list_and_the_count(
    engines: tuple[LocalEngine, PostgresEngine], postgres_url: str
) -> None:
    _, remote = engines
    await _ranked(remote, "alpha")
    stop = threading.Event()
    builds = 0

    def rebuild() -> None:
        nonlocal builds
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            while not stop.is_set():
                total = 10**6 if builds % 2 else 1  # a total far from the last count: built again every time
                champions.build(conn, "alpha", "'alpha'", total, 30.0)
                builds += 1

    racer = threading.Thread(target=rebuild)
    racer.start()
    try:
        for first in range(200, 600, 20):
            receipts = await remote.store_many(_docs(first, 20))
            await remote.forget(ForgetTarget(ids=[r.id for r in receipts[::4]]))  # removals race the builds too
    finally:
        stop.set()
        racer.join()
    assert builds > 2
    _assert_list_holds_every_passage_above_its_threshold(postgres_url, "alpha")
