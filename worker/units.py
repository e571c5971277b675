"""One unit through the stages: read → (unchanged?) → sniff/convert → assemble → scrub → chunk.

Pure stages live in `pipeline/`; this module only chains them for one unit and says, when a unit
fails, at which stage and why.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass

from engines.contract import Document, EngineError, Error, Item
from pipeline.assemble import Origin, document_item
from pipeline.chunk import split_document
from pipeline.convert import RawDocument
from pipeline.scrub import scrub_item
from worker.context import JobContext
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
    digest = hashlib.sha256(data).hexdigest()
    signature = Signature(size=len(data), mtime_ns=change.mtime_ns, sha256=digest)
    if unchanged(previous, digest):
        return UnitReading(unit_id, signature, None)
    try:
        converted = await ctx.converter.aconvert(RawDocument(data=data, filename=unit_id))
    except Error as err:
        raise UnitStageError(unit_id, "convert", err) from err
    except Exception as err:
        # A converter's own bug must cost this unit, not the batch: the rest goes on.
        failure = EngineError(f"{unit_id}: conversion failed unexpectedly ({type(err).__name__}: {err})")
        raise UnitStageError(unit_id, "convert", failure) from err
    origin = Origin.of_file(
        entry.kind.item_source,
        entry.id,
        workspace=str(reader.root),
        path=str(reader.root / unit_id),
        mtime_ns=change.mtime_ns,
        namespace=entry.placed_at(),
    )
    document = document_item(converted.markdown, converted.title, converted.format.mime, converted.language, origin)
    scrubbed = scrub_item(document, ctx.settings.scrub_policy)
    ctx.progress.redacted(scrubbed.report)
    clean = scrubbed.value
    parts = split_document(clean, ctx.settings.item_max_chars) if isinstance(clean, Document) else [clean]
    return UnitReading(unit_id, signature, list(parts))
