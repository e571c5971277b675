"""`tinymemory watch`: a watcher per watchable source, each change queued as a targeted sync."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from engines.contract import Error
from sources import RESCAN, FolderWatcher, SourceEntry, SourceReaders, WatchableSource, register_kinds
from worker.cluster.runtime import enqueue_sync
from worker.redis.client import redis_from_url
from worker.redis.leases import Leases
from worker.settings import Settings
from worker.state.redis import RedisStateStore
from worker.wiring import reader_options

if TYPE_CHECKING:
    from celery import Celery

logger = logging.getLogger(__name__)


class SourceWatchers:
    """The watchers of every enabled source whose reader is a `WatchableSource`, kept in step with the
    registry by `refresh()`."""

    def __init__(self, settings: Settings, celery: Celery) -> None:
        register_kinds(settings.source_kinds)
        self.settings = settings
        self.celery = celery
        client = redis_from_url(settings.redis_url)
        self.state = RedisStateStore(client, prefix=settings.redis_prefix)
        self.leases = Leases(client, prefix=settings.redis_prefix)
        self.readers = SourceReaders(reader_options(settings))
        # Every entry considered (watched or not), so an unwatchable source is not looked at again until it changes.
        self.seen: dict[str, SourceEntry] = {}
        self.watchers: dict[str, FolderWatcher] = {}
        self.refresh()

    def refresh(self) -> None:
        """Start watchers of sources added or changed since the last refresh; stop those of removed ones."""
        wanted = {e.id: e for e in self.state.list_sources() if e.enabled}
        for source_id in list(self.seen):
            if wanted.get(source_id) != self.seen[source_id]:
                self._forget(source_id)
        for source_id, entry in wanted.items():
            if source_id not in self.seen:
                self.seen[source_id] = entry
                self._start(entry)

    def _start(self, entry: SourceEntry) -> None:
        try:
            reader = self.readers.reader_for(entry)
            if not isinstance(reader, WatchableSource):
                return
            watcher = reader.watch(self._on_change(entry.id))
            watcher.start()
        except Error as err:
            logger.warning("cannot watch %s (until its settings change): %s", entry.id, err)
            return
        self.watchers[entry.id] = watcher
        # Events before the watcher started are unknown: reconcile once now.
        enqueue_sync(self.celery, self.leases, self.settings, entry.id)

    def _forget(self, source_id: str) -> None:
        del self.seen[source_id]
        watcher = self.watchers.pop(source_id, None)
        if watcher is not None:
            watcher.stop()

    def _on_change(self, source_id: str) -> Callable[[set[str]], None]:
        def queue(changed: set[str]) -> None:
            hints = None if RESCAN in changed else sorted(changed)
            enqueue_sync(self.celery, self.leases, self.settings, source_id, hints=hints)

        return queue

    def stop(self) -> None:
        for watcher in self.watchers.values():
            watcher.stop()
        self.watchers.clear()
        self.seen.clear()
