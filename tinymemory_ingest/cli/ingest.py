"""`tinymemory ingest` and `tinymemory up`: embedded ingestion with a live progress bar.

Dead letters are shown once: the bar collects them while it runs, the summary lists them. An engine that
embeds vectors in the background (the local engine) still has passages queued when a sync ends; `ingest`
waits for them, with a bar of their own, so vector search finds everything once it returns. Its summary says both
times, from the start of the sync: until every item was keyword-searchable (the sync's end: an item is searchable
when it is stored) and until every vector was stored.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from engines.contract import Error, MemoryEngine
from pipeline.scrub import SanitizationReport
from sources import RESCAN, SourceEntry, WatchableSource
from tinymemory_ingest.cli.serving import EmbeddedServer, bind
from worker import control
from worker.embedded import EmbeddedRuntime
from worker.jobs import Progress as JobProgress
from worker.jobs import due_sources
from worker.records import BatchReport, DeadLetter, SyncOutcome, SyncReport
from worker.runs import RunView
from worker.settings import Settings

logger = logging.getLogger(__name__)
console = Console(stderr=True)

SHOWN_LETTERS = 10
"""Dead letters a summary lists one by one; the rest are counted, and `tinymemory dlq list` shows all."""

VECTOR_STALL_S = 60.0
"""How long the vector queue may not shrink before `ingest` stops waiting for it (an embedder that is down)."""

_VECTOR_LOOK_S = 0.25


@runtime_checkable
class VectorQueue(Protocol):
    """An engine that embeds stored passages in the background: how many wait, and a bounded wait for them."""

    async def vector_backlog(self) -> int: ...

    async def wait_for_vectors(self, timeout_s: float = ...) -> bool: ...


class BarProgress(JobProgress):
    """Feeds the job's progress into a rich bar: units, items, errors, rate; keeps the run's dead letters."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.task = bar.add_task("ingesting", total=None, items=0, errors=0, rate="")
        self.items = self.errors = self.redactions = self.done = 0
        self.letters: list[DeadLetter] = []
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

    def dead_lettered(self, letter: DeadLetter) -> None:
        self.letters.append(letter)

    def taken_letters(self) -> list[DeadLetter]:
        """The dead letters since the last call (each summary shows its own run's)."""
        letters, self.letters = self.letters, []
        return letters


_FILES = "files · {task.fields[items]} items · {task.fields[errors]} errors{task.fields[rate]}"


def _bar(quiet: bool, counted: str = _FILES) -> Progress:
    """A bar on standard error: what is done of what, `counted` after the count (files by default)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(counted),
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
    files_without_text: list[str] = field(default_factory=list)
    letters: list[DeadLetter] = field(default_factory=list, compare=False)
    seconds_to_vectors: float | None = None
    """From the sync's start until no passage waited for its vector; None when not waited for, or some still wait."""
    vectors_waiting: int | None = None
    """Passages still waiting for their vectors when `ingest` stopped waiting (None: it did not wait)."""

    @property
    def files_per_second(self) -> float | None:
        return round((self.files_changed + self.files_deleted) / self.seconds, 1) if self.seconds > 0 else None

    @property
    def seconds_to_searchable(self) -> float:
        """Until every item was keyword-searchable: the sync itself, as `store_many` makes an item searchable."""
        return self.seconds

    def as_dict(self) -> dict[str, object]:
        shown = {k: v for k, v in asdict(self).items() if k != "letters"}
        return {**shown, "files_per_second": self.files_per_second, "seconds_to_searchable": self.seconds_to_searchable}


def summarise(sync: SyncReport, batches: list[BatchReport], seconds: float, letters: list[DeadLetter]) -> Summary:
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
        files_without_text=[unit for b in batches for unit in b.no_text],
        letters=letters,
    )


def _print_summary(summary: Summary, as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary.as_dict()))
        return
    console.print(
        f"[green]done[/] in {summary.seconds} s: {summary.files_listed} files listed, "
        f"{summary.files_changed} changed, {summary.files_deleted} deleted; "
        f"{summary.items_stored} items stored, {summary.items_replayed} unchanged, "
        f"{summary.items_forgotten} forgotten; {summary.errors} errors"
    )
    for skipped in summary.files_without_text[:SHOWN_LETTERS]:
        console.print(f"  [yellow]–[/] skipped {escape(skipped)}")
    if len(summary.files_without_text) > SHOWN_LETTERS:
        console.print(f"  {len(summary.files_without_text) - SHOWN_LETTERS} more skipped for holding no text")
    for letter in summary.letters[:SHOWN_LETTERS]:
        console.print(f"  [red]✗[/] {escape(letter.unit_id)} ({letter.stage}): {escape(letter.message)}")
    hidden = len(summary.letters) - SHOWN_LETTERS
    if hidden > 0 or summary.errors > len(summary.letters):
        more = f"{hidden} more; " if hidden > 0 else ""
        console.print(f"  {more}see them all with: tinymemory dlq list")


async def _sync_once(runtime: EmbeddedRuntime, progress: BarProgress | None, source_id: str) -> Summary:
    started = time.perf_counter()
    sync, batches = await runtime.sync(source_id)
    letters = progress.taken_letters() if progress is not None else []
    return summarise(sync, batches, time.perf_counter() - started, letters)


async def run_ingest(settings: Settings, path: Path, as_json: bool, *, wait_vectors: bool = True) -> int:
    """Ingest once, then (with `wait_vectors`) wait for the engine's background vectors; the exit status is 0
    even when some files failed (they are dead letters) or vectors are left queued (embedded at the next open).
    The JSON summary comes last, once the vectors were waited for, so it can say how long they took."""
    with _bar(quiet=as_json) as bar:
        progress = BarProgress(bar)
        try:
            with EmbeddedRuntime(settings, progress) as runtime:
                entry = control.ensure_local_source(runtime.state, path)
                started = time.perf_counter()
                summary = await _sync_once(runtime, progress, entry.id)
                if not as_json:
                    _print_summary(summary, as_json=False)
                bar.stop()  # rich shows one live display at a time: the vectors' bar follows the files'
                if wait_vectors:
                    left = await wait_for_vectors(runtime.engine, quiet=as_json)
                    took = None if left else round(time.perf_counter() - started, 3)
                    summary = replace(summary, seconds_to_vectors=took, vectors_waiting=left)
                if as_json:
                    _print_summary(summary, as_json=True)
                return 0
        except Error as err:
            console.print(f"[red]error:[/] {escape(err.message)}")
            return 2


async def wait_for_vectors(engine: MemoryEngine, *, quiet: bool, stall_s: float = VECTOR_STALL_S) -> int:
    """Wait until `engine` has embedded every queued passage, with a bar on standard error (none when
    `quiet`); the passages still queued (0: every one embedded; always 0 for an engine without a queue).
    Gives up, saying so, once the queue has not shrunk for `stall_s`: what is left is embedded the next time
    the memory is opened."""
    if not isinstance(engine, VectorQueue):
        return 0
    left = total = await engine.vector_backlog()
    if not left:
        return 0
    started = moved = time.monotonic()
    with _bar(quiet, "passages") as bar:
        task = bar.add_task("embedding", total=total)
        while left and time.monotonic() - moved < stall_s:
            await engine.wait_for_vectors(timeout_s=_VECTOR_LOOK_S)  # returns as soon as none is left
            now = await engine.vector_backlog()
            if now < left:
                moved = time.monotonic()
            total += max(0, now - left)  # what another process on the file queued meanwhile
            left = now
            bar.update(task, total=total, completed=total - left)
    if left:
        health = await engine.health()
        why = f": {health.reason}" if health.reason else ""
        console.print(
            f"[yellow]vectors:[/] {left} of {total} passages still wait for their vectors (none embedded for "
            f"{stall_s:g} s{escape(why)}); vector and hybrid search use keyword search for them until they are "
            "embedded the next time this memory is opened (`tinymemory up`, or `tinymemory ingest` again)"
        )
    elif not quiet:
        console.print(f"[green]vectors:[/] {total} passages embedded in {time.monotonic() - started:.1f} s")
    return left


async def run_up(settings: Settings, path: Path, *, serve_api: bool = True) -> int:
    """Ingest, then watch PATH, sync what changes and serve the API until interrupted."""
    progress = BarProgress(_bar(quiet=True))
    with EmbeddedRuntime(settings, progress) as runtime:
        try:
            entry = control.ensure_local_source(runtime.state, path)
            _print_summary(await _sync_once(runtime, progress, entry.id), as_json=False)
            return await _follow(runtime, progress, entry, serve_api=serve_api)
        except Error as err:
            console.print(f"[red]error:[/] {escape(err.message)}")
            return 2


class _OneAtATime:
    """The runtime's syncs, one at a time: the watcher's and the API's take turns (a `SyncRunner`)."""

    def __init__(self, runtime: EmbeddedRuntime) -> None:
        self.runtime = runtime
        self.lock = asyncio.Lock()

    async def request_sync(self, source_id: str, hints: Iterable[str] | None = None) -> SyncOutcome:
        async with self.lock:
            return await self.runtime.request_sync(source_id, hints)

    def runs(self) -> list[RunView]:
        """The runtime's runs (a `worker.control.RunBoard`), so the console shows them."""
        return self.runtime.runs()


async def _follow(runtime: EmbeddedRuntime, progress: BarProgress, entry: SourceEntry, *, serve_api: bool) -> int:
    """Sync what the source's watcher reports, and serve the API, until SIGINT or SIGTERM."""
    reader = runtime.context.readers.reader_for(entry)
    if not isinstance(reader, WatchableSource):
        console.print(f"{entry.label} cannot be watched; run `tinymemory ingest` again to sync it")
        return 0
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    syncs = _OneAtATime(runtime)

    async def follow(hints: set[str] | None) -> None:
        outcome = await syncs.request_sync(entry.id, hints)
        sync = outcome.report
        if sync is not None and (sync.upserts or sync.deletes):
            _print_summary(summarise(sync, outcome.batches, 0.0, progress.taken_letters()), as_json=False)

    def on_change(changed: set[str]) -> None:
        hints = None if RESCAN in changed else changed
        asyncio.run_coroutine_threadsafe(follow(hints), loop)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # The watcher first: a file changed while the API starts (importing it takes a moment) is then not missed.
    watcher = reader.watch(on_change)
    watcher.start()
    server = _start_api(runtime, syncs) if serve_api else None
    poller = asyncio.create_task(_poll_intervals(runtime, syncs, progress))
    console.print(f"watching {entry.label} (Ctrl-C to stop)")
    try:
        await stop.wait()
    finally:
        poller.cancel()
        watcher.stop()
        if server is not None:
            await server.stop()
        async with syncs.lock:  # let a running sync finish its batch cleanly
            pass
    console.print("stopped")
    return 0


async def _poll_intervals(runtime: EmbeddedRuntime, syncs: _OneAtATime, progress: BarProgress) -> None:
    """What beat does in distributed mode: sync every source whose interval has passed (a link, a feed, a
    repository), each beat tick. A failed listing is recorded by the sync and waits for the next interval."""
    while True:
        await asyncio.sleep(runtime.settings.beat_tick_s)
        for source_id in due_sources(runtime.state, datetime.now(UTC)):
            try:
                outcome = await syncs.request_sync(source_id)
            except Error as err:
                console.print(f"[yellow]{escape(source_id)}:[/] {escape(err.message)}")
                continue
            except Exception:
                # A bug in one source's sync must not end the polling of every other source.
                logger.exception("polling %s failed", source_id)
                continue
            sync = outcome.report
            if sync is not None and (sync.upserts or sync.deletes):
                _print_summary(summarise(sync, outcome.batches, 0.0, progress.taken_letters()), as_json=False)


def _start_api(runtime: EmbeddedRuntime, syncs: _OneAtATime) -> EmbeddedServer | None:
    """The API over the runtime's own engine and state, or None (said in one line) when it cannot listen."""
    try:
        sock = bind(runtime.settings)
    except Error as err:
        console.print(f"[yellow]not serving the API:[/] {escape(err.message)}")
        return None
    from tinymemory_ingest.api import create_app

    services = control.Services(
        runtime.settings, state=runtime.state, engine=runtime.engine, runner=syncs, erasures=runtime.erasures
    )
    server = EmbeddedServer(sock, create_app(runtime.settings, services))
    server.start()
    loopback = "" if control.list_tokens(runtime.settings.token_path) else " (no tokens: loopback only)"
    # Printed plainly: a newcomer copies the URL, and scripts (and the tests) read it.
    print(
        f"serving the API on {server.url}{loopback}; console at {server.url}/ and docs at {server.url}/docs",
        file=sys.stderr,
        flush=True,
    )
    return server
