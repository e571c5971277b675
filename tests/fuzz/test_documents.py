"""Hypothesis over bytes on the front end that turns a unit's bytes and name into text: `sniff`, then
`convert_document` (the size check and the default converter chain, markitdown included).

`sniff` never raises and decides from the same input the same way. `convert_document` answers a document whose
markdown is not blank, or refuses with the errors its docstring documents: `InvalidRequestError` for a document
refused, `UnsupportedError` for a format this build does not convert, and `EngineError` only as a parsing
library's own exception, translated at the converter's edge and chained (markitdown's EPUB reader, mammoth and
python-pptx raise IndexError, ValueError and AttributeError on some damaged archives; the worker dead-letters
those as it does a refusal). Nothing else escapes. Every example runs under the profile's deadline, so a parser that
goes quadratic on a hostile input fails here rather than holding a worker. The inputs are random bytes, bytes
behind every signature the sniffer knows, and zip archives holding the parts of every OOXML and EPUB kind,
whole or cut short.
"""

from __future__ import annotations

import io
import zipfile
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from engines.contract import EngineError, InvalidRequestError, UnsupportedError
from pipeline.convert import ConvertLimits, RawDocument, convert_document
from pipeline.sniff import DocumentFormat, sniff
from tests.fuzz.profiles import fuzzed

# The openings the sniffer reads, each one step from a real document.
SIGNATURES = [
    b"%PDF-1.7\n", b"PK\x03\x04", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff",
    b"GIF89a", b"RIFF\x00\x00\x00\x00WEBP", b"RIFF\x00\x00\x00\x00WAVE", b"ID3\x03", b"\xff\xfb", b"OggS",
    b"fLaC", b"\x00\x00\x00\x18ftypheic", b"BM", b"<?xml version='1.0'?>\n<rss version='2.0'>",
    b"<feed xmlns='http://www.w3.org/2005/Atom'>", b"<!DOCTYPE html><html>", b"<html><body>", b"\xef\xbb\xbf",
    b"\xff\xfe", b"\xfe\xff", b'{"cells": [', b"# Title\n\n", b"---\ntitle: x\n---\n", b"a,b,c\n1,2,3\n",
    b"\x00", b"\n" * 64,
]  # fmt: skip
NAMES = [
    None, "", "notes.md", "a.txt", "page.html", "main.py", "lib.rs", "paper.pdf", "report.docx", "sheet.xlsx",
    "deck.pptx", "book.epub", "old.xls", "mail.msg", "nb.ipynb", "data.csv", "feed.rss", "feed.atom", "x.png",
    "song.mp3", "Makefile", ".env", "no-extension", "dir/sub/file.MD", "weird.name.tar.gz", "\u202etxt.exe",
]  # fmt: skip
MIMES = [
    None, "", "text/plain", "text/markdown; charset=utf-8", "text/html", "application/pdf", "application/zip",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document", "application/vnd.ms-excel",
    "application/rss+xml", "application/atom+xml", "image/png", "audio/mpeg", "application/octet-stream", ";;",
]  # fmt: skip
# Member names that make a zip look like each kind it can be, and a few that make it ambiguous.
ZIP_MEMBERS = [
    "[Content_Types].xml", "word/document.xml", "xl/workbook.xml", "xl/worksheets/sheet1.xml",
    "xl/sharedStrings.xml", "ppt/presentation.xml", "ppt/slides/slide1.xml", "_rels/.rels", "mimetype",
    "META-INF/container.xml", "OEBPS/content.opf", "docProps/core.xml", "../escape.txt", "a/" * 20 + "deep.xml",
]  # fmt: skip
XML_BODIES = [
    b"", b"<", b"<?xml version='1.0'?><root/>", b"<w:document><w:body><w:p><w:r><w:t>hi</w:t></w:r></w:p></w:body>",
    b"<!DOCTYPE x [<!ENTITY a 'aaaa'><!ENTITY b '&a;&a;&a;&a;'>]><x>&b;</x>", b"application/epub+zip",
    b"<workbook><sheets><sheet name='s' r:id='rId1'/></sheets></workbook>", b"\xff\xfe\x00",
]  # fmt: skip

names = st.sampled_from(NAMES) | st.text(max_size=20)
mimes = st.sampled_from(MIMES) | st.text(max_size=20)
tails = st.binary(max_size=300)
signed = st.builds(bytes.__add__, st.sampled_from(SIGNATURES), tails)


@st.composite
def zips(draw: st.DrawFn) -> bytes:
    """A zip archive of OOXML or EPUB parts with hostile bodies, whole or cut short."""
    buffer = io.BytesIO()
    method = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name in draw(st.lists(st.sampled_from(ZIP_MEMBERS), min_size=1, max_size=5, unique=True)):
            archive.writestr(name, draw(st.sampled_from(XML_BODIES) | st.binary(max_size=80)))
    data = buffer.getvalue()
    return data[: draw(st.integers(4, len(data)))] if draw(st.booleans()) else data


documents = st.binary(max_size=400) | signed | zips()
# Small enough that a hostile archive meets the inflation ceiling in the test's time, not after it.
LIMITS = ConvertLimits(max_input_bytes=64 * 1024, max_decompressed_bytes=1024 * 1024, max_spreadsheet_cells=10_000)


@fuzzed(80)
@given(documents, names, mimes)
def test_sniff_never_raises_and_decides_the_same_way_twice(data: bytes, filename: str | None, mime: str | None) -> None:
    found = sniff(data, filename, mime)
    assert isinstance(found, DocumentFormat)
    assert sniff(data, filename, mime) is found


@fuzzed(80)
@given(documents, mimes)
def test_the_bytes_decide_a_signed_format_whatever_the_name(data: bytes, mime: str | None) -> None:
    # A name is only a hint: a PDF or a zip stays one whatever it is called.
    formats = {sniff(data, name, mime) for name in ("a.txt", "a.md", "a.html", None)}
    if data.startswith((b"%PDF-", b"PK\x03\x04")):
        assert len(formats) == 1


@fuzzed(30, deadline=timedelta(seconds=10))
@given(documents, names, mimes)
def test_conversion_answers_text_or_a_documented_refusal(data: bytes, filename: str | None, mime: str | None) -> None:
    raw = RawDocument(data, filename=filename or None, mime=mime or None)
    try:
        converted = convert_document(raw, LIMITS)
    except (InvalidRequestError, UnsupportedError):
        return
    except EngineError as failure:
        assert "failed inside the converter" in failure.message and failure.__cause__ is not None
        return
    assert converted.markdown.strip()
    assert converted.source_size == len(data)
    converted.markdown.encode("utf-8")


@fuzzed(100)
@given(st.text(min_size=1, max_size=300).filter(str.strip), st.sampled_from(["notes.md", "a.txt", "main.py", None]))
def test_text_is_kept_byte_exact(text: str, filename: str | None) -> None:
    data = text.encode("utf-8")
    raw = RawDocument(data, filename=filename)
    fmt = sniff(data, filename)
    if not fmt.is_textual or b"\x00" in data:
        return
    assert convert_document(raw, LIMITS).markdown == text
