"""Every refusal and failure of conversion, with its contract error and its message
(docs/spec/sources-and-documents.md §10.5, §10.8)."""

from __future__ import annotations

import importlib
import io
import socket
import zipfile
from typing import Any

import pytest

from engines.contract import EngineError, Error, InvalidRequestError, UnsupportedError
from pipeline.convert import (
    ConvertedDocument,
    ConverterChain,
    ConvertLimits,
    NativeConverter,
    OcrSettings,
    OfficeConverter,
    RawDocument,
    convert_document,
    native_chain,
    ocr_unavailable,
)
from pipeline.convert.sheets import dense_cells
from pipeline.sniff import DocumentFormat
from tests.fixtures.documents import (
    corrupt_pdf_bytes,
    docx_bytes,
    html_bytes,
    lying_zip_bytes,
    pdf_bytes,
    png_bytes,
    wav_bytes,
    xlsx_bytes,
    zip_bomb_bytes,
)
from tests.fixtures.scans import bomb_png, truncated_jpeg
from tests.fixtures.vectors import VECTORS

F = DocumentFormat
OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 1024


def plain_zip() -> bytes:
    """An ordinary archive of files, no Office package."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("holiday/beach.jpg", png_bytes())
        archive.writestr("holiday/notes.txt", "sunny")
    return buffer.getvalue()


CONVERTS = "markdown, plain_text, html, code, pdf, docx, xlsx, pptx, epub, xls, msg, ipynb, csv, rss, atom, image"
_OCR_MISSING = ocr_unavailable(OcrSettings())
# A PDF without a text layer is read by OCR where this build can; the refusal says why nothing came of it.
_SCAN_REASON = "and OCR found no text in its pages" if _OCR_MISSING is None else f"and {_OCR_MISSING}"


def refusal(raw: RawDocument, limits: ConvertLimits | None = None) -> Error:
    with pytest.raises(Error) as caught:
        convert_document(raw, limits)
    return caught.value


# (input, error class, exact message): every message names the input and says why.
REFUSALS: list[tuple[str, RawDocument, type[Error], str]] = [
    ("empty", RawDocument(b"", filename="notes.md"), InvalidRequestError, "notes.md: document body is empty"),
    (
        "blank markdown",
        RawDocument(b" \r\n\t\n", filename="blank.md"),
        InvalidRequestError,
        "blank.md: converting markdown produced no text",
    ),
    (
        "blank html",
        RawDocument(html_bytes("", "<script>only()</script>"), filename="blank.html"),
        InvalidRequestError,
        "blank.html: converting html produced no text",
    ),
    (
        "scan",
        RawDocument(pdf_bytes(["", ""]), filename="scan.pdf"),
        InvalidRequestError,
        f"scan.pdf: the PDF has no text layer (a scanned document?); {_SCAN_REASON}",
    ),
    (
        "bomb",
        RawDocument(zip_bomb_bytes(), filename="test.zip"),
        InvalidRequestError,
        "test.zip declares 2.1 GiB uncompressed, over the 64 MiB limit",
    ),
    (
        "plain zip",
        RawDocument(plain_zip(), filename="photos.zip"),
        InvalidRequestError,
        "photos.zip is a zip archive but not a Word document (it has no word/ part); "
        "only Word, Excel, PowerPoint and EPUB archives are converted",
    ),
    (
        "image bomb",
        RawDocument(bomb_png(), filename="huge.png"),
        InvalidRequestError,
        "huge.png: the image declares more than 100,000,000 pixels, the limit (ocr.max_pixels): "
        "refused before decoding",
    ),
    (
        "image over the cap",
        RawDocument(bomb_png(12_000, 12_000), filename="large.png"),
        InvalidRequestError,
        "large.png: the image is 12000×12000 pixels, over the 100,000,000-pixel limit (ocr.max_pixels): "
        "refused before decoding",
    ),
    (
        "truncated image",
        RawDocument(truncated_jpeg(), filename="cut.jpg"),
        InvalidRequestError,
        "cut.jpg: damaged image (the file ends before the image does)",
    ),
    (
        "audio",
        RawDocument(wav_bytes(), filename="memo.wav"),
        UnsupportedError,
        "memo.wav: audio files have no text to extract (nothing here transcribes speech); "
        f"this build converts {CONVERTS}",
    ),
    (
        "unknown",
        RawDocument(bytes(range(256)) * 4, filename="random.bin"),
        UnsupportedError,
        "random.bin: unrecognised bytes (not a document format this build converts)",
    ),
    (
        "legacy word",
        RawDocument(OLE2, filename="old.doc"),
        UnsupportedError,
        "old.doc: unrecognised bytes (not a document format this build converts)",
    ),
    (
        "not an outlook message",
        RawDocument(OLE2, filename="mail.msg"),
        InvalidRequestError,
        "mail.msg: unreadable msg (ValueError: bytes length not a multiple of item size)",
    ),
]


@pytest.mark.parametrize(("raw", "kind", "message"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_refusal(raw: RawDocument, kind: type[Error], message: str) -> None:
    error = refusal(raw)
    assert type(error) is kind
    assert error.message == message
    assert raw.label in error.message


@pytest.mark.parametrize(
    ("raw", "start"),
    [
        (RawDocument(corrupt_pdf_bytes(), filename="broken.pdf"), "broken.pdf: unreadable PDF (PDFSyntaxError: "),
        (RawDocument(lying_zip_bytes(), filename="liar.docx"), "liar.docx: unreadable docx (BadZipFile: Bad CRC-32"),
        (RawDocument(b'{"cells": [', filename="cut.ipynb"), "cut.ipynb: unreadable ipynb (JSONDecodeError: "),
        (RawDocument(OLE2, filename="old.xls"), "old.xls: unreadable xls (CompDocError: "),
        (RawDocument(b"PK\x03\x04 no directory", filename="cut.docx"), "cut.docx: unreadable docx: the zip archive"),
        (RawDocument(b"%PDF-1.4\n", filename="stub.pdf"), "stub.pdf: unreadable PDF"),
        (
            RawDocument("Grüße".encode("latin-1"), filename="latin.md"),
            "latin.md: markdown is not valid UTF-8 (byte 0xfc",
        ),
    ],
)
def test_damaged_input_is_an_invalid_request(raw: RawDocument, start: str) -> None:
    error = refusal(raw)
    assert isinstance(error, InvalidRequestError)
    assert error.message.startswith(start), error.message


# --- size limits ---


def test_size_limit_is_checked_before_anything_else() -> None:
    limits = ConvertLimits(max_input_bytes=1024)
    error = refusal(RawDocument(b"\x00" * 2048, filename="big.bin"), limits)
    assert error == InvalidRequestError("big.bin is 2 KiB, over the 1 KiB limit")


def test_default_input_limit_is_32_mib_and_exact_counts_show_when_rounding_hides_the_excess() -> None:
    data = b"a" * (32 * 1024 * 1024 + 1)
    error = refusal(RawDocument(data, filename="huge.txt"))
    assert error == InvalidRequestError("huge.txt is 33,554,433 bytes, over the 32 MiB limit")
    assert convert_document(RawDocument(data[:-1], filename="huge.txt")).source_size == len(data) - 1


def test_unnamed_documents_are_named_by_origin_or_as_unnamed() -> None:
    assert refusal(RawDocument(b"", origin="https://example.com/a")).message == (
        "https://example.com/a: document body is empty"
    )
    assert refusal(RawDocument(b"")).message == "unnamed document: document body is empty"
    assert refusal(RawDocument(b"", origin="https://ada:s3cret@example.com/a")).message == (
        "https://example.com/a: document body is empty"
    )


# --- archives and spreadsheets, checked before the library opens the bytes ---


@pytest.fixture
def markitdown_must_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object) -> None:
        raise AssertionError("markitdown was handed bytes that the pre-checks should have refused")

    monkeypatch.setattr("pipeline.convert.office.run_markitdown", forbidden)


@pytest.mark.usefixtures("markitdown_must_not_run")
@pytest.mark.parametrize("kind", ["xlsx", "docx", "pptx"])
def test_declared_size_is_checked_before_markitdown(kind: str) -> None:
    error = refusal(RawDocument(zip_bomb_bytes(kind=kind), filename=f"bomb.{kind}"))
    assert error == InvalidRequestError(f"bomb.{kind} declares 2.1 GiB uncompressed, over the 64 MiB limit")


@pytest.mark.usefixtures("markitdown_must_not_run")
def test_decompressed_limit_follows_the_limits() -> None:
    raw = RawDocument(docx_bytes(["x" * 5000]), filename="small.docx")
    error = refusal(raw, ConvertLimits(max_decompressed_bytes=4096))
    assert isinstance(error, InvalidRequestError)
    assert error.message.startswith("small.docx declares ")
    assert error.message.endswith(", over the 4 KiB limit")


@pytest.mark.usefixtures("markitdown_must_not_run")
def test_dense_cells_are_capped_before_markitdown() -> None:
    # Two cells, but A1 to Z40000 is 1,040,000 cells once pandas fills the range in.
    rows = [["a"]] + [[] for _ in range(39_998)] + [[""] * 25 + ["z"]]
    error = refusal(RawDocument(xlsx_bytes({"Sparse": rows}), filename="sparse.xlsx"))
    assert error == InvalidRequestError(
        "sparse.xlsx has more than 1,000,000 cells in its sheets' used ranges (1,040,000 counted so far); "
        "split the workbook or export the sheets you need as CSV"
    )


@pytest.mark.usefixtures("markitdown_must_not_run")
def test_dense_cells_add_up_over_sheets() -> None:
    sheets = {"One": [["a", "b"], ["c", "d"]], "Two": [["e", "f", "g"]]}
    error = refusal(RawDocument(xlsx_bytes(sheets), filename="book.xlsx"), ConvertLimits(max_spreadsheet_cells=6))
    assert isinstance(error, InvalidRequestError)
    assert "(7 counted so far)" in error.message


def test_dense_cells_of_a_workbook_within_the_limit_convert() -> None:
    sheets = {"One": [["a", "b"], ["c", "d"]], "Two": [["e", "f"]]}
    document = convert_document(
        RawDocument(xlsx_bytes(sheets), filename="ok.xlsx"), ConvertLimits(max_spreadsheet_cells=6)
    )
    assert "## Two" in document.markdown


@pytest.mark.parametrize(
    ("xml", "cells"),
    [
        (b'<sheetData><row r="3"><c r="B3"/></row></sheetData>', 6),
        (b'<x:sheetData><x:row r="2"><x:c r="AA2" t="s"/></x:row></x:sheetData>', 54),
        # Cells and rows without references still count: three rows, the widest holding four cells.
        (b"<row><c/><c/></row><row><c/><c/><c/><c/></row><row><c/></row>", 7),
        (b"<cols><col min='1' max='16384'/></cols><sheetData/>", 0),
        (b'<row r="1048576"><c r="XFD1048576"/></row>', 1048576 * 16384),
    ],
)
def test_dense_cell_count(xml: bytes, cells: int) -> None:
    assert dense_cells(xml) == cells


# --- the chain: no fall-through, unsupported formats, library failures ---


class ExplodingConverter:
    name = "exploding"

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def supports(self, fmt: DocumentFormat) -> bool:
        return fmt is F.PDF

    def convert(self, raw: RawDocument, fmt: DocumentFormat | None = None) -> ConvertedDocument:
        raise self.error


class RecordingConverter(OfficeConverter):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def convert(self, raw: RawDocument, fmt: DocumentFormat | None = None) -> ConvertedDocument:
        self.calls += 1
        return super().convert(raw, fmt)


def test_no_fall_through_after_a_claiming_converter_fails() -> None:
    fallback = RecordingConverter()
    chain = ConverterChain([ExplodingConverter(InvalidRequestError("x.pdf: refused by the first")), fallback])
    with pytest.raises(InvalidRequestError, match="refused by the first"):
        chain.convert(RawDocument(pdf_bytes(["text"]), filename="x.pdf"))
    assert fallback.calls == 0


def test_priority_order_prepend_and_push() -> None:
    chain = native_chain()
    office = OfficeConverter()
    chain.push(ExplodingConverter(RuntimeError("never")))
    chain.prepend(office)
    assert chain.converters[0] is office
    assert chain.converter_for(F.PDF) is office
    assert chain.formats()[:4] == [F.MARKDOWN, F.PLAIN_TEXT, F.HTML, F.CODE]


def test_a_converter_bug_becomes_an_engine_error() -> None:
    chain = ConverterChain([ExplodingConverter(ValueError("bad state"))])
    with pytest.raises(EngineError) as caught:
        chain.convert(RawDocument(pdf_bytes(["text"]), filename="x.pdf"))
    assert caught.value.message == "x.pdf: the exploding converter failed on pdf (ValueError: bad state)"
    assert isinstance(caught.value.__cause__, ValueError)


def test_memory_error_is_never_translated() -> None:
    chain = ConverterChain([ExplodingConverter(MemoryError())])
    with pytest.raises(MemoryError):
        chain.convert(RawDocument(pdf_bytes(["text"]), filename="x.pdf"))


def test_a_library_crash_is_an_engine_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(*args: object) -> None:
        raise RuntimeError("internal parser state")

    monkeypatch.setattr("pipeline.convert.office.run_markitdown", crash)
    error = refusal(RawDocument(docx_bytes(["text"]), filename="ok.docx"))
    assert error == EngineError(
        "ok.docx: converting docx failed inside the converter (RuntimeError: internal parser state)"
    )


def _docx_with_body(body: bytes | None) -> bytes:
    """A docx whose main part is `body` (None: left out)."""
    source = zipfile.ZipFile(io.BytesIO(docx_bytes(["text"])))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in source.namelist():
            if name != "word/document.xml":
                archive.writestr(name, source.read(name))
            elif body is not None:
                archive.writestr(name, body)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("body", "start"),
    [
        (None, "no-body.docx: unreadable docx (OSError: Could not find main document part"),
        (b"<w:document xmlns:w='urn:x'/>", "no-body.docx: unreadable docx (ValueError: Could not find the body"),
    ],
)
def test_a_docx_without_its_body_is_an_invalid_request(body: bytes | None, start: str) -> None:
    error = refusal(RawDocument(_docx_with_body(body), filename="no-body.docx"))
    assert isinstance(error, InvalidRequestError) and error.message.startswith(start), error


def test_a_value_error_outside_the_readers_stays_an_engine_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(*args: object) -> None:
        raise ValueError("our own bug")

    monkeypatch.setattr("pipeline.convert.office.run_markitdown", crash)
    error = refusal(RawDocument(docx_bytes(["text"]), filename="ok.docx"))
    assert isinstance(error, EngineError), error


def test_deep_nesting_is_an_invalid_request(monkeypatch: pytest.MonkeyPatch) -> None:
    def recurse(*args: object) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr("pipeline.convert.office.run_markitdown", recurse)
    error = refusal(RawDocument(html_bytes("t", "<p>x</p>"), filename="deep.html"))
    assert error == InvalidRequestError("deep.html: the html is nested too deeply to convert")


def test_a_chain_without_office_support_names_what_it_converts() -> None:
    with pytest.raises(UnsupportedError) as caught:
        convert_document(RawDocument(pdf_bytes(["text"]), filename="x.pdf"), chain=native_chain())
    assert caught.value.message == "x.pdf: no converter handles pdf; this build converts markdown, plain_text, code"


def test_converters_refuse_formats_they_do_not_take() -> None:
    with pytest.raises(UnsupportedError, match="the native converter does not take pdf"):
        NativeConverter().convert(RawDocument(pdf_bytes(["x"]), filename="x.pdf"))
    with pytest.raises(UnsupportedError, match="the office converter does not take markdown"):
        OfficeConverter().convert(RawDocument(b"# x", filename="x.md"))


def test_a_bogus_declared_charset_is_ignored() -> None:
    raw = RawDocument(b"name\nAda\n", filename="a.csv", mime="text/csv; charset=no-such-codec")
    assert "| Ada |" in convert_document(raw).markdown
    latin = RawDocument("name\nJosé\n".encode("latin-1"), filename="b.csv", mime="text/csv; charset=ISO-8859-1")
    assert "| José |" in convert_document(latin).markdown


# --- markitdown is contained: no network, no plugins ---


def test_conversion_never_opens_a_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a converter tried to reach the network")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    page = html_bytes(
        "Remote", '<img src="https://example.com/x.png"><link rel="stylesheet" href="https://e.com/s.css">'
    )
    raw = RawDocument(page + b"<p>text</p>", filename="remote.html", origin="https://en.wikipedia.org/wiki/Remote")
    assert convert_document(raw).title == "Remote"
    for vector in VECTORS:
        convert_document(vector.build())


def test_markitdown_plugins_are_never_loaded() -> None:
    convert_document(RawDocument(docx_bytes(["text"]), filename="p.docx"))
    assert importlib.import_module("markitdown._markitdown")._plugins is None


def test_an_image_is_refused_when_ocr_is_turned_off() -> None:
    error = refusal(RawDocument(png_bytes(), filename="photo.png"), ConvertLimits(ocr=OcrSettings(enabled=False)))
    assert type(error) is UnsupportedError
    converts = CONVERTS.removesuffix(", image")
    assert error.message == (
        "photo.png: images are read only by OCR, which is turned off (ocr.enabled = false); "
        f"this build converts {converts}"
    )
