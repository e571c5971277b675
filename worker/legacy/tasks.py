"""The legacy import on the workers: a `tm.backfill` task that runs `import_legacy` in time slices.

A large workspace outlasts a task's time limit, so each task imports for at most half of the soft limit,
then queues the next slice, which resumes from the checkpoint in the import's record. A worker that dies
mid-slice gives the message back (late acks), and the slice that runs it again resumes the same way. A
second message for an import already running (its record's lock is held) is dropped: that run goes on.
A slice the soft limit stops anyway is continued the same way, unless `MAX_STALLS` slices in a row ended
so before their first batch, which then fails the import (the limit is too low for it). The workers read
the workspace at the path given, so it must be mounted where they run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from celery.exceptions import SoftTimeLimitExceeded

from engines.contract import ConflictError, Error, UnavailableError
from worker.cluster.queues import BACKFILL_QUEUE, RULES
from worker.legacy.job import (
    LegacyImportRecord,
    LegacyImportRequest,
    LegacyImports,
    canonical_workspace,
    import_id,
    import_legacy,
)
from worker.settings import Settings
from worker.wiring import close_engine, legacy_import_settings, open_engine, open_state

if TYPE_CHECKING:
    from celery import Celery, Task

logger = logging.getLogger(__name__)

LEGACY_TASK = "tm.import_legacy"
SLICE_OF_SOFT_LIMIT = 0.5
"""The share of the task's soft time limit one slice imports for before it hands over to the next."""
MAX_STALLS = 3
"""Slices in a row stopped by the soft time limit before their first batch, after which the import fails."""
LEGACY_MAX_RETRIES = 12
_RETRY_BASE_S = 1.0
_RETRY_CAP_S = 60.0


def register_legacy_tasks(app: Celery) -> None:
    """Register the import task on `app` under its stable name."""

    @app.task(name=LEGACY_TASK, bind=True, ignore_result=True, shared=False)
    def import_legacy_slice(self: Task[Any, None], request: dict[str, Any]) -> None:
        run_slice(self, LegacyImportRequest.model_validate(request))


def queue_legacy_import(app: Celery, settings: Settings, request: LegacyImportRequest) -> LegacyImportRecord:
    """Record the import as queued and send its first slice; the record's id is how to follow it.

    An import already queued is left as it is (its slice is waiting) unless `restart` asks again. Any other
    duplicate is harmless: slices of one import take turns on its lock, and one that finds it held is dropped.
    """
    engine_id = request.engine or settings.engine
    pinned = request.model_copy(update={"engine": engine_id})
    workspace = canonical_workspace(request.path)
    records = LegacyImports(settings.data_dir)
    record_id = import_id(workspace, engine_id, pinned.node())
    held = records.get(record_id)
    if held is not None and held.status == "queued" and not request.restart:
        return held
    fresh = LegacyImportRecord(id=record_id, workspace=str(workspace), engine=engine_id, namespace=str(pinned.node()))
    # A finished import queued again starts over (all replays, plus whatever v1 rows are new).
    again = held if held is None or held.status != "completed" else held.started_over()
    queued = fresh if again is None else again.model_copy(update={"status": "queued", "error": None})
    records.put(queued)
    _send(app, pinned)
    # The record as queued: read back, it may already say `running` (a worker was quicker than this return).
    return queued


def run_slice(task: Task[Any, None], request: LegacyImportRequest) -> None:
    """One slice of an import: import until the slice's time is up, then queue the rest."""
    settings: Settings = task.app.conf.tinymemory_settings
    request = request.model_copy(update={"engine": request.engine or settings.engine})
    records = LegacyImports(settings.data_dir)
    before = _held(records, request)
    started = time.monotonic()
    try:
        record = asyncio.run(_import(settings, request, records))
    except ConflictError as err:  # another run holds the import (it goes on), or what it imports into was erased
        logger.info("legacy import slice stopped: %s", err.message)
        return
    except Exception as err:
        # Celery raises the soft time limit wherever the slice is, and code on the way may wrap it (a
        # serializer, an engine's own error mapping): past the limit, a failure is the limit's.
        if isinstance(err, SoftTimeLimitExceeded) or time.monotonic() - started >= settings.task_soft_limit_s:
            _continue_after_limit(task.app, records, request, before, settings.task_soft_limit_s)
            return
        if isinstance(err, UnavailableError):
            _retry(task, err)
        if isinstance(err, Error):
            logger.error("legacy import failed (resumable once fixed): %s", err)
            return
        raise
    if record.status == "paused":
        _continue(task.app, records, request)
    logger.info("legacy import %s %s: %d stored, %d replayed", record.id, record.status, record.stored, record.replayed)


def _retry(task: Task[Any, None], err: UnavailableError) -> None:
    if task.request.retries >= LEGACY_MAX_RETRIES:
        logger.error("legacy import given up after %d retries (resumable): %s", task.request.retries, err)
        return
    delay = min(_RETRY_CAP_S, _RETRY_BASE_S * 2**task.request.retries)
    raise task.retry(exc=err, countdown=delay, max_retries=LEGACY_MAX_RETRIES) from err


def _continue_after_limit(
    app: Celery, records: LegacyImports, request: LegacyImportRequest, before: LegacyImportRecord | None, limit_s: float
) -> None:
    """Go on in the next slice; after `MAX_STALLS` slices in a row that did not move the checkpoint, the
    import fails instead, saying which limit to raise (such a slice never will)."""
    after = _held(records, request)
    if after is None:
        return
    moved = before is None or after.checkpoint != before.checkpoint
    stalls = 0 if moved else after.stalls + 1
    if stalls >= MAX_STALLS:
        message = f"{stalls} slices in a row made no progress within the task's soft time limit ({limit_s:g} s)"
        logger.error("legacy import stopped: %s; raise TINYMEMORY_TASK_SOFT_LIMIT_S and queue it again", message)
        records.put(after.model_copy(update={"status": "failed", "error": message, "stalls": 0}))
        return
    logger.warning("legacy import slice stopped by the soft time limit; the next slice resumes it")
    records.put(after.model_copy(update={"stalls": stalls}))
    _continue(app, records, request)


def _continue(app: Celery, records: LegacyImports, request: LegacyImportRequest) -> None:
    """Queue the next slice, from the record's checkpoint."""
    held = _held(records, request)
    if held is not None:
        records.put(held.model_copy(update={"status": "queued"}))
    _send(app, request.model_copy(update={"restart": False}))


def _held(records: LegacyImports, request: LegacyImportRequest) -> LegacyImportRecord | None:
    return records.get(import_id(canonical_workspace(request.path), request.engine or "", request.node()))


async def _import(settings: Settings, request: LegacyImportRequest, records: LegacyImports) -> LegacyImportRecord:
    engine_id = request.engine or settings.engine
    state = open_state(settings)  # its tombstones: what was erased is not imported again
    try:
        engine = open_engine(settings.model_copy(update={"engine": engine_id}))
        try:
            deadline = time.monotonic() + settings.task_soft_limit_s * SLICE_OF_SOFT_LIMIT
            job = legacy_import_settings(settings, in_task=True)
            return await import_legacy(
                request, engine, engine_id, records, settings=job, deadline=deadline, erasures=state
            )
        finally:
            close_engine(engine)
    finally:
        state.close()


def _send(app: Celery, request: LegacyImportRequest) -> None:
    expires = RULES[BACKFILL_QUEUE].expires_s
    app.send_task(LEGACY_TASK, args=[request.model_dump(mode="json")], queue=BACKFILL_QUEUE, expires=expires)
