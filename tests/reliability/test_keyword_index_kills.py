"""The keyword index derived from a memory file (`engines/local/keyword_index.py`) under two writing processes,
one of them SIGKILLed again and again (perhaps in a catch-up, between tantivy's commit and the watermark), and the
index deleted from disk once meanwhile. Afterwards the index holds each of SQLite's passages exactly once, no
acknowledged item is lost, and keyword rankings equal FTS5's alone.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tantivy

from engines.local import keyword_index
from engines.local.keyword_index import directory_of
from engines.local.postings import Postings
from engines.local.search import TermCounts, keyword_ranking
from engines.local.where import Where
from tests.reliability.conftest import Figures

pytestmark = [pytest.mark.slow]

KILLS = 4
BATCH = 40
# Stores batches of notes from the number given with the index built from the first passage, printing the count
# stored after each call returns, with a keyword read after each store (which wakes the catch-up).
WRITER = """
import asyncio, sys
from engines.contract import Document, FetchMode, FetchRequest
from engines.local import HashingEmbedder, LocalEngine, postings

postings.INDEX_FROM_PASSAGES = 0
postings.QUIET_S = 0.0
WORDS = "amber basalt cobalt dune ember fjord garnet heath indigo jasper kelp lichen marl nacre ochre".split()

async def main() -> None:
    engine = LocalEngine(sys.argv[1], embedder=HashingEmbedder())
    stored, batch, tag = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    print("ready", stored, flush=True)
    while True:
        docs = [
            Document.from_text(" ".join(WORDS[(n * 7 + k) % len(WORDS)] for k in range(5 + n % 90)) + f" {tag}{n}")
            for n in range(stored, stored + batch)
        ]
        await engine.store_many(docs)
        stored += batch
        print("stored", stored, flush=True)
        query = f"{WORDS[stored % 15]} {tag}{stored - 1}"
        await engine.fetch(FetchRequest(query=query, mode=FetchMode.KEYWORD, limit=5))
        await asyncio.sleep(0.05)

asyncio.run(main())
"""


def writer(path: Path, start: int, tag: str) -> subprocess.Popen[str]:
    # Its stderr goes to a file beside the memory file (`stderr_of`), so that a writer that ends says why.
    with stderr_of(path, tag, start).open("w") as errors:
        return subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(start), str(BATCH), tag],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )


def stderr_of(path: Path, tag: str, start: int) -> Path:
    return path.parent / f"{tag}-{start}.stderr"


def acknowledged(process: subprocess.Popen[str], at_least: int, errors: Path) -> int:
    """Read the writer's output until it has acknowledged `at_least` items; the count acknowledged. `errors` is
    its stderr's file, shown when it ends first."""
    assert process.stdout is not None
    count = 0
    while count < at_least:
        line = process.stdout.readline()
        if not line:
            process.wait()
            pytest.fail(f"the writer ended (exit status {process.returncode}): {errors.read_text()[-3000:]}")
        if line.startswith(("stored", "ready")):
            count = int(line.split()[1])
    return count


def test_two_writers_and_kills_leave_the_index_exact(tmp_path: Path, figures: Figures) -> None:
    path = tmp_path / "memory.sqlite3"
    rng = random.Random(11)
    steady = writer(path, 0, "steady")
    started = [steady]
    try:
        stored = 0
        for kill in range(KILLS):
            victim, errors = writer(path, stored, "victim"), stderr_of(path, "victim", stored)
            started.append(victim)
            stored = acknowledged(victim, stored + BATCH * rng.randint(1, 4), errors)
            time.sleep(rng.uniform(0.0, 0.3))
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            if kill == 1:
                directory = directory_of(path)
                if directory.exists():
                    # Deleted from disk under both processes: rebuilt.
                    # The steady writer's catch-up may add a file while `rm` empties it: try again.
                    for _ in range(50):
                        if subprocess.run(["rm", "-rf", str(directory)], check=False).returncode == 0:
                            break
                        time.sleep(0.05)
                    else:
                        pytest.fail(f"{directory} could not be deleted")
        steady_stored = acknowledged(steady, 4 * BATCH, stderr_of(path, "steady", 0))
    finally:
        for process in started:
            process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()

    conn = sqlite3.connect(path, isolation_level=None)
    handle = Postings(index_from=0, quiet_s=0.0)
    try:
        assert handle.wait_caught_up(conn, 120)
        view = handle.view(conn)
        assert view is not None
        live = [r[0] for r in conn.execute("SELECT rowid FROM passages ORDER BY rowid")]
        searcher = view.searcher
        hits = searcher.search(tantivy.Query.all_query(), len(live) * 2 + 1, count=False).hits
        held = sorted(int(v or 0) for v in searcher.fast_field_values("rowid", [a for _, a in hits]))
        assert held == live  # each passage once: replays after kills added nothing twice
        where = Where()
        where.add("i.tenant = ?", "")
        for n in [*range(0, stored, 7), *range(0, steady_stored, 11)]:
            tag = "victim" if n < stored else "steady"
            for query in (f"{tag}{n}", f"ember {tag}{n} kelp"):
                ours = keyword_ranking(conn, where, query, 10, TermCounts(), handle)
                fts = keyword_ranking(conn, where, query, 10, TermCounts(), None)
                assert [(r.passage, r.score) for r in ours] == [(r.passage, r.score) for r in fts]
                assert ours, f"{tag}{n} was acknowledged but is not found"
    finally:
        handle.close()
        conn.close()
    assert keyword_index.read_marks(directory_of(path)) is not None
    figures(
        f"{KILLS} kills of one of two writers, the index deleted once: {len(live)} passages indexed once each",
        f"victim acknowledged {stored} items, the steady writer {steady_stored}; rankings equal FTS5's",
    )
