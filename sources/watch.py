"""File events for local sources: a watchdog observer whose events become debounced sets of changed unit ids.

What `on_change` receives, always on the watcher's own thread, one call at a time:

- a set of unit ids (paths relative to the root, `/` separators), each of which may have been created,
  modified, deleted or moved (a move gives both the old and the new id). The host examines each id: present,
  re-read it; gone (`NotFoundError`), forget it. One call per quiet period of `debounce_s`, so a burst of
  events (a checkout, a build) arrives as one set;
- or exactly `{RESCAN}`: list the whole source and diff it against the manifest. It comes every `reconcile_s`,
  because file events can be lost (a kernel queue overflow, events while nobody listened), and, after the
  debounce, when a folder is deleted or moved out (watchdog does not report its files one by one), when a
  file whose change reaches other units changed (an archive: only its directory says which members changed
  or went), or, in a recursive watch, a `.gitignore` changed (the selection itself changed).

Events still pending when `stop()` is called are dropped: the host syncs the whole source when it starts again.
Start the watcher before the host's first full listing, so nothing falls between the listing and the events.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Final

from watchdog.events import (
    EVENT_TYPE_CREATED,
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from engines.contract import EngineError, InvalidRequestError, NotFoundError

RESCAN: Final = "\x00rescan"
"""The one member of a full-reconcile signal. NUL cannot occur in a file name, so it is never a unit id."""

logger = logging.getLogger(__name__)

_WATCHED: Final = frozenset({EVENT_TYPE_CREATED, EVENT_TYPE_MODIFIED, EVENT_TYPE_DELETED, EVENT_TYPE_MOVED})
_GITIGNORE: Final = ".gitignore"

# A stream of events that never pauses (a log being appended to) is still delivered this many debounces apart.
_MAX_DELAY_DEBOUNCES: Final = 10

# How often watchdog's dispatcher checks whether it was stopped; bounds how long `stop()` waits for it.
_OBSERVER_POLL_S: Final = 0.1


class FolderWatcher:
    """Watches `root` (recursively, or only its direct entries) and calls `on_change` as the module describes.

    `ignore(unit_id)` drops ids the source does not offer; a folder's id is passed with a trailing `/` so that
    folder-only rules apply. `rescan_for(path)` names the files (not ignored) whose change asks for `{RESCAN}`
    rather than their own id. Exceptions from `on_change` or `ignore` are logged and never stop the watcher.
    Usable as a context manager; `stop()` returns once no callback is running and every thread has ended.
    """

    def __init__(
        self,
        root: Path,
        on_change: Callable[[set[str]], None],
        debounce_s: float = 0.5,
        reconcile_s: float = 300.0,
        ignore: Callable[[str], bool] | None = None,
        *,
        recursive: bool = True,
        rescan_for: Callable[[str], bool] | None = None,
    ) -> None:
        if debounce_s < 0 or reconcile_s <= 0:
            raise InvalidRequestError("debounce_s must be >= 0 and reconcile_s > 0")
        self.root = root
        # Not resolved: watchdog reports paths under the root as given, links included.
        self._root = os.fspath(Path(root).absolute())
        self._on_change = on_change
        self._debounce_s = debounce_s
        self._max_delay_s = debounce_s * _MAX_DELAY_DEBOUNCES
        self._reconcile_s = reconcile_s
        self._ignore = ignore
        self._rescan_for = rescan_for
        self._recursive = recursive
        self._cond = threading.Condition()
        self._pending: set[str] = set()
        self._first_at = self._last_at = self._rescan_at = 0.0
        # Bumped by every stop(): a delivery thread serves one generation, so one left running by a stop() from
        # inside its own callback ends instead of serving beside the thread of a later start().
        self._generation = 0
        self._observer: BaseObserver | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Begin watching; a no-op when already started. Raises `NotFoundError` for a missing root."""
        if self._thread is not None:
            return
        with self._cond:
            generation = self._generation
            self._pending.clear()
            self._rescan_at = time.monotonic() + self._reconcile_s
        self._observer = self._started_observer()
        self._thread = threading.Thread(
            target=self._run, args=(generation,), name=f"folder-watcher:{self._root}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop watching and join the threads; pending events are dropped. Safe to call twice or from a callback."""
        with self._cond:
            self._generation += 1
            self._cond.notify_all()
        observer, thread = self._observer, self._thread
        self._observer = self._thread = None
        if observer is not None:
            observer.stop()
            observer.join()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def __enter__(self) -> FolderWatcher:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _started_observer(self) -> BaseObserver:
        if not Path(self._root).is_dir():
            raise NotFoundError(f"folder does not exist: {self._root}")
        observer = Observer(timeout=_OBSERVER_POLL_S)
        observer.schedule(_Handler(self._collect), self._root, recursive=self._recursive)
        try:
            observer.start()
        except FileNotFoundError as exc:
            raise NotFoundError(f"folder does not exist: {self._root}") from exc
        except OSError as exc:
            # Usually the inotify watch limit on a large tree; periodic syncs still work without events.
            raise EngineError(
                f"cannot watch {self._root}: {exc.strerror or exc}; raise fs.inotify.max_user_watches "
                "or rely on periodic sync"
            ) from exc
        return observer

    # Observer thread: turn one event into ids and add them to the pending set.

    def _collect(self, event: FileSystemEvent) -> None:
        ids = self._ids_of(event)
        if not ids:
            return
        now = time.monotonic()
        with self._cond:
            if not self._pending:
                self._first_at = now
                self._cond.notify()  # the delivery thread sleeps until the next rescan; give it a deadline
            self._pending |= ids
            self._last_at = now

    def _ids_of(self, event: FileSystemEvent) -> set[str]:
        if event.event_type not in _WATCHED:
            return set()
        if event.is_directory:
            # A created or moved folder's files arrive as events of their own (watchdog generates them); a
            # deleted folder's do not, so only a rescan can tell which units went with it.
            return self._deleted_folder(event) if event.event_type == EVENT_TYPE_DELETED else set()
        ids: set[str] = set()
        for path in (event.src_path, event.dest_path):
            rel = self._relative(os.fsdecode(path))
            if rel is not None:
                ids |= self._id_for(rel)
        return ids

    def _deleted_folder(self, event: FileSystemEvent) -> set[str]:
        path = os.fsdecode(event.src_path)
        if path == self._root:
            return {RESCAN}  # the root itself went: the next listing reports it
        rel = self._relative(path)
        return {RESCAN} if rel is not None and not self._ignored(rel + "/") else set()

    def _id_for(self, rel: str) -> set[str]:
        parent, _, name = rel.rpartition("/")
        if name == _GITIGNORE and self._recursive:
            return {RESCAN} if not parent or not self._ignored(parent + "/") else set()
        if self._ignored(rel):
            return set()
        return {RESCAN} if self._rescan_for is not None and self._rescan_for(rel) else {rel}

    def _relative(self, path: str) -> str | None:
        prefix = self._root.rstrip(os.sep) + os.sep
        if not path.startswith(prefix) or len(path) == len(prefix):
            return None
        return path[len(prefix) :].replace(os.sep, "/")

    def _ignored(self, unit_id: str) -> bool:
        if self._ignore is None:
            return False
        try:
            return self._ignore(unit_id)
        except Exception:
            # Delivering one id too many costs a stat; dropping one loses a change until the next rescan.
            logger.exception("folder watcher: ignore(%r) failed under %s; keeping the event", unit_id, self._root)
            return False

    # Delivery thread: wait for a quiet period or a rescan, then call back outside the lock.

    def _run(self, generation: int) -> None:
        while (batch := self._next_batch(generation)) is not None:
            try:
                self._on_change(batch)
            except Exception:
                logger.exception("folder watcher: on_change failed under %s; watching goes on", self._root)

    def _next_batch(self, generation: int) -> set[str] | None:
        with self._cond:
            while self._generation == generation:
                now = time.monotonic()
                batch = self._due(now)
                if batch is not None:
                    return batch
                self._cond.wait(self._deadline() - now)
        return None

    def _due(self, now: float) -> set[str] | None:
        if now >= self._rescan_at:
            self._pending = set()
        elif not self._pending or (now < self._last_at + self._debounce_s and now < self._first_at + self._max_delay_s):
            return None
        batch, self._pending = self._pending, set()
        if batch and RESCAN not in batch:
            return batch
        # A rescan covers every pending id, and restarts the periodic clock.
        self._rescan_at = now + self._reconcile_s
        return {RESCAN}

    def _deadline(self) -> float:
        if not self._pending:
            return self._rescan_at
        return min(self._rescan_at, self._last_at + self._debounce_s, self._first_at + self._max_delay_s)


class _Handler(FileSystemEventHandler):
    """Hands every event to the watcher; watchdog calls it on the observer's thread."""

    def __init__(self, collect: Callable[[FileSystemEvent], None]) -> None:
        super().__init__()
        self._collect = collect

    def on_any_event(self, event: FileSystemEvent) -> None:
        self._collect(event)
