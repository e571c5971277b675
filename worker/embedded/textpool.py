"""Text units prepared in worker processes, so a backfill reads, scrubs and chunks on every core.

Markdown, plain text and code need no converter, only reading, hashing, scrubbing and chunking,
and in one process that Python work left the other cores idle while the engine wrote. A
`TextPool` runs `read_text_unit` for slices of a batch in a few child processes
(`pipeline.processes`); the batch's own process only stores. Results come back pickled: the
workers run only this project's code over text (documents from untrusted parsers stay in the
converter pool, which never unpickles). A worker that dies costs nothing: its slice is prepared
again in the calling process.

The workers are children of `pipeline.processes`, as the converter pool's are, rather than a
`ProcessPoolExecutor`'s: those are spawned, and spawn imports the host's main module again in
each (with a benchmark's main, a worker was ready in 0.48 s and 0.69 s of CPU; now 0.27 s).
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection

from pipeline.convert import ConvertLimits, native_chain
from pipeline.processes import ChildProcess, ChildSpec, Handshake, ProcessSlot, SlotClosed
from pipeline.scrub import SanitizationReport
from worker.jobs import Prepared, TextJob, UnitReading, UnitStageError, read_text_unit

logger = logging.getLogger(__name__)

TEXT_WORKER = ChildSpec("worker.embedded.textpool:serve")
"""A text pool process: a fresh interpreter that imports this module (and the pipeline) once, then takes slices."""
START_TIMEOUT_S = 60.0
_READY = b"ready"

Outcome = tuple[UnitReading | None, SanitizationReport | None, UnitStageError | None]
"""A `Prepared` without its change, which the calling process has already: sent back, the change took half as
long to unpickle again as the unit's items (10 against 21 µs a tldr page)."""


@dataclass(frozen=True)
class _Failed:
    """A slice that could not even start in the worker (its reader failed to build)."""

    reason: str


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


def serve(conn: Connection) -> None:
    """Run as a text pool process: take the limits, greet, then prepare each slice sent until the connection closes."""
    limits: ConvertLimits = pickle.loads(conn.recv_bytes())  # from the pool that started this process
    conn.send_bytes(_READY)
    while True:
        conn.send_bytes(_answer(pickle.loads(conn.recv_bytes()), limits))


def _answer(job: TextJob, limits: ConvertLimits) -> bytes:
    try:
        return pickle.dumps(prepare_texts(job, limits), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as err:  # said to the pool, which prepares the batch in place
        return pickle.dumps(_Failed(_reason(err)), protocol=pickle.HIGHEST_PROTOCOL)


class TextPool:
    """`workers` processes preparing text units, replaced when one dies (a `TextPreparer`).

    They are started by `warm`, which a batch of many text units calls without waiting: until
    they are ready, units are prepared in place, so a small sync never waits for a process to
    start. Give it one process fewer than the cores: the batch's own process needs one to store.
    """

    def __init__(self, workers: int, limits: ConvertLimits | None = None) -> None:
        self.workers = max(1, workers)
        self.limits = ConvertLimits() if limits is None else limits
        self._setup = pickle.dumps(self.limits)
        self._lock = threading.Lock()
        self._crew: _Crew | None = None
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
            if self._crew is None:
                self._crew = _Crew(self.workers, self._greet)
            crew = self._crew
        try:
            self._pids = crew.start()
        except (OSError, EOFError, SlotClosed, _NotReady) as err:  # died while starting, or closed meanwhile
            logger.warning("text preparation processes did not start (%s); preparing in place", _reason(err))
            self._discard(crew)
            return
        self._ready.set()

    def _greet(self, child: ChildProcess) -> None:
        child.send(self._setup)
        if child.receive(START_TIMEOUT_S) != _READY:
            raise _NotReady(f"process {child.pid} sent no greeting")

    async def prepare(self, job: TextJob) -> list[Prepared] | None:
        """The job's units prepared across the workers, in order; None when the workers are not ready
        or one died (the caller prepares the units itself; a later `warm` starts afresh)."""
        crew = self._crew
        if crew is None or not self.ready:
            return None
        size = -(-len(job.changes) // self.workers)
        slices = [job.changes[start : start + size] for start in range(0, len(job.changes), size)]
        try:
            parts = await asyncio.gather(*(crew.prepare(job.sliced(changes)) for changes in slices))
        except (OSError, EOFError, SlotClosed) as err:
            logger.warning("a text preparation process died (%s); preparing this batch in place", _reason(err))
            self._discard(crew)
            return None
        except _SliceFailed as err:
            logger.warning("text preparation failed (%s); preparing this batch in place", err)
            return None
        return [
            Prepared(change, reading, report, failure)
            for changes, part in zip(slices, parts, strict=True)
            for change, (reading, report, failure) in zip(changes, part, strict=True)
        ]

    def _discard(self, crew: _Crew) -> None:
        with self._lock:
            if self._crew is crew:
                self._crew, self._warmer = None, None
                self._ready.clear()
        crew.kill()

    def close(self) -> None:
        with self._lock:
            warmer = self._warmer
        if warmer is not None:
            warmer.join()
        with self._lock:
            crew, self._crew, self._warmer = self._crew, None, None
            self._ready.clear()
        if crew is not None:
            crew.close()


class _NotReady(Exception):  # noqa: N818 - a reason to prepare in place, never seen outside this module
    """A process answered its setup with something other than its greeting."""


class _SliceFailed(Exception):  # noqa: N818 - a reason to prepare in place, never seen outside this module
    """A slice could not be prepared there (its reader failed to build, or it would not pickle either way)."""


class _Crew:
    """The processes of one start of the pool, each preparing one slice at a time, in threads of its own.

    The threads wait on the processes (and pickle and unpickle), so the event loop never does; they are the
    crew's own, so that a slice never queues behind the loop's other work in its default executor.
    """

    def __init__(self, size: int, greet: Handshake) -> None:
        self._slots = [ProcessSlot(TEXT_WORKER, greet) for _ in range(size)]
        self._idle: queue.SimpleQueue[ProcessSlot] = queue.SimpleQueue()
        for slot in self._slots:
            self._idle.put(slot)
        self._threads = ThreadPoolExecutor(size, thread_name_prefix="tm-text")

    def start(self) -> list[int]:
        """Start every process, all at once, and wait for their greetings; their ids."""
        children = list(self._threads.map(ProcessSlot.child, self._slots))
        return sorted(child.pid for child in children)

    async def prepare(self, job: TextJob) -> list[Outcome]:
        """`job` prepared by whichever process is free first.

        Raises `OSError`, `EOFError` or `SlotClosed` when that process is gone, `_SliceFailed` when the slice
        could not be prepared there."""
        return await asyncio.get_running_loop().run_in_executor(self._threads, self._exchange, job)

    def _exchange(self, job: TextJob) -> list[Outcome]:
        payload = _pickled(job)
        slot = self._idle.get()
        try:
            with slot.held():
                child = slot.live()
                if child is None:
                    raise EOFError("a text preparation process is gone")
                child.send(payload)
                reply = child.receive()
        finally:
            self._idle.put(slot)
        return _outcomes(reply)

    def kill(self) -> None:
        """Kill every process at once (one died: the others' slices are not wanted); one still preparing a
        slice is reaped by the thread waiting on it, which sees it hang up."""
        for slot in self._slots:
            slot.close(grace=0.0)
        self._threads.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Wait for slices in flight, then stop every process politely."""
        self._threads.shutdown(wait=True, cancel_futures=True)
        for slot in self._slots:
            slot.close()


def _pickled(job: TextJob) -> bytes:
    try:
        return pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as err:  # a reader option that does not pickle
        raise _SliceFailed(_reason(err)) from err


def _outcomes(reply: bytes) -> list[Outcome]:
    try:
        outcomes: list[Outcome] | _Failed = pickle.loads(reply)  # from a process of this pool, running this module
    except Exception as err:  # a unit whose items would not unpickle here
        raise _SliceFailed(_reason(err)) from err
    if isinstance(outcomes, _Failed):
        raise _SliceFailed(outcomes.reason)
    return outcomes


def _reason(err: Exception) -> str:
    return f"{type(err).__name__}: {err}"
