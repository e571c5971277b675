"""Operations on the configured sources: the kinds offered, add, list, show, enable or disable, remove, sync now."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from engines.contract import (
    ForgetTarget,
    InvalidRequestError,
    MemoryEngine,
    MetaFilter,
    Namespace,
    NotFoundError,
    Reach,
)
from sources import REGISTRY, SourceConfigKind, SourceEntry, SourceRegistry, SourceRequest, local_request
from worker.control.results import SourceDetail, SourceKindInfo, SourceRemoval, SyncRunner
from worker.erasure.operations import refuse_erased
from worker.records import SyncOutcome
from worker.state.base import StateStore

MAX_LETTERS = 100_000
_FORGET_CHUNK = 1_000


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
    different source under a taken id is refused, and so is an erased one."""
    entry = registry.configure(request)
    refuse_erased(state, entry, "add")
    existing = state.get_source(entry.id)
    if existing is not None and existing != entry:
        raise InvalidRequestError(
            f"a source {entry.id!r} exists with other settings; remove it first or choose another id (--id)"
        )
    if existing is None:
        state.put_source(entry)
    return entry


def ensure_local_source(state: StateStore, path: Path) -> SourceEntry:
    """The source for a folder or file given on the command line, configured on first use (not once erased)."""
    entry = REGISTRY.configure(local_request(path))
    existing = state.get_source(entry.id)
    refuse_erased(state, existing or entry, "sync")
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


def set_enabled(state: StateStore, source_id: str, enabled: bool) -> SourceEntry:
    """Enable or disable a source: a disabled one is listed but never synced (its watcher's events are
    ignored); its items stay until it is removed."""
    entry = get_source(state, source_id)
    if entry.enabled != enabled:
        entry = entry.model_copy(update={"enabled": enabled})
        state.put_source(entry)
    return entry


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
    """Sync a source now (run here or queued, as the runner does); `hints` narrows it to those unit ids.
    An erased source (being erased: it is purged once done) is refused."""
    refuse_erased(state, get_source(state, source_id), "sync")
    return await runner.request_sync(source_id, hints)
