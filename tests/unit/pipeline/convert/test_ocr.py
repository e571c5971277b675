"""OCR of images and scanned PDFs: every image format, pages kept apart, EXIF orientation and skew undone, an image
without text skipped with its reason, only the empty pages of a mixed PDF read, and each cap refused by name."""

from __future__ import annotations

import io

import pypdfium2
import pytest
from PIL import Image

from engines.contract import ConfigError, InvalidRequestError
from pipeline.convert import ConverterPool, ConvertLimits, OcrSettings, RawDocument, convert_document, ocr_unavailable
from pipeline.convert.images import skew_angle
from tests.fixtures.documents import pdf_bytes
from tests.fixtures.scans import image_bytes, needs_ocr, noise_png, page_image

PAGE_BREAK = "\f"  # between the pages of a converted document

pytestmark = needs_ocr

LINES = ["The quokkafruit harvest starts on Tuesday.", "Bring the copper kettle to the marsh hut."]


def words(text: str) -> set[str]:
    return {word.strip(".,").lower() for word in text.split()}


def read(data: bytes, filename: str, limits: ConvertLimits | None = None) -> str:
    return convert_document(RawDocument(data, filename=filename), limits).markdown


@pytest.mark.parametrize(("fmt", "name"), [("PNG", "a.png"), ("JPEG", "a.jpg"), ("WEBP", "a.webp"), ("BMP", "a.bmp")])
def test_each_image_format_is_read(fmt: str, name: str) -> None:
    assert words(" ".join(LINES)) <= words(read(image_bytes([page_image(LINES)], fmt), name))


def test_every_page_of_a_tiff_is_read_and_kept_apart() -> None:
    pages = [page_image(["First page about the quokkafruit."]), page_image(["Second page about the kettle."])]
    document = convert_document(RawDocument(image_bytes(pages, "TIFF"), filename="two.tiff"))
    first, second = document.markdown.split(PAGE_BREAK)
    assert "quokkafruit" in first and "kettle" in second
    assert document.metadata["pages"] == "2"


def test_a_gif_is_read_from_its_first_frame() -> None:
    frames = [page_image(["The first frame speaks of otters."]), page_image(["A later frame about herons."])]
    out = io.BytesIO()
    frames[0].convert("P").save(out, format="GIF", save_all=True, append_images=[frames[1].convert("P")])
    text = read(out.getvalue(), "moving.gif")
    assert "otters" in text and "herons" not in text


def test_the_exif_orientation_a_camera_wrote_is_applied() -> None:
    upright = page_image(LINES).convert("RGB")
    stored = upright.rotate(90, expand=True)  # the sensor's view; Orientation 6 says "turn 90° clockwise"
    exif = Image.Exif()
    exif[0x0112] = 6
    out = io.BytesIO()
    stored.save(out, format="JPEG", exif=exif.tobytes())
    assert words(" ".join(LINES)) <= words(read(out.getvalue(), "phone.jpg"))


def test_a_page_scanned_askew_is_straightened_and_read() -> None:
    skewed = page_image(LINES, skew=2.0)
    assert skew_angle(skewed) == pytest.approx(-2.0, abs=0.5)
    assert skew_angle(page_image(LINES)) == 0
    assert words(" ".join(LINES)) <= words(read(image_bytes([skewed], "PNG"), "askew.png"))


@pytest.mark.parametrize(
    ("data", "name"), [(noise_png(), "photo.png"), (image_bytes([Image.new("L", (300, 300), 90)], "PNG"), "logo.png")]
)
def test_an_image_without_text_is_an_empty_document_saying_why(data: bytes, name: str) -> None:
    document = convert_document(RawDocument(data, filename=name))
    assert document.markdown == ""
    assert document.no_text is not None and document.no_text.startswith("no text found by OCR")


def test_an_image_only_pdf_is_read_page_by_page() -> None:
    pages = [page_image(["Page one: the quokkafruit."]), page_image(["Page two: the copper kettle."])]
    document = convert_document(RawDocument(image_bytes(pages, "PDF"), filename="scan.pdf"))
    first, second = document.markdown.split(PAGE_BREAK)
    assert "quokkafruit" in first and "kettle" in second
    assert document.metadata["ocr_pages"] == "2"


def test_a_mixed_pdf_is_read_by_ocr_only_on_its_empty_pages() -> None:
    mixed = pypdfium2.PdfDocument(pdf_bytes(["A typed page about herons and their nests."]))
    scan = pypdfium2.PdfDocument(image_bytes([page_image(["A scanned page about the quokkafruit."])], "PDF"))
    mixed.import_pages(scan)
    out = io.BytesIO()
    mixed.save(out)
    document = convert_document(RawDocument(out.getvalue(), filename="mixed.pdf"))
    typed, scanned = document.markdown.split(PAGE_BREAK)
    assert "herons" in typed and "quokkafruit" in scanned
    assert document.metadata == {"converter": "office", "pages": "2", "ocr_pages": "1"}


def test_the_caps_are_refused_by_name() -> None:
    two = image_bytes([page_image(["One."]), page_image(["Two."])], "PDF")
    with pytest.raises(InvalidRequestError, match=r"2 pages to read by OCR, over the 1-page limit \(ocr.max_pages\)"):
        read(two, "long.pdf", ConvertLimits(ocr=OcrSettings(max_pages=1)))
    tiff = image_bytes([page_image(["One."]), page_image(["Two."])], "TIFF")
    with pytest.raises(InvalidRequestError, match=r"2 pages, over the 1-page OCR limit \(ocr.max_pages\)"):
        read(tiff, "long.tiff", ConvertLimits(ocr=OcrSettings(max_pages=1)))
    page = image_bytes([page_image(LINES)], "PNG")  # 1,600 × 278: up to twice the cap, Pillow lets it open
    with pytest.raises(InvalidRequestError, match=r"is 1600×278 pixels, over the 300,000-pixel limit"):
        read(page, "big.png", ConvertLimits(ocr=OcrSettings(max_pixels=300_000)))
    with pytest.raises(InvalidRequestError, match=r"declares more than 1,000 pixels, the limit \(ocr.max_pixels\)"):
        read(page, "huge.png", ConvertLimits(ocr=OcrSettings(max_pixels=1000)))
    slow = ConvertLimits(ocr=OcrSettings(page_timeout_s=0.001))
    with pytest.raises(
        InvalidRequestError, match=r"longer than 0.001 s \(the OCR limit per page, ocr.page_timeout_s\)"
    ):
        read(image_bytes([page_image(LINES * 20)], "PNG"), "slow.png", slow)


def test_a_language_that_is_not_installed_is_a_configuration_error() -> None:
    with pytest.raises(
        ConfigError, match=r"OCR language qqq is not installed in .*: apt-get install tesseract-ocr-qqq"
    ):
        ocr_unavailable(OcrSettings(languages=("eng", "qqq")))
    with pytest.raises(ConfigError, match="is not a Tesseract language name"):
        OcrSettings(languages=("eng; rm",))
    assert ocr_unavailable(OcrSettings(enabled=False)) == "OCR is turned off (ocr.enabled = false)"


def test_a_long_scan_is_read_in_the_pool_page_by_page_within_its_memory_ceiling() -> None:
    # 200 pages, most of them blank: every one is rendered and read, one at a time, and each restarts the
    # pool's clock, so the document may take longer in all than the pool's time limit.
    pages = [
        page_image([f"Page {n} of the long scan."]) if n % 50 == 1 else Image.new("L", (800, 200), 255)
        for n in range(1, 201)
    ]
    limits = ConvertLimits(timeout_s=20, memory_bytes=768 * 1024 * 1024)
    with ConverterPool(1, limits) as pool:
        document = pool.convert(RawDocument(image_bytes(pages, "PDF"), filename="long.pdf"))
    parts = document.markdown.split(PAGE_BREAK)
    assert len(parts) == 200
    assert [n for n, part in enumerate(parts, start=1) if part] == [1, 51, 101, 151]
    assert "Page 51 of the long scan" in parts[50]
