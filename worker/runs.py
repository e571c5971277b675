"""Runs, live: the syncs and backfills in progress and the last ones done, as the console's progress page shows
them.

A run is one sync of one source and the batches it dispatched. Embedded mode counts its runs in memory
(`LiveRuns`, the runtime's progress sink); the distributed pipeline counts them on Redis
(`worker.redis.progress`), where every worker adds to them. Both answer the same `RunView`s.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from threading import Lock

from pydantic import BaseModel, ConfigDict

from pipeline.scrub import SanitizationReport
from worker.jobs import Progress
from worker.records import DeadLetter, now

KEPT_FINISHED = 20
"""Finished runs an embedded runtime keeps showing (the newest ones)."""


class RunView(BaseModel):
    """One run: `planned` units (None while its sync still lists), `done` and `failed` units so far, `items`
    stored. `finished_at` is set once the sync and all its batches ended."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    source_id: str | None
    planned: int | None
    done: int
    items: int
    failed: int
    started_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None

    @property
    def finished(self) -> bool:
        if self.finished_at is not None:
            return True
        return self.planned is not None and self.done + self.failed >= self.planned

    @property
    def percent(self) -> int:
        """Units done or failed, of planned, in whole percent (100 once finished, 0 while listing)."""
        if self.finished:
            return 100
        if not self.planned:
            return 0
        return min(100, (self.done + self.failed) * 100 // self.planned)

    @property
    def elapsed_s(self) -> float:
        end = self.finished_at or self.updated_at
        return max(0.0, (end - self.started_at).total_seconds())

    @property
    def items_per_s(self) -> float | None:
        elapsed = self.elapsed_s
        return self.items / elapsed if elapsed > 0 else None

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate units went so far; None while listing, before any unit, or once done."""
        if self.finished or not self.planned:
            return None
        handled = self.done + self.failed
        elapsed = self.elapsed_s
        if handled == 0 or elapsed <= 0:
            return None
        return (self.planned - handled) * elapsed / handled


_CURRENT: ContextVar[str | None] = ContextVar("tinymemory_run", default=None)


class _Counts:
    __slots__ = ("done", "failed", "finished_at", "items", "planned", "source_id", "started_at", "updated_at")

    def __init__(self, source_id: str) -> None:
        self.source_id = source_id
        self.planned: int | None = None
        self.done = self.items = self.failed = 0
        self.started_at = self.updated_at = now()
        self.finished_at: datetime | None = None


class LiveRuns(Progress):
    """An embedded runtime's runs, counted in memory; also passes every event on to `inner` (a CLI's bar).

    `track` marks a sync's run for the code it awaits: a context variable, so the batches the sync dispatches
    (tasks it creates) count into it, and two sources syncing at once each count into their own.
    """

    def __init__(self, inner: Progress | None = None, *, keep: int = KEPT_FINISHED) -> None:
        self.inner = inner or Progress()
        self.keep = keep
        self._runs: OrderedDict[str, _Counts] = OrderedDict()
        # Counted from the event loop and read by the API's threads.
        self._lock = Lock()

    @contextmanager
    def track(self, source_id: str) -> Iterator[str]:
        run_id = uuid.uuid4().hex
        with self._lock:
            self._runs[run_id] = _Counts(source_id)
        reset = _CURRENT.set(run_id)
        try:
            yield run_id
        finally:
            _CURRENT.reset(reset)
            with self._lock:
                counts = self._runs[run_id]
                counts.finished_at = counts.updated_at = now()
                self._forget_old()

    def runs(self) -> list[RunView]:
        """Running runs first, then finished ones; newest first within each."""
        with self._lock:
            views = [_view(run_id, counts) for run_id, counts in reversed(self._runs.items())]
        return sorted(views, key=lambda v: v.finished)

    def planned(self, units: int) -> None:
        self._count(planned=units)
        self.inner.planned(units)

    def advanced(self, units: int = 0, items: int = 0, failed: int = 0) -> None:
        self._count(done=units, items=items, failed=failed)
        self.inner.advanced(units, items, failed)

    def redacted(self, report: SanitizationReport) -> None:
        self.inner.redacted(report)

    def dead_lettered(self, letter: DeadLetter) -> None:
        self.inner.dead_lettered(letter)

    def _count(self, *, planned: int | None = None, done: int = 0, items: int = 0, failed: int = 0) -> None:
        run_id = _CURRENT.get()
        with self._lock:
            counts = self._runs.get(run_id) if run_id is not None else None
            if counts is None:
                return
            if planned is not None:
                counts.planned = planned
            counts.done += done
            counts.items += items
            counts.failed += failed
            counts.updated_at = now()

    def _forget_old(self) -> None:
        finished = [run_id for run_id, counts in self._runs.items() if counts.finished_at is not None]
        for run_id in finished[: max(0, len(finished) - self.keep)]:
            del self._runs[run_id]


def _view(run_id: str, counts: _Counts) -> RunView:
    return RunView(
        id=run_id,
        source_id=counts.source_id,
        planned=counts.planned,
        done=counts.done,
        items=counts.items,
        failed=counts.failed,
        started_at=counts.started_at,
        updated_at=counts.updated_at,
        finished_at=counts.finished_at,
    )
