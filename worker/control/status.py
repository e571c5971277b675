"""`status`: the sources with their units and last sync, the dead letters, and a distributed pipeline's queues."""

from __future__ import annotations

from collections import Counter

from sources import SourceEntry
from worker.control.results import ClusterProbe, RunBoard, SourceStatus, Status, VectorBacklogStatus
from worker.control.sources import MAX_LETTERS
from worker.records import SyncReport
from worker.runs import RunView
from worker.state.base import StateStore


def status(state: StateStore, probe: ClusterProbe | None = None, vectors: VectorBacklogStatus | None = None) -> Status:
    """The status; `vectors` is the engine's backlog as `vector_backlog` read it (an async read, so the caller's)."""
    letters = Counter(d.source_id for d in state.dead_letters(limit=MAX_LETTERS))
    sources = [_source_status(state, entry, letters[entry.id]) for entry in state.list_sources()]
    total = sum(letters.values())
    if probe is None:
        return Status(sources=sources, dead_letters=total, vectors=vectors)
    queues, workers = probe.queue_depths(), probe.workers()
    return Status(sources=sources, dead_letters=total, queues=queues, workers=workers, vectors=vectors)


def _source_status(state: StateStore, entry: SourceEntry, letters: int) -> SourceStatus:
    last = state.last_sync(entry.id)
    return SourceStatus(
        id=entry.id,
        kind=entry.kind,
        label=entry.label,
        enabled=entry.enabled,
        units=len(state.unit_states(entry.id)),
        last_sync=last.finished_at if last else None,
        last_changes=(last.upserts + last.deletes) if last else None,
        location=entry.path or entry.url,
        interval_s=entry.interval_s,
        items=len(state.item_ids(entry.id)),
        dead_letters=letters,
        last_took_s=_took(last),
        last_error=last.error if last else None,
    )


def _took(last: SyncReport | None) -> float | None:
    if last is None or last.started_at is None:
        return None
    return max(0.0, (last.finished_at - last.started_at).total_seconds())


def runs(runner: object) -> list[RunView]:
    """The runs `runner` shows (`RunBoard`): the syncs in progress and the last ones done; none when it
    keeps no record of them."""
    return runner.runs() if isinstance(runner, RunBoard) else []
