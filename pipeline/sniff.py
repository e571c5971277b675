"""Document formats and sniffing (sources-and-documents §10.1–10.3).

`sniff` decides a format from the bytes first and trusts the hints (MIME, filename) only where the bytes do
not settle it: a zip or a PDF is what its bytes say, whatever a server or a file name claims.
"""

from __future__ import annotations

import codecs
import struct
from enum import StrEnum

from pipeline.languages import file_extension, language_for_path


class DocumentFormat(StrEnum):
    """What a document is; decides which converter handles it and the MIME type stored with it."""

    MARKDOWN = "markdown"
    PLAIN_TEXT = "plain_text"
    HTML = "html"
    CODE = "code"
    PDF = "pdf"
    DOCX = "docx"
    XLSX = "xlsx"
    PPTX = "pptx"
    UNKNOWN = "unknown"

    @property
    def mime(self) -> str:
        """The MIME type stored with a document of this format."""
        return _FORMAT_MIME[self][0]

    @property
    def extension(self) -> str:
        """The file extension, without its dot, for a file of this format."""
        return _FORMAT_MIME[self][1]

    @property
    def is_textual(self) -> bool:
        """True when the raw bytes are the text itself (UTF-8), so the native converter can take them."""
        return self in _TEXTUAL


_OOXML_MIME = "application/vnd.openxmlformats-officedocument"
_FORMAT_MIME: dict[DocumentFormat, tuple[str, str]] = {
    DocumentFormat.MARKDOWN: ("text/markdown", "md"),
    DocumentFormat.PLAIN_TEXT: ("text/plain", "txt"),
    DocumentFormat.HTML: ("text/html", "html"),
    DocumentFormat.CODE: ("text/x-source", "txt"),
    DocumentFormat.PDF: ("application/pdf", "pdf"),
    DocumentFormat.DOCX: (f"{_OOXML_MIME}.wordprocessingml.document", "docx"),
    DocumentFormat.XLSX: (f"{_OOXML_MIME}.spreadsheetml.sheet", "xlsx"),
    DocumentFormat.PPTX: (f"{_OOXML_MIME}.presentationml.presentation", "pptx"),
    DocumentFormat.UNKNOWN: ("application/octet-stream", "bin"),
}

_TEXTUAL = frozenset({DocumentFormat.MARKDOWN, DocumentFormat.PLAIN_TEXT, DocumentFormat.HTML, DocumentFormat.CODE})
_OOXML = frozenset({DocumentFormat.DOCX, DocumentFormat.XLSX, DocumentFormat.PPTX})

# The legacy binary Office types (application/msword, application/vnd.ms-excel, application/vnd.ms-powerpoint)
# are absent on purpose: no converter reads them, and mapping them to an OOXML format would promise one.
_MIME_FORMATS: dict[str, DocumentFormat] = {
    "text/markdown": DocumentFormat.MARKDOWN,
    "text/x-markdown": DocumentFormat.MARKDOWN,
    "text/plain": DocumentFormat.PLAIN_TEXT,
    "text/html": DocumentFormat.HTML,
    "application/xhtml+xml": DocumentFormat.HTML,
    "text/x-source": DocumentFormat.CODE,
    "application/pdf": DocumentFormat.PDF,
    DocumentFormat.DOCX.mime: DocumentFormat.DOCX,
    DocumentFormat.XLSX.mime: DocumentFormat.XLSX,
    DocumentFormat.PPTX.mime: DocumentFormat.PPTX,
    "application/vnd.ms-excel.sheet.macroenabled.12": DocumentFormat.XLSX,
}

# `.doc`, `.xls` and `.ppt` are absent for the same reason as the legacy MIME types.
_EXTENSION_FORMATS: dict[str, DocumentFormat] = {
    "md": DocumentFormat.MARKDOWN,
    "markdown": DocumentFormat.MARKDOWN,
    "mdown": DocumentFormat.MARKDOWN,
    "txt": DocumentFormat.PLAIN_TEXT,
    "text": DocumentFormat.PLAIN_TEXT,
    "log": DocumentFormat.PLAIN_TEXT,
    "html": DocumentFormat.HTML,
    "htm": DocumentFormat.HTML,
    "xhtml": DocumentFormat.HTML,
    "pdf": DocumentFormat.PDF,
    "docx": DocumentFormat.DOCX,
    "xlsx": DocumentFormat.XLSX,
    "xlsm": DocumentFormat.XLSX,
    "pptx": DocumentFormat.PPTX,
}

_ZIP_MAGIC = b"PK\x03\x04"
_PDF_MAGIC = b"%PDF-"
_HTML_PREFIX_BYTES = 512
_HTML_OPENINGS = ("<!doctype html", "<html")

# Central-directory layout (APPNOTE.TXT 4.3.12 and 4.3.16): fixed header sizes and field offsets.
_EOCD_SIGNATURE = b"PK\x05\x06"
_EOCD_SIZE = 22
_MAX_ZIP_COMMENT = 65535
_CD_SIGNATURE = b"PK\x01\x02"
_CD_HEADER_SIZE = 46
_OOXML_PARTS = (
    (b"word/", DocumentFormat.DOCX),
    (b"xl/", DocumentFormat.XLSX),
    (b"ppt/", DocumentFormat.PPTX),
)


def sniff(data: bytes, filename: str | None = None, mime: str | None = None) -> DocumentFormat:
    """The format of `data`; the first rule of §10.2 that decides wins. Never raises.

    The bytes decide first (zip, PDF), then the MIME hint, then the filename, then the content again (an HTML
    opening, else valid UTF-8 text); anything else is `unknown`.
    """
    if data.startswith(_ZIP_MAGIC):
        return _zip_format(data, filename, mime)
    if data.startswith(_PDF_MAGIC):
        return DocumentFormat.PDF
    hinted = _mime_format(mime)
    if hinted is None:
        hinted = _filename_format(filename)
    if hinted is not None:
        return hinted
    if _has_html_opening(data):
        return DocumentFormat.HTML
    if _is_text(data):
        return DocumentFormat.PLAIN_TEXT
    return DocumentFormat.UNKNOWN


def _zip_format(data: bytes, filename: str | None, mime: str | None) -> DocumentFormat:
    # Hints only break a tie the archive itself leaves open; a zip is never taken for text or unknown, because
    # the Office converter is the only one that can say more about it.
    for candidate in (_ooxml_kind(data), _mime_format(mime), _filename_format(filename)):
        if candidate is not None and candidate in _OOXML:
            return candidate
    return DocumentFormat.DOCX


def _mime_format(mime: str | None) -> DocumentFormat | None:
    if mime is None:
        return None
    essence = mime.split(";", 1)[0].strip().lower()
    return _MIME_FORMATS.get(essence)


def _filename_format(filename: str | None) -> DocumentFormat | None:
    if filename is None:
        return None
    # A language wins over the extension table, so `CMakeLists.txt` is code rather than plain text.
    if language_for_path(filename) is not None:
        return DocumentFormat.CODE
    extension = file_extension(filename)
    return None if extension is None else _EXTENSION_FORMATS.get(extension)


def _has_html_opening(data: bytes) -> bool:
    # The incremental decoder holds back a sequence cut at byte 512 instead of failing on it, while still
    # raising on bytes that are invalid wherever they stand.
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        head = decoder.decode(data[:_HTML_PREFIX_BYTES], final=False)
    except UnicodeDecodeError:
        return False
    head = head.removeprefix("\ufeff").lstrip().lower()
    return head.startswith(_HTML_OPENINGS)


def _is_text(data: bytes) -> bool:
    if not data or b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _ooxml_kind(data: bytes) -> DocumentFormat | None:
    """The one OOXML kind the central directory's entry names show, without inflating anything (§10.3)."""
    eocd = _find_eocd(data)
    if eocd is None:
        return None
    entries, cd_offset = struct.unpack_from("<H4xI", data, eocd + 10)
    kinds = _entry_kinds(data, cd_offset, entries)
    if kinds is None or len(kinds) != 1:
        return None
    return next(iter(kinds))


def _find_eocd(data: bytes) -> int | None:
    last = len(data) - _EOCD_SIZE
    if last < 0:
        return None
    # rfind's end bound must hold the whole signature, hence `last + 4`: a match may start at `last`.
    found = data.rfind(_EOCD_SIGNATURE, max(0, last - _MAX_ZIP_COMMENT), last + len(_EOCD_SIGNATURE))
    return None if found < 0 else found


def _entry_kinds(data: bytes, offset: int, entries: int) -> set[DocumentFormat] | None:
    """The kinds named by `entries` central-directory headers from `offset`; None when the walk breaks."""
    kinds: set[DocumentFormat] = set()
    for _ in range(entries):
        if offset + _CD_HEADER_SIZE > len(data) or data[offset : offset + 4] != _CD_SIGNATURE:
            return None
        name_len, extra_len, comment_len = struct.unpack_from("<3H", data, offset + 28)
        name_end = offset + _CD_HEADER_SIZE + name_len
        if name_end > len(data):
            return None
        name = data[offset + _CD_HEADER_SIZE : name_end]
        kinds.update(kind for prefix, kind in _OOXML_PARTS if name.startswith(prefix))
        offset = name_end + extra_len + comment_len
    return kinds
