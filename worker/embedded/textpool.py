"""Text units prepared in worker processes, so a backfill reads, scrubs and chunks on every core.

Markdown, plain text and code need no converter, only reading, hashing, scrubbing and chunking,
and in one process that Python work left the other cores idle while the engine wrote. A
`TextPool` runs `read_text_unit` for slices of a batch in a few spawned processes; the batch's
own process only stores. Results come back pickled: the workers run only this project's code
over text (documents from untrusted parsers stay in the converter pool, which never unpickles).
A worker that dies costs nothing: its slice is prepared again in the calling process.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from pipeline.convert import ConvertLimits, native_chain
from pipeline.scrub import SanitizationReport
from worker.jobs import Prepared, TextJob, UnitReading, UnitStageError, read_text_unit
from worker.pool_process import start_pool_process

logger = logging.getLogger(__name__)

# spawn, not fork: a fresh interpreter inherits no threads, locks or open files from a busy parent.
_CONTEXT = multiprocessing.get_context("spawn")


Outcome = tuple[UnitReading | None, SanitizationReport | None, UnitStageError | None]
"""A `Prepared` without its change, which the calling process has already: sent back, the change took half as
long to unpickle again as the unit's items (10 against 21 µs a tldr page)."""


def prepare_texts(job: TextJob, limits: ConvertLimits) -> list[Outcome]:
    """Run in a worker: every unit of the slice through `read_text_unit`, in order."""
    # A reader per job, as the batch's own process makes one per batch: what it caches about
    # ignore rules must not outlive the listing the changes came from. The kind's module is
    # loaded from where the job says, so a kind registered only in the parent works here too.
    reader = job.kind.load().build(job.entry, job.options)
    native = native_chain()
    prepared: list[Outcome] = []
    for change in job.changes:
        try:
            outcome = read_text_unit(reader, change, job.previous.get(change.unit_id), job.rules, native, limits)
        except UnitStageError as failure:
            prepared.append((None, None, failure))
            continue
        prepared.append((None, None, None) if outcome is None else (*outcome, None))
    return prepared


def _ready() -> int:
    return os.getpid()


class TextPool:
    """`workers` processes preparing text units, replaced when one dies (a `TextPreparer`).

    They are started by `warm`, which a batch of many text units calls without waiting: until
    they are ready, units are prepared in place, so a small sync never waits for a process to
    start. Give it one process fewer than the cores: the batch's own process needs one to store.
    """

    def __init__(self, workers: int, limits: ConvertLimits | None = None) -> None:
        self.workers = max(1, workers)
        self.limits = ConvertLimits() if limits is None else limits
        self._lock = threading.Lock()
        self._executor: ProcessPoolExecutor | None = None
        self._warmer: threading.Thread | None = None
        self._ready = threading.Event()
        self._pids: list[int] = []

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers that answered when the pool was last started."""
        return list(self._pids)

    @property
    def ready(self) -> bool:
        """Whether every worker has started and imported what it runs."""
        return self._ready.is_set()

    def warm(self, *, wait: bool = True) -> None:
        """Start the workers (once); with `wait`, return when they are ready."""
        with self._lock:
            if self._warmer is None:
                self._warmer = threading.Thread(target=self._start_all, name="tm-text-warm", daemon=True)
                self._warmer.start()
            warmer = self._warmer
        if wait:
            warmer.join()

    def _start_all(self) -> None:
        with self._lock:
            if self._executor is None:
                self._executor = ProcessPoolExecutor(
                    self.workers, mp_context=_CONTEXT, initializer=start_pool_process, initargs=(os.getpid(),)
                )
            executor = self._executor
        try:
            self._pids = sorted({future.result() for future in [executor.submit(_ready) for _ in range(self.workers)]})
        except (BrokenProcessPool, RuntimeError) as err:  # died while starting, or closed meanwhile
            logger.warning("text preparation processes did not start (%s); preparing in place", err)
            self._discard(executor)
            return
        self._ready.set()

    async def prepare(self, job: TextJob) -> list[Prepared] | None:
        """The job's units prepared across the workers, in order; None when the workers are not ready
        or one died (the caller prepares the units itself; a later `warm` starts afresh)."""
        executor = self._executor
        if executor is None or not self.ready:
            return None
        size = -(-len(job.changes) // self.workers)
        slices = [job.changes[start : start + size] for start in range(0, len(job.changes), size)]
        loop = asyncio.get_running_loop()
        try:
            parts = await asyncio.gather(
                *(loop.run_in_executor(executor, prepare_texts, job.sliced(changes), self.limits) for changes in slices)
            )
        except (BrokenProcessPool, RuntimeError) as err:
            logger.warning("a text preparation process died (%s); preparing this batch in place", err)
            self._discard(executor)
            return None
        except Exception as err:  # the slice could not even start there (its reader failed to build)
            logger.warning("text preparation failed (%s: %s); preparing this batch in place", type(err).__name__, err)
            return None
        return [
            Prepared(change, reading, report, failure)
            for changes, part in zip(slices, parts, strict=True)
            for change, (reading, report, failure) in zip(changes, part, strict=True)
        ]

    def _discard(self, executor: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._executor is executor:
                self._executor, self._warmer = None, None
                self._ready.clear()
        executor.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        with self._lock:
            warmer = self._warmer
        if warmer is not None:
            warmer.join()
        with self._lock:
            executor, self._executor, self._warmer = self._executor, None, None
            self._ready.clear()
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
