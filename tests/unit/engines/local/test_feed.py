"""The local engine's store calls written chunk by chunk (`engines.local.feed`): one transaction whatever
happens while the caller prepares, receipts and vectors as when everything was prepared first."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

import pytest

from engines.contract import Document, EngineError, FetchMode, FetchRequest, Item, ListRequest
from engines.local import HashingEmbedder, LocalEngine, Vectors, feed
from engines.local.database import connect
from engines.local.pending import PROMISED_PASSAGES
from engines.local.static import StaticEmbedder
from engines.local.writes import insert_items


def _notes(count: int, start: int = 0) -> list[Item]:
    return [Document.from_text(f"note number {n} about topic {n % 7}") for n in range(start, start + count)]


class CountingEmbedder:
    """The static embedder, counting the texts it is asked for."""

    def __init__(self) -> None:
        self.inner = StaticEmbedder()
        self.texts: list[str] = []

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    async def embed(self, texts: Sequence[str]) -> Vectors:
        self.texts.extend(texts)
        return await self.inner.embed(texts)


async def _stored(engine: LocalEngine) -> int:
    return len((await engine.list(ListRequest(limit=1000))).items)


async def test_a_failure_after_some_chunks_were_written_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = LocalEngine(tmp_path / "m.sqlite3", embedder=HashingEmbedder())
    items = _notes(90)
    prepared = feed.prepared_item
    calls = 0

    def failing(tenant: str, item: Item, passage_chars: int) -> object:
        nonlocal calls
        calls += 1
        if calls == 3 * feed.CHUNK_ITEMS + 5:  # three chunks are with the writer by then
            raise ValueError("cannot prepare this item")
        return prepared(tenant, item, passage_chars)

    try:
        monkeypatch.setattr(feed, "prepared_item", failing)
        with pytest.raises(ValueError, match="cannot prepare"):
            await engine.store_many(items)
        monkeypatch.setattr(feed, "prepared_item", prepared)
        assert await _stored(engine) == 0
        with closing(sqlite3.connect(tmp_path / "m.sqlite3", timeout=1)) as other:
            other.execute("BEGIN IMMEDIATE")  # the write lock was given back
            other.execute("ROLLBACK")
        receipts = await engine.store_many(items)
        assert not any(r.replayed for r in receipts)
        assert await _stored(engine) == 90
    finally:
        engine.close()


async def test_an_item_repeated_in_another_chunk_is_a_replay_of_its_first_copy(tmp_path: Path) -> None:
    engine = LocalEngine(tmp_path / "m.sqlite3", embedder=HashingEmbedder())
    items = _notes(60)
    items[2 * feed.CHUNK_ITEMS + 3] = items[1]
    items[-1] = items[0]
    try:
        receipts = await engine.store_many(items)
        assert [r.id for r in receipts] == [item.fingerprint() for item in items]
        replays = [n for n, r in enumerate(receipts) if r.replayed]
        assert replays == [2 * feed.CHUNK_ITEMS + 3, 59]
        assert await _stored(engine) == 58
        again = await engine.store_many(items[:30] + _notes(5, start=100))
        assert [r.replayed for r in again] == [True] * 30 + [False] * 5
        assert await engine.vector_backlog() == 0  # a cheap embedder's vectors come with every chunk
    finally:
        engine.close()


async def test_storing_embeds_nothing_and_the_next_vector_read_embeds_each_calls_last_item(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    engine = LocalEngine(tmp_path / "m.sqlite3", embedder=embedder)
    items = _notes(3 * feed.CHUNK_ITEMS + 7)
    try:
        engine._backlog.close()  # so every embedding counted is one made by the store call or a read
        await engine.store_many(items[:50])
        await engine.store_many(items[50:])
        assert embedder.texts == []
        assert await engine.vector_backlog() == len(items)
        await engine.fetch(FetchRequest(query="note", mode=FetchMode.KEYWORD, limit=1))
        assert embedder.texts == []  # a keyword read needs no vectors
        await engine.fetch(FetchRequest(query="note", mode=FetchMode.VECTOR, limit=1))
        # The query, and the last item of both calls: promised to the next vector read, in storing order.
        assert sorted(embedder.texts) == sorted(["note", items[49].render_text(), items[-1].render_text()])
        assert await engine.vector_backlog() == len(items) - 2
        await engine.store_many(items[-10:])
        await engine.fetch(FetchRequest(query="note again", mode=FetchMode.HYBRID, limit=1))
        assert embedder.texts[3:] == ["note again"]  # a replayed last item is not promised again
    finally:
        engine.close()


async def test_a_read_embeds_at_most_a_bounded_part_of_a_long_promised_item(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    engine = LocalEngine(tmp_path / "m.sqlite3", embedder=embedder, passage_chars=200)
    book = Document.from_text("\n\n".join(f"chapter {n}: " + "a line of the long book. " * 6 for n in range(60)))
    try:
        engine._backlog.close()
        await engine.store(book)
        queued = await engine.vector_backlog()
        assert queued > PROMISED_PASSAGES
        await engine.fetch(FetchRequest(query="chapter", mode=FetchMode.HYBRID, limit=1))
        assert await engine.vector_backlog() == queued - PROMISED_PASSAGES  # the rest is the backlog's
        assert len(embedder.texts) == PROMISED_PASSAGES + 1  # and the query
        await engine.fetch(FetchRequest(query="chapter two", mode=FetchMode.HYBRID, limit=1))
        assert await engine.vector_backlog() == max(0, queued - 2 * PROMISED_PASSAGES)
    finally:
        engine.close()


async def test_an_abandoned_feed_rolls_the_transaction_back(tmp_path: Path) -> None:
    conn = connect(tmp_path / "m.sqlite3")
    chunk = feed.Chunk([feed.prepared_item("", item, 3000) for item in _notes(5)], {})
    waiting = feed.Feed(timeout_s=0.05)
    waiting.put(chunk)
    failed = feed.Feed()
    failed.put(chunk)
    failed.fail(RuntimeError("the caller was cancelled"))
    try:
        for stream, reason in ((waiting, "no chunk of a store call came"), (failed, "failed while preparing")):
            with pytest.raises(EngineError, match=reason):
                insert_items(conn, "", stream, "e")
            assert not conn.in_transaction
            assert conn.execute("SELECT count(*) FROM items").fetchone() == (0,)
        done = feed.Feed()
        done.put(chunk)
        done.end()
        inserted, queued = insert_items(conn, "", done, "e")
        assert inserted == {prep.id for prep in chunk.items} and queued
    finally:
        conn.close()
