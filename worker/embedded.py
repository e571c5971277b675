"""Embedded mode: everything in one process — SQLite state, the configured engine, a converter pool,
the in-process dispatcher — under one data directory."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from types import TracebackType

from engines.contract import MemoryEngine, NotFoundError, Segment, SegmentKind
from pipeline.convert import ConverterPool, ConvertLimits
from worker.context import JobContext, PipelineSettings, Progress
from worker.dispatch import InProcessDispatcher
from worker.jobs import sync_source
from worker.model import BatchReport, SourceConfigKind, SourceEntry, SyncReport
from worker.readers import Readers
from worker.settings import Settings
from worker.state_sqlite import SqliteStateStore
from worker.stores import close_engine, open_engine
from worker.textprep import TextPool
from worker.tuning import collect_less


def source_id_for(path: Path) -> str:
    """A stable id for a path: its name made id-safe, and a short hash of the whole path."""
    real = os.path.realpath(path)
    digest = hashlib.sha256(real.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{Segment.sanitized(SegmentKind.SOURCE, path.name or 'root').id[:48]}-{digest}"


class EmbeddedRuntime:
    """The runtime of `tinymemory up` / `ingest`: open it, sync sources, read memory, close it."""

    def __init__(self, settings: Settings, progress: Progress | None = None) -> None:
        collect_less()
        self.settings = settings
        self.state = SqliteStateStore(settings.state_file)
        self.engine: MemoryEngine = open_engine(settings)
        limits = ConvertLimits(
            timeout_s=settings.convert_timeout_s, memory_bytes=settings.convert_memory_mb * 1024 * 1024
        )
        self.converter = ConverterPool(settings.convert_workers, limits)
        # One core is left to this process, which stores what the text processes prepare.
        self.text_pool = TextPool(min(settings.convert_workers, (os.cpu_count() or 2) - 1), limits)
        # Two batches in flight: one is prepared by the text pool while the other is stored here.
        self.dispatcher = InProcessDispatcher(in_flight=2)
        self.context = JobContext(
            state=self.state,
            engine=self.engine,
            converter=self.converter,
            dispatcher=self.dispatcher,
            readers=Readers(max_file_bytes=int(settings.max_file_mb * 1024 * 1024)),
            settings=PipelineSettings(
                item_max_chars=settings.item_max_chars, convert_concurrency=max(2, settings.convert_workers * 2)
            ),
            progress=progress or Progress(),
            text_pool=self.text_pool,
        )
        self.dispatcher.bind(self.context)

    def __enter__(self) -> EmbeddedRuntime:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self.text_pool.close()
        self.converter.close()
        close_engine(self.engine)
        self.state.close()

    def source_for_path(self, path: Path) -> SourceEntry:
        """The source registered for a folder or file path, registering it on first use."""
        if not path.exists():
            raise NotFoundError(f"{path} does not exist")
        source_id = source_id_for(path)
        entry = self.state.get_source(source_id)
        if entry is None:
            kind = SourceConfigKind.FOLDER if path.is_dir() else SourceConfigKind.FILE
            entry = SourceEntry(id=source_id, kind=kind, label=str(path), path=os.path.realpath(path))
            self.state.put_source(entry)
        return entry

    async def sync(self, source_id: str, hints: set[str] | None = None) -> tuple[SyncReport, list[BatchReport]]:
        """Sync one source now; returns the sync and the reports of the batches it ran."""
        self.dispatcher.reports = []
        report = await sync_source(self.context, source_id, hints)
        await self.dispatcher.drain()
        return report, list(self.dispatcher.reports)
