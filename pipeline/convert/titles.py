"""A converted document's title (docs/spec/sources-and-documents.md §10.6)."""

from __future__ import annotations

import re

from engines.chunking import heading_title
from pipeline.convert.documents import RawDocument
from pipeline.languages import file_name
from pipeline.sniff import DocumentFormat

# A line that opens like a heading; a line starts at the text's start or after a newline or a page break, as
# in the CortexDB splitter. `heading_title` then applies the whole rule (a non-empty title, trailing `#`s).
_HEADING_LINE = re.compile(r"(?:^|(?<=[\n\f]))( {0,3}#{1,6} [^\n\f]*)")


def document_title(fmt: DocumentFormat, converter_title: str | None, markdown: str, raw: RawDocument) -> str | None:
    """The first of: the converter's title, the first markdown heading (not for code), the file name, the origin.

    Code never takes a heading title, because a `#` line in a script is a comment. A blank candidate is no
    candidate; whitespace inside the chosen title is collapsed to single spaces.
    """
    candidates = (
        converter_title,
        None if fmt is DocumentFormat.CODE else first_heading(markdown),
        None if raw.filename is None else file_name(raw.filename),
        raw.origin,
    )
    for candidate in candidates:
        title = None if candidate is None else " ".join(candidate.split())
        if title:
            return title
    return None


def first_heading(markdown: str) -> str | None:
    """The title of the first markdown heading line in `markdown`, or None when no line is a heading."""
    for match in _HEADING_LINE.finditer(markdown):
        title = heading_title(match.group(1))
        if title is not None:
            return title
    return None
