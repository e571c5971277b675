"""The state store: what the runtime remembers between runs.

One protocol, implemented on SQLite for embedded mode (`worker.state.sqlite`) and on Redis for the distributed
pipeline (`worker.state.redis`). It holds the source registry, per-source manifests (the checkpoint of what is
stored for each unit), dead letters and the last sync of each source. It never holds memory items: those live
in the engine.

Both stores keep a layout version (`STATE_LAYOUT`) and bring state written by an older release forward when
they open it, so an upgrade never asks for a re-ingest; state written by a newer release is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from sources import SourceEntry
from worker.records import DeadLetter, ManifestEntry, SyncReport

STATE_LAYOUT: Final = 2
"""1: units signed by size and mtime (releases before opaque versions). 2: units carry their reader's version."""


@dataclass(frozen=True, slots=True)
class UnitState:
    """The cheap part of a manifest entry a sync compares a listing with (no item ids)."""

    version: str
    deleted: bool
    has_stale: bool


class StateStore(Protocol):
    """Where a runtime keeps its state. Writes are atomic per call; a call never half-applies."""

    # -- source registry --------------------------------------------------------------------------
    def put_source(self, entry: SourceEntry) -> None: ...
    def get_source(self, source_id: str) -> SourceEntry | None: ...
    def list_sources(self) -> list[SourceEntry]: ...
    def remove_source(self, source_id: str) -> None:
        """Forget the entry, its manifest, dead letters and run record (not its stored items)."""
        ...

    # -- manifests ----------------------------------------------------------------------------------
    def unit_states(self, source_id: str) -> dict[str, UnitState]:
        """Every unit of the source's manifest, with only what a sync compares."""
        ...

    def manifest_entries(self, source_id: str, unit_ids: Iterable[str]) -> dict[str, ManifestEntry]:
        """The full entries of the named units that have one."""
        ...

    def commit(self, source_id: str, entries: Mapping[str, ManifestEntry | None]) -> None:
        """Write these entries (None removes a unit) in one atomic step: the batch's checkpoint."""
        ...

    # -- dead letters -------------------------------------------------------------------------------
    def add_dead_letter(self, letter: DeadLetter) -> None:
        """Record a failure; the same (source, unit, stage) again replaces it, counting attempts."""
        ...

    def dead_letters(self, source_id: str | None = None, limit: int = 1000) -> list[DeadLetter]:
        """Newest first."""
        ...

    def clear_dead_letters(self, source_id: str, unit_ids: Iterable[str]) -> None:
        """Drop the letters of units that have since been ingested (or are gone)."""
        ...

    def purge_dead_letters(self, source_id: str | None = None) -> int: ...

    # -- runs ---------------------------------------------------------------------------------------
    def record_sync(self, report: SyncReport) -> None: ...
    def last_sync(self, source_id: str) -> SyncReport | None: ...

    def close(self) -> None:
        """Release the store's connection (a store never closes a client it was given and shares)."""
        ...
