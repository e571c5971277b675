"""`tinymemory erase source ID` while `tinymemory up` is ingesting that source, in another process on the same data
directory: the erasure waits for the running batches' leases, the rest of the backfill drops its items, and
nothing of the source is left or comes back, not even when the watcher sees a new file."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from engines.contract import ListRequest, MetaFilter
from engines.local import LocalEngine

pytestmark = pytest.mark.e2e

# HTML, converted by one converter process: a backfill of several seconds, so the erasure lands in its middle.
FILES = 2_500
TINYMEMORY = str(Path(sys.executable).parent / "tinymemory")
# `tinymemory erase source ID --json`, through the command's own entry point, with ID read from stdin; what the
# command imports when it runs is imported before, as is the local engine (together about a second).
_ERASE_WHEN_TOLD = """
import sys
import engines.local, worker.control, worker.embedded
from tinymemory_ingest.cli import app
source_id = sys.stdin.readline().strip()
app(["erase", "source", source_id, "--json"], prog_name="tinymemory")
"""


def _rows(state: Path, sql: str) -> list[tuple[object, ...]]:
    try:
        conn = sqlite3.connect(state, timeout=5)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()
    except sqlite3.OperationalError:  # not created yet
        return []


def _count(state: Path, table: str) -> int:
    rows = _rows(state, f"SELECT count(*) FROM {table}")
    return int(str(rows[0][0])) if rows else 0


def _items(memory: Path, source_id: str) -> int:
    async def count() -> int:
        engine = LocalEngine(memory)
        try:
            page = await engine.list(ListRequest(limit=10, filter=MetaFilter(source_id=source_id)))
            return len(page.items)
        finally:
            engine.close()

    return asyncio.run(count())


def _wait(condition: Callable[[], bool], within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} not reached within {within_s} s")


def test_erase_a_source_while_up_is_ingesting_it(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    for n in range(FILES):
        path = folder / f"d{n % 20:02}" / f"note-{n:05}.html"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"<html><body><h1>note {n}</h1><p>the body of note {n}, word{n}x</p></body></html>\n")
    data = tmp_path / "data"
    state, memory = data / "state.sqlite3", data / "memory.sqlite3"
    env = {
        **os.environ,
        "TINYMEMORY_DATA_DIR": str(data),
        "TINYMEMORY_API_PORT": "0",
        "TINYMEMORY_CONVERT_WORKERS": "1",
        "TINYMEMORY_CONVERT_CONCURRENCY": "1",
    }
    # The erase command, started (and imported) before the backfill and told its source once the first batch
    # lands: an interpreter's start-up takes seconds on a busy machine, long enough for a whole backfill.
    erase = subprocess.Popen(
        [sys.executable, "-c", _ERASE_WHEN_TOLD],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    up = subprocess.Popen(
        [TINYMEMORY, "up", str(folder)], env=env, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        _wait(lambda: _count(state, "manifest") >= 1, 60, "the backfill under way")
        ((source_id,),) = _rows(state, "SELECT id FROM sources")
        out, err = erase.communicate(f"{source_id}\n", timeout=60)
        assert erase.returncode == 0, err
        erasure_id, body = out.splitlines()[:2]
        receipt = json.loads(body)
        assert receipt["id"] == erasure_id and receipt["status"] == "completed", receipt
        assert receipt["verification"]["passed"] and receipt["sources"] == [source_id]
        committed_when_erased = receipt["forgotten"]
        assert 0 < committed_when_erased < FILES  # it erased in the middle of the backfill
        assert _items(memory, str(source_id)) == 0

        # The rest of the backfill drops its items; up goes on watching, and a new file is not stored.
        time.sleep(0.5)
        (folder / "late.md").write_text("# late\n\na file written after the erasure\n")
        time.sleep(1.5)
        assert up.poll() is None
        assert _items(memory, str(source_id)) == 0
        assert (_count(state, "manifest"), _count(state, "sources")) == (0, 0)
        assert _rows(state, "SELECT status FROM erasures") == [("completed",)]
    finally:
        if erase.poll() is None:
            erase.kill()
            erase.communicate()
        os.killpg(up.pid, signal.SIGINT)
        _, err = up.communicate(timeout=60)
    assert up.returncode == 0, err
    assert "Traceback" not in err
