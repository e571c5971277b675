"""The local engine's vector backlog: items searchable at once, vectors after, never a mix of two embedders.

`GatedEmbedder` holds the backlog's batches until a test opens its gate (vectors computed at store
time pass at once), so what reads see before the vectors arrive can be checked.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path

import pytest

from engines.contract import Document, FetchMode, FetchRequest, ForgetTarget, RecallRequest, UnavailableError
from engines.local import HashingEmbedder, LocalEngine, Vectors, progress
from engines.local.static import StaticEmbedder

NOTES = [
    "the car needs new brakes and an oil change at the garage",
    "a recipe for lemon cake with sugar icing",
    "the quarterly budget review moved to thursday",
    "our dog loves long walks in the park",
    "the flight to lisbon leaves at seven in the morning",
]
BACKLOG = "tm-local-embed"


class GatedEmbedder:
    """The static embedder, except that the backlog's batches wait for `gate` (and count as calls)."""

    def __init__(self) -> None:
        self.inner = StaticEmbedder()
        self.gate = threading.Event()
        self.waiting = threading.Event()
        self.failing: Exception | None = None

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if threading.current_thread().name == BACKLOG:
            self.waiting.set()
            assert self.gate.wait(20), "the test never opened the gate"
            if self.failing is not None:
                raise self.failing
        return await self.inner.embed(texts)


@pytest.fixture
def gated() -> Iterator[GatedEmbedder]:
    embedder = GatedEmbedder()
    yield embedder
    embedder.gate.set()  # never leave a backlog thread waiting


def _vector_rows(path: Path) -> list[int]:
    with closing(sqlite3.connect(path)) as conn:
        return [row[0] for row in conn.execute("SELECT length(vector) FROM passage_vectors")]


async def test_items_are_searchable_at_once_and_the_last_of_a_batch_by_meaning_too(
    tmp_path: Path, gated: GatedEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="engines.local")
    engine = LocalEngine(tmp_path / "m.sqlite3", embedder=gated)
    try:
        receipts = await engine.store_many([Document.from_text(text) for text in NOTES])
        ids = [r.id for r in receipts]
        assert await engine.vector_backlog() == 5  # storing embeds nothing: every note waits for the backlog
        for mode in FetchMode:
            page = await engine.fetch(FetchRequest(query="brakes garage", mode=mode, limit=5))
            assert [hit.id for hit in page.hits] == [ids[0]], mode
        # The first vector read embedded the batch's last note, as the contract promises; the rest still wait.
        assert await engine.vector_backlog() == 4
        assert "ranked 1 of its items by keyword: their vectors are still being computed" in caplog.text
        # The last note is found by meaning alone.
        flight = await engine.fetch(FetchRequest(query="airplane trip", mode=FetchMode.VECTOR, limit=1))
        assert [hit.id for hit in flight.hits] == [ids[4]]
        assert (
            await engine.fetch(FetchRequest(query="automobile mechanic", mode=FetchMode.VECTOR, limit=5))
        ).hits == []
        gated.gate.set()
        assert await engine.wait_for_vectors(timeout_s=20)
        car = await engine.fetch(FetchRequest(query="automobile mechanic", mode=FetchMode.VECTOR, limit=1))
        assert [hit.id for hit in car.hits] == [ids[0]]
        recalled = await engine.recall(RecallRequest(question="when does the plane depart?", limit=1))
        assert [c.id for c in recalled.citations] == [ids[4]]
    finally:
        engine.close()
    assert _vector_rows(tmp_path / "m.sqlite3") == [256 * 4] * 5


async def test_a_failing_embedder_never_fails_a_store_and_is_retried(
    tmp_path: Path, gated: GatedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("engines.local.backlog._PAUSES_S", (0.05,))
    gated.failing = UnavailableError("the model server is down")
    gated.gate.set()
    engine = LocalEngine(tmp_path / "m.sqlite3", embedder=gated)
    try:
        receipts = await engine.store_many([Document.from_text(text) for text in NOTES[:3]])
        assert not await engine.wait_for_vectors(timeout_s=0.3)
        health = await engine.health()
        assert health.state == "degraded" and "the model server is down" in (health.reason or "")
        page = await engine.fetch(FetchRequest(query="budget", mode=FetchMode.HYBRID, limit=3))
        assert [hit.id for hit in page.hits] == [receipts[2].id]
        gated.failing = None
        assert await engine.wait_for_vectors(timeout_s=20)
        assert (await engine.health()).state == "ok"
    finally:
        engine.close()


async def test_passages_forgotten_while_embedding_are_skipped(tmp_path: Path, gated: GatedEmbedder) -> None:
    engine = LocalEngine(tmp_path / "m.sqlite3", embedder=gated)
    try:
        receipts = await engine.store_many([Document.from_text(text) for text in NOTES])
        assert gated.waiting.wait(10)  # the backlog holds a batch of the first four
        await engine.forget(ForgetTarget.by_ids([r.id for r in receipts[:2]]))
        gated.gate.set()
        assert await engine.wait_for_vectors(timeout_s=20)
        assert (await engine.health()).state == "ok"
    finally:
        engine.close()
    assert len(_vector_rows(tmp_path / "m.sqlite3")) == 3


async def test_another_process_embeds_what_one_left_once_its_claims_lapse(
    tmp_path: Path, gated: GatedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("engines.local.backlog.LOOK_S", 0.05)
    path = tmp_path / "m.sqlite3"
    first = LocalEngine(path, embedder=gated)
    second = LocalEngine(path)
    try:
        await first.store_many([Document.from_text(text) for text in NOTES[:3]])
        assert gated.waiting.wait(10)  # the first engine's backlog claimed both waiting passages, then stalled
        assert not await second.wait_for_vectors(timeout_s=0.3)
        with closing(sqlite3.connect(path)) as conn:  # as if the claims had been held for too long
            conn.execute("UPDATE pending_vectors SET claimed_until = 1")
            conn.commit()
        assert await second.wait_for_vectors(timeout_s=20)
        gated.gate.set()  # the stalled batch finds nothing left to save
        assert await first.wait_for_vectors(timeout_s=20)
    finally:
        first.close()
        second.close()
    assert len(_vector_rows(path)) == 3


async def test_another_embedder_re_embeds_the_file_and_vectors_are_never_mixed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="engines.local")
    path = tmp_path / "m.sqlite3"
    old = LocalEngine(path, embedder=HashingEmbedder(64))
    old_ids = [r.id for r in await old.store_many([Document.from_text(text) for text in NOTES[:3]])]
    assert _vector_rows(path) == [64 * 4] * 3
    new = LocalEngine(path)  # the default, MiniLM embedder: another identity
    try:
        # Whether the backlog has re-embedded it yet or not, the note is found (by keyword or new vectors).
        page = await new.fetch(FetchRequest(query="new brakes and an oil change", mode=FetchMode.VECTOR, limit=1))
        assert "was indexed with embedder hashing-ngram-v2/64; re-embedding its 3 passages" in caplog.text
        assert [hit.id for hit in page.hits] == [old_ids[0]]
        assert await new.wait_for_vectors(timeout_s=20)
        car = await new.fetch(FetchRequest(query="automobile mechanic", mode=FetchMode.VECTOR, limit=1))
        assert [hit.id for hit in car.hits] == [old_ids[0]]
        # The old engine, still open, is outvoted: it neither searches nor writes vectors of its own.
        caplog.clear()
        stale = await old.fetch(FetchRequest(query="cake", mode=FetchMode.HYBRID, limit=3))
        assert [hit.id for hit in stale.hits] == [old_ids[1]]
        assert "the memory file's vectors are another embedder's" in caplog.text
        late = await old.store(Document.from_text(NOTES[3]))
        assert await new.wait_for_vectors(timeout_s=20)
        dog = await new.fetch(FetchRequest(query="puppy", mode=FetchMode.VECTOR, limit=1))
        assert [hit.id for hit in dog.hits] == [late.id]
    finally:
        old.close()
        new.close()
    assert _vector_rows(path) == [384 * 4] * 4


async def test_closing_stops_the_backlog_thread(tmp_path: Path, gated: GatedEmbedder) -> None:
    engine = LocalEngine(tmp_path / "m.sqlite3", embedder=gated)
    await engine.store_many([Document.from_text(text) for text in NOTES[:2]])
    assert gated.waiting.wait(10)
    gated.gate.set()
    engine.close()
    thread = engine._backlog._thread
    assert thread is not None and thread.name == BACKLOG and not thread.is_alive()


def test_the_backlog_yields_to_stores_but_not_for_ever(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = LocalEngine(tmp_path / "m.sqlite3", embedder=HashingEmbedder())
    backlog = engine._backlog
    try:
        assert backlog._yields(since_write_ms=0)  # a store just committed: leave the machine to it
        assert backlog._yields(since_write_ms=100)
        assert not backlog._yields(since_write_ms=10_000)  # stores paused: embed
        monkeypatch.setattr("engines.local.backlog.MAX_YIELD_S", 0.0)
        assert backlog._yields(since_write_ms=0) is False  # yielded long enough: one batch now
    finally:
        engine.close()


async def test_an_engine_left_open_at_exit_stops_its_backlog_quietly(
    tmp_path: Path, gated: GatedEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    """At interpreter exit the engine's executors refuse work before anyone closes it: that is no failure."""
    engine = LocalEngine(tmp_path / "m.sqlite3", embedder=gated)
    await engine.store_many([Document.from_text(text) for text in NOTES[:2]])
    assert gated.waiting.wait(10)
    writer = engine._db._writer
    writer._executor.shutdown(wait=True)  # what interpreter exit does to a thread pool
    with caplog.at_level(logging.WARNING, logger="engines.local.backlog"):
        gated.gate.set()
        thread = engine._backlog._thread
        assert thread is not None
        thread.join(10)
        assert not thread.is_alive()
    assert [r.getMessage() for r in caplog.records] == []
    engine._db._reader.close()
    if writer._conn is not None:
        writer._conn.close()


def test_the_rate_is_measured_over_the_last_minute_up_to_now() -> None:
    stamps = [(1_000, 10), (11_000, 110), (31_000, 410)]
    assert progress.rate(stamps, now_ms=31_000) == pytest.approx(400 / 30)
    # A lane that stopped shows a falling rate, never the last one again.
    assert progress.rate(stamps, now_ms=51_000) == pytest.approx(400 / 50)
    # Stamps older than a minute are left out; fewer than two, or spanning under 5 s, tell no rate.
    assert progress.rate(stamps, now_ms=70_000) == pytest.approx(300 / 59)
    assert progress.rate(stamps, now_ms=200_000) is None
    assert progress.rate([(1_000, 10), (3_000, 50)], now_ms=4_000) is None


async def test_every_process_reads_the_file_s_backlog_and_rate(tmp_path: Path, gated: GatedEmbedder) -> None:
    path = tmp_path / "m.sqlite3"
    engine = LocalEngine(path, embedder=gated)
    other = LocalEngine(path, embedder=StaticEmbedder())  # another process's view: it embeds nothing here
    try:
        await engine.store_many([Document.from_text(text) for text in NOTES])
        before = await other.vector_progress()
        assert (before.waiting, before.embedded, before.rate_per_s) == (5, 0, None)
        gated.gate.set()
        assert await engine.wait_for_vectors(timeout_s=20)
        after = await other.vector_progress()
        assert (after.waiting, after.embedded) == (0, 5)
        # The stamp follows the save that emptied the backlog, in a transaction of its own: wait for it.
        deadline = time.monotonic() + 20
        stamped = "SELECT value FROM settings WHERE key = ?"
        with closing(sqlite3.connect(path)) as conn:
            while (row := conn.execute(stamped, (progress.STAMPS_KEY,)).fetchone()) is None:
                assert time.monotonic() < deadline, "no stamp was written"
                time.sleep(0.02)
        assert json.loads(row[0])[-1][1] == 5  # the last stamp counts every vector stored
    finally:
        other.close()
        engine.close()
