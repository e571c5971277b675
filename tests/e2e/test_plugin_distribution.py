"""A plugin distribution, built and installed for real, extends `tinymemory` with no change to it.

The test writes a tiny project (a pyproject declaring a `tinymemory.sources` kind and a `tinymemory.converters`
converter, one module holding both), installs it with pip into a folder of its own, and runs the `tinymemory`
command with that folder on PYTHONPATH: the kind is added and synced on the embedded default, its image unit
converted by the plugin's converter in the converter pool's own process, and a change is picked up on the next
sync. Beside it lies a broken engine plugin, which no command here touches until one asks for that engine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.distributions import CAPTION_CONVERTER

pytestmark = pytest.mark.e2e

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tm-notes-plugin"
version = "0.1.0"
dependencies = ["tinymemory-ingest"]

[project.entry-points."tinymemory.sources"]
notes_json = "tm_notes_plugin"

[project.entry-points."tinymemory.converters"]
caption = "tm_notes_plugin:CaptionConverter"

[tool.setuptools]
py-modules = ["tm_notes_plugin"]
"""

MODULE = '''\
"""Notes kept in one JSON file ({unit id: text}), and a converter that reads an image's caption."""

import hashlib
import json
from pathlib import Path

from engines.contract import NotFoundError, SourceKind
from pipeline.convert import ConvertedDocument
from pipeline.sniff import DocumentFormat
from sources import KindSpec, Listing, Unit, UnitContent, configured_entry

KIND = "notes_json"
PNG = b"\\x89PNG\\r\\n\\x1a\\n"


class NotesReader:
    kind = KIND

    def __init__(self, entry, options):
        self.entry = entry
        self.path = Path(entry.path)

    def _notes(self):
        if not self.path.exists():
            raise NotFoundError(f"notes file does not exist: {self.path}")
        return json.loads(self.path.read_text())

    def list_units(self):
        return Listing(units=tuple(Unit(i, _version(text)) for i, text in sorted(self._notes().items())))

    def read(self, unit_id):
        text = self._notes().get(unit_id)
        if text is None:
            raise NotFoundError(f"no note {unit_id!r} in {self.path}")
        data = PNG + b"CAPTION:" + text.encode() if unit_id.endswith(".png") else text.encode()
        origin = self.entry.origin(SourceKind.IMPORT, url=f"notes://{self.entry.id}/{unit_id}")
        return UnitContent(unit_id, _version(text), origin, data=data, name=unit_id)


def _version(text):
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def configure(request):
    path = Path(request.target).resolve()
    return configured_entry(request, path.stem, str(path), path=str(path))


SPEC = KindSpec(kind=KIND, target="path", summary="notes in a JSON file", configure=configure, build=NotesReader)
'''


BROKEN_ENGINE = "[tinymemory.engines]\ntm_broken = tm_plugin_missing_engine\n"


def _install(tmp_path: Path) -> Path:
    """The plugin project built and installed into a folder of its own, as pip installs any distribution."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "tm_notes_plugin.py").write_text(MODULE + CAPTION_CONVERTER)
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--quiet"]
    subprocess.run([*pip, "--disable-pip-version-check", "--target", str(site), str(project)], check=True)
    broken = site / "tm_broken_engine-1.0.dist-info"
    broken.mkdir()
    (broken / "METADATA").write_text("Metadata-Version: 2.1\nName: tm-broken-engine\nVersion: 1.0\n")
    (broken / "entry_points.txt").write_text(BROKEN_ENGINE)
    return site


def test_an_installed_plugin_distribution_adds_a_kind_and_a_converter(tmp_path: Path) -> None:
    site = _install(tmp_path)
    assert (site / "tm_notes_plugin-0.1.0.dist-info" / "entry_points.txt").exists()
    env = {**os.environ, "TINYMEMORY_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(site)}
    env.pop("TINYMEMORY_SOURCE_KINDS", None)
    tinymemory = str(Path(sys.executable).parent / "tinymemory")

    def run(*args: str, expect: int = 0) -> str:
        done = subprocess.run([tinymemory, *args], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == expect, done.stderr
        assert "Traceback" not in done.stderr
        return done.stdout if expect == 0 else done.stderr

    def stored() -> dict[str, str]:
        items = json.loads(run("list", "--json", "--limit", "50"))["hits"]
        return {item["meta"]["url"].rpartition("/")[2]: item["text"] for item in items}

    notes = tmp_path / "notes.json"
    notes.write_text(json.dumps({"a.md": "zebracorns graze at dawn", "b.txt": "quokkas", "c.png": "an ocelot"}))
    kinds = {kind["name"]: kind for kind in json.loads(run("sources", "kinds", "--json"))}
    assert kinds["notes_json"] == {**kinds["notes_json"], "available": True, "summary": "notes in a JSON file"}
    assert run("sources", "add", "notes_json", str(notes), "--id", "notes").strip() == "notes"
    assert run("sources", "sync", "notes").strip() == "synced: 3 changed, 0 deleted"
    first = stored()
    assert first.keys() == {"a.md", "b.txt", "c.png"}
    assert first["a.md"].endswith("zebracorns graze at dawn") and first["c.png"].endswith("an ocelot")

    notes.write_text(json.dumps({"a.md": "zebracorns graze at dusk", "c.png": "an ocelot"}))
    assert run("sources", "sync", "notes").strip() == "synced: 1 changed, 1 deleted"
    second = stored()
    assert second.keys() == {"a.md", "c.png"} and second["a.md"].endswith("zebracorns graze at dusk")

    # The broken engine plugin stayed out of the way; asked for, it is named with its distribution.
    env["TINYMEMORY_ENGINE"] = "tm_broken"
    error = run("list", expect=2)
    assert 'memory engine "tm_broken": cannot load tm_plugin_missing_engine (ModuleNotFoundError' in error
    assert "distribution tm-broken-engine 1.0" in error
