"""Importing a v1 TinyCortex workspace into any engine, resumably (docs/spec/legacy-import.md).

    with LegacyWorkspace.open(path) as ws:                 # read-only; NotLegacy when it is not one
        report = await migrate_with(engine, ws, saved, on_batch=persist)

The workspace is read straight from disk (SQLite and the chunk store's content files; no v1 code), section
by section in a fixed order: documents, chunks, conversations, learnings, profile. Each row becomes at most
one `StoreItem` whose source is `import` with the row's legacy id; every item is scrubbed before it is
stored. Nothing is ever written to the workspace.

    schema      opening read-only and detection
    values      reading column values and v1's JSON columns
    mapping     namespace classes and the row → item mappings
    sections    each section in key order, counting skipped rows
    paging      one pass over a table in key order, rows grouped by their exact keys
    checkpoint  the resume point
    workspace   `LegacyWorkspace`: items, items_from, counts
    batches     the batches a migration stores: scrubbed, placed, with their checkpoints
    helper      the helper process that prepares batches while the engine stores
    migrate     `migrate`, `migrate_with`, `MigrationFailed`
    errors      the read failures

Each module's docstring cites the sections it implements. Other packages import these names from here only.
"""

from pipeline.legacy.checkpoint import SECTIONS, Checkpoint, ChunkKey
from pipeline.legacy.errors import (
    LegacyImportError,
    LegacyIoError,
    LegacyJsonError,
    LegacyNotFound,
    LegacySqliteError,
    NotLegacy,
)
from pipeline.legacy.mapping import TAINT_TAG, Skip
from pipeline.legacy.migrate import (
    HELPER_FROM_ITEMS,
    Keep,
    MigrationFailed,
    MigrationReport,
    OnBatch,
    migrate,
    migrate_with,
    prepared_items,
)
from pipeline.legacy.sections import MAX_CONTENT_FILE_BYTES, ReadStats
from pipeline.legacy.workspace import DEFAULT_PAGE_SIZE, ImportedItem, LegacyCounts, LegacyWorkspace

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "HELPER_FROM_ITEMS",
    "MAX_CONTENT_FILE_BYTES",
    "SECTIONS",
    "TAINT_TAG",
    "Checkpoint",
    "ChunkKey",
    "ImportedItem",
    "Keep",
    "LegacyCounts",
    "LegacyImportError",
    "LegacyIoError",
    "LegacyJsonError",
    "LegacyNotFound",
    "LegacySqliteError",
    "LegacyWorkspace",
    "MigrationFailed",
    "MigrationReport",
    "NotLegacy",
    "OnBatch",
    "ReadStats",
    "Skip",
    "migrate",
    "migrate_with",
    "prepared_items",
]
