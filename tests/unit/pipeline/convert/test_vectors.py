"""Every format's conversion against the shared vector table, PDF page breaks, titles
(docs/spec/sources-and-documents.md §10.6) and passthrough."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.convert import (
    NativeConverter,
    OfficeConverter,
    RawDocument,
    convert_document,
    default_chain,
)
from pipeline.sniff import DocumentFormat, sniff
from tests.fixtures.documents import docx_bytes, epub_bytes, html_bytes, ipynb_bytes, pdf_bytes
from tests.fixtures.vectors import VECTORS, ConversionVector, check_vector

F = DocumentFormat


@pytest.mark.parametrize("vector", VECTORS, ids=[v.id for v in VECTORS])
def test_vector_converts(vector: ConversionVector) -> None:
    check_vector(vector, convert_document(vector.build()))


@pytest.mark.parametrize("vector", VECTORS, ids=[v.id for v in VECTORS])
def test_vector_sniffs_to_its_format_and_one_converter_claims_it(vector: ConversionVector) -> None:
    raw = vector.build()
    assert sniff(raw.data, raw.filename, raw.mime) is vector.format
    claimants = [c for c in default_chain().converters if c.supports(vector.format)]
    assert len(claimants) == 1


@pytest.mark.parametrize("vector", VECTORS, ids=[v.id for v in VECTORS])
def test_converter_and_language_metadata(vector: ConversionVector) -> None:
    document = convert_document(vector.build())
    expected = "native" if vector.format in {F.MARKDOWN, F.PLAIN_TEXT, F.CODE} else "office"
    assert document.metadata["converter"] == expected
    assert document.language == ("python" if vector.format is F.CODE else None)


# --- PDF pages ---


def test_three_pages_are_joined_by_one_form_feed_each() -> None:
    raw = RawDocument(pdf_bytes(["First page\nline two", "Second page", "Third page"]), filename="three.pdf")
    document = convert_document(raw)
    assert document.markdown == "First page\nline two\fSecond page\fThird page"
    assert document.markdown.split("\f") == ["First page\nline two", "Second page", "Third page"]
    assert document.metadata == {"converter": "office", "pages": "3"}


def test_an_empty_page_keeps_its_place() -> None:
    document = convert_document(RawDocument(pdf_bytes(["one", "", "three", ""]), filename="gaps.pdf"))
    assert document.markdown == "one\f\fthree\f"
    assert document.metadata["pages"] == "4"


def test_page_text_is_whitespace_normalised() -> None:
    raw = RawDocument(pdf_bytes(["spaced out   \n\n\n\nafter the gap", "x"]), filename="ws.pdf")
    first_page = convert_document(raw).markdown.split("\f")[0]
    assert not any(line != line.rstrip() for line in first_page.split("\n"))
    assert "\n\n\n" not in first_page
    assert not first_page.startswith("\n") and not first_page.endswith("\n")


def test_a_single_page_has_no_break() -> None:
    assert "\f" not in convert_document(RawDocument(pdf_bytes(["only page"]), filename="one.pdf")).markdown


# --- titles (docs/spec/sources-and-documents.md §10.6) ---


def title_of(data: bytes, filename: str | None = "doc.md", origin: str | None = None) -> str | None:
    return convert_document(RawDocument(data, filename=filename, origin=origin)).title


@pytest.mark.parametrize(
    ("markdown", "title"),
    [
        (b"# Plain heading\nbody", "Plain heading"),
        (b"intro\n\n## Second level ##\nbody", "Second level"),
        (b"   ### Three spaces allowed", "Three spaces allowed"),
        (b"    # Four spaces is code\nbody", "doc.md"),
        (b"#No space\nbody", "doc.md"),
        (b"####### seven hashes", "doc.md"),
        (b"# \nbody", "doc.md"),
        (b"# ###\nbody", "doc.md"),
        (b"page one\f# Page two heading", "Page two heading"),
        (b"#  Spaced   out   title  ", "Spaced out title"),
        (b"no heading at all", "doc.md"),
    ],
)
def test_first_heading_of_markdown(markdown: bytes, title: str) -> None:
    assert title_of(markdown) == title


def test_code_never_takes_a_heading_title() -> None:
    assert title_of(b"# This is a comment\nx = 1\n", "tools/build.sh") == "build.sh"


def test_filename_then_origin_then_nothing() -> None:
    assert title_of(b"no heading", "deep/path/to/notes.txt") == "notes.txt"
    assert title_of(b"no heading", "C:\\Users\\ada\\notes.txt") == "notes.txt"
    assert title_of(b"no heading", None, "https://example.com/page") == "https://example.com/page"
    assert title_of(b"no heading", None) is None


def test_html_title_outranks_the_first_heading() -> None:
    assert title_of(html_bytes("The  title\n", "<h1>A heading</h1>"), "p.html") == "The title"
    assert title_of(html_bytes("   ", "<h1>A heading</h1>"), "p.html") == "A heading"
    assert title_of(html_bytes("", "<p>no heading</p>"), None, "https://example.com/p") == "https://example.com/p"


def test_library_titles() -> None:
    assert title_of(epub_bytes("Book Title", ["text"]), "b.epub") == "Book Title"
    assert (
        title_of(ipynb_bytes([("markdown", "# Cell heading")], title="Notebook title"), "n.ipynb") == "Notebook title"
    )
    assert title_of(docx_bytes(["Intro", "Heading later"], headings={1: 2}), "d.docx") == "Heading later"
    assert title_of(docx_bytes(["No headings here"]), "d.docx") == "d.docx"


# --- passthrough exactness ---


@pytest.mark.parametrize(
    ("data", "filename"),
    [
        (b"line one\r\nline two  \r\n\r\n\ttabbed\t\n", "crlf.md"),
        (b"no final newline   ", "tail.txt"),
        (b"\xef\xbb\xbfwith a byte order mark\n", "bom.md"),
        ("déjà vu 漢字 😀\u00a0\n".encode(), "unicode.txt"),
        (b"mixed\rold mac\r\nwindows\nunix", "endings.log"),
        (b"def f():\n    return 1  # trailing  \n", "f.py"),
        (b"\n\n\nleading blank lines", "lead.md"),
        (b"form\ffeed and \x00 nul", "odd.txt"),
    ],
)
def test_passthrough_is_byte_exact(data: bytes, filename: str) -> None:
    document = convert_document(RawDocument(data, filename=filename))
    assert document.markdown.encode("utf-8") == data
    assert document.metadata == {"converter": "native"}


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1).filter(lambda text: bool(text.strip())), st.sampled_from(["a.md", "b.txt", "c.rs"]))
def test_passthrough_property(text: str, filename: str) -> None:
    data = text.encode("utf-8", "surrogatepass")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return  # a lone surrogate is not UTF-8 text
    assert NativeConverter().convert(RawDocument(data, filename=filename)).markdown.encode() == data


def test_office_converter_takes_html_and_the_native_converter_does_not() -> None:
    assert OfficeConverter().supports(F.HTML)
    assert not NativeConverter().supports(F.HTML)
    assert {fmt for fmt in F if NativeConverter().supports(fmt)} == {F.MARKDOWN, F.PLAIN_TEXT, F.CODE}
