"""`OfficeConverter`: every format that needs a parser, through markitdown (pdfminer.six for PDF)."""

from __future__ import annotations

import codecs
from urllib.parse import urlsplit

from engines.contract import Error, UnsupportedError
from pipeline.convert.archives import open_archive
from pipeline.convert.chrome import without_chrome
from pipeline.convert.compound import check_outlook_message
from pipeline.convert.converter import converted, sniffed
from pipeline.convert.documents import ConvertedDocument, RawDocument
from pipeline.convert.failures import library_failure
from pipeline.convert.feeds import feed_for_markitdown
from pipeline.convert.limits import ConvertLimits
from pipeline.convert.markitdown_formats import MARKITDOWN_FORMATS, MarkitdownResult, load_markitdown, run_markitdown
from pipeline.convert.pdf import joined_pages, pdf_pages
from pipeline.convert.scans import read_scanned_pages
from pipeline.convert.sheets import check_xls_cells, check_xlsx_cells
from pipeline.sniff import DocumentFormat

_ARCHIVES = frozenset({DocumentFormat.DOCX, DocumentFormat.XLSX, DocumentFormat.PPTX, DocumentFormat.EPUB})
_FEEDS = frozenset({DocumentFormat.RSS, DocumentFormat.ATOM})
_OFFICE_FORMATS = MARKITDOWN_FORMATS | {DocumentFormat.PDF}
_WEB_SCHEMES = frozenset({"http", "https"})


class OfficeConverter:
    """PDF, Word, Excel (both), PowerPoint, EPUB, Outlook, notebooks, CSV, feeds and HTML
    (docs/spec/sources-and-documents.md §10.5 "Office").

    Untrusted parsing: run it in a `ConverterPool` worker, which adds the time limit and the memory ceiling.
    Before any library sees the bytes, an archive's declared uncompressed size and a spreadsheet's dense
    cell count are checked against `limits`. A PDF's pages are joined by one form feed each. HTML loses its
    navigation chrome first, and a page whose origin is a web URL may be claimed by a site-aware converter;
    an RSS 1.0 feed is read as the RSS 2.0 feed it amounts to. markitdown is imported on first use, so
    building the converter costs nothing in a process that never converts.
    """

    name = "office"

    def __init__(self, limits: ConvertLimits | None = None) -> None:
        self._limits = ConvertLimits() if limits is None else limits

    def supports(self, fmt: DocumentFormat) -> bool:
        return fmt in _OFFICE_FORMATS

    def convert(self, raw: RawDocument, fmt: DocumentFormat | None = None) -> ConvertedDocument:
        fmt = sniffed(raw, fmt)
        if not self.supports(fmt):
            raise UnsupportedError(f"{raw.label}: the office converter does not take {fmt}")
        if fmt is DocumentFormat.PDF:
            return self._pdf(raw, fmt)
        result = self._parse(raw, fmt)
        return converted(raw, fmt, result.markdown, converter=self.name, title=result.title)

    def _pdf(self, raw: RawDocument, fmt: DocumentFormat) -> ConvertedDocument:
        """The text layer page by page, with the pages that have none read by OCR."""
        layer = pdf_pages(raw)
        pages, no_text = read_scanned_pages(raw, layer, self._limits.ocr)
        text = joined_pages(raw, pages, no_text or "and no page was read by OCR")
        scanned = sum(1 for before, after in zip(layer, pages, strict=True) if before != after)
        metadata = {"pages": str(len(pages))} | ({"ocr_pages": str(scanned)} if scanned else {})
        return converted(raw, fmt, text, converter=self.name, metadata=metadata)

    def warm_up(self) -> None:
        """Import the parsing libraries now rather than on the first document."""
        load_markitdown()
        import pdfminer.high_level  # noqa: F401 -- the PDF path's imports, paid once here

    def _parse(self, raw: RawDocument, fmt: DocumentFormat) -> MarkitdownResult:
        try:
            self._check(raw, fmt)
            data, charset = raw.data, _charset(raw, fmt)
            if fmt is DocumentFormat.HTML:
                data, charset = without_chrome(data, charset)
            elif fmt in _FEEDS:
                data = feed_for_markitdown(raw, fmt)
            return run_markitdown(fmt, data, raw.filename, charset, _web_origin(raw.origin))
        except (Error, MemoryError):
            raise
        except Exception as exc:
            raise library_failure(exc, raw, fmt) from exc

    def _check(self, raw: RawDocument, fmt: DocumentFormat) -> None:
        """The checks that must pass before a library opens the bytes."""
        if fmt in _ARCHIVES:
            with open_archive(raw, fmt, self._limits) as archive:
                if fmt is DocumentFormat.XLSX:
                    check_xlsx_cells(archive, raw, self._limits)
        elif fmt is DocumentFormat.XLS:
            check_xls_cells(raw, self._limits)
        elif fmt is DocumentFormat.MSG:
            check_outlook_message(raw)


def _web_origin(origin: str | None) -> str | None:
    """`origin` when it is an http or https URL (what site-aware converters and feed links may use), else None."""
    if not origin:
        return None
    try:
        scheme = urlsplit(origin).scheme.lower()
    except ValueError:
        return None
    return origin if scheme in _WEB_SCHEMES else None


def _charset(raw: RawDocument, fmt: DocumentFormat) -> str | None:
    """The text encoding to hand markitdown: the MIME's, else UTF-8 where the bytes are UTF-8, else a guess."""
    if fmt is DocumentFormat.IPYNB:
        return "utf-8"  # JSON is UTF-8 (RFC 8259); anything else is a damaged notebook
    declared = _declared_charset(raw.mime)
    if declared is not None or fmt is not DocumentFormat.CSV:
        # HTML without a declared charset is left to markitdown, which tries UTF-8 and then lets its parser
        # read the document's own <meta charset>.
        return declared
    # A CSV states no encoding; markitdown's guess is poor on short UTF-8 files, so only non-UTF-8 is guessed.
    try:
        raw.data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return "utf-8"


def _declared_charset(mime: str | None) -> str | None:
    """The `charset` parameter of `mime` when it names an encoding Python knows; a bogus one is ignored."""
    for parameter in (mime or "").split(";")[1:]:
        key, _, value = parameter.partition("=")
        if key.strip().lower() == "charset":
            return _known_encoding(value.strip().strip('"'))
    return None


def _known_encoding(name: str) -> str | None:
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None
