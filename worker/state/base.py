"""The state store: what the runtime remembers between runs.

One protocol, implemented on SQLite for embedded mode (`worker.state.sqlite`) and on Redis for the distributed
pipeline (`worker.state.redis`). It holds the source registry, per-source manifests (the checkpoint of what is
stored for each unit), dead letters, the last sync of each source, erasure receipts and tombstones, and leases
(`LeaseStore`: which jobs are running). It never holds memory items: those live in the engine.

Both stores keep a layout version (`STATE_LAYOUT`) and bring state written by an older release forward when
they open it, so an upgrade never asks for a re-ingest; state written by a newer release is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from engines.contract import ItemId
from sources import SourceEntry
from worker.erasure.request import ErasureReceipt, ErasureRequest, Tombstone
from worker.records import DeadLetter, ManifestEntry, SyncReport

STATE_LAYOUT: Final = 3
"""1: units signed by size and mtime (releases before opaque versions). 2: units carry their reader's version.
3: erasure receipts, tombstones and (SQLite) leases; nothing of layout 2 changes."""


@dataclass(frozen=True, slots=True)
class UnitState:
    """The cheap part of a manifest entry a sync compares a listing with (no item ids)."""

    version: str
    deleted: bool
    has_stale: bool


class LeaseStore(Protocol):
    """Named, expiring ownership: on Redis `worker.redis.leases`, on SQLite `worker.state.sqlite_leases`.

    An exclusive lease (`acquire`) has one owner at a time; a shared one (`join`) any number of holders, each
    with a token and an expiry of its own (the running jobs of one source). Only a token's holder releases or
    extends what it holds, and a holder that dies lets go when its time runs out. Times are wall-clock
    seconds; the holder must extend before its time runs out if its work runs longer.
    """

    def acquire(self, name: str, ttl_s: float) -> str | None:
        """The new owner's token, or None while someone else holds `name`."""
        ...

    def release(self, name: str, token: str) -> bool:
        """Free `name` if `token` still owns it."""
        ...

    def extend(self, name: str, token: str, ttl_s: float) -> bool:
        """Make `token`'s lease end `ttl_s` from now; False when it no longer owns `name` (stop the work)."""
        ...

    def held(self, name: str) -> bool:
        """Whether anyone holds `name` exclusively now."""
        ...

    def join(self, name: str, ttl_s: float) -> str:
        """Hold `name` beside its other holders for `ttl_s`; the token to renew and leave with."""
        ...

    def renew(self, name: str, token: str, ttl_s: float) -> bool:
        """Make `token`'s hold end `ttl_s` from now; False when it had lapsed (it is held again from now)."""
        ...

    def leave(self, name: str, token: str) -> None:
        """Stop holding `name` (nothing when the hold had lapsed)."""
        ...

    def holders(self, name: str) -> set[str]:
        """The tokens holding `name` now (lapsed holds left out)."""
        ...


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

    def item_ids(self, source_id: str) -> list[ItemId]:
        """Every item id the source's manifest names, current and stale, each once (an erasure forgets them)."""
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

    # -- erasures -----------------------------------------------------------------------------------
    def open_erasure(self, request: ErasureRequest) -> ErasureReceipt:
        """The receipt of the same request (`target.key`) already queued, running or completed, else the new
        request's, saved as queued: one step, so two identical requests at once share one receipt."""
        ...

    def get_erasure(self, erasure_id: str) -> ErasureReceipt | None: ...

    def put_erasure(self, receipt: ErasureReceipt) -> None:
        """Save a receipt as it moves on (it is kept for good)."""
        ...

    def unfinished_erasures(self) -> list[ErasureReceipt]:
        """Receipts still queued or running, oldest request first (embedded mode resumes them at start-up)."""
        ...

    def recent_erasures(self, limit: int = 100) -> list[ErasureReceipt]:
        """The latest receipts, newest request first (what the console lists)."""
        ...

    def put_tombstone(self, tombstone: Tombstone) -> None:
        """Record a tombstone (kept for good; the same erasure's again replaces it)."""
        ...

    def tombstones(self, scopes: Iterable[str]) -> list[Tombstone]:
        """The tombstones of the named scopes (`worker.erasure.request.scopes_over` names those covering an item)."""
        ...

    # -- leases -------------------------------------------------------------------------------------
    def leases(self) -> LeaseStore:
        """Leases kept where this state is, shared by every process that opens it."""
        ...

    def close(self) -> None:
        """Release the store's connection (a store never closes a client it was given and shares)."""
        ...
