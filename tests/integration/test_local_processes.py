"""The local engine's file shared by several OS processes, and a process killed in the middle of a write."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from engines.contract import Document, ListRequest, MemoryMeta, MetaFilter
from engines.local import LocalEngine

pytestmark = pytest.mark.integration

BATCH = 100


def _doc(writer: str, n: int) -> Document:
    return Document.from_text(f"note {n} from {writer}: " + "word " * 50, meta=MemoryMeta(workspace=writer))


def _write(path: str, writer: str, count: int) -> None:
    async def main() -> None:
        engine = LocalEngine(Path(path))
        for start in range(0, count, BATCH):
            receipts = await engine.store_many([_doc(writer, n) for n in range(start, min(start + BATCH, count))])
            assert not any(r.replayed for r in receipts)
        engine.close()

    asyncio.run(main())


def _read(path: str, seconds: float, seen: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    async def main() -> None:
        engine = LocalEngine(Path(path))
        # Timed from here, and at least a few reads: a spawned process can take seconds to start on a busy machine.
        counts, stop = [], time.monotonic() + seconds
        while time.monotonic() < stop or len(counts) < 8:
            page = await engine.list(ListRequest(limit=1))
            counts.append(len(page.items))
            total = await _count(engine, MetaFilter())
            counts.append(total)
        engine.close()
        seen.put(counts)

    asyncio.run(main())


async def _count(engine: LocalEngine, filter: MetaFilter) -> int:
    total, cursor = 0, None
    while True:
        page = await engine.list(ListRequest(filter=filter, limit=500, cursor=cursor))
        total += len(page.items)
        if page.next_cursor is None:
            return total
        cursor = page.next_cursor


def test_two_writers_and_a_reader_share_one_file(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite3")
    LocalEngine(Path(path)).close()  # create the schema before the race
    context = multiprocessing.get_context("spawn")
    seen: multiprocessing.Queue = context.Queue()  # type: ignore[type-arg]
    writers = [context.Process(target=_write, args=(path, name, 2_500)) for name in ("w1", "w2")]
    reader = context.Process(target=_read, args=(path, 6.0, seen))
    for process in (*writers, reader):
        process.start()
    for process in (*writers, reader):
        process.join(timeout=120)
    assert [p.exitcode for p in (*writers, reader)] == [0, 0, 0]
    counts = seen.get(timeout=5)
    # The reader saw totals only grow: no torn or lost writes were visible along the way.
    totals = counts[1::2]
    assert totals == sorted(totals) and totals

    async def check() -> None:
        engine = LocalEngine(Path(path))
        assert await _count(engine, MetaFilter(workspace="w1")) == 2_500
        assert await _count(engine, MetaFilter(workspace="w2")) == 2_500
        assert await _count(engine, MetaFilter()) == 5_000
        engine.close()

    asyncio.run(check())


_KILLED_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from engines.contract import Document, MemoryMeta
    from engines.local import LocalEngine

    async def main():
        engine = LocalEngine(Path(sys.argv[1]))
        batch = 0
        while True:
            meta = MemoryMeta(tags=[f"batch-{batch}"])
            items = [Document.from_text(f"batch {batch} item {n} " + "payload " * 400, meta=meta) for n in range(100)]
            await engine.store_many(items)
            print(batch, flush=True)
            batch += 1

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_writer_killed_mid_batch_leaves_whole_batches(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "killed.sqlite3"
    script = tmp_path / "writer.py"
    script.write_text(_KILLED_WRITER)
    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}
    child = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    committed = [int(child.stdout.readline()) for _ in range(2)]
    time.sleep(random.Random(seed).uniform(0.0, 0.3))
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    committed.extend(int(line) for line in child.stdout.read().split())
    child.stdout.close()

    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.execute("INSERT INTO passage_text (passage_text) VALUES ('integrity-check')")
    sizes = dict(conn.execute("SELECT tag, count(*) FROM item_tags GROUP BY tag").fetchall())
    conn.close()
    assert all(sizes.get(f"batch-{b}") == BATCH for b in committed)
    # Every batch on disk is whole; at most the one being written when killed is beyond the reported ones.
    assert set(sizes.values()) == {BATCH}
    assert len(sizes) - len(committed) in (0, 1)

    async def reopen() -> None:
        engine = LocalEngine(path)
        assert await _count(engine, MetaFilter()) == BATCH * len(sizes)
        receipts = await engine.store_many([Document.from_text("after the crash")])
        assert not receipts[0].replayed
        engine.close()

    asyncio.run(reopen())
