"""What a job runs with: the state store, the engine, the converter, the dispatcher, settings, progress."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential, wait_random

from engines.contract import Error, Item, MemoryEngine, StoreReceipt
from pipeline.convert import ConvertedDocument, RawDocument
from pipeline.scrub import Policy, SanitizationReport
from worker.model import Change
from worker.readers import Readers
from worker.state import StateStore

if TYPE_CHECKING:
    from worker.textprep import TextPool


class Converter(Protocol):
    """Turns a unit's bytes into markdown (the converter pool, or an in-process chain in tests)."""

    async def aconvert(self, raw: RawDocument) -> ConvertedDocument: ...


class Dispatcher(Protocol):
    """Where `sync_source` sends its batches: run them here, or queue them for workers.

    `bulk` marks the batches of a sync that found more than one batch of changes (a backfill), so a
    distributed dispatcher can queue them behind small, incremental ones.
    """

    async def ingest(self, source_id: str, changes: list[Change], *, bulk: bool = False) -> None: ...


class Progress:
    """Receives progress of long work; the default ignores it (the CLI draws a bar from it)."""

    def planned(self, units: int) -> None:
        """A sync found this many changed units to process."""

    def advanced(self, units: int = 0, items: int = 0, failed: int = 0) -> None:
        """Units done (stored, unchanged or deleted), items written, units dead-lettered."""

    def redacted(self, report: SanitizationReport) -> None:
        """One item was scrubbed with this report."""


@dataclass(frozen=True)
class PipelineSettings:
    """The pipeline's knobs, as typed values (the runtime reads them from configuration)."""

    item_max_chars: int = 8 * 1024 * 1024
    convert_concurrency: int = 4
    store_attempts: int = 5
    store_backoff_s: float = 0.5
    store_backoff_max_s: float = 30.0
    scrub_policy: Policy = field(default_factory=Policy)
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
    text_pool: TextPool | None = None

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
