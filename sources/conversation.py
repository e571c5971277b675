"""The conversation source (docs/spec/sources-and-documents.md §8.1): a folder of chat threads, each thread a unit read
as turns.

The folder is walked, contained, capped and watched exactly as a folder source is (`FolderReader`, selecting
`*.json` and `*.jsonl` files unless the entry names its own patterns); `sources.threads` parses what is read. A
file holding one thread (thread JSON, JSON lines) is the unit `<relative path>`, versioned as the folder
versions it. An export holding many (ChatGPT's or Claude's `conversations.json`) is one unit per thread,
`<relative path>#<thread id>`, versioned by a hash of that thread's own record, so a thread that changes is read
alone and one that disappears from the export is deleted alone. File names holding `#` are refused for that.

Listing reads the first bytes of each selected file to tell an export (a JSON list) from a thread, and parses
each export in full (bounded by the file cap). A file or folder the listing refuses (too large, a link, an
unreadable folder, an export that cannot be parsed now) is a `Skipped` entry, and the units the host already
holds from it are listed with the versions it holds (the `ConditionalSource` ability), so a half-written export
or a file grown past the cap never deletes what was stored from it. A thread whose messages all have unknown
roles is refused when read (a dead letter naming the roles); one with some keeps the others, drops those (spec
docs/spec/sources-and-documents.md §8.1) and logs how many it dropped.

Reading an export's thread parses the file again, unless it is the file this reader parsed last and still has
the same size and mtime: the units of one file are listed, and so read, one after the other.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final, TypeVar

from engines.contract import (
    Error,
    InvalidRequestError,
    MemoryMeta,
    NotFoundError,
    SourceKind,
    SourceRef,
    TurnRange,
)
from sources.base import FOLDER_FILE_SIZE_CAP_BYTES, ChangeCallback, Listing, ReaderOptions, Skipped, Unit, UnitContent
from sources.config import SourceConfigKind, SourceEntry, SourceRequest, configured_entry, source_id_for
from sources.folder import FolderReader
from sources.local_files import configured_path, local_path
from sources.registry import KindSpec
from sources.threads import Export, Thread, exported_turns, load_thread_file
from sources.watch import RESCAN, FolderWatcher

logger = logging.getLogger(__name__)

DEFAULT_INCLUDE: Final = ("**/*.json", "**/*.jsonl")
"""The files a conversation source offers when its entry names no include patterns."""

THREAD_MARK: Final = "#"
"""What separates an export's path from a thread id in the unit id `<relative path>#<thread id>`."""

REASON_MARK_IN_NAME: Final = "file name contains '#', which unit ids use to name a thread of an export; rename it"

_MAX_THREAD_ID: Final = 255
_UTF8_BOM: Final = b"\xef\xbb\xbf"
# Enough to see past indentation to the first character of any JSON a person or a tool writes.
_HEAD_BYTES: Final = 4096
_PEEK_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class _Loaded:
    """One thread file as read and parsed: its folder version, the folder's origin of it, its thread(s)."""

    path: str
    version: str
    origin: MemoryMeta
    content: Thread | Export


class ConversationReader:
    """Lists and reads the threads of the thread files below `root` (relative only with a `workspace`).

    `include` replaces `DEFAULT_INCLUDE` (docs/spec/sources-and-documents.md §3 globs); the format of a file is told
    from its content, not its name. Files over `max_file_bytes` are skipped and refused as a folder source does. Items
    carry `entry`'s source reference and namespace (none without an entry). Also a `WatchableSource` and a
    `ConditionalSource` (module docstring).
    """

    kind = SourceConfigKind.CONVERSATION

    def __init__(
        self,
        root: Path,
        include: list[str] | None = None,
        max_file_bytes: int = FOLDER_FILE_SIZE_CAP_BYTES,
        *,
        workspace: Path | None = None,
        entry: SourceEntry | None = None,
    ) -> None:
        self._entry = entry
        self._files = FolderReader(
            root, include=include or list(DEFAULT_INCLUDE), max_file_bytes=max_file_bytes, workspace=workspace
        )
        self.root = self._files.root
        self._lock = threading.Lock()
        self._last: _Loaded | None = None

    def list_units(self) -> Listing:
        """Every thread now (module docstring); raises only when the folder itself cannot be listed."""
        return self.list_units_since({})

    def list_units_since(self, known: Mapping[str, str]) -> Listing:
        """Every thread now; what the host holds (`known`) from a file or folder refused now keeps its version."""
        files = self._files.list_units()
        units: list[Unit] = []
        skipped = list(files.skipped)
        for file in files.units:
            found, not_offered = self._units_of(file, known)
            units.extend(found)
            skipped.extend(not_offered)
        for refused in files.skipped:  # too large, a link, an unreadable folder: what was stored from it stays
            units.extend(_known_below(known, refused.unit_id))
        return Listing(
            units=tuple(sorted(units, key=lambda unit: unit.id)),
            skipped=tuple(sorted(skipped, key=lambda entry: entry.unit_id)),
        )

    def read(self, unit_id: str) -> UnitContent:
        """One thread's turns, re-checking containment, selection and the cap, and parsing the file now."""
        path, mark, thread_id = unit_id.partition(THREAD_MARK)
        if mark and (reason := thread_id_refusal(thread_id)) is not None:
            raise InvalidRequestError(f"cannot read '{unit_id}': thread id {thread_id!r} {reason}")
        loaded = self._load(path)
        if mark:
            thread, version = _exported_thread(loaded, thread_id, unit_id)
        else:
            thread_id, thread, version = _single_thread(loaded)
        if thread.dropped:
            dropped = ", ".join(f"{count} with role {role!r}" for role, count in thread.dropped)
            logger.warning("%s: messages of unknown roles dropped (%s)", unit_id, dropped)
        origin = self._origin(loaded.origin, thread_id, thread)
        return UnitContent(unit_id, version, origin, turns=thread.turns, name=path)

    def watch(self, on_change: ChangeCallback, *, debounce_s: float = 0.5, reconcile_s: float = 300.0) -> FolderWatcher:
        """The folder's watcher; a change to an export asks for a full listing (`RESCAN`), since a file event
        cannot say which of its threads changed, while a thread file's id is passed on as it is."""

        def relay(changed: set[str]) -> None:
            exports = any(self._is_export(unit_id) for unit_id in changed if unit_id != RESCAN)
            on_change({RESCAN} if exports else changed)

        return self._files.watch(relay, debounce_s=debounce_s, reconcile_s=reconcile_s)

    def _units_of(self, file: Unit, known: Mapping[str, str]) -> tuple[list[Unit], list[Skipped]]:
        """The units of one listed file: itself (one thread) or its threads (an export), and its refusals."""
        if THREAD_MARK in file.id:
            return [], [Skipped(file.id, REASON_MARK_IN_NAME)]
        if self._is_export(file.id):
            try:
                loaded = self._load(file.id)
            except Error as exc:
                return _known_below(known, file.id), [Skipped(file.id, exc.message)]
            if isinstance(loaded.content, Export):
                return _export_units(file, loaded.content)
        reason = thread_id_refusal(PurePosixPath(file.id).stem)
        if reason is not None:
            return [], [Skipped(file.id, f"its thread id (the file name) {reason}")]
        return [file], []

    def _load(self, path: str) -> _Loaded:
        """`path` read through the folder source's checks and parsed, or the last file parsed if unchanged."""
        with self._lock:
            last = self._last
        if last is not None and last.path == path and self._files.stat_unit(path).version == last.version:
            return last
        content = self._files.read(path)
        data = content.data or b""
        loaded = _Loaded(path, content.version, content.origin, _guarded(lambda: load_thread_file(data, path), path))
        with self._lock:
            self._last = loaded
        return loaded

    def _is_export(self, path: str) -> bool:
        """Whether `path` starts as an export does; False for anything unreadable, which reading reports."""
        try:
            fd = os.open(self.root / path, _PEEK_FLAGS)
        except (OSError, ValueError):  # gone, unreadable, or a name no file can have
            return False
        # Only a hint for how to read the file: reading it goes through every containment check.
        try:
            return stat.S_ISREG(os.fstat(fd).st_mode) and _is_export_head(os.read(fd, _HEAD_BYTES))
        except OSError:
            return False
        finally:
            os.close(fd)

    def _origin(self, file_origin: MemoryMeta, thread_id: str, thread: Thread) -> MemoryMeta:
        """docs/spec/sources-and-documents.md §2.4: the folder's fields, the thread id, the turns, and the time of the
        last timed turn (else when the export says the thread changed, else the file's mtime)."""
        observed = next((turn.at for turn in reversed(thread.turns) if turn.at is not None), thread.updated_at)
        fields = {
            "workspace": file_origin.workspace,
            "folder": file_origin.folder,
            "file_path": file_origin.file_path,
            "thread_id": thread_id,
            "turns": TurnRange(first=0, last=len(thread.turns) - 1),
            "observed_at": observed or file_origin.observed_at,
        }
        if self._entry is None:
            return MemoryMeta.model_validate({"source": SourceRef(kind=SourceKind.CONVERSATION), **fields})
        return self._entry.origin(SourceKind.CONVERSATION, **fields)


def thread_id_refusal(thread_id: str) -> str | None:
    """Why `thread_id` cannot name a thread (docs/spec/sources-and-documents.md §8.1, and `#`, which unit ids use), or
    None when it can."""
    if thread_id in ("", ".", "..") or not thread_id.strip():
        return "is empty, '.' or '..'"
    if "/" in thread_id or "\\" in thread_id:
        return "contains '/' or '\\'"
    if THREAD_MARK in thread_id:
        return f"contains {THREAD_MARK!r}, which unit ids use to name a thread of an export"
    if not thread_id.isprintable() or not _encodable(thread_id):
        return "contains control characters"
    return f"is longer than {_MAX_THREAD_ID} characters" if len(thread_id) > _MAX_THREAD_ID else None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_export_head(head: bytes) -> bool:
    """Whether a file starting with `head` is an export (a JSON list); a thread file is an object or lines."""
    return head.removeprefix(_UTF8_BOM).lstrip().startswith(b"[")


def _exported_thread(loaded: _Loaded, thread_id: str, unit_id: str) -> tuple[Thread, str]:
    """Thread `thread_id` of the export `loaded` and its version; `NotFoundError` when the file holds no such
    thread (or is not an export any more)."""
    if not isinstance(loaded.content, Export):
        raise NotFoundError(f"thread {thread_id!r} is not in {loaded.path}: it holds one thread, unit '{loaded.path}'")
    exported = loaded.content.thread(thread_id)
    if exported is None:
        raise NotFoundError(f"thread {thread_id!r} is not in {loaded.path}")
    return _guarded(lambda: exported_turns(exported, unit_id), unit_id), exported.version


def _single_thread(loaded: _Loaded) -> tuple[str, Thread, str]:
    """The thread id (the file stem), the thread and the version of a file holding one thread."""
    path = loaded.path
    if isinstance(loaded.content, Export):
        count = len(loaded.content.threads)
        raise InvalidRequestError(f"cannot read '{path}': an export of {count} threads; read '{path}#<id>'")
    thread_id = PurePosixPath(path).stem
    reason = thread_id_refusal(thread_id)
    if reason is not None:
        raise InvalidRequestError(f"cannot read '{path}': its thread id {thread_id!r} {reason}")
    return thread_id, loaded.content, loaded.version


def _export_units(file: Unit, export: Export) -> tuple[list[Unit], list[Skipped]]:
    """An export's threads as units (each as large as its file: reading one parses the file), and the
    entries refused: not conversations, repeated ids, ids that cannot name a thread."""
    units: list[Unit] = []
    refused = [Skipped(f"{file.id}{THREAD_MARK}{label}", why) for label, why in export.refused]
    for thread in export.threads:
        reason = thread_id_refusal(thread.thread_id)
        if reason is None:
            units.append(Unit(f"{file.id}{THREAD_MARK}{thread.thread_id}", thread.version, file.size))
        else:
            refused.append(Skipped(f"{file.id}{THREAD_MARK}[{thread.index}]", f"its id {thread.thread_id!r} {reason}"))
    return units, refused


def _known_below(known: Mapping[str, str], path: str) -> list[Unit]:
    """The units the host holds from `path`: the file itself, its threads, or, for a folder, what is below it."""
    return [
        Unit(unit_id, version)
        for unit_id, version in known.items()
        if unit_id == path or unit_id.startswith((f"{path}{THREAD_MARK}", f"{path}/"))
    ]


def _guarded(parse: Callable[[], _T], where: str) -> _T:
    """`parse()`, with what a hostile file can still make a parser raise turned into a refusal naming it."""
    try:
        return parse()
    except (ValueError, RecursionError) as exc:  # a pydantic ValidationError is a ValueError
        raise InvalidRequestError(f"{where}: not a readable conversation ({type(exc).__name__})") from exc


def _configure(request: SourceRequest) -> SourceEntry:
    request.refuse_options(SourceConfigKind.CONVERSATION.alias, "include")
    path = local_path(request.target)
    if not path.is_dir():
        raise InvalidRequestError(
            f"{request.target} is not a folder; a conversation source reads a folder of thread files and exports"
        )
    real = os.path.realpath(path)
    return configured_entry(request, source_id_for(path), real, path=real, include=request.include)


def _build(entry: SourceEntry, options: ReaderOptions) -> ConversationReader:
    root = configured_path(entry)
    return ConversationReader(root, include=entry.include or None, max_file_bytes=options.max_file_bytes, entry=entry)


SPEC = KindSpec(
    kind=SourceConfigKind.CONVERSATION,
    target="path",
    summary="chat threads in a folder: thread JSON, JSON lines, ChatGPT and Claude exports",
    configure=_configure,
    build=_build,
)
