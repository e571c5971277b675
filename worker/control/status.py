"""`status`: the sources with their units and last sync, the dead letters, and a distributed pipeline's queues."""

from __future__ import annotations

from worker.control.results import ClusterProbe, SourceStatus, Status
from worker.control.sources import MAX_LETTERS
from worker.state.base import StateStore


def status(state: StateStore, probe: ClusterProbe | None = None) -> Status:
    sources = []
    for entry in state.list_sources():
        last = state.last_sync(entry.id)
        sources.append(
            SourceStatus(
                id=entry.id,
                kind=entry.kind,
                label=entry.label,
                enabled=entry.enabled,
                units=len(state.unit_states(entry.id)),
                last_sync=last.finished_at if last else None,
                last_changes=(last.upserts + last.deletes) if last else None,
            )
        )
    letters = len(state.dead_letters(limit=MAX_LETTERS))
    if probe is None:
        return Status(sources=sources, dead_letters=letters)
    return Status(sources=sources, dead_letters=letters, queues=probe.queue_depths(), workers=probe.workers())
