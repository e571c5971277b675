"""The job functions every runtime calls, and what they run with.

    sync_source   (`sync`)    list a source's units (or what changed since its cursor), diff them against the
                              manifest, hand the changes to the dispatcher in batches
    ingest_batch  (`ingest`)  one batch through read → convert → items → store_many, checkpointed after every
                              acknowledged call

The third job, `run_erasure`, is the erasure feature's (`worker.erasure.job`).

Both are idempotent: item ids are fingerprints and the manifest is committed only after the engine
acknowledged, so a redelivered job is a replay. `JobContext` (`context`) names what a runtime provides
as small protocols; the embedded and the Celery runtimes build one each.
"""

from worker.jobs.context import (
    JOB_LEASE_S,
    Converter,
    Dispatcher,
    JobContext,
    PipelineSettings,
    Progress,
    Readers,
    TextPreparer,
    WarmableConverter,
    job_lease,
)
from worker.jobs.ingest import MIN_TEXT_UNITS, ingest_batch, needs_converter_worker
from worker.jobs.prepared import Prepared, TextJob, UnitReading, UnitStageError
from worker.jobs.sync import MAX_BATCH_CHANGES, diff_delta, diff_units, due_sources, sync_source
from worker.jobs.units import read_text_unit, read_unit

__all__ = [
    "JOB_LEASE_S",
    "MAX_BATCH_CHANGES",
    "MIN_TEXT_UNITS",
    "Converter",
    "Dispatcher",
    "JobContext",
    "PipelineSettings",
    "Prepared",
    "Progress",
    "Readers",
    "TextJob",
    "TextPreparer",
    "UnitReading",
    "UnitStageError",
    "WarmableConverter",
    "diff_delta",
    "diff_units",
    "due_sources",
    "ingest_batch",
    "job_lease",
    "needs_converter_worker",
    "read_text_unit",
    "read_unit",
    "sync_source",
]
