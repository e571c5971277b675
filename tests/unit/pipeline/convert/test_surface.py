"""The public surface of `pipeline.convert`, its records and limits, and the pool's wire messages."""

from __future__ import annotations

import inspect
import pickle
from dataclasses import FrozenInstanceError
from types import ModuleType

import pytest

import pipeline.convert as convert
from engines.contract import ConfigError, EngineError, InvalidRequestError
from pipeline.convert import (
    MAX_DECOMPRESSED_BYTES,
    MAX_DOCUMENT_BYTES,
    MAX_SPREADSHEET_DENSE_CELLS,
    ConvertedDocument,
    ConverterChain,
    ConvertLimits,
    DocumentConverter,
    ImageConverter,
    NativeConverter,
    OfficeConverter,
    RawDocument,
    default_chain,
)
from pipeline.convert.limits import format_bytes, format_seconds, over_limit
from pipeline.convert.messages import (
    Done,
    Failed,
    Ready,
    document_of,
    done,
    error_of,
    failed,
    job_for,
    read_reply,
    read_request,
)
from pipeline.sniff import DocumentFormat

SURFACE = {
    "MAX_DECOMPRESSED_BYTES",
    "MAX_DOCUMENT_BYTES",
    "MAX_SPREADSHEET_DENSE_CELLS",
    "ConvertLimits",
    "ConvertedDocument",
    "ConverterChain",
    "ConverterPool",
    "DocumentConverter",
    "ImageConverter",
    "NativeConverter",
    "OcrSettings",
    "OfficeConverter",
    "RawDocument",
    "convert_document",
    "convert_natively",
    "default_chain",
    "native_chain",
    "ocr_unavailable",
}


def isort_key(name: str) -> tuple[int, str]:
    """Ruff's `__all__` order (RUF022): constants, then classes, then functions, each alphabetically."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_sorted_complete_and_the_surface() -> None:
    public = {
        name for name, value in vars(convert).items() if not name.startswith("_") and not isinstance(value, ModuleType)
    }
    assert convert.__all__ == sorted(convert.__all__, key=isort_key)
    assert set(convert.__all__) == public == SURFACE


@pytest.mark.parametrize("name", sorted(name for name in SURFACE if not name.isupper()))
def test_every_public_class_and_function_has_a_docstring(name: str) -> None:
    assert inspect.getdoc(getattr(convert, name))


def test_importing_the_package_does_not_import_the_parsers() -> None:
    # A process that only converts text (or only hands documents to a pool) never pays for markitdown.
    import subprocess
    import sys

    code = (
        "import sys, pipeline.convert; "
        "print(sorted(m for m in ('markitdown', 'pdfminer', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_limits_defaults_and_comparison() -> None:
    limits = ConvertLimits()
    assert limits == ConvertLimits(
        max_input_bytes=32 * 1024 * 1024,
        max_decompressed_bytes=64 * 1024 * 1024,
        max_spreadsheet_cells=1_000_000,
        timeout_s=60.0,
        memory_bytes=1024**3,
    )
    assert (
        limits.max_input_bytes,
        limits.max_decompressed_bytes,
        limits.max_spreadsheet_cells,
    ) == (MAX_DOCUMENT_BYTES, MAX_DECOMPRESSED_BYTES, MAX_SPREADSHEET_DENSE_CELLS)
    assert ConvertLimits(timeout_s=5) != limits
    assert hash(ConvertLimits(timeout_s=5)) == hash(ConvertLimits(timeout_s=5))
    assert pickle.loads(pickle.dumps(limits)) == limits
    with pytest.raises(FrozenInstanceError):
        limits.timeout_s = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    "field", ["max_input_bytes", "max_decompressed_bytes", "max_spreadsheet_cells", "memory_bytes"]
)
def test_limits_must_be_positive(field: str) -> None:
    with pytest.raises(ConfigError, match=f"conversion limit {field} must be positive"):
        ConvertLimits(**{field: 0})


def test_records_are_frozen_and_raw_bytes_stay_out_of_repr() -> None:
    raw = RawDocument(b"secret bytes", filename="a.md")
    assert "secret" not in repr(raw)
    with pytest.raises(FrozenInstanceError):
        raw.filename = "b.md"  # type: ignore[misc]
    assert raw.label == "a.md"


def test_the_converters_satisfy_the_protocol() -> None:
    converters: list[DocumentConverter] = [NativeConverter(), ImageConverter(), OfficeConverter()]
    assert [c.name for c in converters] == ["native", "ocr", "office"]
    assert [type(c) for c in default_chain().converters] == [ImageConverter, OfficeConverter, NativeConverter]
    assert ConverterChain().formats() == []


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0 bytes"),
        (1023, "1023 bytes"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (64 * 1024 * 1024, "64 MiB"),
        (2_254_857_830, "2.1 GiB"),
        (1024**3, "1 GiB"),
    ],
)
def test_format_bytes(count: int, text: str) -> None:
    assert format_bytes(count) == text


def test_format_seconds_and_over_limit() -> None:
    assert [format_seconds(s) for s in (60.0, 0.5, 1.25, 90)] == ["60 s", "0.5 s", "1.2 s", "90 s"]
    assert over_limit(40 * 1024 * 1024, 32 * 1024 * 1024) == "40 MiB, over the 32 MiB limit"
    assert over_limit(1025, 1024) == "1,025 bytes, over the 1 KiB limit"


# --- the pool's wire: JSON both ways, garbage refused ---


def test_documents_and_errors_round_trip_through_the_wire() -> None:
    document = ConvertedDocument("# T\fpage two", "T", DocumentFormat.PDF, None, 10, {"converter": "office"})
    reply = read_reply(done(document).model_dump_json().encode())
    assert isinstance(reply, Done)
    assert document_of(reply) == document
    for error in (InvalidRequestError("x.pdf: no"), EngineError("y.pdf: broke")):
        refusal = read_reply(failed(error).model_dump_json().encode())
        assert isinstance(refusal, Failed)
        assert error_of(refusal) == error
    assert read_reply(Ready(pid=42).model_dump_json().encode()) == Ready(pid=42)
    job = job_for(RawDocument(b"data", filename="a.pdf", mime="application/pdf", origin="https://e.com/a.pdf"))
    assert read_request(job.model_dump_json().encode()) == job


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x80\x04\x95 a pickle",
        b"{}",
        b'{"kind": "done"}',
        b'{"kind": "failed", "error": "no_such_kind", "message": "x"}',
        b'{"kind": "done", "markdown": "x", "title": null, "format": "pdf", "language": null, '
        b'"source_size": 1, "metadata": {"converter": 1}}',
        b'{"kind": "ready", "pid": 1, "extra": true}',
    ],
)
def test_garbage_replies_are_refused(payload: bytes) -> None:
    with pytest.raises(ValueError):
        read_reply(payload)
