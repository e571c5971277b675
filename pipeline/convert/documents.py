"""What conversion takes in (`RawDocument`) and gives back (`ConvertedDocument`),
docs/spec/sources-and-documents.md §10.5."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from pipeline.sniff import DocumentFormat

UNNAMED = "unnamed document"


@dataclass(frozen=True)
class RawDocument:
    """A unit's bytes and what its source knows about them; hints only, the bytes decide the format.

    `filename` is the unit's name or path (it picks a code language and is the fallback title), `mime` a
    server's Content-Type, `origin` the URL it was fetched from. Messages about the document name it by
    `label`, so give at least one of `filename` and `origin` when there is one.
    """

    data: bytes = field(repr=False)
    filename: str | None = None
    mime: str | None = None
    origin: str | None = None

    @property
    def label(self) -> str:
        """How messages name this document: its filename, else its origin (no credentials), else `unnamed document`."""
        if self.filename:
            return self.filename
        return _without_userinfo(self.origin) if self.origin else UNNAMED


def _without_userinfo(url: str) -> str:
    # Messages end up in logs and dead letters; a `user:password@` in a URL must not.
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


@dataclass(frozen=True)
class ConvertedDocument:
    """A document as markdown, ready for scrubbing; `markdown` is never blank, but in a document its converter
    found no text in (marked `no_text` in its metadata, with the reason: see `converter.nothing_read`).

    Markdown, plain text and code are their bytes decoded, unchanged; everything else is what the
    converter made of it. A PDF's pages are separated by one form feed (U+000C) each, an empty page keeping
    its place. `title` follows docs/spec/sources-and-documents.md §10.6; `language` is set for code only; `source_size`
    is the input's length in bytes; `metadata` says at least which converter ran (`{"converter": "native"}`).
    """

    markdown: str
    title: str | None
    format: DocumentFormat
    language: str | None
    source_size: int
    metadata: dict[str, str]

    @property
    def no_text(self) -> str | None:
        """Why its converter found no text in it (the document is then empty and skipped), else None."""
        return self.metadata.get("no_text")
