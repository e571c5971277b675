"""How much one conversion may take: input bytes, inflated bytes, spreadsheet cells, seconds and memory."""

from __future__ import annotations

from dataclasses import dataclass, field

from engines.contract import ConfigError
from pipeline.convert.ocr import OcrSettings

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

MAX_DOCUMENT_BYTES = 32 * MIB
MAX_DECOMPRESSED_BYTES = 64 * MIB
MAX_SPREADSHEET_DENSE_CELLS = 1_000_000
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MEMORY_BYTES = 1 * GIB


@dataclass(frozen=True)
class ConvertLimits:
    """The ceilings one document's conversion runs under; small, comparable and safe to send to a worker.

    `max_input_bytes` and `max_decompressed_bytes` are checked before any library sees the bytes;
    `max_spreadsheet_cells` before a spreadsheet is parsed; `timeout_s` and `memory_bytes` are enforced by the
    `ConverterPool` on its worker processes (an in-process conversion has no clock and no ceiling); for a scan
    read by OCR the clock restarts at each page. `ocr` says how scans and images are read, with their own caps.
    """

    max_input_bytes: int = MAX_DOCUMENT_BYTES
    max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES
    max_spreadsheet_cells: int = MAX_SPREADSHEET_DENSE_CELLS
    timeout_s: float = DEFAULT_TIMEOUT_S
    memory_bytes: int = DEFAULT_MEMORY_BYTES
    ocr: OcrSettings = field(default_factory=OcrSettings)

    def __post_init__(self) -> None:
        for name in ("max_input_bytes", "max_decompressed_bytes", "max_spreadsheet_cells", "timeout_s", "memory_bytes"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"conversion limit {name} must be positive, got {getattr(self, name)!r}")


def format_bytes(count: int) -> str:
    """`count` bytes for a message: `64 MiB`, `2.1 GiB`, `512 bytes`."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if count >= size:
            return f"{_one_decimal(count / size)} {unit}"
    return f"{count} bytes"


def format_seconds(seconds: float) -> str:
    """`seconds` for a message: `60 s`, `0.5 s`."""
    return f"{_one_decimal(seconds)} s" if seconds >= 1 else f"{seconds:g} s"


def _one_decimal(value: float) -> str:
    # One decimal is enough for a person; `64.0` reads better as `64`.
    return f"{value:.1f}".removesuffix(".0")


def over_limit(count: int, limit: int) -> str:
    """`40 MiB, over the 32 MiB limit`; exact byte counts when rounding would make the two look equal."""
    size, ceiling = format_bytes(count), format_bytes(limit)
    if size == ceiling:
        size = f"{count:,} bytes"
    return f"{size}, over the {ceiling} limit"
