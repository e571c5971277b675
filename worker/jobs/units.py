"""One unit through the stages: read → (unchanged?) → sniff/convert → assemble, scrub and bound its items.

The stages are `sources` (read), `pipeline.convert` and `pipeline.items`; this module only chains them for one
unit and says, when a unit fails, at which stage and why. Any kind's content goes the same way: bytes are
converted first, a conversation's turns go straight to assembly.
"""

from __future__ import annotations

import asyncio

from engines.contract import EngineError, Error
from pipeline.convert import ConverterChain, ConvertLimits, RawDocument, convert_natively
from pipeline.items import Assembled, Content, ItemRules, assemble_items, content_digest
from pipeline.scrub import SanitizationReport
from sources import SourceReader, UnitContent
from worker.jobs.context import JobContext
from worker.jobs.prepared import UnitReading, UnitStageError
from worker.records import Change, ManifestEntry

_INLINE_READ_BYTES = 256 * 1024


def unchanged(previous: ManifestEntry | None, sha256: str) -> bool:
    """The unit holds exactly the content whose items are stored and nothing is left to clean up."""
    return (
        previous is not None
        and not previous.deleted
        and not previous.stale
        and bool(previous.item_ids)
        and previous.sha256 == sha256
    )


async def read_unit(
    ctx: JobContext, reader: SourceReader, change: Change, previous: ManifestEntry | None
) -> UnitReading:
    """Read one unit and make its items, converting documents in `ctx.converter`."""
    unit_id = change.unit_id
    # A small local file is read faster than a thread hop takes; anything else is read off the loop.
    small = change.size is not None and 0 < change.size <= _INLINE_READ_BYTES
    content = _read(reader, unit_id) if small else await asyncio.to_thread(_read, reader, unit_id)
    digest = _digest(content)
    if unchanged(previous, digest):
        return UnitReading(unit_id, content.version, digest, None)
    body: Content = content.turns or ()
    if content.data is not None:
        try:
            document = await ctx.converter.aconvert(_raw(content))
        except Exception as err:
            raise _stage_failure(unit_id, err) from err
        if document.no_text is not None:
            # Nothing to store, and nothing wrong: the unit's previous items, if any, are let go.
            return UnitReading(unit_id, content.version, digest, [], no_text=document.no_text)
        body = document
    assembled = _assembled(unit_id, body, content, ctx.settings.items)
    ctx.progress.redacted(assembled.report)
    return UnitReading(unit_id, content.version, digest, assembled.items)


def read_text_unit(
    reader: SourceReader,
    change: Change,
    previous: ManifestEntry | None,
    rules: ItemRules,
    native: ConverterChain,
    limits: ConvertLimits,
) -> tuple[UnitReading, SanitizationReport | None] | None:
    """`read_unit` for a unit that is only decoded, all in this thread (a text preparation process runs it).

    None when its bytes turn out to need a document converter after all (a PDF named `.md`): the caller
    sends it through `read_unit`. The report is None for a unit whose content is unchanged.
    """
    unit_id = change.unit_id
    content = _read(reader, unit_id)
    digest = _digest(content)
    if unchanged(previous, digest):
        return UnitReading(unit_id, content.version, digest, None), None
    body: Content = content.turns or ()
    if content.data is not None:
        try:
            converted = convert_natively(_raw(content), limits, native)
        except Exception as err:
            raise _stage_failure(unit_id, err) from err
        if converted is None:
            return None
        body = converted
    assembled = _assembled(unit_id, body, content, rules)
    return UnitReading(unit_id, content.version, digest, assembled.items), assembled.report


def _read(reader: SourceReader, unit_id: str) -> UnitContent:
    try:
        return reader.read(unit_id)
    except Error as err:
        raise UnitStageError(unit_id, "read", err) from err
    except Exception as err:
        # A reader's own bug must cost this unit, not the batch.
        failure = EngineError(f"{unit_id}: reading failed unexpectedly ({type(err).__name__}: {err})")
        raise UnitStageError(unit_id, "read", failure) from err


def _digest(content: UnitContent) -> str:
    return content_digest(content.data if content.data is not None else content.turns or ())


def _raw(content: UnitContent) -> RawDocument:
    return RawDocument(
        data=content.data or b"", filename=content.name or content.unit_id, mime=content.mime, origin=content.origin.url
    )


def _assembled(unit_id: str, body: Content, content: UnitContent, rules: ItemRules) -> Assembled:
    try:
        return assemble_items(body, content.origin, rules)
    except Exception as err:
        raise _stage_failure(unit_id, err) from err


def _stage_failure(unit_id: str, err: Exception) -> UnitStageError:
    if isinstance(err, Error):
        return UnitStageError(unit_id, "convert", err)
    # A converter's own bug must cost this unit, not the batch: the rest goes on.
    failure = EngineError(f"{unit_id}: conversion failed unexpectedly ({type(err).__name__}: {err})")
    return UnitStageError(unit_id, "convert", failure)
