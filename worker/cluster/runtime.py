"""The distributed runtime: a worker process's job context on Redis, and how syncs are enqueued.

Each worker process (Celery prefork child) builds one `ClusterRuntime` on its first task: the
Redis state store, the configured engine, a converter pool of its own, and a dispatcher that sends
ingest batches to the queues. Enqueueing a sync takes a lease, so a source is never queued or run
twice at once; a sync asked for while one is queued or running is remembered and run right after.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from kombu.exceptions import OperationalError

from engines.contract import MemoryEngine, UnavailableError
from pipeline.convert import ConverterPool
from pipeline.scrub import SanitizationReport
from sources import SourceReaders, register_kinds
from worker.cluster.deliveries import RESEND_LIMIT, Deliveries, celery_send
from worker.cluster.queues import (
    BACKFILL_QUEUE,
    ERASE_QUEUE,
    ERASE_TASK,
    INGEST_QUEUE,
    INGEST_TASK,
    RULES,
    SYNC_QUEUE,
    SYNC_TASK,
)
from worker.jobs import JobContext, Progress
from worker.records import Change, SyncOutcome
from worker.redis.client import redis_from_url
from worker.redis.leases import Leases
from worker.redis.progress import Progress as RunState
from worker.redis.progress import RunProgress
from worker.runs import RunView
from worker.settings import Settings
from worker.state.redis import RedisStateStore
from worker.wiring import check_ocr, close_engine, convert_limits, open_engine, pipeline_settings, reader_options

if TYPE_CHECKING:
    import redis
    from celery import Celery


_CONVERTERS = 1


def sync_lease(source_id: str) -> str:
    return f"sync:{source_id}"


def sync_again(source_id: str) -> str:
    return f"sync-again:{source_id}"


def deliveries_for(app: Celery, client: redis.Redis, settings: Settings) -> Deliveries:
    """The deliveries of the pipeline `settings` describe, sent through `app`."""
    return Deliveries(client, settings.redis_prefix, celery_send(app))


class CeleryDispatcher:
    """Sends ingest batches to `tm.ingest`, or to `tm.backfill` when they belong to a bulk sync, each recorded as a
    delivery (so a batch the broker loses is sent again)."""

    def __init__(self, deliveries: Deliveries, run_id: str | None = None) -> None:
        self.deliveries = deliveries
        self.run_id = run_id

    async def ingest(self, source_id: str, changes: list[Change], *, bulk: bool = False) -> None:
        queue = BACKFILL_QUEUE if bulk else INGEST_QUEUE
        payload = [change.model_dump(mode="json") for change in changes]
        self.deliveries.send(
            uuid.uuid4().hex,
            INGEST_TASK,
            [source_id, payload, self.run_id],
            queue,
            expires_s=RULES[queue].expires_s,
            resends=RESEND_LIMIT,
        )


class RunProgressSink(Progress):
    """Writes a run's progress to Redis, where `tinymemory backfill` reads it live."""

    def __init__(self, progress: RunProgress, run_id: str) -> None:
        self.progress = progress
        self.run_id = run_id

    def planned(self, units: int) -> None:
        self.progress.plan(self.run_id, units)

    def advanced(self, units: int = 0, items: int = 0, failed: int = 0) -> None:
        self.progress.advance(self.run_id, units=units, items=items, failed=failed)

    def redacted(self, report: SanitizationReport) -> None:
        """Redactions are counted in metrics, not in the progress bar."""


class ClusterRuntime:
    """One worker process's connections and job context."""

    def __init__(self, settings: Settings, app: Celery) -> None:
        register_kinds(settings.source_kinds)
        check_ocr(settings)
        self.settings = settings
        self.app = app
        self.redis: redis.Redis = redis_from_url(settings.redis_url)
        self.state = RedisStateStore(self.redis, prefix=settings.redis_prefix)
        self.leases = Leases(self.redis, prefix=settings.redis_prefix)
        self.progress = RunProgress(self.redis, prefix=settings.redis_prefix)
        self.deliveries = deliveries_for(app, self.redis, settings)
        self.engine: MemoryEngine = open_engine(settings)
        # One converter process per pool process: Celery's concurrency is the parallelism.
        self.converter = ConverterPool(_CONVERTERS, convert_limits(settings))
        self.context = JobContext(
            state=self.state,
            engine=self.engine,
            converter=self.converter,
            dispatcher=CeleryDispatcher(self.deliveries),
            readers=SourceReaders(reader_options(settings)),
            settings=pipeline_settings(settings, _CONVERTERS, in_task=True),
        )

    def context_for(self, run_id: str | None) -> JobContext:
        """The job context of one task: its progress goes to the run it belongs to, if any."""
        if run_id is None:
            return self.context
        return dataclasses.replace(
            self.context,
            dispatcher=CeleryDispatcher(self.deliveries, run_id),
            progress=RunProgressSink(self.progress, run_id),
        )

    def close(self) -> None:
        self.converter.close()
        close_engine(self.engine)
        self.redis.close()


def enqueue_sync(
    app: Celery,
    leases: Leases,
    settings: Settings,
    source_id: str,
    hints: list[str] | None = None,
    run_id: str | None = None,
) -> bool:
    """Queue a sync of `source_id` unless one is already queued or running (then it is asked to run again
    once done, so no change is missed). True when this call queued it."""
    token = leases.acquire(sync_lease(source_id), settings.sync_lease_s)
    if token is None:
        leases.mark(sync_again(source_id), settings.sync_lease_s)
        return False
    app.send_task(
        SYNC_TASK, args=[source_id, hints, token, run_id], queue=SYNC_QUEUE, expires=RULES[SYNC_QUEUE].expires_s
    )
    return True


class QueuedSyncs:
    """Asks for syncs by queueing them for the workers (a `worker.control.SyncRunner`), each as a run the
    workers count their progress into (so `runs` shows it, a `worker.control.RunBoard`)."""

    def __init__(self, settings: Settings, app: Celery, client: redis.Redis) -> None:
        self.settings = settings
        self.app = app
        self.leases = Leases(client, prefix=settings.redis_prefix)
        self.progress = RunProgress(client, prefix=settings.redis_prefix)

    async def request_sync(self, source_id: str, hints: Iterable[str] | None = None) -> SyncOutcome:
        listed = None if hints is None else sorted(hints)
        run_id = self.progress.start(source_id=source_id)
        queued = enqueue_sync(self.app, self.leases, self.settings, source_id, hints=listed, run_id=run_id)
        if not queued:
            # The sync already queued or running counts into its own run (or none); this one never starts.
            self.progress.drop(run_id)
        return SyncOutcome(source_id=source_id, status="queued" if queued else "already_queued")

    def runs(self) -> list[RunView]:
        return [_run_view(p) for p in self.progress.runs()]


def _run_view(progress: RunState) -> RunView:
    return RunView(
        id=progress.run_id,
        source_id=progress.source_id,
        planned=progress.planned,
        done=progress.done,
        items=progress.items,
        failed=progress.failed,
        started_at=datetime.fromtimestamp(progress.started, UTC),
        updated_at=datetime.fromtimestamp(progress.updated, UTC),
    )


class QueuedErasures:
    """Queues erasures for the erase workers (a `worker.control.ErasureRunner`); `tm.erase` never lapses, and an
    erasure message the broker loses is sent again for as long as it takes.

    A message that cannot be sent leaves the receipt queued: asking for the same erasure again sends it.
    """

    def __init__(self, deliveries: Deliveries) -> None:
        self.deliveries = deliveries

    async def submit(self, erasure_id: str) -> None:
        try:
            self.deliveries.send(
                uuid.uuid4().hex,
                ERASE_TASK,
                [erasure_id],
                ERASE_QUEUE,
                expires_s=RULES[ERASE_QUEUE].expires_s,
                resends=None,
            )
        except OperationalError as err:
            raise UnavailableError(
                f"cannot queue erasure {erasure_id} ({type(err).__name__}); it stays queued: ask for it again "
                "once the broker answers"
            ) from err
