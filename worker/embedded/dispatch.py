"""The in-process dispatcher of embedded mode: a sync's batches run here, as tasks of this event loop.

(The Celery dispatcher of the distributed pipeline sends the same batches to the `tm.ingest`
queue instead; the job functions do not know which one they were given.)
"""

from __future__ import annotations

import asyncio

from worker.jobs import JobContext, ingest_batch
from worker.records import BatchReport, Change


class InProcessDispatcher:
    """Runs ingest batches in this process, up to `in_flight` at once, and keeps their reports.

    One at a time by default: on two cores, a second batch in flight (even one that only prepares
    while the first is written) gained nothing measurable, both competing for the interpreter lock.
    `drain()` waits for every batch dispatched so far and re-raises the first failure.
    """

    def __init__(self, in_flight: int = 1) -> None:
        self.context: JobContext | None = None
        self.reports: list[BatchReport] = []
        self._slots = asyncio.Semaphore(in_flight)
        self._running: set[asyncio.Task[None]] = set()

    def bind(self, context: JobContext) -> None:
        """The context batches run with (it holds this dispatcher, so it is given afterwards)."""
        self.context = context

    async def ingest(self, source_id: str, changes: list[Change], *, bulk: bool = False) -> None:
        if self.context is None:
            raise RuntimeError("InProcessDispatcher.bind(context) must be called before dispatching")
        await self._slots.acquire()
        task = asyncio.create_task(self._run(self.context, source_id, changes))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, context: JobContext, source_id: str, changes: list[Change]) -> None:
        try:
            self.reports.append(await ingest_batch(context, source_id, changes))
        finally:
            self._slots.release()

    async def drain(self) -> None:
        """Wait for every dispatched batch; the first one that failed raises here."""
        while self._running:
            await asyncio.gather(*self._running)
