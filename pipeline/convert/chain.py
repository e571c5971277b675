"""`ConverterChain` and `convert_document`: the size check, sniffing, then one converter
(docs/spec/sources-and-documents.md §10.5, "Chain")."""

from __future__ import annotations

from collections.abc import Iterable

from engines.contract import EngineError, Error, InvalidRequestError, UnsupportedError
from pipeline.convert.converter import DocumentConverter, sniffed
from pipeline.convert.documents import ConvertedDocument, RawDocument
from pipeline.convert.failures import describe
from pipeline.convert.limits import ConvertLimits, over_limit
from pipeline.convert.native import NativeConverter
from pipeline.convert.office import OfficeConverter
from pipeline.convert.plugins import plugin_converters
from pipeline.convert.scans import ImageConverter
from pipeline.sniff import DocumentFormat, sniff

# Why a format no converter takes is refused, where a better reason than "no converter" exists.
_NO_TEXT_REASONS = {
    DocumentFormat.IMAGE: "images are read only by OCR, which is turned off (ocr.enabled = false)",
    DocumentFormat.AUDIO: "audio files have no text to extract (nothing here transcribes speech)",
}


class ConverterChain:
    """Converters in priority order; the first that supports the sniffed format converts, and its word is final.

    A converter that claims a format and fails has found a real problem, so no other converter is tried
    (no fall-through). A format nobody takes is `UnsupportedError` naming what this chain does convert;
    never an empty document.
    """

    def __init__(self, converters: Iterable[DocumentConverter] = ()) -> None:
        self._converters = list(converters)

    @property
    def converters(self) -> tuple[DocumentConverter, ...]:
        """The converters, highest priority first."""
        return tuple(self._converters)

    def prepend(self, converter: DocumentConverter) -> None:
        """Give `converter` the highest priority."""
        self._converters.insert(0, converter)

    def push(self, converter: DocumentConverter) -> None:
        """Give `converter` the lowest priority."""
        self._converters.append(converter)

    def converter_for(self, fmt: DocumentFormat) -> DocumentConverter | None:
        """The converter that takes `fmt`, or None."""
        return next((converter for converter in self._converters if converter.supports(fmt)), None)

    def formats(self) -> list[DocumentFormat]:
        """Every format some converter here takes, in `DocumentFormat` order."""
        return [fmt for fmt in DocumentFormat if self.converter_for(fmt) is not None]

    def convert(self, raw: RawDocument, fmt: DocumentFormat | None = None) -> ConvertedDocument:
        """`raw` through the one converter for its format; `fmt` when already sniffed. No size check here."""
        fmt = sniffed(raw, fmt)
        converter = self.converter_for(fmt)
        if converter is None:
            raise UnsupportedError(self._refusal(raw, fmt))
        try:
            return converter.convert(raw, fmt)
        except (Error, MemoryError):
            raise
        except Exception as exc:
            # A converter must translate its libraries' exceptions; one that escaped is the converter's bug.
            raise EngineError(f"{raw.label}: the {converter.name} converter failed on {fmt} ({describe(exc)})") from exc

    def _refusal(self, raw: RawDocument, fmt: DocumentFormat) -> str:
        if fmt is DocumentFormat.UNKNOWN:
            return f"{raw.label}: unrecognised bytes (not a document format this build converts)"
        converts = ", ".join(self.formats()) or "nothing"
        reason = _NO_TEXT_REASONS.get(fmt, f"no converter handles {fmt}")
        return f"{raw.label}: {reason}; this build converts {converts}"


def native_chain() -> ConverterChain:
    """The chain of a host without parsing libraries: markdown, plain text and code only (the spec's default)."""
    return ConverterChain([NativeConverter()])


def default_chain(limits: ConvertLimits | None = None) -> ConverterChain:
    """Every format this build converts: the converters installed distributions declare (`tinymemory.converters`,
    found in this process), then OCR for images, the Office converter and the native one."""
    limits = ConvertLimits() if limits is None else limits
    return ConverterChain(
        [*plugin_converters(limits), ImageConverter(limits), OfficeConverter(limits), NativeConverter()]
    )


def warm_chain(limits: ConvertLimits) -> ConverterChain:
    """`default_chain` with its libraries already imported: what a `ConverterPool` worker runs by default.

    Built in the worker process, so the converters installed distributions declare are found there too; any
    converter with a `warm_up()` method (the Office one, a plugin's) has it called once, here.
    """
    chain = default_chain(limits)
    for converter in chain.converters:
        warm_up = getattr(converter, "warm_up", None)
        if callable(warm_up):
            warm_up()
    return chain


def check_size(raw: RawDocument, limits: ConvertLimits) -> None:
    """Refuse an empty document or one over the input limit, before anything else looks at it."""
    if not raw.data:
        raise InvalidRequestError(f"{raw.label}: document body is empty")
    if len(raw.data) > limits.max_input_bytes:
        raise InvalidRequestError(f"{raw.label} is {over_limit(len(raw.data), limits.max_input_bytes)}")


def convert_natively(raw: RawDocument, limits: ConvertLimits, native: ConverterChain) -> ConvertedDocument | None:
    """The size check, then `raw` converted here when `native` takes its format (text is only decoded);
    None when its bytes need a document converter."""
    check_size(raw, limits)
    fmt = sniff(raw.data, raw.filename, raw.mime)
    return native.convert(raw, fmt) if native.converter_for(fmt) is not None else None


def convert_document(
    raw: RawDocument, limits: ConvertLimits | None = None, chain: ConverterChain | None = None
) -> ConvertedDocument:
    """`raw` as markdown, in this process: size check, sniff, then `chain` (the default chain when None).

    Raises the contract's errors only: `InvalidRequestError` for a document refused (empty, too big, damaged,
    over a limit, no text), `UnsupportedError` for a format this build does not convert, `EngineError` for a
    converter's own failure. No time limit or memory ceiling applies here; `ConverterPool` adds both.
    """
    limits = ConvertLimits() if limits is None else limits
    check_size(raw, limits)
    return (default_chain(limits) if chain is None else chain).convert(raw)
