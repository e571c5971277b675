"""From a configured source to the reader that lists and reads its units."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from engines.contract import InvalidRequestError, UnsupportedError
from sources import FileReader, FolderReader, Listing
from worker.model import SourceConfigKind, SourceEntry


class Reader(Protocol):
    """What a job needs of a reader: its units, a unit's bytes, and the directory ids are relative to."""

    @property
    def root(self) -> Path: ...

    def list_units(self) -> Listing: ...

    def read(self, unit_id: str) -> bytes: ...


class Readers:
    """Builds the reader for a source entry (local kinds now; network kinds join with their sources)."""

    def __init__(self, max_file_bytes: int = 10 * 1024 * 1024) -> None:
        self.max_file_bytes = max_file_bytes

    def reader_for(self, entry: SourceEntry) -> Reader:
        if entry.path is None:
            raise InvalidRequestError(f"source {entry.id}: path is required for this source kind")
        path = Path(os.path.realpath(entry.path))
        if entry.kind is SourceConfigKind.FOLDER:
            return FolderReader(path, include=entry.include or None, max_file_bytes=self.max_file_bytes)
        if entry.kind is SourceConfigKind.FILE:
            return FileReader(path, max_file_bytes=self.max_file_bytes)
        raise UnsupportedError(f"source {entry.id}: {entry.kind.value} sources are not available in this build yet")
