"""PDF text, page by page, with pdfminer.six (docs/spec/sources-and-documents.md §10.5 "PDF").

markitdown's PDF converter joins pages without a mark, and the page breaks matter: the CortexDB engine splits
large documents at them and cites pages by number. So the text layer is read here, one page at a time, with
the same pdfminer layout analysis markitdown uses for prose, and the pages are joined by one form feed each.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator

from engines.contract import InvalidRequestError
from pipeline.convert.documents import RawDocument
from pipeline.convert.failures import describe

PAGE_BREAK = "\f"
_BLANK_RUNS = re.compile(r"\n{3,}")


def pdf_pages(raw: RawDocument) -> list[str]:
    """The text layer of each page, in order (an empty string for a page without one).

    A file pdfminer cannot parse, or one without pages, is `unreadable PDF`.
    """
    try:
        pages = [_normalise(text) for text in _page_texts(raw.data)]
    except MemoryError:
        raise
    except Exception as exc:
        raise InvalidRequestError(f"{raw.label}: unreadable PDF ({describe(exc)})") from exc
    if not pages:
        raise InvalidRequestError(f"{raw.label}: unreadable PDF (no pages found)")
    return pages


def joined_pages(raw: RawDocument, pages: list[str], no_text: str) -> str:
    """The pages joined by one form feed each: an empty page keeps its place (two breaks in a row), and no break
    follows the last. A PDF none of whose pages holds text is refused, saying `no_text` about it."""
    if not any(pages):
        raise InvalidRequestError(f"{raw.label}: the PDF has no text layer (a scanned document?); {no_text}")
    return PAGE_BREAK.join(pages)


def _page_texts(data: bytes) -> Iterator[str]:
    """Each page's text as pdfminer's `extract_text` would give it, one page at a time."""
    # Imported here so that only the processes that convert PDFs pay for pdfminer.
    from pdfminer.converter import TextConverter
    from pdfminer.layout import LAParams
    from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
    from pdfminer.pdfpage import PDFPage

    output = io.StringIO()
    manager = PDFResourceManager(caching=True)
    device = TextConverter(manager, output, laparams=LAParams())
    try:
        interpreter = PDFPageInterpreter(manager, device)
        for page in PDFPage.get_pages(io.BytesIO(data), caching=True):
            interpreter.process_page(page)
            yield output.getvalue()
            output.seek(0)
            output.truncate()
    finally:
        device.close()


def _normalise(text: str) -> str:
    """Trailing spaces off every line, runs of blank lines down to one, no blank lines at either end."""
    # pdfminer ends each page with a form feed; any other one inside a page would fake a page break.
    text = text.removesuffix(PAGE_BREAK).replace(PAGE_BREAK, "\n")
    lines = "\n".join(line.rstrip() for line in text.splitlines())
    return _BLANK_RUNS.sub("\n\n", lines).strip("\n")
