"""The converter interface and the one place a converter's output becomes a `ConvertedDocument`."""

from __future__ import annotations

from typing import Protocol

from engines.contract import InvalidRequestError
from pipeline.convert.documents import ConvertedDocument, RawDocument
from pipeline.convert.titles import document_title
from pipeline.languages import language_for_path
from pipeline.sniff import DocumentFormat, sniff


class DocumentConverter(Protocol):
    """One family of formats turned into markdown; a `ConverterChain` holds several in priority order.

    `supports` is the whole claim: a converter that supports a format and then fails has found a real
    problem, and the chain does not try another (no fall-through). `convert` raises the contract's errors
    only: `InvalidRequestError` for a document it refuses, `UnsupportedError` for a format it does not take,
    `EngineError` for its own failure. It must not let a library exception escape, and must let
    `MemoryError` through untouched so a pool can tell a memory ceiling from a bug.
    """

    name: str

    def supports(self, fmt: DocumentFormat) -> bool:
        """True when this converter takes documents of `fmt`."""
        ...

    def convert(self, raw: RawDocument, fmt: DocumentFormat | None = None) -> ConvertedDocument:
        """`raw` as markdown; `fmt` is the sniffed format when the caller already has it, else sniffed here."""
        ...


def sniffed(raw: RawDocument, fmt: DocumentFormat | None) -> DocumentFormat:
    """`fmt`, or the format sniffed from `raw` when the caller did not pass one."""
    return sniff(raw.data, raw.filename, raw.mime) if fmt is None else fmt


def converted(
    raw: RawDocument,
    fmt: DocumentFormat,
    markdown: str,
    *,
    converter: str,
    title: str | None = None,
    metadata: dict[str, str] | None = None,
) -> ConvertedDocument:
    """The finished document; a blank `markdown` is refused, as the spec never lets an empty document through."""
    if not markdown.strip():
        raise InvalidRequestError(f"{raw.label}: converting {fmt} produced no text")
    markdown = _valid_unicode(markdown)
    language = language_for_path(raw.filename) if fmt is DocumentFormat.CODE and raw.filename else None
    return ConvertedDocument(
        markdown=markdown,
        title=document_title(fmt, title, markdown, raw),
        format=fmt,
        language=language,
        source_size=len(raw.data),
        metadata={"converter": converter, **(metadata or {})},
    )


def nothing_read(
    raw: RawDocument, fmt: DocumentFormat, *, converter: str, why: str, metadata: dict[str, str] | None = None
) -> ConvertedDocument:
    """A document in which its converter found no text worth keeping (OCR on a photograph): empty, and marked
    `no_text` with `why`, so the pipeline skips it with that reason instead of storing noise or dead-lettering
    it."""
    return ConvertedDocument(
        markdown="",
        title=None,
        format=fmt,
        language=None,
        source_size=len(raw.data),
        metadata={"converter": converter, **(metadata or {}), "no_text": why},
    )


def _valid_unicode(text: str) -> str:
    """`text` with any lone surrogate (a parser's broken decoding) replaced, as stored text must be Unicode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text
