"""The source registry and source configuration: built-in kinds, aliases, refusals, plugins by module path."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from engines.contract import ConfigError, InvalidRequestError, NotFoundError, SourceKind, UnsupportedError
from sources import (
    REGISTRY,
    FileReader,
    FolderReader,
    KindSpec,
    ReaderOptions,
    SourceConfigKind,
    SourceEntry,
    SourceKindEntry,
    SourceRegistry,
    SourceRequest,
    local_request,
    source_id_for,
)
from tests.fixtures import memory_source
from tests.fixtures.memory_source import MemorySourceReader
from tests.unit.sources.helpers import write


@pytest.fixture
def registry() -> Iterator[SourceRegistry]:
    made = SourceRegistry()
    made.register(SourceKindEntry(SourceConfigKind.FOLDER, "sources.folder"))
    made.register(SourceKindEntry(SourceConfigKind.FILE, "sources.file"))
    yield made


def test_the_build_offers_the_local_kinds() -> None:
    assert REGISTRY.kinds()[:2] == ["folder", "file"]
    assert REGISTRY.spec("folder").target == "path"


def test_every_built_in_kind_has_an_item_source_and_an_alias() -> None:
    assert {k.alias for k in SourceConfigKind} == {"folder", "file", "link", "github", "rss", "conversation"}
    assert SourceConfigKind.WEB_PAGE.item_source is SourceKind.LINK
    assert REGISTRY.resolve("link") == "web_page" and REGISTRY.resolve("web_page") == "web_page"


def test_a_folder_request_becomes_an_entry_with_a_stable_id(registry: SourceRegistry, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    request = SourceRequest(kind="folder", target=str(folder), namespace="team:acme", include=["**/*.md"])
    entry = registry.configure(request)
    assert entry == SourceEntry(
        id=source_id_for(folder),
        kind="folder",
        label=str(folder),
        path=str(folder.resolve()),
        namespace="team:acme",
        include=["**/*.md"],
    )
    assert registry.configure(request) == entry
    reader = registry.reader_for(entry, ReaderOptions(max_file_bytes=5))
    assert isinstance(reader, FolderReader) and reader.max_file_bytes == 5


def test_a_file_request_and_the_local_guess(registry: SourceRegistry, tmp_path: Path) -> None:
    note = write(tmp_path, "a.md")
    entry = registry.configure(local_request(note, source_id="a"))
    assert (entry.id, entry.kind, entry.path) == ("a", "file", str(note.resolve()))
    assert isinstance(registry.reader_for(entry, ReaderOptions()), FileReader)
    assert registry.configure(local_request(tmp_path)).kind == "folder"


@pytest.mark.parametrize(
    ("kind", "target", "error", "message"),
    [
        ("folder", "MISSING", NotFoundError, "does not exist"),
        ("folder", "FILE", InvalidRequestError, "is not a folder"),
        ("file", "FOLDER", InvalidRequestError, "is a folder"),
        ("link", "https://example.com/", UnsupportedError, "link sources are not available in this build yet"),
        ("rss_feed", "https://example.com/feed", UnsupportedError, "this build offers folder, file"),
        ("psychic", "x", InvalidRequestError, "unknown source kind 'psychic'"),
    ],
)
def test_refusals_name_the_target_or_the_kind(
    registry: SourceRegistry, tmp_path: Path, kind: str, target: str, error: type[Exception], message: str
) -> None:
    targets = {"MISSING": str(tmp_path / "gone"), "FILE": str(write(tmp_path, "a.md")), "FOLDER": str(tmp_path)}
    with pytest.raises(error, match=message):
        registry.configure(SourceRequest(kind=kind, target=targets.get(target, target)))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"id": "a:b"}, "id: id must not contain ':'"),
        ({"namespace": "robot:x"}, "namespace: .*is not a namespace segment kind"),
    ],
)
def test_a_bad_field_is_named(registry: SourceRegistry, tmp_path: Path, fields: dict[str, str], message: str) -> None:
    request = SourceRequest.model_validate({"kind": "folder", "target": str(tmp_path), **fields})
    with pytest.raises(InvalidRequestError, match=message):
        registry.configure(request)


def test_entries_refuse_unknown_fields_and_bad_kinds() -> None:
    with pytest.raises(ValidationError, match="Extra inputs"):
        SourceEntry.model_validate({"id": "a", "kind": "folder", "label": "A", "globb": "*.md"})
    with pytest.raises(ValidationError, match="not a kind name"):
        SourceEntry(id="a", kind="Folder!", label="A")
    with pytest.raises(ValidationError, match="label is required"):
        SourceEntry(id="a", kind="folder", label=" ")


def test_a_plugin_kind_is_registered_by_module_path(registry: SourceRegistry, tmp_path: Path) -> None:
    entry = SourceKindEntry(memory_source.KIND, memory_source.MODULE)
    registry.register(entry)
    registry.register(entry)  # every process registers its settings' kinds; twice is harmless
    assert registry.kinds() == ["folder", "file", memory_source.KIND]
    configured = registry.configure(SourceRequest(kind=memory_source.KIND, target=str(tmp_path / "units.json")))
    assert (configured.id, configured.kind) == ("units", memory_source.KIND)
    assert isinstance(registry.reader_for(configured, ReaderOptions()), MemorySourceReader)
    with pytest.raises(ConfigError, match="registered twice"):
        registry.register(SourceKindEntry(memory_source.KIND, "somewhere.else"))
    registry.unregister(memory_source.KIND)
    with pytest.raises(InvalidRequestError, match="unknown source kind"):
        registry.reader_for(configured, ReaderOptions())


def test_a_broken_plugin_is_a_config_error(registry: SourceRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    registry.register(SourceKindEntry("missing_kind", "tests.fixtures.no_such_module"))
    with pytest.raises(ConfigError, match=r"cannot load tests\.fixtures\.no_such_module\.SPEC"):
        registry.spec("missing_kind")
    module = types.ModuleType("tests_fake_kind")
    module.SPEC = KindSpec(kind="other", target="x", summary="", configure=None, build=None)  # type: ignore[arg-type]
    monkeypatch.setitem(sys.modules, "tests_fake_kind", module)
    registry.register(SourceKindEntry("fake_kind", "tests_fake_kind"))
    with pytest.raises(ConfigError, match="not the KindSpec of that kind"):
        registry.spec("fake_kind")
