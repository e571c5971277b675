"""`sync_source`: find what changed in a source since its manifest and dispatch the changes in batches.

A unit is new or changed when its listed version differs from the manifest's (or the manifest's entry still
has clean-up to finish), and gone when the source no longer lists it. An `IncrementalSource` with a cursor
from the last complete sync is asked only for what changed since; when it cannot say, everything is listed.
Dead letters follow the listing: a unit that failed as it is now is held back until its version moves.
A source whose tombstone (or its namespace's) erases every kind is not synced.

A listing that fails (an unreachable host, a feed that is no longer a feed, a rate limit) changes nothing
stored. It is recorded, so that it is seen and so that the source is tried again at its interval rather than
at every beat: a dead letter for the whole source (unit id `SOURCE_UNIT`, stage `list`), cleared by the next
listing that succeeds, and a `SyncReport` carrying the error. The error is raised again for the caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from engines.contract import Error
from sources import ConditionalSource, Delta, IncrementalSource, Listing, Skipped, SourceReader, Unit
from worker.erasure.request import refusing, scopes_over
from worker.jobs.context import JobContext
from worker.records import SOURCE_UNIT, Change, DeadLetter, SyncReport, now
from worker.state.base import StateStore, UnitState

MAX_BATCH_CHANGES = 100
MAX_LETTERS_READ = 100_000


@dataclass
class _Found:
    """What looking at a source found: the changes, and what the dead letters are settled against."""

    changes: list[Change]
    listed: int
    skipped: tuple[Skipped, ...]
    cursor: str | None
    # Every unit id the source has now (a full listing), or None when only a delta was seen.
    present: set[str] | None = None
    removed: list[str] = field(default_factory=list)


async def sync_source(ctx: JobContext, source_id: str, hints: Iterable[str] | None = None) -> SyncReport:
    """Find what changed in a source since its manifest and dispatch the changes in batches.

    `hints` (unit ids a watcher saw change) narrows the diff to those units; None diffs everything.
    Listing the source is the only failure that raises.
    """
    entry = ctx.state.get_source(source_id)
    if entry is None or not entry.enabled:
        return SyncReport(source_id=source_id)
    # An erased source is refused, recording nothing: its state is being purged (or already was).
    if refusing(ctx.state.tombstones(scopes_over(source_id, [entry.placed_at()]))) is not None:
        return SyncReport(source_id=source_id)
    started = now()
    reader = ctx.readers.reader_for(entry)
    states = ctx.state.unit_states(source_id)
    letters = ctx.state.dead_letters(source_id, limit=MAX_LETTERS_READ)
    last_cursor = _last_cursor(ctx, source_id, reader)
    # A delta names only what changed since the cursor; a unit whose read failed for now (a letter without
    # a version) would never be retried by one, so the source is listed whole until no such letter is left.
    cursor = None if any(d.version is None and d.stage != "list" for d in letters) else last_cursor
    try:
        found = await _look(reader, states, None if hints is None else set(hints), cursor)
    except Error as err:
        _record_listing_failure(ctx.state, source_id, err, last_cursor, started)
        raise
    changes, held_back = _settle_dead_letters(ctx, source_id, found, letters)
    deletes = sum(c.action == "delete" for c in changes)
    batches = [changes[i : i + MAX_BATCH_CHANGES] for i in range(0, len(changes), MAX_BATCH_CHANGES)]
    ctx.progress.planned(len(changes))
    for batch in batches:
        await ctx.dispatcher.ingest(source_id, batch, bulk=len(batches) > 1)
    report = SyncReport(
        source_id=source_id,
        started_at=started,
        listed=found.listed,
        upserts=len(changes) - deletes,
        deletes=deletes,
        skipped=len(found.skipped),
        batches=len(batches),
        held_back=held_back,
        # A hinted sync compared only some units: the next one must start where the last complete one did.
        cursor=found.cursor if hints is None else last_cursor,
    )
    ctx.state.record_sync(report)
    return report


def _last_cursor(ctx: JobContext, source_id: str, reader: SourceReader) -> str | None:
    if not isinstance(reader, IncrementalSource):
        return None
    last = ctx.state.last_sync(source_id)
    return None if last is None else last.cursor


async def _look(
    reader: SourceReader, states: Mapping[str, UnitState], hints: set[str] | None, cursor: str | None
) -> _Found:
    if hints is None and cursor is not None and isinstance(reader, IncrementalSource):
        delta = await asyncio.to_thread(reader.list_changes, cursor)
        if delta is not None:
            return _Found(
                diff_delta(delta, states), len(delta.units), delta.skipped, delta.cursor, None, [*delta.removed]
            )
    if isinstance(reader, ConditionalSource):
        known = {unit_id: state.version for unit_id, state in states.items() if not state.deleted}
        listing: Listing = await asyncio.to_thread(reader.list_units_since, known)
    else:
        listing = await asyncio.to_thread(reader.list_units)
    present = {u.id for u in listing.units} | {s.unit_id for s in listing.skipped}
    changes = diff_units(listing.units, states, hints)
    return _Found(changes, len(listing.units), listing.skipped, listing.cursor, present)


def _upsert(unit: Unit) -> Change:
    return Change(unit_id=unit.id, action="upsert", version=unit.version, size=unit.size)


def diff_units(units: Iterable[Unit], states: Mapping[str, UnitState], hints: set[str] | None) -> list[Change]:
    """The changes that bring the manifest in line with a listing: new units and units whose version moved
    are upserts, units no longer listed are deletes. A unit whose entry still holds stale ids or a deletion
    mark is redone whatever the listing says, so an interrupted clean-up always finishes. `hints` narrows
    the version comparison to the units a watcher reported.
    """
    changes: list[Change] = []
    listed: set[str] = set()
    for unit in units:
        listed.add(unit.id)
        state = states.get(unit.id)
        unfinished = state is None or state.deleted or state.has_stale
        moved = state is not None and state.version != unit.version
        if unfinished or (moved and (hints is None or unit.id in hints)):
            changes.append(_upsert(unit))
    changes.extend(Change(unit_id=unit_id, action="delete") for unit_id in states if unit_id not in listed)
    return changes


def diff_delta(delta: Delta, states: Mapping[str, UnitState]) -> list[Change]:
    """The changes a delta asks for, plus any clean-up the manifest left unfinished for units outside it."""
    changes: list[Change] = []
    touched = {unit.id for unit in delta.units} | set(delta.removed)
    for unit in delta.units:
        state = states.get(unit.id)
        if state is None or state.deleted or state.has_stale or state.version != unit.version:
            changes.append(_upsert(unit))
    changes.extend(Change(unit_id=u, action="delete") for u in delta.removed if u in states)
    for unit_id, state in states.items():
        if unit_id in touched:
            continue
        if state.deleted:
            changes.append(Change(unit_id=unit_id, action="delete"))
        elif state.has_stale:
            changes.append(Change(unit_id=unit_id, action="upsert", version=state.version))
    return changes


def _settle_dead_letters(
    ctx: JobContext, source_id: str, found: _Found, letters: list[DeadLetter]
) -> tuple[list[Change], int]:
    """Bring the source's dead letters in line with what was found, and hold back hopeless retries.

    An entry skipped at listing gets a letter (once: the same reason again is not a new failure); the letters
    of units that are gone are dropped; a unit that failed at the version it has now is left out of the
    changes, since retrying cannot help. It is tried again once its version moves, or after a replay clears
    its letter.
    """
    held = {(d.unit_id, d.stage): d for d in letters}
    for skipped in found.skipped:
        known = held.get((skipped.unit_id, "list"))
        if known is None or known.message != skipped.reason:
            letter = DeadLetter(
                source_id=source_id, unit_id=skipped.unit_id, stage="list", error="Skipped", message=skipped.reason
            )
            ctx.state.add_dead_letter(letter)
    lettered = {d.unit_id for d in letters}
    gone = lettered - found.present if found.present is not None else lettered & {*found.removed, SOURCE_UNIT}
    ctx.state.clear_dead_letters(source_id, sorted(gone))
    failed = {(d.unit_id, d.version) for d in letters if d.stage != "list" and d.version is not None}
    kept = [c for c in found.changes if c.action == "delete" or (c.unit_id, c.version) not in failed]
    return kept, len(found.changes) - len(kept)


def _record_listing_failure(
    state: StateStore, source_id: str, err: Error, cursor: str | None, started: datetime
) -> None:
    kind = type(err).__name__
    state.add_dead_letter(
        DeadLetter(source_id=source_id, unit_id=SOURCE_UNIT, stage="list", error=kind, message=err.message)
    )
    failed = SyncReport(source_id=source_id, started_at=started, error=f"{kind}: {err.message}", cursor=cursor)
    state.record_sync(failed)


def due_sources(state: StateStore, now: datetime) -> list[str]:
    """The enabled sources with an interval whose last sync (or failed listing) is that long ago, or never."""
    due = []
    for entry in state.list_sources():
        if not entry.enabled or entry.interval_s is None:
            continue
        last = state.last_sync(entry.id)
        if last is None or (now - last.finished_at).total_seconds() >= entry.interval_s:
            due.append(entry.id)
    return due
