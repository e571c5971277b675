"""What preparing a unit yields: its items or the stage it failed at, and the text-preparation hand-off.

Plain records, so a text preparation process (`TextPreparer`) can take a `TextJob` and send `Prepared`
units back pickled; they hold only this project's types over text.
"""

from __future__ import annotations

from dataclasses import dataclass

from engines.contract import Error, StoreItem
from pipeline.items import ItemRules
from pipeline.scrub import SanitizationReport
from sources import ReaderOptions, SourceEntry, SourceKindEntry
from worker.records import Change, ManifestEntry


@dataclass(frozen=True)
class UnitReading:
    """A unit read and turned into items; `items` is None when its content is the one last stored, and empty,
    with `no_text` saying why, when its converter found no text in it (a photograph read by OCR)."""

    unit_id: str
    version: str
    sha256: str
    items: list[StoreItem] | None
    no_text: str | None = None


class UnitStageError(Exception):
    """A unit that could not go through a stage: it becomes a dead letter, the batch goes on."""

    def __init__(self, unit_id: str, stage: str, error: Error) -> None:
        super().__init__(f"{unit_id}: {stage}: {error}")
        self.unit_id = unit_id
        self.stage = stage
        self.error = error

    def __reduce__(self) -> tuple[type[UnitStageError], tuple[str, str, Error]]:
        # A text preparation process sends it back pickled; the default would pass only the message.
        return (UnitStageError, (self.unit_id, self.stage, self.error))


@dataclass(frozen=True)
class TextJob:
    """Text units of one batch, with what another process needs to read and prepare them: the source, where
    its kind's reader is (`kind`), the reader options, the changes, the manifest entries they start from
    (`previous` may hold other units' entries too; each slice sent to a process carries only its own), and
    the item rules."""

    entry: SourceEntry
    kind: SourceKindEntry
    options: ReaderOptions
    changes: list[Change]
    previous: dict[str, ManifestEntry]
    rules: ItemRules

    def sliced(self, changes: list[Change]) -> TextJob:
        """The same job for some of its changes, with only their manifest entries."""
        previous = {c.unit_id: self.previous[c.unit_id] for c in changes if c.unit_id in self.previous}
        return TextJob(self.entry, self.kind, self.options, changes, previous, self.rules)


@dataclass(frozen=True)
class Prepared:
    """One unit as a preparation process left it: read and turned into items, failed at a stage, or handed
    back (`reading` and `failure` both None) because its bytes need a document converter."""

    change: Change
    reading: UnitReading | None = None
    report: SanitizationReport | None = None
    failure: UnitStageError | None = None
