"""Image files as pages ready for OCR: decoded under a pixel cap, every page of a TIFF, upright, grey, straight.

A decompression bomb (a small file declaring a huge canvas) is refused from its header, before any pixel is
decoded. The EXIF orientation a camera wrote is applied, and a page scanned a degree or two askew is turned
straight (the angle whose rows of ink are sharpest), since Tesseract reads level lines best.
"""

from __future__ import annotations

import io
import threading
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

from engines.contract import InvalidRequestError
from pipeline.convert.documents import RawDocument
from pipeline.convert.failures import describe
from pipeline.convert.ocr import OcrSettings

if TYPE_CHECKING:
    from PIL.Image import Image

# Formats whose every frame is a page; elsewhere (GIF, animated WebP) the first frame stands for the image.
_PAGED = frozenset({"TIFF"})
# The skew search: a coarse pass over ±5°, then a fine one around its best angle, on a small copy of the page.
_COARSE = [step * 1.0 for step in range(-5, 6)]
_FINE = [step * 0.25 for step in range(-4, 5)]
_SEARCH_WIDTH = 800
_INK = 160
_PILLOW_CAP = threading.Lock()
# Below this the turn would blur the glyphs more than the skew hurts the reading.
_LEVEL_ENOUGH = 0.5


def image_pages(raw: RawDocument, settings: OcrSettings) -> Iterator[Image]:
    """Each page of the image file `raw`, ready for OCR; `InvalidRequestError` naming the cap or the damage.

    Pages are decoded one at a time, so a long TIFF is never held whole.
    """
    from PIL import Image as PILImage

    try:
        image = _opened(raw.data, settings.max_pixels)
    except PILImage.DecompressionBombError:
        raise InvalidRequestError(
            f"{raw.label}: the image declares more than {settings.max_pixels:,} pixels, the limit (ocr.max_pixels): "
            "refused before decoding"
        ) from None
    except Exception as exc:
        raise InvalidRequestError(f"{raw.label}: unreadable image ({describe(exc)})") from exc
    with image:
        frames = getattr(image, "n_frames", 1) if image.format in _PAGED else 1
        if frames > settings.max_pages:
            raise InvalidRequestError(
                f"{raw.label}: {frames} pages, over the {settings.max_pages}-page OCR limit (ocr.max_pages)"
            )
        for index in range(frames):
            yield _page(image, index, raw, settings)


def _opened(data: bytes, max_pixels: int) -> Image:
    """The image, its header read and no pixel decoded yet. Pillow refuses, from the header, a canvas twice its
    cap and only warns below that; our own check (in `_page`) says more, so for this call Pillow's cap is ours
    and its warning is silenced. The cap is Pillow's module setting, hence the lock, and put back after."""
    from PIL import Image as PILImage

    with _PILLOW_CAP, warnings.catch_warnings():
        warnings.simplefilter("ignore", PILImage.DecompressionBombWarning)
        previous, PILImage.MAX_IMAGE_PIXELS = PILImage.MAX_IMAGE_PIXELS, max_pixels
        try:
            return PILImage.open(io.BytesIO(data))
        finally:
            PILImage.MAX_IMAGE_PIXELS = previous


def _page(image: Image, index: int, raw: RawDocument, settings: OcrSettings) -> Image:
    from PIL import ImageOps

    try:
        image.seek(index)  # a page's header: its size is known, no pixel is decoded yet
    except Exception as exc:
        raise InvalidRequestError(f"{raw.label}: damaged image ({describe(exc)})") from exc
    width, height = image.size
    if width * height > settings.max_pixels:
        raise InvalidRequestError(
            f"{raw.label}: the image is {width}×{height} pixels, over the {settings.max_pixels:,}-pixel limit "
            "(ocr.max_pixels): refused before decoding"
        )
    try:
        page = ImageOps.exif_transpose(image) if index == 0 else image.copy()
        grey = page.convert("L")
    except MemoryError:
        raise
    except Exception as exc:
        # Pillow says how many bytes it missed, which varies with its JPEG library; the fact is what matters.
        what = "the file ends before the image does" if "truncated" in str(exc) else describe(exc)
        raise InvalidRequestError(f"{raw.label}: damaged image ({what})") from exc
    return straightened(grey)


def straightened(page: Image) -> Image:
    """`page` (grey) turned by the small angle that makes its lines of text level, or as it is."""
    angle = skew_angle(page)
    if abs(angle) < _LEVEL_ENOUGH:
        return page
    from PIL import Image as PILImage

    # Bilinear reads as well as bicubic here (measured by bench/ocr.py) and turns a 300 dpi page in less than half
    # the time.
    return page.rotate(angle, resample=PILImage.Resampling.BILINEAR, expand=True, fillcolor=255)


def skew_angle(page: Image) -> float:
    """The rotation (degrees, counter-clockwise) that levels `page`'s text lines: the one whose row profile of
    ink varies most, searched coarse then fine on a small copy; 0 for a page without ink."""
    import numpy as np

    scale = min(1.0, _SEARCH_WIDTH / max(1, page.width))
    small = page.resize((max(1, int(page.width * scale)), max(1, int(page.height * scale))))
    ink = small.point(lambda value: 255 if value < _INK else 0)
    if not np.asarray(ink).any():
        return 0.0

    def sharpness(angle: float) -> float:
        rows = np.asarray(ink.rotate(angle, expand=True, fillcolor=0), dtype=np.float64).sum(axis=1)
        return float(np.square(np.diff(rows)).sum())

    coarse = max(_COARSE, key=sharpness)
    return max((coarse + step for step in _FINE), key=lambda angle: (sharpness(angle), -abs(angle)))
