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
    env = {**os.environ, "TINYMEMORY_DATA_DIR": str(data)}
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
