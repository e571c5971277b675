"""Source readers: configure a source, list its units, read one unit into content with its origin.

One `SourceReader` protocol (`sources.base`) for every kind; `WatchableSource`, `IncrementalSource` and
`ConditionalSource` are the abilities only some kinds have. `REGISTRY` maps a kind to its reader, as the
engine registry maps an engine id: the six kinds of `SourceConfigKind` are built in (the local ones,
`FolderReader` and `FileReader`, exported here), and others come from the `source_kinds` setting or from
installed distributions' `tinymemory.sources` entry points (docs/extending.md).
`FolderWatcher` turns file events into debounced sets of changed unit ids, or `{RESCAN}`.
"""

from sources.base import (
    FOLDER_FILE_SIZE_CAP_BYTES,
    ChangeCallback,
    ConditionalSource,
    Delta,
    IncrementalSource,
    Listing,
    ReaderOptions,
    Skipped,
    SourceReader,
    Unit,
    UnitContent,
    WatchableSource,
    resolve_source_path,
)
from sources.config import (
    SourceConfigKind,
    SourceEntry,
    SourceRequest,
    configured_entry,
    local_request,
    source_id_for,
)
from sources.file import FileReader
from sources.folder import FolderReader
from sources.registry import (
    REGISTRY,
    KindSpec,
    SourceKindEntry,
    SourceReaders,
    SourceRegistry,
    register_kinds,
)
from sources.watch import RESCAN, FolderWatcher

__all__ = [
    "FOLDER_FILE_SIZE_CAP_BYTES",
    "REGISTRY",
    "RESCAN",
    "ChangeCallback",
    "ConditionalSource",
    "Delta",
    "FileReader",
    "FolderReader",
    "FolderWatcher",
    "IncrementalSource",
    "KindSpec",
    "Listing",
    "ReaderOptions",
    "Skipped",
    "SourceConfigKind",
    "SourceEntry",
    "SourceKindEntry",
    "SourceReader",
    "SourceReaders",
    "SourceRegistry",
    "SourceRequest",
    "Unit",
    "UnitContent",
    "WatchableSource",
    "configured_entry",
    "local_request",
    "register_kinds",
    "resolve_source_path",
    "source_id_for",
]
