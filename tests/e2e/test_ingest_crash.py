"""`tinymemory ingest` killed in the middle of a backfill, then run again: exact counts, nothing lost,
nothing duplicated, no manifest entry pointing at a missing item."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engines.contract import ListRequest
from engines.local import LocalEngine
from tests.reliability.figures import exactly_once, print_figures

pytestmark = pytest.mark.e2e

FILES = 1_500


def _tinymemory(*args: str, data_dir: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "TINYMEMORY_DATA_DIR": str(data_dir)}
    command = [str(Path(sys.executable).parent / "tinymemory"), *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _committed_units(state: Path) -> int:
    try:
        conn = sqlite3.connect(state, timeout=5)
        try:
            return int(conn.execute("SELECT count(*) FROM manifest").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0


def _kill_once_committed(child: subprocess.Popen[str], state: Path, units: int, deadline_s: float) -> None:
    """SIGKILL the ingest as soon as `units` units are committed (or it ended on its own)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and child.poll() is None and _committed_units(state) < units:
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=30)


def test_killed_mid_backfill_then_rerun_stores_every_file_exactly_once(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    folder = tmp_path / "notes"
    for n in range(FILES):
        path = folder / f"d{n % 30}" / f"note-{n}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Note {n}\n\nbody of note {n}, word{n}x\n")
    data = tmp_path / "data"
    state = data / "state.sqlite3"

    for kill_after in (200, 700):  # two crashes, at different depths of the backfill
        child = _tinymemory("ingest", str(folder), "--json", data_dir=data)
        _kill_once_committed(child, state, kill_after, 60)

    assert _committed_units(state) < FILES  # the crashes happened mid-backfill
    final = _tinymemory("ingest", str(folder), "--json", data_dir=data)
    out, err = final.communicate(timeout=120)
    assert final.returncode == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["errors"] == 0

    asyncio.run(_check_exact(data, folder, request))


async def _check_exact(data: Path, folder: Path, request: pytest.FixtureRequest) -> None:
    engine = LocalEngine(data / "memory.sqlite3")
    try:
        hits, cursor = [], None
        while True:
            page = await engine.list(ListRequest(limit=500, cursor=cursor))
            hits.extend(page.items)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
    finally:
        engine.close()
    paths = [hit.meta.file_path for hit in hits]
    lost, duplicated = exactly_once((str(p.resolve()) for p in folder.rglob("*.md")), (p or "" for p in paths))
    print_figures(
        request,
        f"items lost: {lost}; duplicated: {duplicated}",
        f"{FILES} files; `tinymemory ingest` SIGKILLed twice (once 200, then 700 units were committed), then run again",
    )
    assert len(hits) == FILES
    assert len(set(paths)) == FILES  # no file twice
    assert len({hit.id for hit in hits}) == FILES
    conn = sqlite3.connect(data / "state.sqlite3")
    rows = conn.execute("SELECT unit_id, item_ids, stale, deleted FROM manifest").fetchall()
    conn.close()
    assert len(rows) == FILES
    held = {hit.id for hit in hits}
    for unit_id, item_ids, stale, deleted in rows:
        assert json.loads(item_ids) and set(json.loads(item_ids)) <= held, unit_id
        assert (json.loads(stale), deleted) == ([], 0), unit_id
    assert {os.path.relpath(p or "", os.path.realpath(folder)) for p in paths} == {r[0] for r in rows}
