"""Reading text off a page image with Tesseract, offline: its settings, its language data, one reader per process.

Tesseract runs in the converter worker through `tesserocr`, whose wheel carries the engine; the language data
(`eng.traineddata`, …) comes from the system's `tesseract-ocr` packages (Debian: `apt-get install
tesseract-ocr tesseract-ocr-eng`, one `tesseract-ocr-<lang>` per further language). A build without either
cannot read scans: `ocr_unavailable` says why, and a document that needs OCR is refused with that reason.
The model is loaded once per process and kept; each page gets its own deadline.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, model_validator

from engines.contract import ConfigError, InvalidRequestError, UnsupportedError

if TYPE_CHECKING:
    from PIL.Image import Image

DEFAULT_LANGUAGES = ("eng",)
DEFAULT_DPI = 300
DEFAULT_MAX_PAGES = 1000
DEFAULT_PAGE_TIMEOUT_S = 30.0
DEFAULT_MAX_PIXELS = 100_000_000
# An image whose words Tesseract trusts less than this, or that yields fewer letters and digits, holds no text
# worth keeping (an icon, a logo, a photograph): measured on such images, Tesseract reads a few stray
# characters at a mean confidence well below 50.
MIN_CONFIDENCE = 50
MIN_CHARACTERS = 4

# Where Debian, Fedora, Homebrew and a source build put the language data; TESSDATA_PREFIX comes first.
_TESSDATA_DIRS = (
    "/usr/share/tesseract-ocr/5/tessdata",
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",
    "/usr/local/share/tessdata",
    "/opt/homebrew/share/tessdata",
)
_LANGUAGE = re.compile(r"[A-Za-z_]{2,32}")
_INSTALL = "apt-get install tesseract-ocr tesseract-ocr-eng"


class OcrSettings(BaseModel):
    """How scans and images are read: the languages (Tesseract's names, `eng`, `deu`, …), the resolution a PDF
    page without text is rendered at, and the caps a document must stay under (pages, seconds per page, pixels
    per image). `enabled=False` refuses such documents as before. `tessdata` names the folder of language data
    when it is not in a usual place."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    languages: tuple[str, ...] = DEFAULT_LANGUAGES
    dpi: int = DEFAULT_DPI
    max_pages: int = DEFAULT_MAX_PAGES
    page_timeout_s: float = DEFAULT_PAGE_TIMEOUT_S
    max_pixels: int = DEFAULT_MAX_PIXELS
    min_confidence: int = MIN_CONFIDENCE
    min_characters: int = MIN_CHARACTERS
    tessdata: str | None = None

    @model_validator(mode="after")
    def _checked(self) -> OcrSettings:
        if not self.languages:
            raise ConfigError('ocr.languages must name at least one language, e.g. ["eng"]')
        wrong = [name for name in self.languages if not _LANGUAGE.fullmatch(name)]
        if wrong:
            names = ", ".join(map(repr, wrong))
            raise ConfigError(f"ocr.languages: {names} is not a Tesseract language name (such as eng or deu)")
        for name in ("dpi", "max_pages", "page_timeout_s", "max_pixels"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"ocr.{name} must be positive, got {getattr(self, name)!r}")
        return self

    @property
    def language(self) -> str:
        """The languages as Tesseract takes them: `eng+deu`."""
        return "+".join(self.languages)


@dataclass(frozen=True)
class PageText:
    """What OCR read off one image: its text and Tesseract's mean word confidence (0 to 100)."""

    text: str
    confidence: int

    def holds_text(self, settings: OcrSettings) -> bool:
        """Whether this is text rather than noise read off a picture."""
        letters = sum(ch.isalnum() for ch in self.text)
        return letters >= settings.min_characters and self.confidence >= settings.min_confidence


def tessdata_dir(settings: OcrSettings) -> Path | None:
    """The folder holding Tesseract's language data: the setting's, `TESSDATA_PREFIX`, else a usual place."""
    candidates = [settings.tessdata, os.environ.get("TESSDATA_PREFIX"), *_TESSDATA_DIRS]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir() and any(Path(candidate).glob("*.traineddata")):
            return Path(candidate)
    return None


@functools.cache
def _engine_error() -> str | None:
    try:
        import tesserocr  # noqa: F401 -- only whether it imports
    except ImportError as err:
        return f"the tesserocr package is missing ({err}): reinstall tinymemory-ingest"
    return None


def ocr_unavailable(settings: OcrSettings) -> str | None:
    """Why this process cannot read scans, or None when it can. A language it cannot read is a `ConfigError`:
    the settings name a language pack that is not installed."""
    if not settings.enabled:
        return "OCR is turned off (ocr.enabled = false)"
    engine = _engine_error()
    if engine is not None:
        return engine
    folder = tessdata_dir(settings)
    if folder is None:
        return f"Tesseract's language data is not installed ({_INSTALL})"
    missing = [name for name in settings.languages if not (folder / f"{name}.traineddata").is_file()]
    if missing:
        packages = " ".join(f"tesseract-ocr-{name}" for name in missing)
        raise ConfigError(
            f"OCR language {', '.join(missing)} is not installed in {folder}: apt-get install {packages}, "
            "or leave it out of ocr.languages"
        )
    return None


class TesseractReader:
    """One Tesseract engine with the settings' languages, loaded on first use and kept; one page at a time."""

    def __init__(self, settings: OcrSettings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._api: Any = None

    def read(self, image: Image, label: str) -> PageText:
        """The text of `image` (a page of `label`), within the settings' seconds per page."""
        with self._lock:
            api = self._open(label)
            api.SetImage(image)
            if not api.Recognize(timeout=int(self._settings.page_timeout_s * 1000)):
                api.Clear()
                raise InvalidRequestError(
                    f"{label}: reading it took longer than {self._settings.page_timeout_s:g} s "
                    "(the OCR limit per page, ocr.page_timeout_s)"
                )
            text, confidence = api.GetUTF8Text(), api.MeanTextConf()
            api.Clear()
        return PageText(_tidy(text), int(confidence))

    def warm_up(self) -> None:
        """Load the model now rather than on the first page."""
        with self._lock:
            self._open("OCR")

    def close(self) -> None:
        with self._lock:
            if self._api is not None:
                self._api.End()
                self._api = None

    def _open(self, label: str) -> Any:
        if self._api is None:
            reason = ocr_unavailable(self._settings)
            if reason is not None:
                raise UnsupportedError(f"{label} needs OCR, which this build cannot do: {reason}")
            import tesserocr

            folder = tessdata_dir(self._settings)
            self._api = tesserocr.PyTessBaseAPI(path=f"{folder}/", lang=self._settings.language)
        return self._api


def _tidy(text: str) -> str:
    """Tesseract's text without form feeds, trailing spaces or runs of blank lines."""
    lines = [line.rstrip() for line in text.replace("\f", "\n").splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")


_READERS: dict[OcrSettings, TesseractReader] = {}
_READERS_LOCK = threading.Lock()


def reader_for(settings: OcrSettings) -> TesseractReader:
    """This process's reader for `settings` (a converter process keeps one model loaded across documents)."""
    with _READERS_LOCK:
        reader = _READERS.get(settings)
        if reader is None:
            reader = _READERS[settings] = TesseractReader(settings)
        return reader
