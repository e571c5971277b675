"""`tinymemory watch`: a watcher per folder or file source, each change queued as a targeted sync."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from engines.contract import Error
from sources import RESCAN, FolderWatcher
from worker.cluster import enqueue_sync
from worker.leases import Leases
from worker.model import SourceConfigKind, SourceEntry
from worker.readers import Readers
from worker.redis_client import redis_from_url
from worker.settings import Settings
from worker.state_redis import RedisStateStore

if TYPE_CHECKING:
    from celery import Celery

logger = logging.getLogger(__name__)

_LOCAL_KINDS = (SourceConfigKind.FOLDER, SourceConfigKind.FILE)


class SourceWatchers:
    """The watchers of every enabled local source, kept in step with the registry by `refresh()`."""

    def __init__(self, settings: Settings, celery: Celery) -> None:
        self.settings = settings
        self.celery = celery
        client = redis_from_url(settings.redis_url)
        self.state = RedisStateStore(client, prefix=settings.redis_prefix)
        self.leases = Leases(client, prefix=settings.redis_prefix)
        self.readers = Readers(max_file_bytes=int(settings.max_file_mb * 1024 * 1024))
        self.watchers: dict[str, tuple[SourceEntry, FolderWatcher]] = {}
        self.refresh()

    def refresh(self) -> None:
        """Start watchers of sources added or changed since the last refresh; stop those of removed ones."""
        wanted = {e.id: e for e in self.state.list_sources() if e.enabled and e.kind in _LOCAL_KINDS}
        for source_id in list(self.watchers):
            entry, watcher = self.watchers[source_id]
            if wanted.get(source_id) != entry:
                watcher.stop()
                del self.watchers[source_id]
        for source_id, entry in wanted.items():
            if source_id not in self.watchers:
                self._start(entry)

    def _start(self, entry: SourceEntry) -> None:
        try:
            reader = self.readers.reader_for(entry)
        except Error as err:
            logger.warning("cannot watch %s: %s", entry.id, err)
            return
        if entry.kind is SourceConfigKind.FILE:
            name = Path(entry.path or "").name
            watcher = FolderWatcher(reader.root, self._on_change(entry.id), ignore=lambda u: u != name, recursive=False)
        else:
            watcher = FolderWatcher(reader.root, self._on_change(entry.id), ignore=getattr(reader, "ignores", None))
        watcher.start()
        self.watchers[entry.id] = (entry, watcher)
        # Events before the watcher started are unknown: reconcile once now.
        enqueue_sync(self.celery, self.leases, self.settings, entry.id)

    def _on_change(self, source_id: str) -> Callable[[set[str]], None]:
        def queue(changed: set[str]) -> None:
            hints = None if RESCAN in changed else sorted(changed)
            enqueue_sync(self.celery, self.leases, self.settings, source_id, hints=hints)

        return queue

    def stop(self) -> None:
        for _, watcher in self.watchers.values():
            watcher.stop()
        self.watchers.clear()
