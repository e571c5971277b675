"""The source registry and source configuration: built-in kinds, aliases, refusals, plugins by module path and
by entry point (a fake installed distribution), and which of those wins."""

from __future__ import annotations

import pickle
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from engines import plugins
from engines.contract import ConfigError, InvalidRequestError, NotFoundError, SourceKind, UnsupportedError
from engines.plugins import SOURCES_GROUP
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
    register_kinds,
    source_id_for,
)
from tests.fixtures import memory_source
from tests.fixtures.distributions import fake_distribution, plugin_site
from tests.fixtures.memory_source import MemorySourceReader
from tests.unit.sources.helpers import write


@pytest.fixture
def registry() -> Iterator[SourceRegistry]:
    made = SourceRegistry()
    made.register(SourceKindEntry(SourceConfigKind.FOLDER, "sources.folder"))
    made.register(SourceKindEntry(SourceConfigKind.FILE, "sources.file"))
    yield made


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from plugin_site(tmp_path, monkeypatch)


# A plugin's module: the memory kind's reader under another kind name, as a distribution would ship it.
UNITS_MODULE = """
from sources import KindSpec
from tests.fixtures.memory_source import MemorySourceReader, configure

SPEC = KindSpec(kind="tm_units", target="path", summary="units (plugin)", configure=configure, build=MemorySourceReader)
OTHER = KindSpec(kind="tm_other", target="path", summary="others", configure=configure, build=MemorySourceReader)
"""


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


# -- kinds from installed distributions (tinymemory.sources entry points) ----------------------------------------


def test_an_installed_kind_is_offered_without_importing_it(site: Path, tmp_path: Path) -> None:
    fake_distribution(
        site, "tm-units", {SOURCES_GROUP: {"tm_units": "tm_plugin_units"}}, {"tm_plugin_units": UNITS_MODULE}
    )
    assert REGISTRY.kinds()[-1] == "tm_units"
    entry = REGISTRY.entry("tm_units")
    assert (entry.kind, entry.module) == ("tm_units", "tm_plugin_units")
    assert (
        entry.origin
        == "entry point tm_units = tm_plugin_units in group tinymemory.sources of distribution tm-units 1.0"
    )
    assert "tm_plugin_units" not in sys.modules  # found from metadata only
    configured = REGISTRY.configure(SourceRequest(kind="tm_units", target=str(tmp_path / "units.json")))
    assert (configured.id, configured.kind) == ("units", "tm_units")
    assert isinstance(REGISTRY.reader_for(configured, ReaderOptions()), MemorySourceReader)
    assert pickle.loads(pickle.dumps(entry)).origin == entry.origin  # as a text preparation process gets it


def test_an_entry_point_may_name_the_spec_as_module_colon_attribute(site: Path) -> None:
    fake_distribution(
        site, "tm-other", {SOURCES_GROUP: {"tm_other": "tm_plugin_units:OTHER"}}, {"tm_plugin_units": UNITS_MODULE}
    )
    assert REGISTRY.spec("tm_other").summary == "others"


def test_entry_points_are_read_once_per_process(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    groups: list[str] = []
    real = plugins.entry_points

    def counted(group: str) -> object:
        groups.append(group)
        return real(group=group)

    monkeypatch.setattr(plugins, "entry_points", counted)
    fake_distribution(
        site, "tm-units", {SOURCES_GROUP: {"tm_units": "tm_plugin_units"}}, {"tm_plugin_units": UNITS_MODULE}
    )
    for _ in range(3):
        REGISTRY.kinds()
        REGISTRY.spec("tm_units")
        REGISTRY.spec("folder")
    assert groups == [SOURCES_GROUP]


def test_the_setting_wins_over_entry_points_and_settles_a_duplicate(site: Path, tmp_path: Path) -> None:
    fake_distribution(
        site, "tm-units", {SOURCES_GROUP: {"tm_units": "tm_plugin_units"}}, {"tm_plugin_units": UNITS_MODULE}
    )
    fake_distribution(site, "tm-units-fork", {SOURCES_GROUP: {"tm_units": "tm_plugin_fork"}})
    with pytest.raises(ConfigError) as caught:
        REGISTRY.spec("tm_units")
    assert str(caught.value) == (
        "configuration error: source kind 'tm_units' is declared twice, by entry point tm_units = tm_plugin_units"
        " in group tinymemory.sources of distribution tm-units 1.0 and by entry point tm_units = tm_plugin_fork"
        " in group tinymemory.sources of distribution tm-units-fork 1.0; uninstall one of them or name the module"
        " to use in the source_kinds setting (TINYMEMORY_SOURCE_KINDS)"
    )
    assert REGISTRY.spec("folder").kind == "folder"  # every other kind is unaffected
    register_kinds({"tm_units": memory_source.MODULE})  # what TINYMEMORY_SOURCE_KINDS does in every process
    try:
        assert REGISTRY.entry("tm_units").module == memory_source.MODULE
        assert REGISTRY.kinds().count("tm_units") == 1
    finally:
        REGISTRY.unregister("tm_units")


def test_a_broken_plugin_fails_only_when_its_kind_is_used(site: Path, tmp_path: Path) -> None:
    broken = {"tm_plugin_broken": "raise RuntimeError('no licence key found')\n"}
    fake_distribution(site, "tm-broken", {SOURCES_GROUP: {"tm_broken": "tm_plugin_broken"}}, broken)
    assert "tm_broken" in REGISTRY.kinds()
    assert REGISTRY.configure(local_request(tmp_path)).kind == "folder"
    with pytest.raises(ConfigError) as caught:
        REGISTRY.configure(SourceRequest(kind="tm_broken", target="x"))
    assert str(caught.value) == (
        "configuration error: source kind 'tm_broken': cannot load tm_plugin_broken.SPEC (RuntimeError: no licence"
        " key found); it is declared by entry point tm_broken = tm_plugin_broken in group tinymemory.sources of"
        " distribution tm-broken 1.0: reinstall a working version or uninstall it"
    )


def test_a_plugin_whose_spec_is_another_kind_is_named(site: Path) -> None:
    fake_distribution(
        site, "tm-liar", {SOURCES_GROUP: {"tm_liar": "tm_plugin_units"}}, {"tm_plugin_units": UNITS_MODULE}
    )
    with pytest.raises(ConfigError, match=r"tm_plugin_units\.SPEC is not the KindSpec of that kind; .* tm-liar 1\.0"):
        REGISTRY.spec("tm_liar")


def test_an_entry_point_cannot_replace_a_built_in_kind(site: Path, tmp_path: Path) -> None:
    fake_distribution(site, "tm-folders", {SOURCES_GROUP: {"folder": "tm_plugin_folder"}})
    with pytest.raises(ConfigError) as caught:
        REGISTRY.configure(local_request(tmp_path))
    assert str(caught.value) == (
        "configuration error: source kind 'folder' is built in, but entry point folder = tm_plugin_folder in group"
        " tinymemory.sources of distribution tm-folders 1.0 declares it too; uninstall that distribution or ask"
        " its authors to rename the entry point"
    )
    assert REGISTRY.spec("file").kind == "file"
    assert REGISTRY.kinds().count("folder") == 1


def test_a_registry_without_plugins_reads_no_distribution(site: Path) -> None:
    fake_distribution(
        site, "tm-units", {SOURCES_GROUP: {"tm_units": "tm_plugin_units"}}, {"tm_plugin_units": UNITS_MODULE}
    )
    with pytest.raises(InvalidRequestError, match="unknown source kind 'tm_units'"):
        SourceRegistry().entry("tm_units")
