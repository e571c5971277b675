"""`NativeConverter`: markdown, plain text and code, stored exactly as written."""

from __future__ import annotations

from engines.contract import InvalidRequestError, UnsupportedError
from pipeline.convert.converter import converted, sniffed
from pipeline.convert.documents import ConvertedDocument, RawDocument
from pipeline.sniff import DocumentFormat

_NATIVE_FORMATS = frozenset({DocumentFormat.MARKDOWN, DocumentFormat.PLAIN_TEXT, DocumentFormat.CODE})


class NativeConverter:
    """Markdown, plain text and code: the UTF-8 bytes decoded and nothing else (docs/spec/sources-and-documents.md §10.5
    "Native").

    No rewriting of a person's words or a program's meaning: line endings, trailing spaces and a byte order
    mark all survive, so encoding the markdown as UTF-8 gives back the input bytes. Bytes that are not UTF-8
    are refused rather than guessed at. HTML is not taken here; it goes through the Office converter.
    """

    name = "native"

    def supports(self, fmt: DocumentFormat) -> bool:
        return fmt in _NATIVE_FORMATS

    def convert(self, raw: RawDocument, fmt: DocumentFormat | None = None) -> ConvertedDocument:
        fmt = sniffed(raw, fmt)
        if not self.supports(fmt):
            raise UnsupportedError(f"{raw.label}: the native converter does not take {fmt}")
        try:
            text = raw.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequestError(
                f"{raw.label}: {fmt} is not valid UTF-8 (byte 0x{raw.data[exc.start]:02x} at offset {exc.start}); "
                "save it as UTF-8"
            ) from exc
        return converted(raw, fmt, text, converter=self.name)
