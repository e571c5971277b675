"""`import_legacy`: a v1 TinyCortex workspace copied into the engine as a job, resumable across runs.

The import's record (`LegacyImportRecord`: where it stands, its checkpoint, what it stored and skipped) is a
JSON file in the data directory, written after every batch the engine acknowledged. Running the same import
again (same workspace, engine and namespace) resumes from it; one that completed starts over, and since item
ids are fingerprints its items come back as replays. A process that dies mid-import leaves the record at its
last batch, and an exclusive lock on the record (released by the OS with the process) keeps two runs of one
import apart. The command line runs the job here; a `tm.backfill` task (`worker.legacy.tasks`) runs
it in slices on the workers.

What was erased stays erased, as for every other ingest job (`worker.erasure.guard`): an erasure of
every kind where the import stores refuses it (`ConflictError`, the record `failed`); items of an erased kind
are left out and counted with the skipped rows.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, Field, ValidationError

from engines.contract import (
    ConflictError,
    Error,
    InvalidRequestError,
    MemoryEngine,
    Namespace,
    NotFoundError,
    UnavailableError,
)
from pipeline.legacy import (
    HELPER_FROM_ITEMS,
    Checkpoint,
    LegacyImportError,
    LegacyIoError,
    LegacyNotFound,
    LegacyWorkspace,
    MigrationFailed,
    MigrationReport,
    NotLegacy,
    ReadStats,
    migrate_with,
)
from pipeline.scrub import Policy
from worker.erasure.guard import ErasureGuard, Erasures

logger = logging.getLogger(__name__)

RECORDS_FOLDER = "legacy-imports"
"""The data directory's folder of import records (`<id>.json`) and their locks (`<id>.lock`)."""

ImportStatus = Literal["queued", "running", "paused", "completed", "failed"]


class LegacyImportRequest(BaseModel):
    """What to import: a workspace folder (read where the job runs), the namespace to store under (the
    root when None), the engine id (the configured one when None), and whether to ignore the checkpoint."""

    path: str
    namespace: str | None = None
    engine: str | None = None
    restart: bool = False

    def node(self) -> Namespace:
        """The namespace to store under; a malformed one is `InvalidRequestError`."""
        return Namespace.ROOT if self.namespace is None else Namespace.parse(self.namespace)


class LegacyImportRecord(BaseModel):
    """Where one import stands. `stored`, `replayed` and `batches` are exact over all its runs; rows read
    and skipped are counted as read, so after an interruption the rows since the checkpoint count twice."""

    id: str
    workspace: str
    engine: str
    namespace: str
    status: ImportStatus = "queued"
    checkpoint: Checkpoint = Field(default_factory=Checkpoint)
    planned: int | None = None
    rows_read: int = 0
    stored: int = 0
    replayed: int = 0
    batches: int = 0
    skipped: dict[str, int] = Field(default_factory=dict)
    error: str | None = None
    runs: int = 0
    stalls: int = 0
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    updated_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None

    @property
    def items(self) -> int:
        return self.stored + self.replayed

    @property
    def skipped_rows(self) -> int:
        return sum(self.skipped.values())

    def started_over(self) -> LegacyImportRecord:
        """The same import from the beginning, nothing counted yet."""
        fresh = LegacyImportRecord(id=self.id, workspace=self.workspace, engine=self.engine, namespace=self.namespace)
        return fresh.model_copy(update={"created_at": self.created_at, "runs": self.runs})


def import_id(workspace: Path, engine: str, namespace: Namespace) -> str:
    """One import's id: the same workspace, engine and namespace is the same import (and resumes)."""
    digest = hashlib.sha256(f"{workspace}\n{engine}\n{namespace}".encode()).hexdigest()
    return f"legacy-{digest[:16]}"


def canonical_workspace(path: str) -> Path:
    """The workspace path as item ids know it (resolved; a missing folder resolves as far as it can). A path no
    folder can have (a NUL byte, `~user` with no such user) is `InvalidRequestError`."""
    try:
        return Path(path).expanduser().resolve()
    except (ValueError, RuntimeError, OSError) as err:
        raise InvalidRequestError(
            f"workspace path {path!r} cannot be a folder ({err}); give a v1 workspace's folder"
        ) from None


class LegacyImports:
    """Import records in a folder of the data directory, each replaced whole on every write."""

    def __init__(self, data_dir: Path) -> None:
        self.folder = data_dir / RECORDS_FOLDER

    def get(self, record_id: str) -> LegacyImportRecord | None:
        """The record, or None when there is none (or it is unreadable: the import then starts over)."""
        path = self._path(record_id)
        try:
            return LegacyImportRecord.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValidationError) as err:
            logger.warning("legacy import record %s is unreadable, the import starts over: %s", path, err)
            return None

    def require(self, record_id: str) -> LegacyImportRecord:
        record = self.get(record_id)
        if record is None:
            raise NotFoundError(f"no legacy import {record_id}; `tinymemory import-legacy PATH` starts one")
        return record

    def all(self) -> list[LegacyImportRecord]:
        """Every readable record, most recently updated first."""
        names = sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []
        records = [record for record in (self.get(path.stem) for path in names) if record is not None]
        return sorted(records, key=lambda record: record.updated_at, reverse=True)

    def put(self, record: LegacyImportRecord) -> LegacyImportRecord:
        """Write `record` (stamped now) in place of the old one: a reader sees the old or the new, whole."""
        stamped = record.model_copy(update={"updated_at": datetime.now(UTC)})
        path = self._path(record.id)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            partial.write_text(stamped.model_dump_json(indent=2))
            # No fsync: a checkpoint lost to a power cut is an older one, and resuming from it only replays.
            partial.replace(path)
        except OSError as err:
            raise UnavailableError(f"cannot write the legacy import record {path}: {err.strerror or err}") from err
        return stamped

    @contextmanager
    def claim(self, record_id: str) -> Iterator[None]:
        """Hold the import's lock for the block; `ConflictError` while another process runs it."""
        lock_path = self._path(record_id).with_suffix(".lock")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            lock = lock_path.open("a")
        except OSError as err:
            raise UnavailableError(f"cannot open the legacy import lock {lock_path}: {err.strerror or err}") from err
        with lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ConflictError(f"legacy import {record_id} is running in another process") from None
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _path(self, record_id: str) -> Path:
        if not record_id.replace("-", "").isalnum():
            raise InvalidRequestError(f"legacy import id `{record_id}` is malformed")
        return self.folder / f"{record_id}.json"


class ImportProgress(Protocol):
    """Hears how an import goes: once when it starts (its record, with `planned` items), then after each
    batch the engine acknowledged."""

    def started(self, record: LegacyImportRecord) -> None: ...

    def advanced(self, record: LegacyImportRecord) -> None: ...


class _Silent:
    def started(self, record: LegacyImportRecord) -> None:
        """Nobody is listening."""

    def advanced(self, record: LegacyImportRecord) -> None:
        """Nobody is listening."""


@dataclass(frozen=True)
class LegacyImportSettings:
    """How the job stores: the scrub policy, how often (and how patiently) an unavailable engine is tried
    again before the import stops, resumable, and from how many items a helper process reads the workspace
    (`pipeline.legacy.migrate_with`; None: never)."""

    policy: Policy = field(default_factory=Policy)
    store_attempts: int = 5
    backoff_s: float = 0.5
    backoff_max_s: float = 30.0
    helper_from: int | None = HELPER_FROM_ITEMS


class _TimeIsUp(Exception):  # noqa: N818 - a signal, not an error
    """The run's time is up; the checkpoint just saved is where the next run starts."""


async def import_legacy(
    request: LegacyImportRequest,
    engine: MemoryEngine,
    engine_id: str,
    records: LegacyImports,
    *,
    settings: LegacyImportSettings | None = None,
    progress: ImportProgress | None = None,
    deadline: float | None = None,
    erasures: Erasures | None = None,
) -> LegacyImportRecord:
    """Import the workspace (or resume it), saving the record after every batch; return the final record.

    With `deadline` (a `time.monotonic()` instant) the run stops after the first batch past it, as
    `paused`, and a later run goes on from there. A workspace that cannot be opened or read, or an engine
    that keeps failing, leaves the record `failed` and raises a contract error naming the cause. `erasures`
    is the state whose tombstones the import keeps to; every host passes its own (None: nothing was erased,
    as in a benchmark's fresh engine).
    """
    node = request.node()
    workspace = canonical_workspace(request.path)
    record_id = import_id(workspace, engine_id, node)
    with records.claim(record_id):
        held = records.get(record_id)
        record = _starting(held, request, record_id, str(workspace), engine_id, str(node))
        job = _Job(records, record, progress or _Silent(), deadline, ErasureGuard(erasures, node))
        try:
            with _opened(workspace) as opened:
                await job.run(opened, engine, node, settings or LegacyImportSettings())
        except _TimeIsUp:
            return job.finish("paused")
        except Error as err:
            job.finish("failed", err.message)
            raise
        return job.finish("completed")


def _starting(
    held: LegacyImportRecord | None,
    request: LegacyImportRequest,
    record_id: str,
    workspace: str,
    engine: str,
    namespace: str,
) -> LegacyImportRecord:
    """The record a run starts from: the held one to resume, else a fresh one (a finished import, or
    `restart`, starts over)."""
    if held is None:
        return LegacyImportRecord(id=record_id, workspace=workspace, engine=engine, namespace=namespace)
    if request.restart or held.status == "completed":
        return held.started_over()
    return held


class _Job:
    """One run of an import: its record so far, kept in step with the engine's acknowledgements."""

    def __init__(
        self,
        records: LegacyImports,
        record: LegacyImportRecord,
        progress: ImportProgress,
        deadline: float | None,
        guard: ErasureGuard,
    ) -> None:
        self.records = records
        self.record = record
        self.progress = progress
        self.deadline = deadline
        self.guard = guard
        self.stats = ReadStats()
        self.erased: Counter[str] = Counter()
        self.base = record.model_copy()

    async def run(
        self, workspace: LegacyWorkspace, engine: MemoryEngine, node: Namespace, settings: LegacyImportSettings
    ) -> None:
        self.guard.refuse_if_erased()
        counts = await asyncio.to_thread(workspace.counts)
        self._save(status="running", planned=counts.total, runs=self.record.runs + 1, error=None, finished_at=None)
        self.progress.started(self.record)
        attempt = 1
        while True:
            # Each attempt counts from the record as it stands, with rows counted afresh.
            self.base, self.stats, self.erased = self.record.model_copy(), ReadStats(), Counter()
            report = MigrationReport()
            try:
                await migrate_with(
                    engine,
                    workspace,
                    self.record.checkpoint,
                    self._on_batch(report),
                    policy=settings.policy,
                    namespace=node,
                    stats=self.stats,
                    report=report,
                    keep=self.guard.kept,
                    helper_from=settings.helper_from,
                )
                return
            except MigrationFailed as failed:
                cause = failed.__cause__
                if not (isinstance(cause, Error) and cause.is_transient()) or attempt >= settings.store_attempts:
                    raise
                delay = min(settings.backoff_max_s, settings.backoff_s * 2 ** (attempt - 1))
                logger.warning(
                    "legacy import %s: engine unavailable, resuming in %.1f s: %s", self.record.id, delay, cause
                )
                await asyncio.sleep(delay)
                attempt += 1

    def _on_batch(self, report: MigrationReport) -> Callable[[Checkpoint], None]:
        def committed(checkpoint: Checkpoint) -> None:
            base = self.base
            self.erased.update(self.guard.take_left_out())  # the batch is acknowledged: count what it left out
            self._save(
                checkpoint=checkpoint,
                stored=base.stored + report.stored,
                replayed=base.replayed + report.replayed,
                batches=base.batches + report.batches,
                rows_read=base.rows_read + self.stats.rows,
                skipped=_skipped(base.skipped, self.stats, self.erased),
            )
            self.progress.advanced(self.record)
            if self.deadline is not None and time.monotonic() >= self.deadline:
                raise _TimeIsUp

        return committed

    def finish(self, status: ImportStatus, error: str | None = None) -> LegacyImportRecord:
        finished = datetime.now(UTC) if status in ("completed", "failed") else None
        rows, skipped = self.base.rows_read + self.stats.rows, _skipped(self.base.skipped, self.stats, self.erased)
        self._save(status=status, error=error, finished_at=finished, rows_read=rows, skipped=skipped)
        return self.record

    def _save(self, **changes: object) -> None:
        self.record = self.records.put(self.record.model_copy(update=changes))


def _skipped(before: dict[str, int], stats: ReadStats, erased: Counter[str]) -> dict[str, int]:
    counted = Counter(before)
    counted.update({f"{section}: {reason}": count for (section, reason), count in stats.skipped.items()})
    counted.update(erased)
    return dict(counted)


@contextmanager
def _opened(workspace: Path) -> Iterator[LegacyWorkspace]:
    """The workspace, open for the block; its read failures become contract errors that say what to do."""
    try:
        opened = LegacyWorkspace.open(workspace)
    except LegacyNotFound as err:
        raise NotFoundError(f"{workspace}: no such folder; give the folder of a v1 TinyCortex workspace") from err
    except NotLegacy as err:
        raise InvalidRequestError(f"{workspace} is {err}") from err
    except LegacyImportError as err:
        raise _read_failure(workspace, err) from err
    try:
        with opened:
            yield opened
    except LegacyImportError as err:
        raise _read_failure(workspace, err) from err


def _read_failure(workspace: Path, err: LegacyImportError) -> Error:
    # An I/O error may pass (a network mount); a database SQLite cannot read will not.
    kind = UnavailableError if isinstance(err, LegacyIoError) else InvalidRequestError
    return kind(f"reading the v1 workspace {workspace} failed: {err}; run the import again to resume once it is fixed")
