"""Document formats and sniffing (docs/spec/sources-and-documents.md §10.1–10.3).

`sniff` decides a format from the bytes first and trusts the hints (MIME, filename) only where the bytes do
not settle it: a zip, a PDF, an image or a sound is what its bytes say, whatever a server or a file name
claims. Beyond the spec's nine formats it knows EPUB, legacy Excel and Outlook files (OLE2), notebooks, CSV,
feeds (RSS, Atom), and images and audio, so that the converter can refuse the last two with a reason instead of
"unknown". A feed is known by its root element wherever it is found, so a feed in a folder or a repository is
converted like one fetched from a feed URL instead of being stored as the XML it is written in.
"""

from __future__ import annotations

import codecs
import re
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
    EPUB = "epub"
    XLS = "xls"
    MSG = "msg"
    IPYNB = "ipynb"
    CSV = "csv"
    RSS = "rss"
    ATOM = "atom"
    IMAGE = "image"
    AUDIO = "audio"
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
    DocumentFormat.EPUB: ("application/epub+zip", "epub"),
    DocumentFormat.XLS: ("application/vnd.ms-excel", "xls"),
    DocumentFormat.MSG: ("application/vnd.ms-outlook", "msg"),
    DocumentFormat.IPYNB: ("application/x-ipynb+json", "ipynb"),
    DocumentFormat.CSV: ("text/csv", "csv"),
    # RSS 1.0 (RDF) is stored as RSS too: it is converted the same way, and readers take rss+xml for both.
    DocumentFormat.RSS: ("application/rss+xml", "rss"),
    DocumentFormat.ATOM: ("application/atom+xml", "atom"),
    # Images and sounds are only ever refused, never stored, so a family wildcard is honest enough.
    DocumentFormat.IMAGE: ("image/*", "bin"),
    DocumentFormat.AUDIO: ("audio/*", "bin"),
    DocumentFormat.UNKNOWN: ("application/octet-stream", "bin"),
}

_TEXTUAL = frozenset({DocumentFormat.MARKDOWN, DocumentFormat.PLAIN_TEXT, DocumentFormat.HTML, DocumentFormat.CODE})
# What a zip can be: the hints may only choose among these, never turn an archive into text.
_ZIP_FORMATS = frozenset({DocumentFormat.DOCX, DocumentFormat.XLSX, DocumentFormat.PPTX, DocumentFormat.EPUB})

# The legacy binary Office types (application/msword, application/vnd.ms-excel, application/vnd.ms-powerpoint)
# are absent on purpose: only an OLE2 compound file can be legacy Excel or Outlook (`_OLE2_MIME`), and
# mapping these types for any other bytes would promise a conversion that cannot happen.
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
    "application/epub+zip": DocumentFormat.EPUB,
    "application/x-ipynb+json": DocumentFormat.IPYNB,
    "text/csv": DocumentFormat.CSV,
    "application/csv": DocumentFormat.CSV,
}

# `.doc`, `.xls`, `.ppt` and `.msg` are absent for the same reason as the legacy MIME types (`_OLE2_EXTENSIONS`).
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
    "epub": DocumentFormat.EPUB,
    "ipynb": DocumentFormat.IPYNB,
    "csv": DocumentFormat.CSV,
}

# An OLE2 compound file is a container, like a zip; only its name or MIME says which kind it holds.
_OLE2_MIME = {"application/vnd.ms-excel": DocumentFormat.XLS, "application/vnd.ms-outlook": DocumentFormat.MSG}
_OLE2_EXTENSIONS = {"xls": DocumentFormat.XLS, "msg": DocumentFormat.MSG}

_ZIP_MAGIC = b"PK\x03\x04"
_PDF_MAGIC = b"%PDF-"
_OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# EPUB's first entry is an uncompressed `mimetype` (OCF 3.3 §4.3): its name sits at byte 30, its content right
# after it, so the kind shows without walking the directory. ODF files start the same way with another type.
_EPUB_LOCAL_MAGIC = b"mimetypeapplication/epub+zip"
_EPUB_CONTAINER = b"META-INF/container.xml"

# Signatures of the images and sounds refused with a reason (JPEG, PNG, GIF, TIFF both byte orders; OGG, FLAC).
_IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"II*\x00", b"MM\x00*")
_AUDIO_MAGIC = (b"OggS", b"fLaC")
_BMP_HEADER_SIZES = frozenset({12, 40, 52, 56, 64, 108, 124})
# MPEG-1, -2 and -2.5 Layer III, with and without CRC.
_MP3_FRAME_SECOND_BYTES = frozenset({0xFB, 0xFA, 0xF3, 0xF2, 0xE3, 0xE2})
# ISO base media files whose brand is a still image (HEIC, AVIF); every other `ftyp` is taken for sound.
_HEIF_BRANDS = frozenset({b"heic", b"heix", b"heim", b"heis", b"hevc", b"mif1", b"msf1", b"avif", b"avis"})
_HTML_PREFIX_BYTES = 512
_HTML_OPENINGS = ("<!doctype html", "<html")

# A feed's root start tag comes after an optional byte order mark, the XML declaration, comments, processing
# instructions and a DOCTYPE, within the first few KiB; its closing tag must end the document, so a text that
# merely opens with `<rss>` and goes on as prose is not taken for a feed (nor one with a trailing comment).
_FEED_PREFIX_BYTES = 4096
_FEED_SUFFIX_BYTES = 1024
_PROLOGUE_ENDS = ((b"<?", b"?>"), (b"<!--", b"-->"), (b"<!DOCTYPE", b">"))
_XML_SPACE = b" \t\r\n"
_FEED_ROOT = re.compile(rb"<(?:(?P<prefix>[A-Za-z_][\w.-]*):)?(?P<name>rss|feed|RDF)(?P<attributes>\s[^>]*)?(?<!/)>")
_ATOM_NAMESPACE = b"http://www.w3.org/2005/Atom"
_RDF_NAMESPACE = b"http://www.w3.org/1999/02/22-rdf-syntax-ns#"
_RSS1_NAMESPACE = b"http://purl.org/rss/1.0/"

# Central-directory layout (APPNOTE.TXT 4.3.12 and 4.3.16): fixed header sizes and field offsets.
_EOCD_SIGNATURE = b"PK\x05\x06"
_EOCD_SIZE = 22
_MAX_ZIP_COMMENT = 65535
_CD_SIGNATURE = b"PK\x01\x02"
_CD_HEADER_SIZE = 46
_OOXML_PARTS = ((b"word/", DocumentFormat.DOCX), (b"xl/", DocumentFormat.XLSX), (b"ppt/", DocumentFormat.PPTX))


def sniff(data: bytes, filename: str | None = None, mime: str | None = None) -> DocumentFormat:
    """The format of `data`; the first rule of docs/spec/sources-and-documents.md §10.2 that decides wins. Never raises.

    The bytes decide first (zip, PDF, OLE2, image and audio signatures, a feed's root element), then the MIME
    hint, then the filename,
    then the content again (an HTML opening, else valid UTF-8 text); anything else is `unknown`. Inside a zip
    or an OLE2 file the hints only choose among what such a container can hold.
    """
    if data.startswith(_ZIP_MAGIC):
        return _zip_format(data, filename, mime)
    if data.startswith(_PDF_MAGIC):
        return DocumentFormat.PDF
    if data.startswith(_OLE2_MAGIC):
        return _ole2_format(filename, mime)
    media = _media_format(data)
    if media is not None:
        return media
    feed = _feed_format(data)
    if feed is not None:
        return feed
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
    for candidate in (_zip_kind(data), _mime_format(mime), _filename_format(filename)):
        if candidate is not None and candidate in _ZIP_FORMATS:
            return candidate
    return DocumentFormat.DOCX


def _ole2_format(filename: str | None, mime: str | None) -> DocumentFormat:
    # Legacy Word and PowerPoint are OLE2 too, and nothing here converts them: without a hint naming Excel
    # or Outlook the file stays unknown rather than being handed to a library that would misread it.
    by_mime = _OLE2_MIME.get(_essence(mime))
    if by_mime is not None:
        return by_mime
    extension = None if filename is None else file_extension(filename)
    by_name = None if extension is None else _OLE2_EXTENSIONS.get(extension)
    return DocumentFormat.UNKNOWN if by_name is None else by_name


def _essence(mime: str | None) -> str:
    """The MIME type without its parameters, trimmed and lowercased; empty for no MIME."""
    return "" if mime is None else mime.split(";", 1)[0].strip().lower()


def _mime_format(mime: str | None) -> DocumentFormat | None:
    return _MIME_FORMATS.get(_essence(mime))


def _media_format(data: bytes) -> DocumentFormat | None:
    """`image` or `audio` when `data` opens with one of their signatures, else None."""
    if data.startswith(_IMAGE_MAGIC) or _is_riff(data, b"WEBP") or _is_bmp(data) or _is_heif(data):
        return DocumentFormat.IMAGE
    if (
        data.startswith(_AUDIO_MAGIC)
        or _is_riff(data, b"WAVE")
        or _is_id3(data)
        or _is_mpeg_frame(data)
        or _is_mp4(data)
    ):
        return DocumentFormat.AUDIO
    return None


def _is_riff(data: bytes, form: bytes) -> bool:
    return data.startswith(b"RIFF") and data[8:12] == form


def _is_bmp(data: bytes) -> bool:
    # "BM" alone starts ordinary words; the reserved zero bytes and a known DIB header size rule text out.
    if not data.startswith(b"BM") or len(data) < 18 or data[6:10] != b"\0\0\0\0":
        return False
    return struct.unpack_from("<I", data, 14)[0] in _BMP_HEADER_SIZES


def _is_id3(data: bytes) -> bool:
    # ID3v2: "ID3", a major version 2 to 4, a revision byte; words like "ID3 tags" fail the version byte.
    return data.startswith(b"ID3") and len(data) >= 5 and 2 <= data[3] <= 4 and data[4] != 0xFF


def _is_mpeg_frame(data: bytes) -> bool:
    # An MPEG audio Layer III frame header without an ID3 tag: sync bits, a real bitrate and sample rate.
    # Only Layer III is taken, so a UTF-16 byte order mark (FF FE) is never mistaken for a frame.
    if len(data) < 3 or data[0] != 0xFF or data[1] not in _MP3_FRAME_SECOND_BYTES:
        return False
    return data[2] >> 4 not in (0x0, 0xF) and (data[2] >> 2) & 0x3 != 0x3


def _is_mp4(data: bytes) -> bool:
    return _is_ftyp(data) and data[8:12] not in _HEIF_BRANDS


def _is_heif(data: bytes) -> bool:
    return _is_ftyp(data) and data[8:12] in _HEIF_BRANDS


def _is_ftyp(data: bytes) -> bool:
    # An ISO base media file opens with its `ftyp` box, whose big-endian size is a few dozen bytes.
    return data.startswith(b"\0\0") and data[4:8] == b"ftyp"


def _feed_format(data: bytes) -> DocumentFormat | None:
    """`rss` for an `<rss>` or RSS 1.0 `<rdf:RDF>` root, `atom` for an Atom `<feed>` root, else None.

    The root's own start tag must bind the namespaces: Atom's for a `<feed>`; RDF's, and name RSS 1.0's, for
    an `RDF` root. The prologue before it is skipped by a plain scan: one regular expression's nested
    repetitions would backtrack exponentially on a hostile one. A DOCTYPE's internal subset (entities, which
    the XML parser refuses anyway) is not skipped, so such a document is never a feed.
    """
    head = data[:_FEED_PREFIX_BYTES]
    match = _FEED_ROOT.match(head, _prologue_end(head))
    if match is None:
        return None
    prefix, name, attributes = match.group("prefix"), match.group("name"), match.group("attributes") or b""
    qualified = name if prefix is None else prefix + b":" + name
    if re.search(rb"</" + re.escape(qualified) + rb"\s*>\Z", data[-_FEED_SUFFIX_BYTES:].rstrip(_XML_SPACE)) is None:
        return None
    binding = b"xmlns" if prefix is None else b"xmlns:" + prefix
    if name == b"rss":
        return DocumentFormat.RSS if prefix is None else None
    if name == b"feed":
        return DocumentFormat.ATOM if _declares(attributes, binding, _ATOM_NAMESPACE) else None
    rss1 = _declares(attributes, binding, _RDF_NAMESPACE) and _RSS1_NAMESPACE in attributes
    return DocumentFormat.RSS if rss1 else None


def _prologue_end(head: bytes) -> int:
    """Where the root may start in `head`: past the BOM, whitespace and prologue; its end when unterminated."""
    position = len(codecs.BOM_UTF8) if head.startswith(codecs.BOM_UTF8) else 0
    while True:
        while position < len(head) and head[position] in _XML_SPACE:
            position += 1
        ends = next((ends for ends in _PROLOGUE_ENDS if head.startswith(ends[0], position)), None)
        if ends is None:
            return position
        close = head.find(ends[1], position + len(ends[0]))
        if close < 0:
            return len(head)
        position = close + len(ends[1])


def _declares(attributes: bytes, binding: bytes, namespace: bytes) -> bool:
    """True when a start tag's `attributes` bind `binding` (`xmlns` or `xmlns:p`) to `namespace`."""
    pattern = rb"(?:^|\s)" + re.escape(binding) + rb"\s*=\s*([\"'])" + re.escape(namespace) + rb"\1"
    return re.search(pattern, attributes) is not None


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


def _zip_kind(data: bytes) -> DocumentFormat | None:
    """The one zip kind the central directory's entry names show, without inflating anything
    (docs/spec/sources-and-documents.md §10.3).

    Besides the three OOXML prefixes, a `META-INF/container.xml` entry or a leading `mimetype` entry naming
    EPUB means epub.
    """
    if data.startswith(_EPUB_LOCAL_MAGIC, 30):
        return DocumentFormat.EPUB
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
        if name == _EPUB_CONTAINER:
            kinds.add(DocumentFormat.EPUB)
        offset = name_end + extra_len + comment_len
    return kinds
