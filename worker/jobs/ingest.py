"""`ingest_batch`: bring the engine in line with one batch of a sync's changes, checkpointing as it goes.

For each change, read → sniff/convert → scrub → chunk → items; store them in calls of at most 100; after
each acknowledged call commit the units it completed, then forget their previous items. A deleted unit's
items are forgotten.

Write first, then clean up: a unit's new items are stored, then its manifest entry is committed
naming the old ids as stale, then those are forgotten and the entry cleared. A crash at any point
leaves either the old copy or the new one findable, never none, and a stale list the next sync
sweeps. Ids are fingerprints, so redoing any step is a replay. One unit's failure is a dead letter;
the rest of the batch proceeds.

An erased source or namespace stays erased: the batch holds its source's job lease (`JobContext.running`)
and reads the tombstones over what it stores when it starts and again right before each `store_many`. A
tombstone found at the start drops the whole batch; one found later drops what is not yet stored (what
is, the erasure, which waits for the lease, erases). Items of an erased kind are left out. A batch queued
before an erasure drops itself the same way, which is all the purging a queued job needs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from engines.contract import Error, ForgetTarget, Item, ItemId, Namespace, StoreReceipt, UnavailableError
from pipeline.batch import StoredUnit, UnitItems, store_units
from pipeline.sniff import DocumentFormat, sniff
from sources import SourceEntry, SourceReader
from worker.erasure.request import Tombstone, covering, refusing, scopes_over
from worker.jobs.context import JobContext, WarmableConverter
from worker.jobs.prepared import Prepared, TextJob, UnitReading, UnitStageError
from worker.jobs.units import read_unit
from worker.records import BatchReport, Change, DeadLetter, ManifestEntry

logger = logging.getLogger(__name__)

MIN_TEXT_UNITS = 32
"""Fewer text units than this in a batch are prepared in place: a round trip to other processes costs more."""
_TEXT_FORMATS = frozenset(
    {DocumentFormat.MARKDOWN, DocumentFormat.PLAIN_TEXT, DocumentFormat.CODE, DocumentFormat.UNKNOWN}
)


async def ingest_batch(ctx: JobContext, source_id: str, changes: Sequence[Change]) -> BatchReport:
    """Bring the engine in line with one batch of changes and commit the manifest as it goes; nothing when
    the source is gone or erased (`dropped` counts the units of a batch a tombstone stopped)."""
    async with ctx.running(source_id):
        entry = ctx.state.get_source(source_id)
        if entry is None:
            return BatchReport(source_id=source_id)
        guard = _Guard(ctx, entry)
        erased = refusing(guard.look([entry.placed_at()]))
        if erased is not None:
            logger.info("batch of %s dropped: erased by %s", source_id, erased.erasure_id)
            return BatchReport(source_id=source_id, dropped=len(changes))
        try:
            return await _ingest(ctx, entry, changes, guard)
        except _Erased as stop:
            logger.info("batch of %s stopped: erased by %s", source_id, stop.tombstone.erasure_id)
            return stop.report


async def _ingest(ctx: JobContext, entry: SourceEntry, changes: Sequence[Change], guard: _Guard) -> BatchReport:
    source_id = entry.id
    previous = ctx.state.manifest_entries(source_id, [c.unit_id for c in changes])
    batch = _Batch(ctx, source_id, previous, guard)
    await batch.delete([c.unit_id for c in changes if c.action == "delete"])
    upserts = [c for c in changes if c.action == "upsert"]
    documents: list[Change] = []
    texts: list[Change] = []
    for change in upserts:
        (documents if needs_converter_worker(change.unit_id) else texts).append(change)
    if documents and isinstance(ctx.converter, WarmableConverter):
        ctx.converter.warm()  # start converter processes while the first files are being read
    reader = ctx.readers.reader_for(entry)
    limit = asyncio.Semaphore(ctx.settings.convert_concurrency)

    async def prepare(change: Change) -> UnitItems | None:
        return await batch.prepare(change, read_unit(ctx, reader, change, previous.get(change.unit_id)))

    async def prepare_limited(change: Change) -> UnitItems | None:
        async with limit:
            return await prepare(change)

    # Documents go to the converter processes concurrently; text and code are only decoded, so they
    # are done one after the other meanwhile, without a task each (which costs more than the work).
    converting = [asyncio.ensure_future(prepare_limited(c)) for c in documents]
    decoded = await _decode_texts(ctx, batch, entry, reader, texts, prepare)
    prepared = [u for u in [*decoded, *await asyncio.gather(*converting)] if u is not None]
    await batch.store(prepared)
    return batch.report()


def needs_converter_worker(unit_id: str) -> bool:
    """Whether a unit's name says it is a document (PDF, Office, HTML…) rather than plain text or code."""
    return sniff(b"", unit_id) not in _TEXT_FORMATS


async def _decode_texts(
    ctx: JobContext,
    batch: _Batch,
    entry: SourceEntry,
    reader: SourceReader,
    texts: list[Change],
    prepare: Callable[[Change], Awaitable[UnitItems | None]],
) -> list[UnitItems | None]:
    """The text units of a batch, prepared by the text pool when there is one and enough of them."""
    pool = ctx.text_pool
    done = None
    if pool is not None and len(texts) >= MIN_TEXT_UNITS:
        pool.warm(wait=False)  # a backfill: start the processes, preparing in place until they are up
        kind = ctx.readers.kind_entry(entry.kind)
        job = TextJob(entry, kind, ctx.readers.options, texts, batch.previous, ctx.settings.items)
        done = await pool.prepare(job)
    if done is None:
        return [await prepare(c) for c in texts]
    decoded = []
    for unit in done:
        if unit.reading is None and unit.failure is None:
            decoded.append(await prepare(unit.change))  # its bytes are a document: the converter's
            continue
        if unit.report is not None:
            ctx.progress.redacted(unit.report)
        decoded.append(await batch.prepare(unit.change, _settled(unit)))
    return decoded


async def _settled(unit: Prepared) -> UnitReading:
    """A unit the text pool read (or failed to), as `batch.prepare` awaits a reading."""
    if unit.reading is not None:
        return unit.reading
    raise unit.failure or RuntimeError(f"{unit.change.unit_id}: the text pool returned neither items nor a failure")


class _Erased(Exception):  # noqa: N818 - a signal, not an error: the batch ends early on purpose
    """A tombstone appeared while the batch was storing: it stops, reporting what it did."""

    def __init__(self, tombstone: Tombstone, report: BatchReport) -> None:
        super().__init__(tombstone.erasure_id)
        self.tombstone = tombstone
        self.report = report


class _Guard:
    """Reads the tombstones over what a batch of one source stores (its source and their namespaces)."""

    def __init__(self, ctx: JobContext, entry: SourceEntry) -> None:
        self.ctx = ctx
        self.entry = entry

    def look(self, namespaces: list[Namespace]) -> list[Tombstone]:
        return self.ctx.state.tombstones(scopes_over(self.entry.id, namespaces))

    def first(self, items: Sequence[Item]) -> Tombstone | None:
        """The first tombstone, read now, that forbids storing one of `items`."""
        tombstones = self.look(list({item.meta.namespace for item in items}))
        if not tombstones:
            return None
        return next(
            (t for i in items if (t := covering(tombstones, self.entry.id, i.meta.namespace, i.item_kind))), None
        )

    def kept(self, units: list[UnitItems]) -> list[UnitItems]:
        """`units` without their items of an erased kind (a whole erasure has stopped the batch already)."""
        tombstones = self.look(list({item.meta.namespace for unit in units for item in unit.items}))
        if not tombstones:
            return units
        return [
            UnitItems(
                u.unit_id,
                [i for i in u.items if not covering(tombstones, self.entry.id, i.meta.namespace, i.item_kind)],
            )
            for u in units
        ]


class _Batch:
    """One ingest batch: the manifest entries it started from, what it committed, its tallies."""

    def __init__(self, ctx: JobContext, source_id: str, previous: dict[str, ManifestEntry], guard: _Guard) -> None:
        self.ctx = ctx
        self.source_id = source_id
        self.previous = previous
        self.guard = guard
        self.pending: dict[str, ManifestEntry] = {}
        self.committed: set[str] = set()
        self.changes: dict[str, Change] = {}
        self.tally = BatchReport(source_id=source_id)

    async def prepare(self, change: Change, reading: Awaitable[UnitReading]) -> UnitItems | None:
        """Await one unit's reading; an unchanged unit is committed at once, a failure dead-lettered."""
        self.changes[change.unit_id] = change
        try:
            outcome = await reading
        except UnitStageError as failure:
            self._dead(failure.unit_id, failure.stage, failure.error)
            return None
        unit_id, items = outcome.unit_id, outcome.items
        if items is None:  # same content as last time (touched, renamed back, …): nothing to store
            entry = self.previous[unit_id].model_copy(update={"version": outcome.version})
            self.ctx.state.commit(self.source_id, {unit_id: entry})
            self.ctx.state.clear_dead_letters(self.source_id, [unit_id])
            self.tally.unchanged += 1
            self.ctx.progress.advanced(units=1)
            return None
        if outcome.no_text is not None:
            logger.info("%s of %s: skipped, %s", unit_id, self.source_id, outcome.no_text)
            self.tally.no_text.append(f"{unit_id}: {outcome.no_text}")
        self.pending[unit_id] = ManifestEntry(version=outcome.version, sha256=outcome.sha256)
        return UnitItems(unit_id, items)

    async def store(self, units: list[UnitItems]) -> None:
        units = self.guard.kept(units)
        try:
            outcome = await store_units(self.ctx.engine, units, self._committed, self._guarded(units))
        except UnavailableError as err:
            # Still unavailable after the retries: what was acknowledged is committed; the rest waits,
            # as a dead letter (embedded) or as the task's own retry (Celery).
            if not self.ctx.settings.dead_letter_unavailable:
                raise
            for unit_id in sorted({u.unit_id for u in units} - self.committed):
                self._dead(unit_id, "store", err)
            return
        for unit_id, error in outcome.failed:
            self._dead(unit_id, "store", error)

    def _guarded(self, units: list[UnitItems]) -> Callable[[list[Item]], Awaitable[list[StoreReceipt]]]:
        """The retrying `store_many`, looking at the tombstones right before each call: an erasure that began
        meanwhile stops the batch before anything more is stored."""
        store_many = self.ctx.retrying_store_many()

        async def guarded(items: list[Item]) -> list[StoreReceipt]:
            tombstone = self.guard.first(items)
            if tombstone is not None:
                report = self.report()
                report.dropped = len({u.unit_id for u in units} - self.committed)
                raise _Erased(tombstone, report)
            return await store_many(items)

        return guarded

    async def _committed(self, stored: list[StoredUnit]) -> None:
        """The checkpoint after an acknowledged call: commit, forget what became stale, clear it."""
        entries: dict[str, ManifestEntry | None] = {}
        stale: list[ItemId] = []
        for unit in stored:
            before = self.previous.get(unit.unit_id)
            old = [] if before is None else [*before.item_ids, *before.stale]
            dropped = [i for i in dict.fromkeys(old) if i not in set(unit.item_ids)]
            entries[unit.unit_id] = self.pending[unit.unit_id].model_copy(
                update={"item_ids": unit.item_ids, "stale": dropped}
            )
            stale.extend(dropped)
            self.tally.stored += len(unit.item_ids) - unit.replayed
            self.tally.replayed += unit.replayed
        self.ctx.state.commit(self.source_id, entries)
        await self._forget(stale)
        cleared = {u: e.model_copy(update={"stale": []}) for u, e in entries.items() if e is not None and e.stale}
        if cleared:
            self.ctx.state.commit(self.source_id, cleared)
        self.ctx.state.clear_dead_letters(self.source_id, entries)
        self.committed.update(entries)
        self.tally.units += len(stored)
        self.ctx.progress.advanced(units=len(stored), items=sum(len(u.item_ids) for u in stored))

    async def delete(self, unit_ids: list[str]) -> None:
        """Forget the items of units that are gone: mark, forget, then drop their entries."""
        gone = {u: self.previous[u] for u in unit_ids if u in self.previous}
        if gone:
            marked = {
                u: e.model_copy(update={"item_ids": [], "stale": [*e.item_ids, *e.stale], "deleted": True})
                for u, e in gone.items()
            }
            self.ctx.state.commit(self.source_id, marked)
            await self._forget([i for e in marked.values() for i in e.stale])
            self.ctx.state.commit(self.source_id, dict.fromkeys(gone))
        self.ctx.state.clear_dead_letters(self.source_id, unit_ids)
        self.tally.units += len(unit_ids)
        self.ctx.progress.advanced(units=len(unit_ids))

    async def _forget(self, ids: list[ItemId]) -> None:
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), 1000):
            report = await self.ctx.engine.forget(ForgetTarget.by_ids(unique[start : start + 1000]))
            self.tally.forgotten += report.forgotten

    def _dead(self, unit_id: str, stage: str, error: Error | Exception) -> None:
        message = error.message if isinstance(error, Error) else str(error)
        change = self.changes.get(unit_id)
        letter = DeadLetter(
            source_id=self.source_id,
            unit_id=unit_id,
            stage=stage,
            error=type(error).__name__,
            message=message,
            # A transient failure is not pinned to the unit's version: any later sync may retry it.
            version=change.version if change is not None and not isinstance(error, UnavailableError) else None,
        )
        self.ctx.state.add_dead_letter(letter)
        self.ctx.progress.dead_lettered(letter)
        self.tally.failed += 1
        self.ctx.progress.advanced(failed=1)

    def report(self) -> BatchReport:
        return self.tally.model_copy()
