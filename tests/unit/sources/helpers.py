"""Building folder trees for the source tests, in `tmp_path`."""

from __future__ import annotations

from pathlib import Path

from sources import Listing


def write(root: Path, rel: str, data: bytes = b"text\n") -> Path:
    """Create `root/rel` (and its folders) holding `data`."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def ids(listing: Listing) -> list[str]:
    return [unit.id for unit in listing.units]


def skipped(listing: Listing) -> dict[str, str]:
    return {entry.unit_id: entry.reason for entry in listing.skipped}
