"""Scans read by OCR: image files (`ImageConverter`) and the pages of a PDF that have no text layer.

Everything here runs in a converter process, under its memory ceiling, one page at a time: a page is decoded
or rendered, read, and let go before the next, so a 200-page scan never sits in memory whole, and each page
tells the parent it is done (`progress.page_done`), which restarts the parent's clock. What OCR reads is
ordinary text from here on: it is scrubbed and chunked like any other.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from engines.contract import InvalidRequestError, UnsupportedError
from pipeline.convert.converter import converted, nothing_read, sniffed
from pipeline.convert.documents import ConvertedDocument, RawDocument
from pipeline.convert.failures import describe
from pipeline.convert.images import image_pages, straightened
from pipeline.convert.limits import ConvertLimits
from pipeline.convert.ocr import OcrSettings, PageText, TesseractReader, ocr_unavailable, reader_for
from pipeline.convert.pdf import PAGE_BREAK
from pipeline.convert.progress import page_done
from pipeline.sniff import DocumentFormat

if TYPE_CHECKING:
    import pypdfium2
    from PIL.Image import Image

# A PDF page whose text layer has fewer letters and digits than this is read by OCR (a scan may carry a stamp
# or a page number as text).
MIN_LAYER_CHARACTERS = 16
_POINTS_PER_INCH = 72
# Below this a scan's text is too small to read at all; a page whose image claims less is rendered at this.
_MIN_DPI = 100


class ImageConverter:
    """PNG, JPEG, TIFF (every page), WebP, BMP and GIF (its first frame), read by Tesseract.

    An image in which OCR finds no text worth keeping becomes an empty document marked `no_text`, which the
    pipeline skips with a line in its report. Without OCR (turned off, or not installed) an image is refused
    with the reason.
    """

    name = "ocr"

    def __init__(self, limits: ConvertLimits | None = None) -> None:
        self._settings = (ConvertLimits() if limits is None else limits).ocr

    def supports(self, fmt: DocumentFormat) -> bool:
        return fmt is DocumentFormat.IMAGE and self._settings.enabled

    def convert(self, raw: RawDocument, fmt: DocumentFormat | None = None) -> ConvertedDocument:
        fmt = sniffed(raw, fmt)
        if not self.supports(fmt):
            raise UnsupportedError(f"{raw.label}: the OCR converter does not take {fmt}")
        reader = reader_for(self._settings)
        pages = [_read(reader, page, raw.label) for page in image_pages(raw, self._settings)]
        kept = [page for page in pages if page.holds_text(self._settings)]
        metadata = {"pages": str(len(pages)), "ocr_pages": str(len(pages))}
        if not kept:
            best = max(pages, key=lambda page: page.confidence, default=PageText("", 0))
            why = f"no text found by OCR ({_letters(best.text)} characters, confidence {best.confidence})"
            return nothing_read(raw, fmt, converter=self.name, why=why, metadata=metadata)
        text = PAGE_BREAK.join(page.text if page in kept else "" for page in pages)
        return converted(raw, fmt, text, converter=self.name, metadata=metadata)

    def warm_up(self) -> None:
        """Load Tesseract's model now, when this build can read scans."""
        if ocr_unavailable(self._settings) is None:
            reader_for(self._settings).warm_up()


def read_scanned_pages(raw: RawDocument, pages: list[str], settings: OcrSettings) -> tuple[list[str], str | None]:
    """`pages` (a PDF's text layer) with every page that holds almost no text read by OCR instead, and why OCR
    could not help when it could not (None when it could, or no page needed it)."""
    wanted = [index for index, text in enumerate(pages) if _letters(text) < MIN_LAYER_CHARACTERS]
    if not wanted:
        return pages, None
    why = ocr_unavailable(settings)
    if why is not None:
        return pages, f"and {why}"
    if len(pages) > settings.max_pages:
        raise InvalidRequestError(
            f"{raw.label}: {len(pages)} pages to read by OCR, over the {settings.max_pages}-page limit (ocr.max_pages)"
        )
    reader = reader_for(settings)
    read = list(pages)
    with _pdfium(raw) as document:
        for index in wanted:
            label = f"{raw.label}, page {index + 1}"
            page = _read(reader, straightened(_rendered(document, index, settings, label)), label)
            if page.holds_text(settings) and _letters(page.text) > _letters(pages[index]):
                read[index] = page.text
    return read, "and OCR found no text in its pages"


def _read(reader: TesseractReader, image: Image, label: str) -> PageText:
    try:
        return reader.read(image, label)
    finally:
        image.close()
        page_done()


def _letters(text: str) -> int:
    return sum(ch.isalnum() for ch in text)


@contextmanager
def _pdfium(raw: RawDocument) -> Iterator[pypdfium2.PdfDocument]:
    """The PDF opened by pdfium for rendering, closed after; an unreadable one is `InvalidRequestError`."""
    import pypdfium2

    try:
        document = pypdfium2.PdfDocument(raw.data)
    except Exception as exc:
        raise InvalidRequestError(f"{raw.label}: unreadable PDF ({describe(exc)})") from exc
    try:
        yield document
    finally:
        document.close()


def _rendered(document: pypdfium2.PdfDocument, index: int, settings: OcrSettings, label: str) -> Image:
    """Page `index` as a grey image at its scan's own resolution, at most the settings' (and less when that would
    pass the pixel cap)."""
    page = document[index]
    try:
        width, height = page.get_size()
        scale = _resolution(page, settings) / _POINTS_PER_INCH
        pixels = width * scale * height * scale
        if pixels > settings.max_pixels:
            scale *= (settings.max_pixels / pixels) ** 0.5
        bitmap = page.render(scale=scale, grayscale=True)
        try:
            image: Image = bitmap.to_pil().convert("L")
            return image
        finally:
            bitmap.close()
    except InvalidRequestError:
        raise
    except Exception as exc:
        raise InvalidRequestError(f"{label}: the page cannot be rendered for OCR ({describe(exc)})") from exc
    finally:
        page.close()


def _resolution(page: pypdfium2.PdfPage, settings: OcrSettings) -> float:
    """The resolution to render a scanned page at: its finest image's, up to `settings.dpi`; the settings' when
    the page holds no image. Rendering a 150 dpi scan at 300 only made it slower and read it a little worse
    (measured by bench/ocr.py)."""
    import pypdfium2.raw as pdfium_c

    images = page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=2)
    found = [max(meta.horizontal_dpi, meta.vertical_dpi) for meta in (image.get_metadata() for image in images)]
    finest = max((dpi for dpi in found if dpi > 0), default=settings.dpi)
    return float(min(settings.dpi, max(finest, _MIN_DPI)))
