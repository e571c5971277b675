"""What the settings name, opened or built: the state store, the engine, and the pipeline's typed settings.

Runtimes and commands open these here, so every process reads the same settings the same way.
"""

from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable

from engines.contract import MemoryEngine
from pipeline.convert import ConvertLimits, ocr_unavailable
from pipeline.items import ItemRules
from pipeline.scrub import Policy
from sources import ReaderOptions
from worker.jobs import PipelineSettings
from worker.legacy.job import LegacyImportSettings
from worker.settings import Settings
from worker.state.base import StateStore

MIB = 1024 * 1024

logger = logging.getLogger(__name__)


@runtime_checkable
class Closeable(Protocol):
    """Something that holds resources (a file, threads, a connection) until closed."""

    def close(self) -> None: ...


def open_state(settings: Settings) -> StateStore:
    """The configured state store. Redis's client is imported only when Redis is chosen."""
    if settings.state == "redis":
        from worker.redis.client import redis_from_url
        from worker.state.redis import RedisStateStore

        return RedisStateStore(redis_from_url(settings.redis_url), prefix=settings.redis_prefix)
    from worker.state.sqlite import SqliteStateStore

    return SqliteStateStore(settings.state_file)


def open_engine(settings: Settings) -> MemoryEngine:
    """The configured engine, with the configured credential."""
    return settings.memory_config().build(settings.credential())


def close_engine(engine: MemoryEngine) -> None:
    """Release an engine's resources when it holds any (the local engine's file and threads)."""
    # Closing is not part of the contract: only engines that hold resources offer it.
    if isinstance(engine, Closeable):
        engine.close()


def reader_options(settings: Settings) -> ReaderOptions:
    if settings.allow_private_networks:
        logger.warning("allow_private_networks is on: network sources may reach private and loopback addresses")
    token = settings.github_token
    return ReaderOptions(
        max_file_bytes=int(settings.max_file_mb * MIB),
        allow_private_networks=settings.allow_private_networks,
        user_agent=settings.user_agent,
        fetch_timeout_s=settings.fetch_timeout_s,
        github_api_url=settings.github_api_url,
        github_token=token.get_secret_value() if token is not None else None,
    )


def convert_limits(settings: Settings) -> ConvertLimits:
    return ConvertLimits(
        timeout_s=settings.convert_timeout_s, memory_bytes=settings.convert_memory_mb * MIB, ocr=settings.ocr
    )


_OCR_WARNED: set[str] = set()


def check_ocr(settings: Settings) -> None:
    """At start-up: a language the settings name that is not installed stops the process (`ConfigError`); a
    build that cannot read scans at all says so once, in the log, and its scans and images are dead-lettered
    with the reason."""
    reason = ocr_unavailable(settings.ocr)
    if reason is not None and reason not in _OCR_WARNED and settings.ocr.enabled:
        _OCR_WARNED.add(reason)
        logger.warning("scanned PDFs and images cannot be read: %s", reason)


def scrub_policy(settings: Settings) -> Policy:
    """How every item a process stores is scrubbed: the default rules, with the settings' regions."""
    return Policy(regions=settings.scrub.regions)


def legacy_import_settings(settings: Settings, *, in_task: bool) -> LegacyImportSettings:
    """How a legacy import stores: scrubbed as every other item is, as patient as a sync with the engine."""
    attempts = settings.task_store_attempts if in_task else settings.store_attempts
    return LegacyImportSettings(policy=scrub_policy(settings), store_attempts=attempts)


def pipeline_settings(settings: Settings, converter_processes: int, *, in_task: bool) -> PipelineSettings:
    """The jobs' settings in a process with `converter_processes` converters; `in_task` for a Celery task,
    which leaves a still-unavailable engine to the task's own retries instead of dead-lettering."""
    concurrency = settings.convert_concurrency or max(2, converter_processes * 2)
    return PipelineSettings(
        items=ItemRules(item_max_chars=settings.item_max_chars, scrub_policy=scrub_policy(settings)),
        convert_concurrency=concurrency,
        store_attempts=settings.task_store_attempts if in_task else settings.store_attempts,
        dead_letter_unavailable=not in_task,
    )
