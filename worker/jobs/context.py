"""What a job runs with: the state store, the engine, the converter, the dispatcher, readers, settings, progress.

Each part is a small protocol, so a runtime (embedded or Celery) or a test gives its own: the jobs never know
which dispatcher, converter, state store or text preparer they were given.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential, wait_random

from engines.contract import Error, Item, MemoryEngine, StoreReceipt
from pipeline.convert import ConvertedDocument, RawDocument
from pipeline.items import ItemRules
from pipeline.scrub import SanitizationReport
from sources import ReaderOptions, SourceEntry, SourceKindEntry, SourceReader
from worker.jobs.prepared import Prepared, TextJob
from worker.records import Change, DeadLetter
from worker.state.base import StateStore

logger = logging.getLogger(__name__)

JOB_LEASE_S = 30.0
"""How long a running job's hold on its source lasts unless renewed (every third of it while the job runs):
a job that dies lets an erasure waiting for it go on after this long at most."""


def job_lease(source_id: str) -> str:
    """The shared lease every running sync and ingest job of a source holds (an erasure waits for them)."""
    return f"jobs:{source_id}"


class Converter(Protocol):
    """Turns a unit's bytes into markdown (the converter pool, or an in-process chain in tests)."""

    async def aconvert(self, raw: RawDocument) -> ConvertedDocument: ...


@runtime_checkable
class WarmableConverter(Protocol):
    """A converter whose processes can be started ahead of the first document (the converter pool)."""

    def warm(self) -> None:
        """Start the converter processes without waiting for them."""
        ...


class Dispatcher(Protocol):
    """Where `sync_source` sends its batches: run them here, or queue them for workers.

    `bulk` marks the batches of a sync that found more than one batch of changes (a backfill), so a
    distributed dispatcher can queue them behind small, incremental ones.
    """

    async def ingest(self, source_id: str, changes: list[Change], *, bulk: bool = False) -> None: ...


class Readers(Protocol):
    """Builds the reader of a configured source (`sources.SourceReaders`, or a test's own)."""

    @property
    def options(self) -> ReaderOptions: ...

    def reader_for(self, entry: SourceEntry) -> SourceReader: ...

    def kind_entry(self, kind: str) -> SourceKindEntry:
        """Where the kind's module is, so a text preparation process builds the same reader."""
        ...


class TextPreparer(Protocol):
    """Processes that read, scrub and chunk a batch's text units while the batch's own process stores.

    `prepare` answers None when it cannot take the job now (not started yet, a process died): the caller
    prepares the units itself.
    """

    def warm(self, *, wait: bool = True) -> None: ...

    async def prepare(self, job: TextJob) -> list[Prepared] | None: ...


class Progress:
    """Receives progress of long work; the default only logs dead letters (the CLI draws a bar instead)."""

    def planned(self, units: int) -> None:
        """A sync found this many changed units to process."""

    def advanced(self, units: int = 0, items: int = 0, failed: int = 0) -> None:
        """Units done (stored, unchanged or deleted), items written, units dead-lettered."""

    def redacted(self, report: SanitizationReport) -> None:
        """One item was scrubbed with this report."""

    def dead_lettered(self, letter: DeadLetter) -> None:
        """A unit could not be ingested (the letter is already recorded)."""
        logger.warning("dead letter: %s %s at %s: %s", letter.source_id, letter.unit_id, letter.stage, letter.message)


@dataclass(frozen=True)
class PipelineSettings:
    """The pipeline's knobs, as typed values (the runtime reads them from configuration)."""

    items: ItemRules = field(default_factory=ItemRules)
    convert_concurrency: int = 4
    store_attempts: int = 5
    store_backoff_s: float = 0.5
    store_backoff_max_s: float = 30.0
    # Embedded mode dead-letters units the engine still refuses as unavailable after the retries; a
    # Celery worker instead lets the error out, so the task is retried later with a longer backoff.
    dead_letter_unavailable: bool = True


@dataclass
class JobContext:
    state: StateStore
    engine: MemoryEngine
    converter: Converter
    dispatcher: Dispatcher
    readers: Readers
    settings: PipelineSettings = field(default_factory=PipelineSettings)
    progress: Progress = field(default_factory=Progress)
    # Processes that prepare text units (embedded mode); None prepares them in this process.
    text_pool: TextPreparer | None = None

    def retrying_store_many(self) -> Callable[[list[Item]], Awaitable[list[StoreReceipt]]]:
        """`engine.store_many`, retried with exponential backoff and jitter while it is unavailable."""
        settings = self.settings

        async def store_many(items: list[Item]) -> list[StoreReceipt]:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception(lambda err: isinstance(err, Error) and err.is_transient()),
                stop=stop_after_attempt(settings.store_attempts),
                wait=wait_exponential(multiplier=settings.store_backoff_s, max=settings.store_backoff_max_s)
                + wait_random(0, settings.store_backoff_s),
                reraise=True,
            ):
                with attempt:
                    return await self.engine.store_many(items)
            raise AssertionError("unreachable: tenacity either returns or re-raises")

        return store_many

    @asynccontextmanager
    async def running(self, source_id: str, ttl_s: float = JOB_LEASE_S) -> AsyncIterator[None]:
        """Hold the source's job lease while the block runs, renewed in the background.

        Take it before reading the source's tombstones: an erasure writes its tombstone before it looks at
        who holds the lease, so a job either is among those it waits for or sees the tombstone.
        """
        leases = self.state.leases()
        name = job_lease(source_id)
        token = leases.join(name, ttl_s)
        try:
            async with kept_alive(name, ttl_s, lambda: leases.renew(name, token, ttl_s), _REJOINED):
                yield
        finally:
            leases.leave(name, token)

    def holding(self, name: str, token: str, ttl_s: float) -> AbstractAsyncContextManager[None]:
        """Keep the exclusive lease `name`, which `acquire` gave `token`, extended while the block runs.

        A lease found lost (it lapsed, and another may own it now) is logged and the block goes on: the
        work it does is idempotent, and stopping it halfway would leave more to redo than finishing it.
        """
        leases = self.state.leases()
        return kept_alive(name, ttl_s, lambda: leases.extend(name, token, ttl_s), _LOST)


_REJOINED = "the job lease %s had lapsed (the loop was held up); held again"
_LOST = "the lease %s lapsed before its holder ended; another may own it now"


@asynccontextmanager
async def kept_alive(name: str, ttl_s: float, renew: Callable[[], bool], lapsed: str) -> AsyncIterator[None]:
    """Call `renew` every third of `ttl_s` while the block runs, so the lease `name` outlives slow work.

    `renew` answers False when the hold had lapsed before it came: `lapsed` (a format with one `%s`, the
    name) is logged then. A state store that fails a renewal is logged too; the next one may reach it in time.
    """
    renewing = asyncio.create_task(_renew(name, ttl_s, renew, lapsed))
    try:
        yield
    finally:
        renewing.cancel()


async def _renew(name: str, ttl_s: float, renew: Callable[[], bool], lapsed: str) -> None:
    while True:
        await asyncio.sleep(ttl_s / 3)
        try:
            if not renew():
                logger.warning(lapsed, name)
        except Error as err:  # the state blinked: the next renewal may reach it, still within the lease
            logger.warning("renewing the lease %s failed: %s", name, err)
