"""Shared shapes of `sources`: units and content, path resolution, the protocols, the public surface."""

from __future__ import annotations

import dataclasses
import types
from pathlib import Path

import pytest

import sources
from engines.contract import InvalidRequestError, MemoryMeta, Role, Turn
from sources import (
    FileReader,
    FolderReader,
    IncrementalSource,
    Listing,
    SourceReader,
    Unit,
    UnitContent,
    WatchableSource,
    resolve_source_path,
)

UNIT = Unit(id="notes/a.md", version="10:1700000000123456789", size=10)


def test_a_unit_is_an_id_and_an_opaque_version() -> None:
    assert Unit("notes/a.md", "10:1700000000123456789", 10) == UNIT
    assert Unit("page", '"etag-1"') != Unit("page", '"etag-2"')
    assert Unit("page", "v").size is None  # a listing need not know sizes
    with pytest.raises(dataclasses.FrozenInstanceError):
        UNIT.version = "other"  # type: ignore[misc]


def test_content_holds_exactly_one_of_bytes_or_turns() -> None:
    origin = MemoryMeta()
    UnitContent("a", "v", origin, data=b"text")
    UnitContent("t", "v", origin, turns=(Turn(role=Role.USER, text="hi"),))
    for kwargs in ({}, {"data": b"x", "turns": ()}):
        with pytest.raises(ValueError, match="exactly one of data or turns"):
            UnitContent("a", "v", origin, **kwargs)  # type: ignore[arg-type]


def test_listing_defaults_to_empty() -> None:
    assert Listing() == Listing(units=(), skipped=(), cursor=None)


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
        assert not isinstance(reader, IncrementalSource)
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
