"""`tinymemory up PATH`: ingest, then follow edits and deletions as they happen; Ctrl-C stops cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engines.contract import FetchMode, FetchRequest
from engines.local import LocalEngine
from tests.fixtures.processes import wait_gone

pytestmark = pytest.mark.e2e


async def _found(memory: Path, word: str) -> bool:
    engine = LocalEngine(memory)
    try:
        page = await engine.fetch(FetchRequest(query=word, mode=FetchMode.KEYWORD, limit=3))
        return bool(page.hits)
    finally:
        engine.close()


def _eventually(memory: Path, word: str, present: bool, within_s: float = 15.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < within_s:
        if memory.exists() and asyncio.run(_found(memory, word)) is present:
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"{word!r} {'never appeared' if present else 'never went away'} within {within_s} s")


def test_up_follows_changes_and_stops_on_interrupt(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "first.md").write_text("the gnuffle note\n")
    data = tmp_path / "data"
    env = {**os.environ, "TINYMEMORY_DATA_DIR": str(data), "TINYMEMORY_API_PORT": "0"}
    tinymemory = str(Path(sys.executable).parent / "tinymemory")
    child = subprocess.Popen([tinymemory, "up", str(folder)], env=env, stderr=subprocess.PIPE, text=True)
    try:
        memory = data / "memory.sqlite3"
        _eventually(memory, "gnuffle", present=True)
        time.sleep(0.5)  # the watcher starts after the first sync

        (folder / "second.md").write_text("a brand new snorkwhistle idea\n")
        seconds = _eventually(memory, "snorkwhistle", present=True)
        assert seconds < 10
        (folder / "first.md").unlink()
        _eventually(memory, "gnuffle", present=False)
    finally:
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    assert "stopped" in err


def test_ctrl_c_after_a_backfill_stops_every_process_quietly(tmp_path: Path) -> None:
    # Enough text files for the text pool to start; Ctrl-C reaches the whole process group.
    folder = tmp_path / "notes"
    for n in range(400):
        path = folder / f"d{n % 8}" / f"note-{n}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Note {n}\n\nthe quibbleton number {n}\n")
    data = tmp_path / "data"
    env = {**os.environ, "TINYMEMORY_DATA_DIR": str(data), "TINYMEMORY_API_PORT": "0"}
    tinymemory = str(Path(sys.executable).parent / "tinymemory")
    child = subprocess.Popen(
        [tinymemory, "up", str(folder)], env=env, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        _eventually(data / "memory.sqlite3", "quibbleton", present=True)
        time.sleep(1.0)
        group = [
            int(pid)
            for pid in subprocess.run(
                ["pgrep", "-g", str(child.pid)], capture_output=True, text=True, check=False
            ).stdout.split()
        ]
    finally:
        os.killpg(child.pid, signal.SIGINT)
        _, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    assert "stopped" in err and "Traceback" not in err
    assert len(group) > 1  # the text pool (and nothing else) had started processes of its own
    assert wait_gone(group) == []
