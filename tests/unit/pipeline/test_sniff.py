"""`sniff` and the zip central-directory reader against docs/spec/sources-and-documents.md §10.1–10.3 and the added
formats."""

from __future__ import annotations

import io
import struct
import zipfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.sniff import DocumentFormat, _zip_kind, sniff

F = DocumentFormat
OOXML = "application/vnd.openxmlformats-officedocument"
DOCX_MIME = f"{OOXML}.wordprocessingml.document"
XLSX_MIME = f"{OOXML}.spreadsheetml.sheet"
PPTX_MIME = f"{OOXML}.presentationml.presentation"


def make_zip(*names: str, comment: bytes = b"", entry_comment: bytes = b"", extra: bytes = b"") -> bytes:
    """A real archive holding one small stored entry per name."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in names:
            info = zipfile.ZipInfo(name)
            info.comment = entry_comment
            info.extra = extra
            archive.writestr(info, b"<xml/>")
        archive.comment = comment
    return buffer.getvalue()


DOCX_ZIP = make_zip("[Content_Types].xml", "_rels/.rels", "word/document.xml", "docProps/core.xml")
XLSX_ZIP = make_zip("[Content_Types].xml", "xl/workbook.xml", "xl/worksheets/sheet1.xml")
PPTX_ZIP = make_zip("[Content_Types].xml", "ppt/presentation.xml", "ppt/slides/slide1.xml")
MIXED_ZIP = make_zip("word/document.xml", "xl/workbook.xml")
PLAIN_ZIP = make_zip("readme.txt", "src/main.py")

# --- docs/spec/sources-and-documents.md §10.1 ---


@pytest.mark.parametrize(
    ("fmt", "value", "mime", "extension", "textual"),
    [
        (F.MARKDOWN, "markdown", "text/markdown", "md", True),
        (F.PLAIN_TEXT, "plain_text", "text/plain", "txt", True),
        (F.HTML, "html", "text/html", "html", True),
        (F.CODE, "code", "text/x-source", "txt", True),
        (F.PDF, "pdf", "application/pdf", "pdf", False),
        (F.DOCX, "docx", DOCX_MIME, "docx", False),
        (F.XLSX, "xlsx", XLSX_MIME, "xlsx", False),
        (F.PPTX, "pptx", PPTX_MIME, "pptx", False),
        (F.EPUB, "epub", "application/epub+zip", "epub", False),
        (F.XLS, "xls", "application/vnd.ms-excel", "xls", False),
        (F.MSG, "msg", "application/vnd.ms-outlook", "msg", False),
        (F.IPYNB, "ipynb", "application/x-ipynb+json", "ipynb", False),
        (F.CSV, "csv", "text/csv", "csv", False),
        (F.RSS, "rss", "application/rss+xml", "rss", False),
        (F.ATOM, "atom", "application/atom+xml", "atom", False),
        (F.IMAGE, "image", "image/*", "bin", False),
        (F.AUDIO, "audio", "audio/*", "bin", False),
        (F.UNKNOWN, "unknown", "application/octet-stream", "bin", False),
    ],
)
def test_formats(fmt: DocumentFormat, value: str, mime: str, extension: str, textual: bool) -> None:
    assert fmt == value
    assert DocumentFormat(value) is fmt
    assert fmt.mime == mime
    assert fmt.extension == extension
    assert fmt.is_textual is textual


def test_there_are_the_spec_nine_and_nine_more() -> None:
    assert len(DocumentFormat) == 18


# --- docs/spec/sources-and-documents.md §10.3: the central directory ---


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (DOCX_ZIP, F.DOCX),
        (XLSX_ZIP, F.XLSX),
        (PPTX_ZIP, F.PPTX),
        (MIXED_ZIP, None),
        (PLAIN_ZIP, None),
        (make_zip(), None),
        (make_zip("words/x.xml", "xlsx/y", "pptx", "Word/document.xml"), None),
        (make_zip("word/"), F.DOCX),
    ],
)
def test_central_directory_kind(data: bytes, kind: DocumentFormat | None) -> None:
    assert _zip_kind(data) == kind


def test_truncated_archives_have_no_kind() -> None:
    for cut in (1, 10, 22, len(DOCX_ZIP) // 2, len(DOCX_ZIP) - 4):
        assert _zip_kind(DOCX_ZIP[:cut]) is None
    assert _zip_kind(b"") is None
    assert _zip_kind(b"PK\x05\x06") is None


def test_a_directory_pointing_past_the_buffer_has_no_kind() -> None:
    eocd = DOCX_ZIP.rfind(b"PK\x05\x06")
    for offset in (len(DOCX_ZIP), len(DOCX_ZIP) - 10, 0xFFFFFFFF):
        broken = DOCX_ZIP[: eocd + 16] + struct.pack("<I", offset) + DOCX_ZIP[eocd + 20 :]
        assert _zip_kind(broken) is None


def test_a_name_running_past_the_buffer_has_no_kind() -> None:
    # The last header claims a name longer than what is left of the archive.
    data = bytearray(make_zip("word/document.xml"))
    header = data.find(b"PK\x01\x02")
    data[header + 28 : header + 30] = struct.pack("<H", 60_000)
    assert _zip_kind(bytes(data)) is None


def test_a_bad_header_signature_has_no_kind() -> None:
    data = bytearray(DOCX_ZIP)
    header = data.find(b"PK\x01\x02")
    data[header + 3] = 0x03
    assert _zip_kind(bytes(data)) is None


def test_more_entries_than_headers_has_no_kind() -> None:
    eocd = DOCX_ZIP.rfind(b"PK\x05\x06")
    data = DOCX_ZIP[: eocd + 10] + struct.pack("<H", 200) + DOCX_ZIP[eocd + 12 :]
    assert _zip_kind(data) is None


def test_archive_comments_and_extra_fields() -> None:
    assert _zip_kind(make_zip("xl/workbook.xml", comment=b"a trailing archive comment")) == F.XLSX
    # The longest comment a zip can carry puts the EOCD at the far end of the scan window.
    assert _zip_kind(make_zip("ppt/presentation.xml", comment=b"c" * 65535)) == F.PPTX
    # Entry comments and extra fields move every following header; the walk must skip them.
    data = make_zip("docProps/app.xml", "word/document.xml", entry_comment=b"hello" * 10, extra=b"\xfe\xca\x00\x00")
    assert _zip_kind(data) == F.DOCX


def test_an_eocd_beyond_the_scan_window_is_not_found() -> None:
    # 65,536 bytes of trailing junk put the real EOCD one byte outside `len - 22 - 65535`.
    assert _zip_kind(XLSX_ZIP + b"\x00" * 65_536) is None
    assert _zip_kind(XLSX_ZIP + b"\x00" * 65_535) == F.XLSX


# --- docs/spec/sources-and-documents.md §10.2 rule 1: zip ---


@pytest.mark.parametrize(
    ("data", "filename", "mime", "expected"),
    [
        (DOCX_ZIP, None, None, F.DOCX),
        (XLSX_ZIP, None, None, F.XLSX),
        (PPTX_ZIP, None, None, F.PPTX),
        # The central directory outranks both hints.
        (XLSX_ZIP, "report.docx", DOCX_MIME, F.XLSX),
        # No kind in the directory: the MIME, then the filename, then docx.
        (MIXED_ZIP, "deck.pptx", XLSX_MIME, F.XLSX),
        (MIXED_ZIP, "deck.pptx", "application/vnd.ms-excel.sheet.macroEnabled.12", F.XLSX),
        (MIXED_ZIP, "deck.pptx", None, F.PPTX),
        (MIXED_ZIP, "book.XLSM", None, F.XLSX),
        (PLAIN_ZIP, "deck.pptx", "text/plain", F.PPTX),
        (PLAIN_ZIP, None, f"{PPTX_MIME}; charset=binary", F.PPTX),
        (PLAIN_ZIP, None, None, F.DOCX),
        (PLAIN_ZIP, "archive.zip", "application/zip", F.DOCX),
        (PLAIN_ZIP, "notes.md", "text/markdown", F.DOCX),
        (PLAIN_ZIP, "CMakeLists.txt", None, F.DOCX),
        (PLAIN_ZIP, "old.xls", "application/vnd.ms-excel", F.DOCX),
        (b"PK\x03\x04", None, None, F.DOCX),
        (b"PK\x03\x04 not really a zip", "slides.pptx", None, F.PPTX),
    ],
)
def test_zip(data: bytes, filename: str | None, mime: str | None, expected: DocumentFormat) -> None:
    assert sniff(data, filename, mime) == expected


# --- rule 2: PDF ---


@pytest.mark.parametrize(
    ("data", "filename", "mime", "expected"),
    [
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", None, None, F.PDF),
        (b"%PDF-", "notes.md", "text/html", F.PDF),
        (b"%PDF-1.4 \x00\xff", "x.docx", DOCX_MIME, F.PDF),
        (b"%PDF", None, None, F.PLAIN_TEXT),
        (b" %PDF-1.7", None, None, F.PLAIN_TEXT),
    ],
)
def test_pdf(data: bytes, filename: str | None, mime: str | None, expected: DocumentFormat) -> None:
    assert sniff(data, filename, mime) == expected


# --- rule 3: MIME ---

MIME_TABLE = [
    ("text/markdown", F.MARKDOWN),
    ("text/x-markdown", F.MARKDOWN),
    ("text/plain", F.PLAIN_TEXT),
    ("text/html", F.HTML),
    ("application/xhtml+xml", F.HTML),
    ("text/x-source", F.CODE),
    ("application/pdf", F.PDF),
    (DOCX_MIME, F.DOCX),
    (XLSX_MIME, F.XLSX),
    (PPTX_MIME, F.PPTX),
    ("application/vnd.ms-excel.sheet.macroenabled.12", F.XLSX),
    ("application/epub+zip", F.EPUB),
    ("application/x-ipynb+json", F.IPYNB),
    ("text/csv", F.CSV),
    ("application/csv", F.CSV),
]


@pytest.mark.parametrize(("mime", "expected"), MIME_TABLE)
def test_mime_table(mime: str, expected: DocumentFormat) -> None:
    # Binary data and a misleading filename: only the MIME can decide.
    assert sniff(b"\x00\x01binary", "misleading.md", mime) == expected


@pytest.mark.parametrize(
    ("mime", "expected"),
    [
        ("text/html; charset=utf-8", F.HTML),
        ("  Text/Markdown ; charset=UTF-8", F.MARKDOWN),
        ("TEXT/PLAIN", F.PLAIN_TEXT),
        ("application/vnd.ms-excel.sheet.macroEnabled.12", F.XLSX),
        ("application/pdf;", F.PDF),
    ],
)
def test_mime_essence(mime: str, expected: DocumentFormat) -> None:
    assert sniff(b"\x00", None, mime) == expected


@pytest.mark.parametrize(
    "mime",
    [
        "application/msword",
        "application/vnd.ms-excel",
        "application/vnd.ms-powerpoint",
        "application/json",
        "application/vnd.ms-outlook",
        "image/png",
        "",
        ";",
        "text/plain-ish",
    ],
)
def test_unmapped_mime_falls_through(mime: str) -> None:
    assert sniff(b"\x00\xff", None, mime) == F.UNKNOWN
    assert sniff(b"hello", None, mime) == F.PLAIN_TEXT
    assert sniff(b"hello", "notes.md", mime) == F.MARKDOWN


def test_mime_outranks_filename_and_content() -> None:
    assert sniff(b"# hi", "notes.md", "text/plain") == F.PLAIN_TEXT
    assert sniff(b"<html><body/></html>", None, "text/markdown") == F.MARKDOWN
    assert sniff(b"", None, "text/markdown") == F.MARKDOWN


# --- rule 4: filename ---

EXTENSION_TABLE = [
    ("md", F.MARKDOWN),
    ("markdown", F.MARKDOWN),
    ("mdown", F.MARKDOWN),
    ("txt", F.PLAIN_TEXT),
    ("text", F.PLAIN_TEXT),
    ("log", F.PLAIN_TEXT),
    ("html", F.HTML),
    ("htm", F.HTML),
    ("xhtml", F.HTML),
    ("pdf", F.PDF),
    ("docx", F.DOCX),
    ("xlsx", F.XLSX),
    ("xlsm", F.XLSX),
    ("pptx", F.PPTX),
    ("epub", F.EPUB),
    ("ipynb", F.IPYNB),
    ("csv", F.CSV),
]


@pytest.mark.parametrize(("extension", "expected"), EXTENSION_TABLE)
def test_extension_table(extension: str, expected: DocumentFormat) -> None:
    assert sniff(b"\x00binary", f"dir/file.{extension}") == expected
    assert sniff(b"\x00binary", f"FILE.{extension.upper()}") == expected


@pytest.mark.parametrize(
    "filename", ["main.py", "lib.RS", "CMakeLists.txt", "Makefile", "src/Dockerfile", "config.yaml"]
)
def test_a_language_is_code(filename: str) -> None:
    assert sniff(b"<!doctype html>", filename) == F.CODE


@pytest.mark.parametrize("filename", ["old.doc", "old.xls", "old.ppt", "archive.zip", "README", ".md", ""])
def test_unmapped_filenames_fall_through(filename: str) -> None:
    assert sniff(b"plain words", filename) == F.PLAIN_TEXT
    assert sniff(b"\xd0\xcf\x11\xe0\x00", filename) == F.UNKNOWN


def test_filename_outranks_content() -> None:
    assert sniff(b"<html></html>", "page.txt") == F.PLAIN_TEXT
    assert sniff(b"plain words", "page.html") == F.HTML


# --- rule 5: HTML prefix ---


@pytest.mark.parametrize(
    "data",
    [
        b"<!DOCTYPE html><html></html>",
        b"<!doctype HTML>",
        b"<html>",
        b"<HTML lang='en'>",
        b"<htmlish>",
        b"\xef\xbb\xbf<!DOCTYPE html>",
        b"\xef\xbb\xbf \r\n\t <html>",
        b"\n\n   \t<!doctype html>",
        "\u3000\u00a0<html>".encode(),
        # NUL and invalid UTF-8 after the opening: rule 5 decides before rule 6 would refuse.
        b"<html>\x00",
        b"<html>" + b"a" * 600 + b"\xff",
        # "e9" cut at byte 512 ("\xc3" is byte 511): the incomplete sequence is dropped, not an error.
        b"<html>" + b"a" * 505 + "é".encode() + b"tail",
        b"<html>" + b"a" * 504 + "€".encode(),
        b"<html>" + b"a" * 503 + "😀".encode(),
    ],
)
def test_html_prefix(data: bytes) -> None:
    assert sniff(data) == F.HTML


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"<head></head>", F.PLAIN_TEXT),
        (b"<!doctype xml>", F.PLAIN_TEXT),
        (b"text before <html>", F.PLAIN_TEXT),
        # The BOM is dropped only before the whitespace.
        (b" \xef\xbb\xbf<html>", F.PLAIN_TEXT),
        (b"\xef\xbb\xbf\xef\xbb\xbf<html>", F.PLAIN_TEXT),
        # Invalid UTF-8 inside the first 512 bytes: the rule is skipped, and the text rule refuses it too.
        (b"<html>\xff", F.UNKNOWN),
        (b"\xff<html>", F.UNKNOWN),
        # A valid opening past byte 512 is not seen.
        (b" " * 512 + b"<html>", F.PLAIN_TEXT),
        # An incomplete sequence before byte 512 is invalid, not dropped.
        (b"<html>\xc3 " + b"a" * 600, F.UNKNOWN),
    ],
)
def test_not_an_html_prefix(data: bytes, expected: DocumentFormat) -> None:
    assert sniff(data) == expected


# --- rules 6 and 7 ---


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"hello", F.PLAIN_TEXT),
        ("naïve café 漢字 😀".encode(), F.PLAIN_TEXT),
        (b"\xef\xbb\xbfwith a BOM", F.PLAIN_TEXT),
        (b" ", F.PLAIN_TEXT),
        (b"\x01\x02\x7f", F.PLAIN_TEXT),
        (b"", F.UNKNOWN),
        (b"\x00", F.UNKNOWN),
        (b"text\x00more", F.UNKNOWN),
        (b"\xff\xfe", F.UNKNOWN),
        (b"abc\xc3", F.UNKNOWN),
        (b"a" * 1000 + b"\xc3\x28", F.UNKNOWN),
        (b"\xed\xa0\x80", F.UNKNOWN),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", F.UNKNOWN),
    ],
)
def test_text_and_unknown(data: bytes, expected: DocumentFormat) -> None:
    assert sniff(data) == expected


# --- never raises ---

PREFIXES = st.sampled_from(
    [
        b"",
        b"PK\x03\x04",
        b"%PDF-",
        b"<html>",
        b"\xef\xbb\xbf",
        b"PK\x05\x06",
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
        b"RIFF",
        b"\xff\xfb",
        b"ID3\x03",
        b"BM",
        b"\x00\x00\x00\x18ftyp",
    ]
)
NAMES = st.one_of(
    st.none(), st.text(max_size=30), st.sampled_from(["a.docx", "CMakeLists.txt", "x.", ".md", "b.xls", "c.msg"])
)
MIMES = st.one_of(st.none(), st.text(max_size=40), st.sampled_from([m for m, _ in MIME_TABLE]))


@given(PREFIXES, st.binary(max_size=2048), NAMES, MIMES)
def test_sniff_never_raises(prefix: bytes, data: bytes, filename: str | None, mime: str | None) -> None:
    assert isinstance(sniff(prefix + data, filename, mime), DocumentFormat)


@given(st.lists(st.binary(max_size=80), max_size=8), st.integers(min_value=0, max_value=4096))
def test_the_directory_reader_never_raises_on_damaged_archives(junk: list[bytes], cut: int) -> None:
    data = bytearray(DOCX_ZIP)
    for i, chunk in enumerate(junk):
        at = (i * 97 + len(chunk)) % len(data)
        data[at : at + len(chunk)] = chunk
    assert _zip_kind(bytes(data)[:cut]) in {None, F.DOCX, F.XLSX, F.PPTX, F.EPUB}


# --- EPUB inside the zip rule ---

EPUB_ZIP = make_zip("META-INF/container.xml", "OEBPS/content.opf", "OEBPS/chapter1.xhtml")


def zip_with_mimetype(media_type: bytes, *names: str) -> bytes:
    """An archive whose first entry is an uncompressed `mimetype`, as EPUB and ODF write it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), media_type, compress_type=zipfile.ZIP_STORED)
        for name in names:
            archive.writestr(name, b"<xml/>")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("data", "filename", "mime", "expected"),
    [
        (EPUB_ZIP, None, None, F.EPUB),
        (EPUB_ZIP, "book.docx", DOCX_MIME, F.EPUB),
        (zip_with_mimetype(b"application/epub+zip", "OEBPS/content.opf"), None, None, F.EPUB),
        # A damaged directory still shows the leading mimetype entry.
        (zip_with_mimetype(b"application/epub+zip")[:60], None, None, F.EPUB),
        # OpenDocument starts the same way with its own type, and is no EPUB.
        (zip_with_mimetype(b"application/vnd.oasis.opendocument.text", "content.xml"), None, None, F.DOCX),
        (zip_with_mimetype(b"application/vnd.oasis.opendocument.text", "META-INF/manifest.xml"), None, None, F.DOCX),
        # No kind in the directory: the hints may name EPUB, as they may name an OOXML kind.
        (PLAIN_ZIP, "novel.EPUB", None, F.EPUB),
        (PLAIN_ZIP, None, "application/epub+zip", F.EPUB),
        # Word parts beside a container entry leave the directory undecided.
        (make_zip("META-INF/container.xml", "word/document.xml"), None, None, F.DOCX),
        (make_zip("META-INF/container.xml", "word/document.xml"), "b.epub", None, F.EPUB),
        # Hints never turn a zip into a format that is not a zip.
        (PLAIN_ZIP, "data.csv", "text/csv", F.DOCX),
        (PLAIN_ZIP, "nb.ipynb", None, F.DOCX),
    ],
)
def test_epub(data: bytes, filename: str | None, mime: str | None, expected: DocumentFormat) -> None:
    assert sniff(data, filename, mime) == expected


def test_the_epub_container_is_a_kind_of_its_own() -> None:
    assert _zip_kind(EPUB_ZIP) == F.EPUB
    assert _zip_kind(make_zip("META-INF/manifest.xml", "mimetype")) is None


# --- OLE2 compound files ---

OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504


@pytest.mark.parametrize(
    ("filename", "mime", "expected"),
    [
        ("budget.xls", None, F.XLS),
        ("BUDGET.XLS", None, F.XLS),
        ("mail.msg", None, F.MSG),
        (None, "application/vnd.ms-excel", F.XLS),
        (None, "application/vnd.ms-outlook; charset=binary", F.MSG),
        # The MIME outranks the filename, as in rules 3 and 4.
        ("mail.msg", "application/vnd.ms-excel", F.XLS),
        ("mail.msg", "application/octet-stream", F.MSG),
        # Legacy Word and PowerPoint, or no hint at all: nothing converts them.
        ("letter.doc", "application/msword", F.UNKNOWN),
        ("deck.ppt", None, F.UNKNOWN),
        (None, None, F.UNKNOWN),
        # A hint for a format that is no OLE2 file does not apply.
        ("notes.md", "text/markdown", F.UNKNOWN),
        ("table.xlsx", XLSX_MIME, F.UNKNOWN),
    ],
)
def test_ole2(filename: str | None, mime: str | None, expected: DocumentFormat) -> None:
    assert sniff(OLE2, filename, mime) == expected


def test_legacy_names_without_the_ole2_signature_are_not_legacy_formats() -> None:
    assert sniff(b"<table><tr><td>1</td></tr></table>", "export.xls") == F.PLAIN_TEXT
    assert sniff(b"\xd0\xcf\x11\xe0 cut short", "old.msg") == F.UNKNOWN
    assert sniff(b"From: someone", None, "application/vnd.ms-outlook") == F.PLAIN_TEXT


# --- notebooks and CSV by name or MIME ---


@pytest.mark.parametrize(
    ("data", "filename", "mime", "expected"),
    [
        (b'{"cells": [], "nbformat": 4}', "analysis.ipynb", None, F.IPYNB),
        (b'{"cells": []}', None, "application/x-ipynb+json", F.IPYNB),
        (b'{"cells": []}', None, None, F.PLAIN_TEXT),
        (b"a,b\n1,2\n", "data.csv", None, F.CSV),
        (b"a,b\n1,2\n", "DATA.CSV", None, F.CSV),
        (b"a,b\n1,2\n", None, "text/csv; header=present", F.CSV),
        (b"a,b\n1,2\n", "data.csv", "text/plain", F.PLAIN_TEXT),
        # Shift-JIS is no UTF-8, yet a CSV by name is still a CSV; unnamed it is unknown bytes.
        ("名前,年齢\n太郎,30\n".encode("shift_jis"), "meibo.csv", None, F.CSV),
        ("名前,年齢\n太郎,30\n".encode("shift_jis"), None, None, F.UNKNOWN),
    ],
)
def test_notebooks_and_csv(data: bytes, filename: str | None, mime: str | None, expected: DocumentFormat) -> None:
    assert sniff(data, filename, mime) == expected


# --- images and audio by signature ---


def bmp_header() -> bytes:
    return b"BM" + struct.pack("<I", 58) + b"\x00\x00\x00\x00" + struct.pack("<II", 54, 40) + b"\x00" * 40


IMAGES = [
    b"\xff\xd8\xff\xe0\x00\x10JFIF\x00",
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    b"GIF87a\x01\x00\x01\x00",
    b"GIF89a\x01\x00\x01\x00",
    b"RIFF\x24\x00\x00\x00WEBPVP8 ",
    bmp_header(),
    b"II*\x00\x08\x00\x00\x00",
    b"MM\x00*\x00\x00\x00\x08",
    b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00",
    b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00",
]
SOUNDS = [
    b"ID3\x04\x00\x00\x00\x00\x00\x00",
    b"ID3\x03\x00\x40\x00\x00\x00\x00",
    b"\xff\xfb\x90\x64\x00",
    b"\xff\xf3\x48\xc4\x00",
    b"RIFF\x24\x00\x00\x00WAVEfmt ",
    b"\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00",
    b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00",
    b"OggS\x00\x02\x00\x00",
    b"fLaC\x00\x00\x00\x22",
]


@pytest.mark.parametrize("data", IMAGES)
def test_images_by_signature(data: bytes) -> None:
    assert sniff(data) == F.IMAGE
    # The signature outranks any hint, as the zip and PDF signatures do.
    assert sniff(data, "notes.md", "text/markdown") == F.IMAGE


@pytest.mark.parametrize("data", SOUNDS)
def test_audio_by_signature(data: bytes) -> None:
    assert sniff(data) == F.AUDIO
    assert sniff(data, "song.txt", "text/plain") == F.AUDIO


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"BMW builds cars", F.PLAIN_TEXT),
        (b"BM\x00\x00\x00\x00\x01\x00\x00\x00", F.UNKNOWN),
        (b"ID3 tags hold the artist", F.PLAIN_TEXT),
        (b"GIF8 is not a version", F.PLAIN_TEXT),
        (b"RIFF\x24\x00\x00\x00AVI LIST", F.UNKNOWN),
        (b"abcdftypisom", F.PLAIN_TEXT),
        (b"fLaC", F.AUDIO),
        # A UTF-16 byte order mark is not an MPEG frame; neither is a frame with a forbidden bitrate.
        (b"\xff\xfe" + "UTF-16 text".encode("utf-16-le"), F.UNKNOWN),
        (b"\xff\xfb\xf0\x00", F.UNKNOWN),
        (b"\xff\xfb\x9c\x00", F.UNKNOWN),
    ],
)
def test_near_misses_are_not_media(data: bytes, expected: DocumentFormat) -> None:
    assert sniff(data) == expected


def test_textual_formats_are_the_spec_four() -> None:
    assert {fmt for fmt in DocumentFormat if fmt.is_textual} == {F.MARKDOWN, F.PLAIN_TEXT, F.HTML, F.CODE}
