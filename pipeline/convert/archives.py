"""Zip-based documents (DOCX, XLSX, PPTX, EPUB) checked before any library opens them
(docs/spec/sources-and-documents.md §10.5 "Archives").

Only the central directory is read here; nothing is inflated. The declared uncompressed sizes bound what
a conversion can inflate because every library markitdown uses for these formats (mammoth, openpyxl,
python-pptx, its EPUB reader) reads entries through Python's `zipfile`, which never returns more than an
entry's declared size and fails the entry's CRC check when the stream holds more: a lying entry is refused
by that check, so no separate capped pre-inflation pass is needed.
"""

from __future__ import annotations

import io
import zipfile

from engines.contract import InvalidRequestError
from pipeline.convert.documents import RawDocument
from pipeline.convert.limits import ConvertLimits, format_bytes
from pipeline.sniff import DocumentFormat

# The part each kind cannot do without, and how a message names the kind. A zip sniffed as docx only because
# nothing else matched (a plain archive) fails here, with a reason, instead of deep inside mammoth.
_MAIN_PARTS: dict[DocumentFormat, tuple[str, str]] = {
    DocumentFormat.DOCX: ("word/", "a Word document"),
    DocumentFormat.XLSX: ("xl/", "an Excel workbook"),
    DocumentFormat.PPTX: ("ppt/", "a PowerPoint presentation"),
    DocumentFormat.EPUB: ("META-INF/container.xml", "an EPUB book"),
}


def open_archive(raw: RawDocument, fmt: DocumentFormat, limits: ConvertLimits) -> zipfile.ZipFile:
    """The archive in `raw`, its directory read; refused when damaged, too big once inflated, or not `fmt`."""
    archive = _read_directory(raw, fmt)
    declared = sum(info.file_size for info in archive.infolist())
    if declared > limits.max_decompressed_bytes:
        raise InvalidRequestError(
            f"{raw.label} declares {format_bytes(declared)} uncompressed, "
            f"over the {format_bytes(limits.max_decompressed_bytes)} limit"
        )
    _require_main_part(archive, raw, fmt)
    return archive


def _read_directory(raw: RawDocument, fmt: DocumentFormat) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(raw.data))
    except MemoryError:
        raise
    except Exception as exc:
        # zipfile raises BadZipFile, but also ValueError, OSError or struct.error on some damaged directories.
        raise InvalidRequestError(f"{raw.label}: unreadable {fmt}: the zip archive is damaged") from exc


def _require_main_part(archive: zipfile.ZipFile, raw: RawDocument, fmt: DocumentFormat) -> None:
    part, kind = _MAIN_PARTS.get(fmt, ("", ""))
    if not part or any(name.startswith(part) for name in archive.namelist()):
        return
    raise InvalidRequestError(
        f"{raw.label} is a zip archive but not {kind} (it has no {part} part); "
        "only Word, Excel, PowerPoint and EPUB archives are converted"
    )
