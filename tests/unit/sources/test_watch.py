"""`FolderWatcher`: events become debounced id sets, a periodic `{RESCAN}`, and nothing a callback does stops it.

Every wait is a condition with a deadline, never a fixed sleep, so a slow machine only makes a test slower.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from watchdog.events import FileModifiedEvent

from engines.contract import InvalidRequestError, NotFoundError
from sources import RESCAN, FileReader, FolderReader, FolderWatcher

DEBOUNCE = 0.15
LONG = 60.0  # a reconcile interval no test reaches
DEADLINE = 2.5


class Recorder:
    """Records every delivered set; `wait_for` blocks until a predicate over them holds or the deadline passes."""

    def __init__(self) -> None:
        self.calls: list[set[str]] = []
        self.cond = threading.Condition()

    def __call__(self, ids: set[str]) -> None:
        with self.cond:
            self.calls.append(set(ids))
            self.cond.notify_all()

    def seen(self) -> set[str]:
        with self.cond:
            return set().union(*self.calls)

    def wait_for(self, predicate: Callable[[list[set[str]]], bool], timeout: float = DEADLINE) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: predicate(self.calls), timeout)

    def wait_seen(self, *ids: str) -> None:
        assert self.wait_for(lambda calls: set(ids) <= set().union(*calls)), (ids, self.calls)

    def clear(self) -> None:
        with self.cond:
            self.calls.clear()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def watched(tmp_path: Path, recorder: Recorder) -> Iterator[FolderWatcher]:
    with FolderWatcher(tmp_path, recorder, debounce_s=DEBOUNCE, reconcile_s=LONG) as watcher:
        yield watcher


@pytest.mark.usefixtures("watched")
def test_create_modify_delete_become_ids(tmp_path: Path, recorder: Recorder) -> None:
    (tmp_path / "a.md").write_text("one")
    recorder.wait_seen("a.md")
    recorder.clear()
    (tmp_path / "a.md").write_text("two")
    recorder.wait_seen("a.md")
    recorder.clear()
    (tmp_path / "a.md").unlink()
    recorder.wait_seen("a.md")
    assert RESCAN not in recorder.seen()


@pytest.mark.usefixtures("watched")
def test_move_gives_old_and_new_ids(tmp_path: Path, recorder: Recorder) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "old.md").write_text("x")
    recorder.wait_seen("docs/old.md")
    recorder.clear()
    (tmp_path / "docs" / "old.md").rename(tmp_path / "new.md")
    recorder.wait_seen("docs/old.md", "new.md")


def test_moved_folder_reports_its_files(tmp_path: Path, recorder: Recorder) -> None:
    # The nested folders exist before watching starts: creating them under a live watch races inside watchdog
    # (it adds the inner watch twice and warns), and tests turn that warning into an error in its thread.
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c.md").write_text("x")
    with FolderWatcher(tmp_path, recorder, debounce_s=DEBOUNCE, reconcile_s=LONG):
        (tmp_path / "a").rename(tmp_path / "z")
        recorder.wait_seen("a/b/c.md", "z/b/c.md")


@pytest.mark.usefixtures("watched")
def test_deleted_folder_asks_for_a_rescan(tmp_path: Path, recorder: Recorder) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.md").write_text("x")
    recorder.wait_seen("d/x.md")
    recorder.clear()
    shutil.rmtree(tmp_path / "d")
    assert recorder.wait_for(lambda calls: {RESCAN} in calls), recorder.calls


@pytest.mark.usefixtures("watched")
def test_changed_gitignore_asks_for_a_rescan(tmp_path: Path, recorder: Recorder) -> None:
    (tmp_path / ".gitignore").write_text("*.log\n")
    assert recorder.wait_for(lambda calls: {RESCAN} in calls), recorder.calls


@pytest.mark.usefixtures("watched")
def test_file_moved_out_of_the_root_is_a_deletion(tmp_path: Path, recorder: Recorder) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    try:
        (tmp_path / "gone.md").write_text("x")
        recorder.wait_seen("gone.md")
        recorder.clear()
        (tmp_path / "gone.md").rename(outside / "gone.md")
        recorder.wait_seen("gone.md")
    finally:
        shutil.rmtree(outside)


def test_burst_is_one_call(tmp_path: Path, recorder: Recorder) -> None:
    # Synthetic events arrive within microseconds, so "one call" does not depend on how fast the disk is.
    with FolderWatcher(tmp_path, recorder, debounce_s=0.5, reconcile_s=LONG) as watcher:
        for index in range(1000):
            watcher._collect(FileModifiedEvent(str(tmp_path / f"f{index}.md")))
        assert recorder.wait_for(lambda calls: len(calls) >= 1)
    # One delivery takes everything pending, and nothing was left after it.
    assert recorder.calls == [{f"f{index}.md" for index in range(1000)}]


def test_burst_on_disk_arrives_whole(tmp_path: Path, recorder: Recorder) -> None:
    with FolderWatcher(tmp_path, recorder, debounce_s=0.3, reconcile_s=LONG):
        for index in range(300):
            (tmp_path / f"f{index}.txt").write_bytes(b"x")
        expected = {f"f{index}.txt" for index in range(300)}
        recorder.wait_seen(*expected)
    # Far fewer calls than events (each write is at least three events).
    assert len(recorder.calls) <= 5


def test_rescan_fires_periodically(tmp_path: Path, recorder: Recorder) -> None:
    with FolderWatcher(tmp_path, recorder, debounce_s=DEBOUNCE, reconcile_s=0.2):
        assert recorder.wait_for(lambda calls: calls.count({RESCAN}) >= 2)


def test_ignored_ids_are_dropped(tmp_path: Path, recorder: Recorder) -> None:
    with FolderWatcher(tmp_path, recorder, DEBOUNCE, LONG, ignore=lambda unit_id: unit_id.startswith("skip")):
        (tmp_path / "skip.md").write_text("x")
        (tmp_path / "keep.md").write_text("x")
        recorder.wait_seen("keep.md")
    assert "skip.md" not in recorder.seen()


def test_raising_callback_does_not_stop_the_watcher(
    tmp_path: Path, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    failed = threading.Event()

    def flaky(ids: set[str]) -> None:
        if not failed.is_set():
            failed.set()
            raise RuntimeError("boom")
        recorder(ids)

    with caplog.at_level(logging.ERROR, logger="sources.watch"), FolderWatcher(tmp_path, flaky, DEBOUNCE, LONG):
        (tmp_path / "first.md").write_text("x")
        assert failed.wait(DEADLINE)
        (tmp_path / "second.md").write_text("x")
        recorder.wait_seen("second.md")
    assert "on_change failed" in caplog.text


def test_raising_ignore_keeps_the_event(tmp_path: Path, recorder: Recorder, caplog: pytest.LogCaptureFixture) -> None:
    def broken(unit_id: str) -> bool:
        raise ValueError(unit_id)

    with caplog.at_level(logging.ERROR, logger="sources.watch"), FolderWatcher(tmp_path, recorder, ignore=broken):
        (tmp_path / "a.md").write_text("x")
        recorder.wait_seen("a.md")
    assert "ignore('a.md') failed" in caplog.text


def test_stop_joins_promptly_and_twice_is_harmless(tmp_path: Path, recorder: Recorder) -> None:
    watcher = FolderWatcher(tmp_path, recorder, debounce_s=DEBOUNCE, reconcile_s=LONG)
    before = set(threading.enumerate())
    watcher.start()
    watcher.start()  # already running: nothing more starts
    started = time.monotonic()
    watcher.stop()
    assert time.monotonic() - started < 1.5
    watcher.stop()
    assert [thread for thread in threading.enumerate() if thread not in before] == []


def test_stop_from_inside_the_callback(tmp_path: Path) -> None:
    done = threading.Event()

    def stopper(ids: set[str]) -> None:
        watcher.stop()
        done.set()

    watcher = FolderWatcher(tmp_path, stopper, debounce_s=DEBOUNCE, reconcile_s=0.1)
    watcher.start()
    assert done.wait(DEADLINE)
    watcher.stop()


def test_restart_after_a_stop_from_inside_the_callback(tmp_path: Path, recorder: Recorder) -> None:
    stopped = threading.Event()

    def stop_once(ids: set[str]) -> None:
        if not stopped.is_set():
            watcher.stop()
            stopped.set()
            return
        recorder(ids)

    watcher = FolderWatcher(tmp_path, stop_once, debounce_s=DEBOUNCE, reconcile_s=0.1)
    watcher.start()
    assert stopped.wait(DEADLINE)
    with watcher:
        assert recorder.wait_for(lambda calls: len(calls) >= 3)
    # The thread that stopped its own watcher ended too, instead of serving beside the new one.
    names = [thread.name for thread in threading.enumerate()]
    assert not [name for name in names if name.startswith("folder-watcher")]


def test_restart_after_stop(tmp_path: Path, recorder: Recorder) -> None:
    watcher = FolderWatcher(tmp_path, recorder, debounce_s=DEBOUNCE, reconcile_s=LONG)
    watcher.start()
    watcher.stop()
    with watcher:
        (tmp_path / "again.md").write_text("x")
        recorder.wait_seen("again.md")


def test_missing_root_is_not_found(tmp_path: Path, recorder: Recorder) -> None:
    with pytest.raises(NotFoundError, match="folder does not exist"):
        FolderWatcher(tmp_path / "gone", recorder).start()


@pytest.mark.parametrize(("debounce_s", "reconcile_s"), [(-1.0, 1.0), (0.1, 0.0)])
def test_bad_intervals_are_refused(tmp_path: Path, recorder: Recorder, debounce_s: float, reconcile_s: float) -> None:
    with pytest.raises(InvalidRequestError):
        FolderWatcher(tmp_path, recorder, debounce_s=debounce_s, reconcile_s=reconcile_s)


def test_link_loop_in_the_tree_does_not_break_watching(tmp_path: Path, recorder: Recorder) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "up").symlink_to(tmp_path)
    with FolderWatcher(tmp_path, recorder, debounce_s=DEBOUNCE, reconcile_s=LONG):
        (tmp_path / "a.md").write_text("x")
        recorder.wait_seen("a.md")


def test_folder_reader_watch_drops_what_it_does_not_offer(tmp_path: Path, recorder: Recorder) -> None:
    (tmp_path / "node_modules").mkdir()
    (tmp_path / ".gitignore").write_text("*.log\n")
    reader = FolderReader(tmp_path)
    with reader.watch(recorder, debounce_s=DEBOUNCE, reconcile_s=LONG):
        (tmp_path / "node_modules" / "x.js").write_text("x")
        (tmp_path / ".hidden.md").write_text("x")
        (tmp_path / "debug.log").write_text("x")
        (tmp_path / "kept.md").write_text("x")
        recorder.wait_seen("kept.md")
    assert recorder.seen() == {"kept.md"}


def test_file_reader_watch_reports_only_its_file(tmp_path: Path, recorder: Recorder) -> None:
    note = tmp_path / "note.md"
    note.write_text("x")
    (tmp_path / "sub").mkdir()
    with FileReader(note).watch(recorder, debounce_s=DEBOUNCE, reconcile_s=LONG):
        (tmp_path / "other.md").write_text("x")
        (tmp_path / "sub" / "note.md").write_text("x")
        (tmp_path / ".gitignore").write_text("x")
        note.write_text("changed")
        recorder.wait_seen("note.md")
    assert recorder.seen() == {"note.md"}


def test_events_outside_the_root_prefix_are_not_ids(tmp_path: Path, recorder: Recorder) -> None:
    # A sibling whose name starts with the root's name must not be mistaken for a path below it.
    root = tmp_path / "root"
    root.mkdir()
    watcher = FolderWatcher(root, recorder)
    assert watcher._relative(os.fspath(tmp_path / "root-other" / "a.md")) is None
    assert watcher._relative(os.fspath(root)) is None
    assert watcher._relative(os.fspath(root / "d" / "a.md")) == "d/a.md"
