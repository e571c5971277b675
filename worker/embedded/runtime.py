"""Embedded mode: everything in one process under one data directory.

SQLite state, the configured engine, a converter pool, a text pool, the in-process dispatcher and the
in-process erasures; the job functions are the ones the Celery workers run. A sync holds its source's job
lease, as each batch does, so an erasure (here or in another process on the same data directory) waits for
it; the first sync a runtime runs first resumes any erasure a stopped process left unfinished.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from types import TracebackType

from engines.contract import MemoryEngine
from pipeline.convert import ConverterPool
from sources import SourceReaders, register_kinds
from worker.embedded.dispatch import InProcessDispatcher
from worker.embedded.textpool import TextPool
from worker.erasure.runner import InProcessErasures
from worker.jobs import JobContext, Progress, sync_source
from worker.records import BatchReport, SyncOutcome, SyncReport
from worker.runs import LiveRuns, RunView
from worker.settings import Settings
from worker.state.base import StateStore
from worker.state.sqlite import SqliteStateStore
from worker.tuning import collect_less
from worker.wiring import check_ocr, close_engine, convert_limits, open_engine, pipeline_settings, reader_options


class EmbeddedRuntime:
    """The runtime of `tinymemory up` / `ingest`: open it, sync sources, read memory, close it.

    It opens the state store and the engine the settings name, unless it is given them (a caller that
    already holds them, so that what it syncs is what the caller reads); it closes only what it opened.
    """

    def __init__(
        self,
        settings: Settings,
        progress: Progress | None = None,
        *,
        state: StateStore | None = None,
        engine: MemoryEngine | None = None,
    ) -> None:
        collect_less()
        register_kinds(settings.source_kinds)
        check_ocr(settings)
        self.settings = settings
        self._owns_state, self._owns_engine = state is None, engine is None
        self.state: StateStore = SqliteStateStore(settings.state_file) if state is None else state
        self.engine: MemoryEngine = open_engine(settings) if engine is None else engine
        limits = convert_limits(settings)
        self.converter = ConverterPool(settings.convert_workers, limits)
        # One core is left to this process, which stores what the text processes prepare.
        self.text_pool = TextPool(min(settings.convert_workers, (os.cpu_count() or 2) - 1), limits)
        # Two batches in flight: one is prepared by the text pool while the other is stored here.
        self.dispatcher = InProcessDispatcher(in_flight=2)
        self.live = LiveRuns(progress)
        self.context = JobContext(
            state=self.state,
            engine=self.engine,
            converter=self.converter,
            dispatcher=self.dispatcher,
            readers=SourceReaders(reader_options(settings)),
            settings=pipeline_settings(settings, settings.convert_workers, in_task=False),
            progress=self.live,
            text_pool=self.text_pool,
        )
        self.dispatcher.bind(self.context)
        self.erasures = InProcessErasures(self.context)
        self._resumed = False

    def __enter__(self) -> EmbeddedRuntime:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self.text_pool.close()
        self.converter.close()
        if self._owns_engine:
            close_engine(self.engine)
        if self._owns_state:
            self.state.close()

    async def sync(self, source_id: str, hints: Iterable[str] | None = None) -> tuple[SyncReport, list[BatchReport]]:
        """Sync one source now; returns the sync and the reports of the batches it ran."""
        if not self._resumed:
            self._resumed = True
            await self.erasures.resume()
        self.dispatcher.reports = []
        with self.live.track(source_id):
            async with self.context.running(source_id):
                report = await sync_source(self.context, source_id, hints)
            await self.dispatcher.drain()
        return report, list(self.dispatcher.reports)

    def runs(self) -> list[RunView]:
        """The syncs running here and the last ones done (a `worker.control.RunBoard`)."""
        return self.live.runs()

    async def request_sync(self, source_id: str, hints: Iterable[str] | None = None) -> SyncOutcome:
        """Sync one source now, here (a `worker.control.SyncRunner`)."""
        report, batches = await self.sync(source_id, hints)
        return SyncOutcome(source_id=source_id, status="synced", report=report, batches=batches)
