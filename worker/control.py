"""The operations every front end calls: the command line, the API's admin routes, the console, the erasure job.

Plain functions over the state store and, where they need them, the engine and a `SyncRunner` (the embedded
runtime syncs here, the Celery one queues). Each returns a typed result; an ordinary mistake (an unknown
source id, a target its kind cannot read) is a contract error whose message says what to do.

    add_source, list_sources, get_source, show_source, remove_source, ensure_local_source
    sync_now, status
    dead_letters, replay_dead_letters, purge_dead_letters
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from engines.contract import (
    ForgetTarget,
    InvalidRequestError,
    MemoryEngine,
    MetaFilter,
    Namespace,
    NotFoundError,
    Reach,
)
from sources import REGISTRY, SourceEntry, SourceRegistry, SourceRequest, local_request
from worker.records import DeadLetter, SyncOutcome, SyncReport
from worker.state.base import StateStore

MAX_LETTERS = 100_000


class SyncRunner(Protocol):
    """Runs or queues a sync of one source (the embedded runtime, or the Celery queues)."""

    async def request_sync(self, source_id: str, hints: Sequence[str] | None = None) -> SyncOutcome: ...


class ClusterProbe(Protocol):
    """What a distributed pipeline adds to a status: its queues and the workers that answer."""

    def queue_depths(self) -> dict[str, int]: ...

    def workers(self) -> list[str]: ...


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceDetail(_Result):
    """One source: its settings, how many units its manifest holds, its last sync, its dead letters."""

    source: SourceEntry
    units: int
    last_sync: SyncReport | None
    dead_letters: int


class SourceRemoval(_Result):
    """A source removed: how many of its items were forgotten (none when they were kept)."""

    source_id: str
    forgotten: int
    kept_items: bool


class SourceStatus(_Result):
    id: str
    kind: str
    label: str
    enabled: bool
    units: int
    last_sync: datetime | None
    last_changes: int | None


class Status(_Result):
    """The sources with their units and last sync, the dead letters, and (distributed) queues and workers."""

    sources: list[SourceStatus]
    dead_letters: int
    queues: dict[str, int] | None = None
    workers: list[str] | None = None


class Replay(_Result):
    """Dead letters of one source cleared and its sync asked for, so their units are tried again."""

    source_id: str
    units: list[str] = Field(default_factory=list)
    sync: SyncOutcome


def add_source(state: StateStore, request: SourceRequest, registry: SourceRegistry = REGISTRY) -> SourceEntry:
    """Configure a source; its kind checks the target. The same request again returns the same entry; a
    different source under a taken id is refused."""
    entry = registry.configure(request)
    existing = state.get_source(entry.id)
    if existing is not None and existing != entry:
        raise InvalidRequestError(
            f"a source {entry.id!r} exists with other settings; remove it first or choose another id (--id)"
        )
    if existing is None:
        state.put_source(entry)
    return entry


def ensure_local_source(state: StateStore, path: Path) -> SourceEntry:
    """The source for a folder or file given on the command line, configured on first use."""
    entry = REGISTRY.configure(local_request(path))
    existing = state.get_source(entry.id)
    if existing is not None:
        return existing
    state.put_source(entry)
    return entry


def list_sources(state: StateStore) -> list[SourceEntry]:
    return state.list_sources()


def get_source(state: StateStore, source_id: str) -> SourceEntry:
    """The source `source_id`; `NotFoundError` naming it when there is none."""
    entry = state.get_source(source_id)
    if entry is None:
        raise NotFoundError(f"no source {source_id!r}; `tinymemory sources list` shows the configured ones")
    return entry


def show_source(state: StateStore, source_id: str) -> SourceDetail:
    entry = get_source(state, source_id)
    return SourceDetail(
        source=entry,
        units=len(state.unit_states(source_id)),
        last_sync=state.last_sync(source_id),
        dead_letters=len(state.dead_letters(source_id, limit=MAX_LETTERS)),
    )


async def remove_source(
    state: StateStore, engine: MemoryEngine | None, source_id: str, *, keep_items: bool = False
) -> SourceRemoval:
    """Unregister a source and, unless `keep_items` (then `engine` may be None), forget every item it stored."""
    get_source(state, source_id)
    forgotten = 0
    if not keep_items:
        if engine is None:
            raise InvalidRequestError("removing a source's items needs the engine")
        # Every node, sandboxes included: the source's items may have been placed anywhere.
        scope = MetaFilter(source_id=source_id, reach=Reach(at=Namespace.ROOT, inherit=False, descendants=True))
        forgotten = (await engine.forget(ForgetTarget.by_filter(scope))).forgotten
    state.remove_source(source_id)
    return SourceRemoval(source_id=source_id, forgotten=forgotten, kept_items=keep_items)


async def sync_now(
    state: StateStore, runner: SyncRunner, source_id: str, hints: Sequence[str] | None = None
) -> SyncOutcome:
    """Sync a source now (run here or queued, as the runner does); `hints` narrows it to those unit ids."""
    get_source(state, source_id)
    return await runner.request_sync(source_id, hints)


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


def dead_letters(state: StateStore, source_id: str | None = None, limit: int = 100) -> list[DeadLetter]:
    """Dead letters, newest first (of one source when `source_id` is given)."""
    if source_id is not None:
        get_source(state, source_id)
    return state.dead_letters(source_id, limit=limit)


async def replay_dead_letters(state: StateStore, runner: SyncRunner, source_id: str | None = None) -> list[Replay]:
    """Try dead-lettered units again: clear their letters, then sync their sources (those still configured)."""
    by_source: dict[str, list[str]] = {}
    for letter in dead_letters(state, source_id, limit=MAX_LETTERS):
        by_source.setdefault(letter.source_id, []).append(letter.unit_id)
    replays = []
    for source, units in sorted(by_source.items()):
        state.clear_dead_letters(source, units)
        if state.get_source(source) is not None:
            replays.append(Replay(source_id=source, units=sorted(set(units)), sync=await runner.request_sync(source)))
    return replays


def purge_dead_letters(state: StateStore, source_id: str | None = None) -> int:
    """Delete dead letters without retrying them; how many went."""
    return state.purge_dead_letters(source_id)
