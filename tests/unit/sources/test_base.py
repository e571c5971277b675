"""Shared shapes of `sources`: signatures and the `needs_hash` rule, hashing, path resolution, the public surface."""

from __future__ import annotations

import dataclasses
import hashlib
import types
from pathlib import Path

import pytest

import sources
from engines.contract import InvalidRequestError
from sources import (
    FileReader,
    FolderReader,
    Listing,
    Signature,
    SourceReader,
    Unit,
    WatchableSource,
    hash_bytes,
    needs_hash,
    resolve_source_path,
)

UNIT = Unit(id="notes/a.md", size=10, mtime_ns=1_700_000_000_123_456_789, path="/data/notes/a.md")


def test_needs_hash_for_a_unit_never_seen() -> None:
    assert needs_hash(None, UNIT)


def test_no_hash_needed_when_size_and_mtime_match() -> None:
    assert not needs_hash(Signature(size=10, mtime_ns=UNIT.mtime_ns, sha256="ab"), UNIT)
    # The hash is not what decides at this step: size and mtime alone say "unchanged".
    assert not needs_hash(Signature(size=10, mtime_ns=UNIT.mtime_ns), UNIT)


@pytest.mark.parametrize(
    "previous",
    [
        Signature(size=11, mtime_ns=UNIT.mtime_ns, sha256="ab"),
        Signature(size=10, mtime_ns=UNIT.mtime_ns + 1, sha256="ab"),
        Signature(size=0, mtime_ns=0),
    ],
)
def test_hash_needed_when_size_or_mtime_moved(previous: Signature) -> None:
    assert needs_hash(previous, UNIT)


def test_touched_but_unchanged_file_is_recognised_by_its_hash() -> None:
    data = b"same content"
    before = Signature.of(UNIT, hash_bytes(data))
    touched = dataclasses.replace(UNIT, mtime_ns=UNIT.mtime_ns + 5)
    assert needs_hash(before, touched)
    assert hash_bytes(data) == before.sha256
    assert Signature.of(touched, hash_bytes(data)) != before  # the new mtime is recorded


def test_signature_is_frozen_and_compares_by_value() -> None:
    first = Signature.of(UNIT, "ff")
    assert first == Signature(size=10, mtime_ns=UNIT.mtime_ns, sha256="ff")
    assert hash(first) == hash(Signature(size=10, mtime_ns=UNIT.mtime_ns, sha256="ff"))
    assert Signature.of(UNIT).sha256 is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.size = 3  # type: ignore[misc]


def test_hash_bytes_is_sha256_hex() -> None:
    assert hash_bytes(b"abc") == hashlib.sha256(b"abc").hexdigest()
    assert hash_bytes(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_unit_updated_at_is_mtime_in_milliseconds() -> None:
    assert UNIT.updated_at_ms == 1_700_000_000_123


def test_listing_defaults_to_empty() -> None:
    assert Listing() == Listing(units=(), skipped=())


def test_absolute_path_is_kept() -> None:
    assert resolve_source_path(Path("/data/notes"), Path("/ws")) == Path("/data/notes")


def test_relative_path_joins_the_workspace_not_the_working_directory() -> None:
    assert resolve_source_path(Path("notes"), Path("/ws")) == Path("/ws/notes")
    with pytest.raises(InvalidRequestError, match="absolute or have a workspace"):
        resolve_source_path(Path("notes"), None)


def test_local_readers_implement_the_protocols(tmp_path: Path) -> None:
    for reader in (FolderReader(tmp_path), FileReader(tmp_path / "a.md")):
        assert isinstance(reader, SourceReader)
        assert isinstance(reader, WatchableSource)
    assert FolderReader(tmp_path).kind == "folder"
    assert FileReader(tmp_path / "a.md").kind == "file"


def _ruff_order(name: str) -> tuple[int, str]:
    # RUF022's isort-style order: SCREAMING_CASE, then CamelCase, then everything else.
    group = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return group, name


def test_all_is_sorted_and_complete() -> None:
    assert sources.__all__ == sorted(sources.__all__, key=_ruff_order)
    exported = {
        name
        for name, value in vars(sources).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert exported == set(sources.__all__)
