"""`tinymemory ingest` and `tinymemory up`: embedded ingestion with a live progress bar."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from engines.contract import Error
from pipeline.scrub import SanitizationReport
from worker.context import Progress as JobProgress
from worker.embedded import EmbeddedRuntime
from worker.model import BatchReport, SourceConfigKind, SourceEntry, SyncReport
from worker.settings import Settings

if TYPE_CHECKING:
    from sources import FolderWatcher

logger = logging.getLogger(__name__)
console = Console(stderr=True)


class BarProgress(JobProgress):
    """Feeds the job's progress into a rich bar: units, items, errors, rate."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.task = bar.add_task("ingesting", total=None, items=0, errors=0, rate="")
        self.items = self.errors = self.redactions = self.done = 0
        self.started = time.monotonic()

    def planned(self, units: int) -> None:
        self.bar.update(self.task, total=units)

    def advanced(self, units: int = 0, items: int = 0, failed: int = 0) -> None:
        self.items += items
        self.errors += failed
        self.done += units + failed
        elapsed = time.monotonic() - self.started
        rate = f" · {self.done / elapsed:,.0f} files/s" if elapsed > 0.5 else ""
        self.bar.update(self.task, advance=units + failed, items=self.items, errors=self.errors, rate=rate)

    def redacted(self, report: SanitizationReport) -> None:
        total = report.blocked_secret_hits + report.text_redactions + report.key_redactions + report.pii_redactions
        self.redactions += total


def _bar(quiet: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("files · {task.fields[items]} items · {task.fields[errors]} errors{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
        transient=False,
    )


@dataclass(frozen=True)
class Summary:
    """What one sync did, for people and for `--json`."""

    source: str
    files_listed: int
    files_changed: int
    files_deleted: int
    files_skipped: int
    items_stored: int
    items_replayed: int
    items_forgotten: int
    errors: int
    seconds: float

    @property
    def files_per_second(self) -> float | None:
        return round((self.files_changed + self.files_deleted) / self.seconds, 1) if self.seconds > 0 else None

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "files_per_second": self.files_per_second}


def summarise(sync: SyncReport, batches: list[BatchReport], seconds: float) -> Summary:
    return Summary(
        source=sync.source_id,
        files_listed=sync.listed,
        files_changed=sync.upserts,
        files_deleted=sync.deletes,
        files_skipped=sync.skipped,
        items_stored=sum(b.stored for b in batches),
        items_replayed=sum(b.replayed for b in batches),
        items_forgotten=sum(b.forgotten for b in batches),
        errors=sum(b.failed for b in batches) + sync.skipped,
        seconds=round(seconds, 3),
    )


def _print_summary(summary: Summary, runtime: EmbeddedRuntime, as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary.as_dict()))
        return
    console.print(
        f"[green]done[/] in {summary.seconds} s: {summary.files_listed} files listed, "
        f"{summary.files_changed} changed, {summary.files_deleted} deleted; "
        f"{summary.items_stored} items stored, {summary.items_replayed} unchanged, "
        f"{summary.items_forgotten} forgotten; {summary.errors} errors"
    )
    for letter in runtime.state.dead_letters(summary.source, limit=5):
        console.print(f"  [red]✗[/] {letter.unit_id} ({letter.stage}): {letter.message}")
    if summary.errors:
        console.print("  see them all with: tinymemory dlq list")


async def _sync_once(runtime: EmbeddedRuntime, path: Path, as_json: bool) -> int:
    entry = runtime.source_for_path(path)
    started = time.perf_counter()
    sync, batches = await runtime.sync(entry.id)
    _print_summary(summarise(sync, batches, time.perf_counter() - started), runtime, as_json)
    return 0


async def run_ingest(settings: Settings, path: Path, as_json: bool) -> int:
    """Ingest once; the exit status is 0 even when some files failed (they are dead letters)."""
    with _bar(quiet=as_json) as bar:
        try:
            with EmbeddedRuntime(settings, BarProgress(bar)) as runtime:
                return await _sync_once(runtime, path, as_json)
        except Error as err:
            console.print(f"[red]error:[/] {err}")
            return 2


def _watcher_for(runtime: EmbeddedRuntime, entry: SourceEntry, on_change: Callable[[set[str]], None]) -> FolderWatcher:
    """A watcher on the source's folder (a file source watches its own folder, not recursively, for it alone)."""
    from sources import FolderWatcher

    reader = runtime.context.readers.reader_for(entry)
    if entry.kind is SourceConfigKind.FILE:
        name = Path(entry.path or "").name
        return FolderWatcher(reader.root, on_change, ignore=lambda unit_id: unit_id != name, recursive=False)
    ignores = getattr(reader, "ignores", None)
    return FolderWatcher(reader.root, on_change, ignore=ignores)


async def run_up(settings: Settings, path: Path) -> int:
    """Ingest, then watch PATH and sync what changes until interrupted."""
    from sources import RESCAN

    with EmbeddedRuntime(settings) as runtime:
        try:
            entry = runtime.source_for_path(path)
            await _sync_once(runtime, path, as_json=False)
        except Error as err:
            console.print(f"[red]error:[/] {err}")
            return 2
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        lock = asyncio.Lock()

        async def follow(hints: set[str] | None) -> None:
            async with lock:
                sync, batches = await runtime.sync(entry.id, hints)
                if sync.upserts or sync.deletes:
                    _print_summary(summarise(sync, batches, 0.0), runtime, as_json=False)

        def on_change(changed: set[str]) -> None:
            hints = None if RESCAN in changed else changed
            asyncio.run_coroutine_threadsafe(follow(hints), loop)

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        watch_root = Path(entry.path or path)
        watcher = _watcher_for(runtime, entry, on_change)
        watcher.start()
        console.print(f"watching {watch_root} (Ctrl-C to stop)")
        try:
            await stop.wait()
        finally:
            watcher.stop()
            async with lock:  # let a running sync finish its batch cleanly
                pass
        console.print("stopped")
        return 0
