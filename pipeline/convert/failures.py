"""Library exceptions turned into the contract's errors, at the edge where the libraries are called
(docs/spec/sources-and-documents.md §10.8).

A library failing on a damaged or hostile file is the document's fault: `InvalidRequestError`, never
retried. Any other exception is the converter's own failure: `EngineError`. `MemoryError` is never
translated here; a worker process turns it into its memory-ceiling exit.
"""

from __future__ import annotations

import functools
import importlib
import json
import struct
import zipfile

from engines.contract import EngineError, Error, InvalidRequestError
from pipeline.convert.documents import RawDocument
from pipeline.sniff import DocumentFormat

_MESSAGE_CHARS = 200

# Exceptions the parsing libraries raise on input they cannot read, named by module so that importing this
# module imports none of them. KeyError is a missing archive member; EOFError and struct.error a truncation.
_DAMAGED_INPUT_NAMES = (
    ("xml.etree.ElementTree", "ParseError"),
    ("xml.parsers.expat", "ExpatError"),
    ("lxml.etree", "XMLSyntaxError"),
    ("defusedxml", "DefusedXmlException"),
    ("xlrd", "XLRDError"),
    ("xlrd.compdoc", "CompDocError"),
    ("pptx.exc", "PackageNotFoundError"),
    ("openpyxl.utils.exceptions", "InvalidFileException"),
)
_DAMAGED_INPUT_BUILTIN: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile,
    json.JSONDecodeError,
    UnicodeDecodeError,
    KeyError,
    EOFError,
    struct.error,
)


# Readers that say a document is damaged with a plain ValueError or OSError ("Could not find the body element:
# are you sure this is a docx file?", "Could not find main document part"): from their own code, those are the
# document's fault. The same types raised anywhere else stay the converter's.
_REFUSING_READERS = ("mammoth",)


def _refused_by_reader(exc: Exception) -> bool:
    if not isinstance(exc, ValueError | OSError):
        return False
    tb, module = exc.__traceback__, ""
    while tb is not None:  # the innermost frame: where it was raised
        module, tb = str(tb.tb_frame.f_globals.get("__name__", "")), tb.tb_next
    return module.split(".", 1)[0] in _REFUSING_READERS


def describe(exc: BaseException) -> str:
    """`Kind: message`, one line and short, for a message that must say what went wrong without a traceback."""
    text = " ".join(str(exc).split())
    if len(text) > _MESSAGE_CHARS:
        text = text[: _MESSAGE_CHARS - 1] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def library_failure(exc: Exception, raw: RawDocument, fmt: DocumentFormat) -> Error:
    """The contract error for `exc`, raised by a library while converting `raw` as `fmt`."""
    if isinstance(exc, RecursionError):
        return InvalidRequestError(f"{raw.label}: the {fmt} is nested too deeply to convert")
    if isinstance(exc, _damaged_input_types()) or _refused_by_reader(exc):
        return InvalidRequestError(f"{raw.label}: unreadable {fmt} ({describe(exc)})")
    return EngineError(f"{raw.label}: converting {fmt} failed inside the converter ({describe(exc)})")


@functools.cache
def _damaged_input_types() -> tuple[type[BaseException], ...]:
    found: list[type[BaseException]] = list(_DAMAGED_INPUT_BUILTIN)
    for module_name, attribute in _DAMAGED_INPUT_NAMES:
        try:
            candidate = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError):
            continue
        if isinstance(candidate, type) and issubclass(candidate, BaseException):
            found.append(candidate)
    return tuple(found)
