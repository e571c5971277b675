"""One unit through the stages: read → (unchanged?) → sniff/convert → assemble → scrub → chunk.

Pure stages live in `pipeline/`; this module only chains them for one unit and says, when a unit
fails, at which stage and why.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from pathlib import Path

from engines.contract import Document, EngineError, Error, Item
from pipeline.assemble import Origin, document_item
from pipeline.chunk import split_document
from pipeline.convert import ConvertedDocument, ConverterChain, ConvertLimits, RawDocument, convert_natively
from pipeline.scrub import SanitizationReport, scrub_item
from worker.context import JobContext, PipelineSettings
from worker.model import Change, ManifestEntry, Signature, SourceEntry
from worker.readers import Reader

_INLINE_READ_BYTES = 256 * 1024


@dataclass(frozen=True)
class UnitReading:
    """A unit read and turned into items; `items` is None when its bytes are the ones last stored."""

    unit_id: str
    signature: Signature
    items: list[Item] | None


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


def unchanged(previous: ManifestEntry | None, sha256: str) -> bool:
    """The unit holds exactly the bytes whose items are stored and nothing is left to clean up."""
    return (
        previous is not None
        and not previous.deleted
        and not previous.stale
        and bool(previous.item_ids)
        and previous.signature.sha256 == sha256
    )


async def read_unit(
    ctx: JobContext, entry: SourceEntry, reader: Reader, change: Change, previous: ManifestEntry | None
) -> UnitReading:
    unit_id = change.unit_id
    try:
        # A small local file is read faster than a thread hop takes; a big one is read off the loop.
        small = 0 < change.size <= _INLINE_READ_BYTES
        data = reader.read(unit_id) if small else await asyncio.to_thread(reader.read, unit_id)
    except Error as err:
        raise UnitStageError(unit_id, "read", err) from err
    signature, digest = _signature(change, data)
    if unchanged(previous, digest):
        return UnitReading(unit_id, signature, None)
    try:
        converted = await ctx.converter.aconvert(RawDocument(data=data, filename=unit_id))
    except Exception as err:
        raise _convert_failure(unit_id, err) from err
    items, report = unit_items(entry, reader.root, change, converted, ctx.settings)
    ctx.progress.redacted(report)
    return UnitReading(unit_id, signature, items)


def read_text_unit(
    entry: SourceEntry,
    reader: Reader,
    change: Change,
    previous: ManifestEntry | None,
    settings: PipelineSettings,
    native: ConverterChain,
    limits: ConvertLimits,
) -> tuple[UnitReading, SanitizationReport | None] | None:
    """`read_unit` for a unit that is only decoded, all in this thread (a text preparation process runs it).

    None when its bytes turn out to need a document converter after all (a PDF named `.md`): the
    caller sends it through `read_unit`. The report is None for a unit whose bytes are unchanged.
    """
    unit_id = change.unit_id
    try:
        data = reader.read(unit_id)
    except Error as err:
        raise UnitStageError(unit_id, "read", err) from err
    signature, digest = _signature(change, data)
    if unchanged(previous, digest):
        return UnitReading(unit_id, signature, None), None
    try:
        converted = convert_natively(RawDocument(data=data, filename=unit_id), limits, native)
    except Exception as err:
        raise _convert_failure(unit_id, err) from err
    if converted is None:
        return None
    items, report = unit_items(entry, reader.root, change, converted, settings)
    return UnitReading(unit_id, signature, items), report


def _signature(change: Change, data: bytes) -> tuple[Signature, str]:
    digest = hashlib.sha256(data).hexdigest()
    return Signature(size=len(data), mtime_ns=change.mtime_ns, sha256=digest), digest


def _convert_failure(unit_id: str, err: Exception) -> UnitStageError:
    if isinstance(err, Error):
        return UnitStageError(unit_id, "convert", err)
    # A converter's own bug must cost this unit, not the batch: the rest goes on.
    failure = EngineError(f"{unit_id}: conversion failed unexpectedly ({type(err).__name__}: {err})")
    return UnitStageError(unit_id, "convert", failure)


def unit_items(
    entry: SourceEntry, root: Path, change: Change, converted: ConvertedDocument, settings: PipelineSettings
) -> tuple[list[Item], SanitizationReport]:
    """A converted unit's items: assembled with its metadata, scrubbed, and split to the item limit."""
    origin = Origin.of_file(
        entry.kind.item_source,
        entry.id,
        workspace=str(root),
        path=str(root / change.unit_id),
        mtime_ns=change.mtime_ns,
        namespace=entry.placed_at(),
    )
    document = document_item(converted.markdown, converted.title, converted.format.mime, converted.language, origin)
    scrubbed = scrub_item(document, settings.scrub_policy)
    clean = scrubbed.value
    parts = split_document(clean, settings.item_max_chars) if isinstance(clean, Document) else [clean]
    return list(parts), scrubbed.report
