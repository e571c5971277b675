"""Legacy imports for the API and the console: start one, and follow it by its record.

With Redis state the import is queued for the workers (`tm.backfill`, in slices); with embedded state it runs
in this process, in the background, over the services' own engine. Either way its record in the data
directory says where it stands.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from engines.contract import InvalidRequestError, MemoryEngine
from worker.legacy.job import (
    LegacyImportRecord,
    LegacyImportRequest,
    LegacyImports,
    canonical_workspace,
    import_id,
    import_legacy,
)
from worker.settings import Settings
from worker.state.base import StateStore
from worker.wiring import legacy_import_settings

logger = logging.getLogger(__name__)


class Services(Protocol):
    """What an import runs against: the settings, the engine and the state store (`worker.control.Services`)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def embedded(self) -> bool: ...

    def engine(self) -> MemoryEngine: ...

    def state(self) -> StateStore: ...


_RUNNING: set[asyncio.Task[LegacyImportRecord]] = set()


async def start_legacy_import(services: Services, request: LegacyImportRequest) -> LegacyImportRecord:
    """Start (or resume) the import; answered at once with its record, whose id follows it."""
    settings = services.settings
    if not services.embedded:
        from worker.cluster.celery_app import create_app
        from worker.legacy.tasks import queue_legacy_import

        return queue_legacy_import(create_app(settings), settings, request)
    engine_id = request.engine or settings.engine
    if engine_id != settings.engine:
        raise InvalidRequestError(
            f"this process serves engine {settings.engine}; import into it, or use the command line"
        )
    records = LegacyImports(settings.data_dir)
    record_id = import_id(canonical_workspace(request.path), engine_id, request.node())
    job = legacy_import_settings(settings, in_task=False)
    importing = import_legacy(request, services.engine(), engine_id, records, settings=job, erasures=services.state())
    task = asyncio.create_task(importing)
    _RUNNING.add(task)
    task.add_done_callback(_finished)
    await asyncio.sleep(0.05)  # its record is written as it starts; a bad path fails it at once
    return records.get(record_id) or LegacyImportRecord(
        id=record_id, workspace=str(canonical_workspace(request.path)), engine=engine_id, namespace=str(request.node())
    )


def legacy_import_status(services: Services, record_id: str) -> LegacyImportRecord:
    """An import's record; `NotFoundError` for an unknown id."""
    return LegacyImports(services.settings.data_dir).require(record_id)


def legacy_imports(services: Services) -> list[LegacyImportRecord]:
    """Every import's record, most recently updated first."""
    return LegacyImports(services.settings.data_dir).all()


def _finished(task: asyncio.Task[LegacyImportRecord]) -> None:
    _RUNNING.discard(task)
    if not task.cancelled() and task.exception() is not None:
        # The record says why; this is for the log.
        logger.warning("legacy import stopped: %s", task.exception())
