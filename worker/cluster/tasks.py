"""Celery tasks: each unpacks ids and calls one job function with the worker process's runtime.

`ingest_batch` is idempotent (ids are fingerprints; units already committed are found unchanged),
so a redelivered or retried batch replays instead of duplicating. A batch the engine keeps refusing
as unavailable is retried with exponential backoff and jitter, then its units are dead-lettered.

`run_erasure` is idempotent too (each step is saved in the receipt and skipped on a rerun). Its message
leaves the queue only when the erasure has ended, completed or failed with a reason: a worker that dies
mid-erasure gives it back (late acks, rejected on a lost worker), and a failure the job could not settle
(the state or the engine unavailable beyond its own retries) is retried with backoff, up to
`ERASE_MAX_RETRIES`, after which the erasure is failed with that reason.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from contextlib import nullcontext
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from engines.contract import NotFoundError, UnavailableError
from worker import jobs
from worker.cluster.deliveries import Swept
from worker.cluster.metrics import record_batch, record_sweep
from worker.cluster.queues import BEAT_TASK, ERASE_TASK, INGEST_TASK, SYNC_TASK
from worker.cluster.runtime import ClusterRuntime, enqueue_sync, sync_again, sync_lease
from worker.erasure.job import run_erasure
from worker.logs import job_fields
from worker.records import Change, DeadLetter

if TYPE_CHECKING:
    from celery import Celery, Task

logger = logging.getLogger(__name__)

INGEST_MAX_RETRIES = 12
ERASE_MAX_RETRIES = 60
_RETRY_BASE_S = 1.0
_RETRY_CAP_S = 60.0
SWEEP_LEASE = "sweep-deliveries"
SWEEP_LEASE_S = 120.0
_LOST = (
    "its batch was sent {sends} times and never finished (a worker died holding it, or it reached the task's "
    "time limit); replay the dead letter to try again"
)

_runtime: ClusterRuntime | None = None


def runtime(app: Celery) -> ClusterRuntime:
    """This worker process's runtime, built on first use (after the prefork, never in the parent)."""
    global _runtime
    if _runtime is None:
        _runtime = ClusterRuntime(app.conf.tinymemory_settings, app)
    return _runtime


def retry_delay(retries: int) -> float:
    """Exponential backoff with full jitter, capped: 1 s, 2 s, 4 s … up to 60 s."""
    return random.uniform(0, min(_RETRY_CAP_S, _RETRY_BASE_S * 2**retries))


def run_sync(app: Celery, source_id: str, hints: list[str] | None, token: str | None, run_id: str | None) -> None:
    """Run the sync `enqueue_sync` queued with `token`, its source's sync lease, which is kept extended while
    the sync runs (a sync may outlast `sync_lease_s`) and released when it ends."""
    rt = runtime(app)
    lease = sync_lease(source_id)
    try:
        with job_fields(source_id=source_id, run_id=run_id):
            asyncio.run(_sync(rt.context_for(run_id), source_id, hints, lease, token, rt.settings.sync_lease_s))
    finally:
        if token is not None:
            rt.leases.release(lease, token)
        # A sync asked for while this one was queued or running: run it now, so no change is missed.
        if rt.leases.take_mark(sync_again(source_id)):
            enqueue_sync(app, rt.leases, rt.settings, source_id)


async def _sync(
    ctx: jobs.JobContext, source_id: str, hints: list[str] | None, lease: str, token: str | None, lease_s: float
) -> None:
    # A sync sent without a token (not through `enqueue_sync`) holds no sync lease to keep.
    held = nullcontext() if token is None else ctx.holding(lease, token, lease_s)
    # The sync holds its source's job lease (as each batch does), so an erasure waits for it to end.
    async with held, ctx.running(source_id):
        await jobs.sync_source(ctx, source_id, hints)


def run_ingest(task: Task[Any, None], source_id: str, changes: list[dict[str, Any]], run_id: str | None) -> None:
    rt = runtime(task.app)
    parsed = [Change.model_validate(change) for change in changes]
    batch_id = task.request.id
    started = time.perf_counter()
    try:
        with job_fields(source_id=source_id, batch_id=batch_id, run_id=run_id):
            report = asyncio.run(jobs.ingest_batch(rt.context_for(run_id), source_id, parsed))
            logger.info("batch done: %s", report.model_dump_json())
        record_batch(report, time.perf_counter() - started)
    except UnavailableError as err:
        if task.request.retries >= INGEST_MAX_RETRIES:
            _dead_letter_batch(rt, source_id, parsed, type(err).__name__, err.message)
            rt.deliveries.settle(batch_id)
            return
        logger.warning("engine unavailable, batch %s retried: %s", batch_id, err)
        raise task.retry(exc=err, countdown=retry_delay(task.request.retries), max_retries=INGEST_MAX_RETRIES) from err
    # Any other failure leaves the batch unsettled: Celery acknowledges it, and a sweep sends it again.
    rt.deliveries.settle(batch_id)


def _dead_letter_batch(rt: ClusterRuntime, source_id: str, changes: list[Change], error: str, message: str) -> None:
    committed = rt.state.manifest_entries(source_id, [c.unit_id for c in changes])
    for change in changes:
        if change.action == "upsert" and change.unit_id not in committed:
            rt.state.add_dead_letter(
                DeadLetter(source_id=source_id, unit_id=change.unit_id, stage="store", error=error, message=message)
            )


def run_erase(task: Task[Any, None], erasure_id: str) -> None:
    rt = runtime(task.app)
    final = task.request.retries >= ERASE_MAX_RETRIES
    try:
        with job_fields(erasure_id=erasure_id):
            receipt = asyncio.run(run_erasure(rt.context, erasure_id, give_up=final))
            logger.info("erasure %s: %s", erasure_id, receipt.status)
    except NotFoundError as err:
        logger.error("erasure %s not run: %s", erasure_id, err)
    except Exception as err:
        if not final:
            logger.warning("erasure %s retried: %s", erasure_id, err)
            raise task.retry(
                exc=err, countdown=retry_delay(task.request.retries), max_retries=ERASE_MAX_RETRIES
            ) from err
        logger.error("erasure %s given up after %d retries: %s", erasure_id, task.request.retries, err)
    rt.deliveries.settle(task.request.id)


def run_beat_tick(app: Celery) -> int:
    """Queue a sync of every polled source whose interval has passed (how many were queued), then send again what
    the broker lost."""
    rt = runtime(app)
    due = jobs.due_sources(rt.state, datetime.now(UTC))
    queued = sum(enqueue_sync(app, rt.leases, rt.settings, source_id) for source_id in due)
    sweep_deliveries(rt)
    return queued


def sweep_deliveries(rt: ClusterRuntime) -> Swept:
    """One sweep of the deliveries (`worker.cluster.deliveries`), by one worker at a time; the units of a batch
    given up are dead-lettered."""
    token = rt.leases.acquire(SWEEP_LEASE, SWEEP_LEASE_S)
    if token is None:
        return Swept()
    try:
        swept = rt.deliveries.sweep(older_than_s=rt.settings.visibility_timeout_s)
    finally:
        rt.leases.release(SWEEP_LEASE, token)
    record_sweep(list(swept.resent.values()), [d.task for d in swept.given_up])
    for delivery in swept.given_up:
        logger.error("%s of %s given up after %d sends", delivery.task, delivery.args[0], delivery.resent + 1)
        if delivery.task == INGEST_TASK:
            source_id, changes = delivery.args[0], [Change.model_validate(c) for c in delivery.args[1]]
            _dead_letter_batch(rt, source_id, changes, "Lost", _LOST.format(sends=delivery.resent + 1))
    return swept


def register(app: Celery) -> None:
    """Register the tasks on `app` under their stable names."""

    @app.task(name=SYNC_TASK, ignore_result=True, shared=False)
    def sync_source(
        source_id: str, hints: list[str] | None = None, token: str | None = None, run_id: str | None = None
    ) -> None:
        run_sync(app, source_id, hints, token, run_id)

    @app.task(name=INGEST_TASK, bind=True, ignore_result=True, shared=False)
    def ingest_batch(
        self: Task[Any, None], source_id: str, changes: list[dict[str, Any]], run_id: str | None = None
    ) -> None:
        run_ingest(self, source_id, changes, run_id)

    @app.task(name=ERASE_TASK, bind=True, ignore_result=True, shared=False)
    def run_erasure(self: Task[Any, None], erasure_id: str) -> None:
        run_erase(self, erasure_id)

    @app.task(name=BEAT_TASK, ignore_result=True, shared=False)
    def beat_tick() -> int:
        return run_beat_tick(app)
