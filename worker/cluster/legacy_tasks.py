"""The legacy import on the workers: a `tm.backfill` task that runs `import_legacy` in time slices.

A large workspace outlasts a task's time limit, so each task imports for at most half of the soft limit,
then queues the next slice, which resumes from the checkpoint in the import's record. A worker that dies
mid-slice gives the message back (late acks), and the slice that runs it again resumes the same way. A
second message for an import already running (its record's lock is held) is dropped: that run goes on.
The workers read the workspace at the path given, so it must be mounted where they run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from celery.exceptions import SoftTimeLimitExceeded

from engines.contract import ConflictError, Error, UnavailableError
from worker.cluster.queues import BACKFILL_QUEUE, RULES
from worker.jobs.legacy import (
    LegacyImportRecord,
    LegacyImportRequest,
    LegacyImports,
    LegacyImportSettings,
    canonical_workspace,
    import_id,
    import_legacy,
)
from worker.services import close_engine, open_engine
from worker.settings import Settings

if TYPE_CHECKING:
    from celery import Celery, Task

logger = logging.getLogger(__name__)

LEGACY_TASK = "tm.import_legacy"
SLICE_OF_SOFT_LIMIT = 0.5
"""The share of the task's soft time limit one slice imports for before it hands over to the next."""
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
    return records.require(record_id)


def run_slice(task: Task[Any, None], request: LegacyImportRequest) -> None:
    """One slice of an import: import until the slice's time is up, then queue the rest."""
    settings: Settings = task.app.conf.tinymemory_settings
    records = LegacyImports(settings.data_dir)
    try:
        record = asyncio.run(_import(settings, request, records))
    except ConflictError as err:
        logger.info("legacy import slice dropped: %s", err.message)
        return
    except SoftTimeLimitExceeded:
        logger.warning("legacy import slice ran into the soft time limit; the next slice resumes it")
        _send(task.app, request.model_copy(update={"restart": False}))
        return
    except UnavailableError as err:
        if task.request.retries >= LEGACY_MAX_RETRIES:
            logger.error("legacy import given up after %d retries: %s", task.request.retries, err)
            return
        delay = min(_RETRY_CAP_S, _RETRY_BASE_S * 2**task.request.retries)
        raise task.retry(exc=err, countdown=delay, max_retries=LEGACY_MAX_RETRIES) from err
    except Error as err:
        logger.error("legacy import failed (resumable once fixed): %s", err)
        return
    if record.status == "paused":
        records.put(record.model_copy(update={"status": "queued"}))
        _send(task.app, request.model_copy(update={"restart": False}))
    logger.info("legacy import %s %s: %d stored, %d replayed", record.id, record.status, record.stored, record.replayed)


async def _import(settings: Settings, request: LegacyImportRequest, records: LegacyImports) -> LegacyImportRecord:
    engine_id = request.engine or settings.engine
    engine = open_engine(settings.model_copy(update={"engine": engine_id}))
    try:
        deadline = time.monotonic() + settings.task_soft_limit_s * SLICE_OF_SOFT_LIMIT
        job = LegacyImportSettings(store_attempts=settings.task_store_attempts)
        return await import_legacy(request, engine, engine_id, records, settings=job, deadline=deadline)
    finally:
        close_engine(engine)


def _send(app: Celery, request: LegacyImportRequest) -> None:
    expires = RULES[BACKFILL_QUEUE].expires_s
    app.send_task(LEGACY_TASK, args=[request.model_dump(mode="json")], queue=BACKFILL_QUEUE, expires=expires)
