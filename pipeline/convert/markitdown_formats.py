"""The typed edge around markitdown's per-format converters.

markitdown's `MarkItDown` class is not used: it guesses the format again with a model (magika), tries every
converter that accepts the guess and falls through on failure, loads plugins when asked, and fetches URLs
given to it. Here each sniffed format goes to exactly one of markitdown's converter classes, with a stream
of the bytes and no URL, so nothing is fetched, no plugin is loaded, and a failure is final.
"""

from __future__ import annotations

import functools
import importlib
import io
import re
from dataclasses import dataclass
from typing import Any

from pipeline.sniff import DocumentFormat

# The converter class markitdown registers for each format this build hands to it.
_CONVERTER_CLASSES: dict[DocumentFormat, str] = {
    DocumentFormat.HTML: "HtmlConverter",
    DocumentFormat.DOCX: "DocxConverter",
    DocumentFormat.XLSX: "XlsxConverter",
    DocumentFormat.XLS: "XlsConverter",
    DocumentFormat.PPTX: "PptxConverter",
    DocumentFormat.EPUB: "EpubConverter",
    DocumentFormat.MSG: "OutlookMsgConverter",
    DocumentFormat.IPYNB: "IpynbConverter",
    DocumentFormat.CSV: "CsvConverter",
    DocumentFormat.RSS: "RssConverter",
    DocumentFormat.ATOM: "RssConverter",
}
MARKITDOWN_FORMATS = frozenset(_CONVERTER_CLASSES)

# The converters markitdown tries before its generic HTML converter; each accepts a page by its URL alone.
_SITE_CONVERTER_CLASSES = ("WikipediaConverter", "BingSerpConverter")

# markdownify (behind markitdown's HTML, Word, Excel, PowerPoint and EPUB output) escapes every underscore by
# default: `api_key` would be stored as `api\_key`, which neither a keyword search for the identifier nor the
# secret scrubber's `api_key=` pattern would match. Intraword underscores are not emphasis in CommonMark.
_MARKDOWNIFY_OPTIONS = {"escape_underscores": False}

_LINE_ENDS = re.compile(r"\r?\n")
_BLANK_RUNS = re.compile(r"\n{3,}")


@dataclass(frozen=True)
class MarkitdownResult:
    """What one of markitdown's converters made of a document."""

    markdown: str
    title: str | None


def run_markitdown(
    fmt: DocumentFormat, data: bytes, filename: str | None, charset: str | None, url: str | None = None
) -> MarkitdownResult:
    """`data` converted by markitdown's converter for `fmt`; library exceptions propagate unchanged.

    `charset` is the text encoding when the caller knows it (HTML, CSV, notebooks); markitdown guesses
    otherwise. `url` is where the document came from (an http or https URL, never fetched): a page a
    site-aware converter accepts by its URL goes to that converter instead. The output is normalised as
    `MarkItDown.convert` does it: trailing spaces off every line, runs of blank lines down to one.
    """
    stream_info = _markitdown_module().StreamInfo(
        mimetype=fmt.mime, extension=f".{fmt.extension}", charset=charset, filename=filename, url=url
    )
    stream = io.BytesIO(data)
    result = _converter_for(fmt, stream, stream_info).convert(stream, stream_info, **_MARKDOWNIFY_OPTIONS)
    title = result.title if isinstance(result.title, str) else None
    return MarkitdownResult(markdown=_normalise(str(result.markdown)), title=title)


def load_markitdown() -> None:
    """Import markitdown and build every converter now, so a worker's first document does not pay for it."""
    for name in (*_CONVERTER_CLASSES.values(), *_SITE_CONVERTER_CLASSES):
        _converter(name)


def _converter_for(fmt: DocumentFormat, stream: io.BytesIO, stream_info: Any) -> Any:
    """markitdown's converter for `fmt`; for HTML from a URL, the first site-aware one that accepts it."""
    if fmt is DocumentFormat.HTML and stream_info.url:
        for name in _SITE_CONVERTER_CLASSES:
            # `accepts` must leave the stream where it found it (markitdown's own rule); these read only the URL.
            if _converter(name).accepts(stream, stream_info):
                return _converter(name)
    return _converter(_CONVERTER_CLASSES[fmt])


@functools.cache
def _markitdown_module() -> Any:
    return importlib.import_module("markitdown")


@functools.cache
def _converter(name: str) -> Any:
    # One instance per class for the process's life: markitdown's converters keep no state between calls
    # (the feed converter keeps the last call's options, which are always the same here).
    converters = importlib.import_module("markitdown.converters")
    return getattr(converters, name)()


def _normalise(markdown: str) -> str:
    lines = "\n".join(line.rstrip() for line in _LINE_ENDS.split(markdown))
    return _BLANK_RUNS.sub("\n\n", lines)
