"""The operations every front end calls: the command line, the API's admin routes, the console, the erasure job.

Plain functions over the state store and, where they need them, the engine and a `SyncRunner` (the embedded
runtime syncs here, the Celery one queues). Each returns a typed result; an ordinary mistake (an unknown
source id, a target its kind cannot read) is a contract error whose message says what to do.

    source_kinds, add_source, list_sources, get_source, show_source, remove_source, ensure_local_source
    sync_now, status
    dead_letters, replay_dead_letters, purge_dead_letters

`Services` opens what they run against from the settings (the command line and the API use it).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Protocol, TypeVar

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
from sources import (
    REGISTRY,
    SourceConfigKind,
    SourceEntry,
    SourceRegistry,
    SourceRequest,
    local_request,
    register_kinds,
)
from worker.records import DeadLetter, SyncOutcome, SyncReport
from worker.services import Closeable, open_engine, open_state
from worker.settings import Settings
from worker.state.base import StateStore

_C = TypeVar("_C", bound=Closeable)

MAX_LETTERS = 100_000
_FORGET_CHUNK = 1_000


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


class SourceKindInfo(_Result):
    """A kind of source as a person types it, and whether this build offers it (and then what it reads)."""

    name: str
    kind: str
    available: bool
    target: str | None = None
    summary: str | None = None


class Replay(_Result):
    """Dead letters of one source cleared and its sync asked for, so their units are tried again."""

    source_id: str
    units: list[str] = Field(default_factory=list)
    sync: SyncOutcome


def source_kinds(registry: SourceRegistry = REGISTRY) -> list[SourceKindInfo]:
    """Every built-in kind (offered or not yet), then the kinds plugins registered."""
    names = {kind.value: kind.alias for kind in SourceConfigKind}
    offered = set(registry.kinds())
    kinds = []
    for kind in [*names, *(k for k in registry.kinds() if k not in names)]:
        if kind not in offered:
            kinds.append(SourceKindInfo(name=names[kind], kind=kind, available=False))
            continue
        spec = registry.spec(kind)
        kinds.append(
            SourceKindInfo(
                name=names.get(kind, kind), kind=kind, available=True, target=spec.target, summary=spec.summary
            )
        )
    return kinds


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
    entry = get_source(state, source_id)
    forgotten = 0
    if not keep_items:
        if engine is None:
            raise InvalidRequestError("removing a source's items needs the engine")
        forgotten = await _forget_items(state, engine, entry)
    state.remove_source(source_id)
    return SourceRemoval(source_id=source_id, forgotten=forgotten, kept_items=keep_items)


async def _forget_items(state: StateStore, engine: MemoryEngine, entry: SourceEntry) -> int:
    """Forget the items the manifest names (wherever they are: ids reach every node, sandboxes too), then
    any left by the source's id below its node and below the root (a store the manifest never recorded)."""
    entries = state.manifest_entries(entry.id, state.unit_states(entry.id))
    ids = list(dict.fromkeys(i for e in entries.values() for i in (*e.item_ids, *e.stale)))
    forgotten = 0
    for start in range(0, len(ids), _FORGET_CHUNK):
        forgotten += (await engine.forget(ForgetTarget.by_ids(ids[start : start + _FORGET_CHUNK]))).forgotten
    for node in dict.fromkeys((entry.placed_at(), Namespace.ROOT)):
        scope = MetaFilter(source_id=entry.id, reach=Reach.subtree(node))
        forgotten += (await engine.forget(ForgetTarget.by_filter(scope))).forgotten
    return forgotten


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
    """Delete dead letters without retrying them (of one source when `source_id` is given); how many went."""
    if source_id is not None:
        get_source(state, source_id)
    return state.purge_dead_letters(source_id)


class Services:
    """What the operations run against, opened from the settings on first use and closed together.

    With SQLite state a sync runs here, in an embedded runtime that shares this object's state store and
    engine (so what it stores is what `engine()` reads); with Redis state a sync is queued for the workers
    and a status includes their queues. Usable as a context manager; closing releases everything opened.
    """

    def __init__(self, settings: Settings) -> None:
        register_kinds(settings.source_kinds)
        self.settings = settings
        self._state: StateStore | None = None
        self._engine: MemoryEngine | None = None
        self._runner: SyncRunner | None = None
        self._opened: list[Closeable] = []

    def __enter__(self) -> Services:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def state(self) -> StateStore:
        if self._state is None:
            self._state = self._keep(open_state(self.settings))
        return self._state

    def engine(self) -> MemoryEngine:
        if self._engine is None:
            self._engine = open_engine(self.settings)
            if isinstance(self._engine, Closeable):
                self._keep(self._engine)
        return self._engine

    def runner(self) -> SyncRunner:
        if self._runner is None:
            self._runner = self._open_runner()
        return self._runner

    def probe(self) -> ClusterProbe | None:
        if self.settings.state != "redis":
            return None
        from worker.cluster.status import CeleryProbe

        return CeleryProbe(self.settings)

    def close(self) -> None:
        """Close everything opened, newest first, even when one of them fails (the first failure is raised)."""
        opened, self._opened = self._opened, []
        self._state = self._engine = self._runner = None
        failure: Exception | None = None
        for resource in reversed(opened):
            try:
                resource.close()
            except Exception as err:
                failure = failure or err
        if failure is not None:
            raise failure

    def _keep(self, resource: _C) -> _C:
        self._opened.append(resource)
        return resource

    def _open_runner(self) -> SyncRunner:
        if self.settings.state == "redis":
            from worker.cluster.app import create_app
            from worker.cluster.runtime import QueuedSyncs
            from worker.redis.client import redis_from_url

            client = self._keep(redis_from_url(self.settings.redis_url))
            return QueuedSyncs(self.settings, create_app(self.settings), client)
        from worker.embedded import EmbeddedRuntime

        return self._keep(EmbeddedRuntime(self.settings, state=self.state(), engine=self.engine()))
