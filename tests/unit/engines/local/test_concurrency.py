"""The local engine's reads run on several threads at once: same answers as one at a time, even while writing.

The engines here embed with the static model: these tests wait for every vector of hundreds of documents, which
MiniLM (the default, tested in test_local_minilm.py) takes half a minute to compute on two cores."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from engines.contract import Document, FetchMode, FetchRequest, ForgetTarget, MemoryMeta
from engines.local import LocalEngine
from engines.local.database import Database
from engines.local.static import StaticEmbedder

WORDS = [
    *("amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "heath"),
    *("indigo", "jasper", "kelp", "lichen", "marl", "nacre", "ochre"),
]


def _documents(start: int, count: int) -> list[Document]:
    docs = []
    for n in range(start, start + count):
        text = " ".join(WORDS[(n * 7 + k * 3) % len(WORDS)] for k in range(40)) + f" serial{n}"
        docs.append(Document.from_text(text, meta=MemoryMeta(file_path=f"/notes/{n}.md"), title=f"note {n}"))
    return docs


def _requests() -> list[FetchRequest]:
    modes = (FetchMode.KEYWORD, FetchMode.VECTOR, FetchMode.HYBRID)
    return [
        FetchRequest(query=f"{WORDS[n % len(WORDS)]} {WORDS[(n * 5) % len(WORDS)]}", mode=modes[n % 3], limit=7)
        for n in range(48)
    ]


async def _store(engine: LocalEngine, docs: list[Document]) -> list[str]:
    ids = []
    for start in range(0, len(docs), 100):
        ids += [str(r.id) for r in await engine.store_many(list(docs[start : start + 100]))]
    # Vectors arrive from the backlog: answers compared with each other must all see them.
    assert await engine.wait_for_vectors(timeout_s=60)
    return ids


async def _answers(engine: LocalEngine, requests: list[FetchRequest]) -> list[list[str]]:
    pages = await asyncio.gather(*(engine.fetch(r) for r in requests))
    return [[str(h.id) for h in page.hits] for page in pages]


async def test_concurrent_searches_answer_as_one_at_a_time(tmp_path: Path) -> None:
    engine = LocalEngine(tmp_path / "memory.db", embedder=StaticEmbedder())
    try:
        await _store(engine, _documents(0, 300))
        requests = _requests()
        alone = [[str(h.id) for h in (await engine.fetch(r)).hits] for r in requests]
        assert all(alone), "every query finds something"
        assert await _answers(engine, requests) == alone
    finally:
        engine.close()


async def test_searches_during_writes_and_deletions_end_consistent(tmp_path: Path) -> None:
    engine = LocalEngine(tmp_path / "memory.db", embedder=StaticEmbedder())
    try:
        ids = await _store(engine, _documents(0, 200))
        requests = _requests()

        async def churn() -> None:
            for round_ in range(6):
                await engine.store_many(list(_documents(200 + round_ * 20, 20)))
                await engine.forget(ForgetTarget(ids=ids[round_ * 10 : round_ * 10 + 10]))

        await asyncio.gather(churn(), *(_answers(engine, requests) for _ in range(4)))
        assert await engine.wait_for_vectors(timeout_s=60)
        # Once writing stops, this engine's vector copy (grown and pruned under concurrent searches) must
        # answer exactly as a fresh engine on the same file, which loads everything once.
        fresh = LocalEngine(tmp_path / "memory.db", embedder=StaticEmbedder())
        try:
            assert await _answers(engine, requests) == await _answers(fresh, requests)
        finally:
            fresh.close()
        forgotten = set(ids[:60])
        assert not forgotten & {hit for answer in await _answers(engine, requests) for hit in answer}
    finally:
        engine.close()


async def test_two_reads_run_at_the_same_time(tmp_path: Path) -> None:
    db = Database(tmp_path / "memory.db", readers=2)
    barrier = threading.Barrier(2, timeout=5)

    def meet(conn: sqlite3.Connection) -> int:
        # On one reading thread the second read would wait for the first, which waits at the barrier.
        barrier.wait()
        return int(conn.execute("SELECT 1").fetchone()[0])

    try:
        assert await asyncio.gather(db.read(meet), db.read(meet)) == [1, 1]
    finally:
        db.close()


@pytest.mark.parametrize("readers", [1, 3])
async def test_each_reading_thread_has_a_connection_of_its_own(tmp_path: Path, readers: int) -> None:
    db = Database(tmp_path / "memory.db", readers=readers)
    barrier = threading.Barrier(readers, timeout=5)

    def which(conn: sqlite3.Connection) -> int:
        barrier.wait()
        return id(conn)

    try:
        assert len(set(await asyncio.gather(*(db.read(which) for _ in range(readers))))) == readers
    finally:
        db.close()


def test_reading_threads_keep_the_engines_priority_when_the_backlog_reads_first(tmp_path: Path) -> None:
    database = Database(tmp_path / "memory.db", readers=2)
    ours = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    niceness: list[int] = []

    def as_the_backlog() -> None:
        # The backlog's thread runs at a lower priority and reads through the pool while other reads run.
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), ours + 5)
        release = threading.Event()
        held = threading.Thread(target=lambda: database.read_now(lambda conn: release.wait(5)))
        held.start()
        for _ in range(4):
            database.read_now(lambda conn: niceness.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
        release.set()
        held.join()

    try:
        low = threading.Thread(target=as_the_backlog)
        low.start()
        low.join()
        assert niceness == [ours] * 4
    finally:
        database.close()
