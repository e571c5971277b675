"""The errors of reading a v1 TinyCortex workspace (docs/spec/legacy-import.md §8).

    LegacyImportError
    ├── LegacyNotFound       the workspace path is missing or not a directory
    ├── NotLegacy            a directory, but not a v1 workspace (`str()` says why)
    ├── LegacySqliteError    SQLite failed while reading after the workspace was opened
    ├── LegacyIoError        a file could not be read (a chunk's content file only falls back to its row)
    └── LegacyJsonError      `Checkpoint.from_json` was given text that is not a checkpoint

They are not contract errors: the workspace is the host's input, not an engine. A store that fails is the
contract's `EngineError` subclass `MigrationFailed` (`pipeline.legacy.migrate`).
"""

from __future__ import annotations


class LegacyImportError(Exception):
    """Base of every failure to read a v1 workspace."""


class LegacyNotFound(LegacyImportError):  # noqa: N818 - the spec's name
    """The workspace path is missing or is not a directory."""


class NotLegacy(LegacyImportError):  # noqa: N818 - the spec's name
    """The directory is not a v1 workspace; `reason` says what is missing."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"not a v1 workspace: {reason}")
        self.reason = reason

    def __reduce__(self) -> tuple[type[NotLegacy], tuple[str]]:
        return (type(self), (self.reason,))


class LegacySqliteError(LegacyImportError):
    """An `sqlite3.Error` while reading a workspace that opened."""


class LegacyIoError(LegacyImportError):
    """An `OSError` reading the workspace (a chunk's content file falls back to its row instead)."""


class LegacyJsonError(LegacyImportError):
    """Text given to `Checkpoint.from_json` that is not a checkpoint."""
