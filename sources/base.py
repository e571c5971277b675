"""The shapes every source shares: units, listings, content, and the reader protocols.

A *unit* is what a source can name and read: a file, a page, a feed entry, a file of a repository at a commit,
a conversation thread. It is listed as an id and an opaque `version` string its reader defines (a folder's
`size:mtime_ns`, a page's ETag, a blob sha, a feed entry's id and update time); a host compares versions only
for equality, to decide whether to read the unit again. Reading one unit gives its `UnitContent`: bytes to
sniff and convert, or turns already structured, with the metadata of where it came from.

Listing returns units and per-unit refusals together (`Listing.skipped`): one bad file is data, only a failure
to list at all raises. Readers raise contract errors only:

    InvalidRequestError   the id escapes the source, is not selected, or names something too large or not a file
    NotFoundError         the root or the unit does not exist
    UnavailableError      the place the source reads is unreachable for now (a retry may help)
    EngineError           the source failed otherwise (permission, I/O)

Abilities only some kinds have are small protocols of their own, checked with `isinstance`:
`WatchableSource` (file events), `IncrementalSource` (list only what changed since a cursor) and
`ConditionalSource` (list given the versions the host holds, so a unit costs a conditional request).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

from engines.contract import InvalidRequestError, MemoryMeta, Turn

if TYPE_CHECKING:
    from sources.watch import FolderWatcher

# docs/spec/sources-and-documents.md §3 `FOLDER_FILE_SIZE_CAP_BYTES`: larger files are skipped when listing and refused
# when read.
FOLDER_FILE_SIZE_CAP_BYTES: Final = 10 * 1024 * 1024

ChangeCallback = Callable[[set[str]], None]
"""Receives changed unit ids, or exactly `{RESCAN}` (see `sources.watch`), on the watcher's thread."""


@dataclass(frozen=True, slots=True)
class Unit:
    """One readable unit as listed: its id within the source and its version now.

    `size` is the unit's size in bytes when the listing knows it without reading (a hint for how to read
    it; reads check their own caps). The id's extension, when it has one, is taken as a hint of its format.
    """

    id: str
    version: str
    size: int | None = None


@dataclass(frozen=True, slots=True)
class Skipped:
    """A unit (or a folder below the root) that listing found but will not offer, and why."""

    unit_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class Listing:
    """What one listing found: readable units (sorted by id), the entries it refused, and, for an
    `IncrementalSource`, the cursor this listing corresponds to (None: the source keeps no cursor)."""

    units: tuple[Unit, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class Delta:
    """What changed in a source since a cursor: units added or modified, ids removed, entries refused, and
    the cursor of the source now."""

    cursor: str
    units: tuple[Unit, ...] = ()
    removed: tuple[str, ...] = ()
    skipped: tuple[Skipped, ...] = ()


@dataclass(frozen=True, slots=True)
class UnitContent:
    """One unit as read: its version, where it came from, and its content.

    The content is exactly one of `data` (bytes to sniff and convert, named `name` for sniffing, with the
    MIME type the source declared, if any) or `turns` (a conversation, already structured). `version` is
    the version of what was read, which may be newer than the one listed. `origin` is the metadata every
    item made of the unit carries: the source reference, the namespace, and what the kind knows (file path,
    URL, repository, commit, thread, when it was observed); the pipeline adds language and MIME type.
    """

    unit_id: str
    version: str
    origin: MemoryMeta
    data: bytes | None = None
    name: str = ""
    mime: str | None = None
    turns: tuple[Turn, ...] | None = None

    def __post_init__(self) -> None:
        if (self.data is None) == (self.turns is None):
            raise ValueError(f"unit {self.unit_id!r}: content holds exactly one of data or turns")


@dataclass(frozen=True, slots=True)
class ReaderOptions:
    """What a host configures for every reader it builds (the kind's own settings are in its entry).

    `allow_private_networks` lets the network readers reach private and loopback addresses (tests, and a
    deployment that means to read its intranet); it is off unless set. `github_token` is the default token
    for GitHub sources whose entry names none (never logged).
    """

    max_file_bytes: int = FOLDER_FILE_SIZE_CAP_BYTES
    allow_private_networks: bool = False
    user_agent: str = "tm-reader"
    fetch_timeout_s: float = 20.0
    github_api_url: str = "https://api.github.com"
    github_token: str | None = field(default=None, repr=False)


def resolve_source_path(path: Path, workspace: Path | None) -> Path:
    """A configured folder or file path made absolute (docs/spec/sources-and-documents.md §3 root rule).

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
    """A source that can list its units and read one of them.

    `list_units` raises only when the source cannot be listed at all (missing root, unreachable host); a unit
    it cannot offer is a `Skipped` entry. `read` re-checks everything `list_units` checked, because the unit
    may have changed or the id may come from elsewhere, and raises a contract error (module docstring).
    """

    @property
    def kind(self) -> str:
        """The persisted config kind (a `SourceConfigKind` value for the built-in kinds)."""
        ...

    def list_units(self) -> Listing:
        """Every unit the source offers now, and the entries it refused."""
        ...

    def read(self, unit_id: str) -> UnitContent:
        """One unit's content now, never more than the source's size cap."""
        ...


@runtime_checkable
class WatchableSource(Protocol):
    """A source whose changes arrive as file events."""

    def watch(self, on_change: ChangeCallback, *, debounce_s: float = 0.5, reconcile_s: float = 300.0) -> FolderWatcher:
        """An unstarted watcher delivering this source's changed unit ids (ignored ones already dropped)."""
        ...


@runtime_checkable
class IncrementalSource(Protocol):
    """A source that can say what changed since a cursor without listing everything (a repository's compare).

    The cursor is the one a previous `list_units` or `list_changes` returned. None means the cursor can no
    longer be used (history rewritten, too much changed): the host lists everything and diffs it instead.
    """

    def list_changes(self, cursor: str) -> Delta | None:
        """The units added or modified and the ids removed since `cursor`, or None to list everything."""
        ...


@runtime_checkable
class ConditionalSource(Protocol):
    """A source whose listing asks a server per unit (a page, a feed), and can ask conditionally.

    `known` maps the unit ids the host holds to their versions. A unit the server says is unchanged (304) is
    listed with its known version, so the host neither reads nor converts it again; a unit the server is
    transiently unable to answer for (5xx, timeout) is listed with its known version too, never dropped, so a
    failing server is never taken for a deletion. Only a unit the server says is gone (404, 410) is left out.
    """

    def list_units_since(self, known: Mapping[str, str]) -> Listing:
        """Every unit the source offers now, asking about the `known` ones conditionally."""
        ...
