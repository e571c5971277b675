"""Source readers: list units, detect changes against a manifest, read one unit.

Local sources (`FolderReader`, `FileReader`) implement `SourceReader` and `WatchableSource`; `FolderWatcher` turns
file events into debounced sets of changed unit ids, or `{RESCAN}`.
"""

from sources.base import (
    FILE_KIND,
    FOLDER_FILE_SIZE_CAP_BYTES,
    FOLDER_KIND,
    ChangeCallback,
    Listing,
    Signature,
    Skipped,
    SourceReader,
    Unit,
    WatchableSource,
    hash_bytes,
    needs_hash,
    resolve_source_path,
)
from sources.file import FileReader
from sources.folder import FolderReader
from sources.watch import RESCAN, FolderWatcher

__all__ = [
    "FILE_KIND",
    "FOLDER_FILE_SIZE_CAP_BYTES",
    "FOLDER_KIND",
    "RESCAN",
    "ChangeCallback",
    "FileReader",
    "FolderReader",
    "FolderWatcher",
    "Listing",
    "Signature",
    "Skipped",
    "SourceReader",
    "Unit",
    "WatchableSource",
    "hash_bytes",
    "needs_hash",
    "resolve_source_path",
]
