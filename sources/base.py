"""The shapes every source shares: units, listings, signatures, and the reader protocols.

A *unit* is what a source can name and read (a file, a page, a feed entry). Listing returns units and
per-unit refusals together (`Listing.skipped`): one bad file is data, only a failure to list at all raises.
Readers raise contract errors only:

    InvalidRequestError   the id escapes the source, is not selected, or names something too large or not a file
    NotFoundError         the root or the unit does not exist
    EngineError           the filesystem failed (permission, I/O)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

from engines.contract import InvalidRequestError

if TYPE_CHECKING:
    from sources.watch import FolderWatcher

# Persisted config kinds (spec §1.2). Plain strings so `sources` need not import `worker`'s enum; a `StrEnum`
# member compares equal to them.
FOLDER_KIND: Final = "folder"
FILE_KIND: Final = "file"

# Spec §3 `FOLDER_FILE_SIZE_CAP_BYTES`: larger files are skipped when listing and refused when read.
FOLDER_FILE_SIZE_CAP_BYTES: Final = 10 * 1024 * 1024

ChangeCallback = Callable[[set[str]], None]
"""Receives changed unit ids, or exactly `{RESCAN}` (see `sources.watch`), on the watcher's thread."""


@dataclass(frozen=True, slots=True)
class Unit:
    """One readable file as listed: `id` is its path relative to the source root, with `/` separators.

    `path` is the absolute path as a string (not a `Path`: building 7,000 `Path` objects doubled a listing's time).
    """

    id: str
    size: int
    mtime_ns: int
    path: str

    @property
    def updated_at_ms(self) -> int:
        """The change signal of spec §3 (`updated_at_ms`): mtime in milliseconds."""
        return self.mtime_ns // 1_000_000


@dataclass(frozen=True, slots=True)
class Skipped:
    """A unit (or a folder below the root) that listing found but will not offer, and why."""

    unit_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class Listing:
    """What one listing found: readable units (sorted by id) and the entries it refused."""

    units: tuple[Unit, ...] = ()
    skipped: tuple[Skipped, ...] = ()


@dataclass(frozen=True, slots=True)
class Signature:
    """What a manifest keeps to decide whether a unit changed.

    Size and mtime are compared first; only when they moved is the content hash (`sha256`, lowercase hex) worth
    computing, so a touched but unchanged file is recognised without converting it again.
    """

    size: int
    mtime_ns: int
    sha256: str | None = None

    @classmethod
    def of(cls, unit: Unit, sha256: str | None = None) -> Signature:
        """The signature to record for `unit`, with its content hash when one was computed."""
        return cls(size=unit.size, mtime_ns=unit.mtime_ns, sha256=sha256)


def needs_hash(previous: Signature | None, unit: Unit) -> bool:
    """True when `unit` may have changed since `previous`: the caller must read and hash it to know.

    False means size and mtime are unchanged, so the unit is taken as unchanged without reading it. When True,
    compare `hash_bytes(data)` with `previous.sha256`: equal means only the metadata moved (record the new
    signature, convert nothing); different or unknown means the content changed.
    """
    if previous is None:
        return True
    return previous.size != unit.size or previous.mtime_ns != unit.mtime_ns


def hash_bytes(data: bytes) -> str:
    """The content hash a `Signature` records: SHA-256, lowercase hex."""
    return hashlib.sha256(data).hexdigest()


def resolve_source_path(path: Path, workspace: Path | None) -> Path:
    """A configured folder or file path made absolute (spec §3 root rule).

    A relative path is joined to the workspace directory, never to the process's working directory, so a
    relative path without a workspace is refused.
    """
    if path.is_absolute():
        return path
    if workspace is None:
        raise InvalidRequestError(f"path must be absolute or have a workspace to resolve against: {path}")
    return workspace / path


@runtime_checkable
class SourceReader(Protocol):
    """A source that can list its units and read one unit's bytes.

    `list_units` raises only when the source cannot be listed at all (missing root); a unit it cannot offer is a
    `Skipped` entry. `read` re-checks everything `list_units` checked, because the unit may have changed or the id
    may come from elsewhere, and raises `InvalidRequestError`, `NotFoundError` or `EngineError`.
    """

    @property
    def kind(self) -> str:
        """The persisted config kind (`FOLDER_KIND`, `FILE_KIND`, ...)."""
        ...

    def list_units(self) -> Listing:
        """Every unit the source offers now, and the entries it refused."""
        ...

    def read(self, unit_id: str) -> bytes:
        """The bytes of one unit, never more than the source's size cap."""
        ...


@runtime_checkable
class WatchableSource(Protocol):
    """A source whose changes arrive as file events; the worker checks `isinstance`, not a flag."""

    def watch(self, on_change: ChangeCallback, *, debounce_s: float = 0.5, reconcile_s: float = 300.0) -> FolderWatcher:
        """An unstarted watcher delivering this source's changed unit ids (ignored ones already dropped)."""
        ...

    def stat_unit(self, unit_id: str) -> Unit:
        """One unit's listing entry now, so an event needs no full listing.

        Raises `NotFoundError` when the unit is gone (the host forgets it) and `InvalidRequestError` when it is
        no longer offered (not selected, too large, a link or not a regular file).
        """
        ...
