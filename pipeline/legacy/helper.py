"""A helper process that reads, maps and scrubs a migration's batches while the engine stores the ones before.

Reading rows, mapping them to items and scrubbing those is Python work, and so is much of what `store_many`
does around SQLite. One process runs Python on one core at a time, and a thread would not help: while the
import's Python holds the GIL, the local engine's writing thread waits for it again after every SQLite step,
so the two ran one after the other (at 50,000 rows the import took 1.3 to 1.8 times as long as `store_many`
alone). Here a child process (`pipeline.processes`) runs `prepared_batches` from the checkpoint the migration
reached and hands each batch over pickled, with the rows it counted; the migration only unpickles, stores and
checkpoints. Unpickling builds the very items the helper made (ids are the same bytes), without validating them
again: the helper runs only this project's code, over the workspace.

The helper changes where the work runs, nothing else. The migration reads in place while it starts, so it
never waits for it; and when it fails (it dies, sends something unreadable, or its reading raises), the
migration reads in place again from the last batch it handed over, which raises a read failure just as reading
in place would have. It is at most `AHEAD` batches ahead of the migration, and it stops when its socket closes
(the migration ended, or was killed). It costs CPU of its own (starting, about 0.3 s; pickling both ways, about
15 µs an item), which a machine with no idle core pays out of the migration's time.
"""

from __future__ import annotations

import gc
import logging
import pickle
from collections.abc import AsyncGenerator
from contextlib import closing, suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection

from engines.contract import Namespace, StoreItem
from pipeline.legacy.batches import Batch, Skipped, add, prepared_batches, taken
from pipeline.legacy.checkpoint import Checkpoint, SectionKeys
from pipeline.legacy.sections import ReadStats
from pipeline.legacy.workspace import LegacyWorkspace
from pipeline.processes import ChildProcess, ChildSpec, exit_story
from pipeline.scrub import Policy

logger = logging.getLogger(__name__)

HELPER = ChildSpec("pipeline.legacy.helper:serve")
"""The helper process: a fresh interpreter that imports only this module (not the host's main module)."""
AHEAD = 2
"""Batches the helper may hand over beyond those the migration took: with one, it would wait for each request,
and every request would wake it (on a busy machine, at the cost of the migration's own turn on a core)."""


@dataclass(frozen=True)
class ReadPlan:
    """How a migration's batches are made: the scrub policy, the namespace items go under, the page size."""

    policy: Policy
    namespace: Namespace
    page_size: int


@dataclass(frozen=True)
class _Job:
    path: str
    plan: ReadPlan
    gc_threshold: tuple[int, int, int]


@dataclass(frozen=True)
class _Ready:
    """The helper opened the workspace."""


@dataclass(frozen=True)
class _Start:
    """Hand over the batches after `keys`, the first `AHEAD` now."""

    keys: SectionKeys


@dataclass(frozen=True)
class _More:
    """The migration took a batch: hand over one more."""


@dataclass(frozen=True)
class _Handed:
    """A batch, and the rows read for it since the last hand-over."""

    items: list[StoreItem]
    keys: SectionKeys
    rows: int
    skipped: Skipped


@dataclass(frozen=True)
class _End:
    """No batch is left; the rows read after the last one."""

    rows: int
    skipped: Skipped


@dataclass(frozen=True)
class _Failed:
    reason: str


class HelperFailed(Exception):  # noqa: N818 - a signal to read in place, never seen outside this package
    """The helper stopped being of use; the batches it handed over before are good."""


async def read_batches(
    workspace: LegacyWorkspace, after: Checkpoint, plan: ReadPlan, stats: ReadStats, helper: HelperProcess | None
) -> AsyncGenerator[Batch, None]:
    """Every batch after `after`, in order, counting rows into `stats`: read in place, then by `helper` (started
    for this `workspace` and `plan`) once it is up. It closes the helper; close it (`contextlib.aclosing`) to
    stop the helper early."""
    process = helper
    keys = after.keys()
    try:
        while True:
            handing_over = False
            with closing(prepared_batches(workspace, Checkpoint.of_keys(keys), *_plan(plan), stats)) as in_place:
                for batch in in_place:
                    yield batch
                    keys = batch.keys
                    if process is not None and process.ready():
                        handing_over = True
                        break
            if process is None or not handing_over:
                return
            try:
                async for batch in process.batches(keys, stats):
                    yield batch
                    keys = batch.keys
                return
            except HelperFailed as err:
                logger.warning("legacy import helper process failed (%s); reading in place from where it was", err)
                process.close()
                process = None
    finally:
        if process is not None:
            process.close()


def _plan(plan: ReadPlan) -> tuple[Policy, Namespace, int]:
    return plan.policy, plan.namespace, plan.page_size


class HelperProcess:
    """The migration's end of one helper process."""

    def __init__(self, child: ChildProcess) -> None:
        self._child = child
        self._ready = False
        self._failed = False
        self._closed = False

    @classmethod
    def start(cls, workspace: LegacyWorkspace, plan: ReadPlan) -> HelperProcess | None:
        """A helper starting to read `workspace` as `plan` says, or None (logged) when no process can start."""
        job = _Job(str(workspace.path), plan, gc.get_threshold())
        try:
            child = ChildProcess.start(HELPER)
        except OSError as err:  # no more processes, or no interpreter to run
            logger.warning("legacy import reads in place: no helper process (%s)", err)
            return None
        helper = cls(child)
        try:
            helper._send(job)
        except HelperFailed:
            helper.close()
            return None
        return helper

    @property
    def pid(self) -> int:
        return self._child.pid

    def ready(self) -> bool:
        """Whether the helper is up; never waits. One that failed to start never is (and is closed)."""
        if self._ready or self._failed:
            return self._ready
        try:
            if not self._child.poll():
                return False
            greeting = _loaded(self._child.receive())
        except Exception as err:  # it died starting, or sent bytes that are no message
            greeting = _Failed(f"{type(err).__name__}: {err}")
        self._ready = isinstance(greeting, _Ready)
        if not self._ready:
            logger.warning("legacy import reads in place: the helper process did not start (%s)", _reason(greeting))
            self._failed = True
            self.close()
        return self._ready

    async def batches(self, keys: SectionKeys, stats: ReadStats) -> AsyncGenerator[Batch, None]:
        """Every batch after `keys`, counting their rows into `stats`; `HelperFailed` when the helper fails."""
        self._send(_Start(keys))
        while True:
            message = await self._receive()
            if isinstance(message, _Handed):
                self._grant()  # the next one is prepared while this one is stored
                add(stats, message.rows, message.skipped)
                yield Batch(message.items, message.keys)
            elif isinstance(message, _End):
                add(stats, message.rows, message.skipped)
                return
            else:
                raise HelperFailed(_reason(message))

    def close(self) -> None:
        """Stop the helper at once (what it was preparing is not wanted) and reap it."""
        if self._closed:
            return
        self._closed = True
        self._child.stop()

    def _grant(self) -> None:
        # A helper that has handed over its last batch has exited: the `_End` it sent is read next. One that
        # died is found out the same way.
        with suppress(OSError):
            self._child.send(pickle.dumps(_More()))

    def _send(self, message: _Job | _Start) -> None:
        try:
            self._child.send(pickle.dumps(message))
        except OSError as err:
            raise HelperFailed(f"its pipe is closed ({err})") from err

    async def _receive(self) -> object:
        try:
            return _loaded(await self._child.areceive())
        except EOFError:
            self._closed = True
            raise HelperFailed(f"it {exit_story(self._child.stop())}") from None
        except Exception as err:  # a broken pipe, or bytes that are no message
            raise HelperFailed(f"{type(err).__name__}: {err}") from err


def _loaded(payload: bytes) -> object:
    return pickle.loads(payload)  # from the helper this process started, running this module


def _reason(message: object) -> str:
    return message.reason if isinstance(message, _Failed) else f"it sent {type(message).__name__}"


def serve(conn: Connection) -> None:
    """Take the job, greet, then hand over batches as credit allows, until the last; stop when the pipe closes."""
    try:
        job = _loaded(conn.recv_bytes())
        if not isinstance(job, _Job):
            return
        gc.set_threshold(*job.gc_threshold)  # its parent's (pipeline processes collect less often)
        with LegacyWorkspace.open(job.path) as workspace:
            _hand(conn, _Ready())
            start = _loaded(conn.recv_bytes())
            if not isinstance(start, _Start):
                return
            stats, credit = ReadStats(), AHEAD
            for batch in prepared_batches(workspace, Checkpoint.of_keys(start.keys), *_plan(job.plan), stats):
                if not credit:
                    if not isinstance(_loaded(conn.recv_bytes()), _More):
                        return
                    credit = 1
                _hand(conn, _Handed(batch.items, batch.keys, *taken(stats)))
                credit -= 1
            _hand(conn, _End(*taken(stats)))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return  # the migration ended, or is gone
    except Exception as err:  # said to the migration, which reads in place instead
        with suppress(OSError):
            _hand(conn, _Failed(f"{type(err).__name__}: {err}"))


def _hand(conn: Connection, message: _Ready | _Handed | _End | _Failed) -> None:
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))
