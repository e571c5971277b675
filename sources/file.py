"""The file source (docs/spec/sources-and-documents.md §4): one configured file is one unit, its id the file name.

Reading is the folder source's: the file's folder is the root (a link among the folders above it is the user's
own choice and is resolved), but the file itself is never a followed link, never over the cap, and always a
regular file when read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from engines.contract import EngineError, InvalidRequestError, NotFoundError, SourceKind
from sources.base import (
    FOLDER_FILE_SIZE_CAP_BYTES,
    ChangeCallback,
    Listing,
    ReaderOptions,
    Skipped,
    Unit,
    UnitContent,
    resolve_source_path,
)
from sources.config import SourceConfigKind, SourceEntry, SourceRequest, configured_entry, source_id_for
from sources.local_files import (
    configured_path,
    file_content,
    id_parts,
    local_path,
    local_version,
    read_beneath,
    refusal,
    stat_beneath,
)
from sources.registry import KindSpec
from sources.watch import FolderWatcher


class FileReader:
    """Lists and reads the one file at `path` (relative only with a `workspace`); its unit id is the file name.

    Items read carry `entry`'s source reference and namespace (none without an entry).
    """

    kind = SourceConfigKind.FILE

    def __init__(
        self,
        path: Path,
        max_file_bytes: int = FOLDER_FILE_SIZE_CAP_BYTES,
        *,
        workspace: Path | None = None,
        entry: SourceEntry | None = None,
    ) -> None:
        self._configured = path
        self._entry = entry
        self.path = resolve_source_path(path, workspace)
        # The folder the unit id is relative to, as for a folder source.
        self.root = self.path.parent
        self.name = self.path.name
        self.max_file_bytes = max_file_bytes
        if not self.name or self.name in (".", ".."):
            raise InvalidRequestError(f"not a file path: {path}")

    def list_units(self) -> Listing:
        """The file as one unit, or as one skipped entry; raises when the path is missing or a folder."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError as exc:
            raise NotFoundError(f"file does not exist: {self._configured} (resolved to {self.path})") from exc
        except OSError as exc:
            raise EngineError(f"cannot read file {self.path}: {exc.strerror or type(exc).__name__}") from exc
        if stat.S_ISDIR(st.st_mode):
            raise InvalidRequestError(f"not a file: {self.path}; use a folder source for a folder")
        reason = refusal(st, self.max_file_bytes)
        if reason is not None:
            return Listing(skipped=(Skipped(self.name, reason),))
        return Listing(units=(Unit(self.name, local_version(st), st.st_size),))

    def read(self, unit_id: str) -> UnitContent:
        """The file, re-checked now: still a regular file, not a link, under the cap."""
        self._check_id(unit_id)
        root = os.fspath(self.root)
        data, st = read_beneath(root, unit_id, self.max_file_bytes)
        return file_content(self._entry, SourceKind.FILE, root, unit_id, data, st)

    def stat_unit(self, unit_id: str) -> Unit:
        """The file's listing entry now, with the checks `read` makes; `NotFoundError` once it is gone."""
        self._check_id(unit_id)
        st = stat_beneath(os.fspath(self.root), unit_id, self.max_file_bytes)
        return Unit(unit_id, local_version(st), st.st_size)

    def watch(self, on_change: ChangeCallback, *, debounce_s: float = 0.5, reconcile_s: float = 300.0) -> FolderWatcher:
        """Watches only the file's folder, not below it, and drops every other entry's events."""
        return FolderWatcher(
            self.root,
            on_change,
            debounce_s=debounce_s,
            reconcile_s=reconcile_s,
            ignore=lambda unit_id: unit_id != self.name,
            recursive=False,
        )

    def _check_id(self, unit_id: str) -> None:
        id_parts(unit_id)  # a path escape is reported as such
        if unit_id != self.name:
            raise InvalidRequestError(f"cannot read '{unit_id}': this file source holds only '{self.name}'")


def _configure(request: SourceRequest) -> SourceEntry:
    request.refuse_options(SourceConfigKind.FILE.alias)
    path = local_path(request.target)
    if path.is_dir():
        raise InvalidRequestError(f"{request.target} is a folder; use a folder source for a folder")
    real = os.path.realpath(path)
    return configured_entry(request, source_id_for(path), real, path=real)


def _build(entry: SourceEntry, options: ReaderOptions) -> FileReader:
    return FileReader(configured_path(entry), max_file_bytes=options.max_file_bytes, entry=entry)


SPEC = KindSpec(
    kind=SourceConfigKind.FILE,
    target="path",
    summary="one file",
    configure=_configure,
    build=_build,
)
