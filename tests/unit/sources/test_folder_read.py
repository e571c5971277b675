"""`FolderReader.read`, `stat_unit` and `ignores`: every listing check again, plus containment, at read time."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engines.contract import InvalidRequestError, NotFoundError, SourceKind, SourceRef
from sources import FolderReader, SourceEntry
from sources.local_files import _read_capped
from tests.unit.sources.helpers import ids, write

MIB = 1024 * 1024


def test_cap_is_checked_again_at_read_time(root: Path) -> None:
    path = write(root, "grows.txt", b"x" * 50)
    reader = FolderReader(root, max_file_bytes=100)
    assert ids(reader.list_units()) == ["grows.txt"]
    path.write_bytes(b"x" * 101)
    with pytest.raises(InvalidRequestError, match="101 bytes is over the 100 bytes file limit"):
        reader.read("grows.txt")
    path.write_bytes(b"x" * 100)
    assert reader.read("grows.txt").data == b"x" * 100


def test_bounded_read_stops_one_byte_past_the_cap() -> None:
    # A pipe stands in for a file that grows after its size was checked: no size to trust, only the reads.
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, b"y" * 300)
        os.close(write_fd)
        with pytest.raises(InvalidRequestError, match="grew past the 100 bytes file limit"):
            _read_capped(read_fd, 100, "f")
    finally:
        os.close(read_fd)


def test_read_returns_the_exact_bytes(root: Path) -> None:
    data = os.urandom(3 * MIB + 7)  # several read chunks
    write(root, "docs/random.md", data)
    assert FolderReader(root).read("docs/random.md").data == data


@pytest.mark.parametrize("unit_id", ["../outside.md", "/etc/passwd", "docs/../../outside.md", "..", "docs/.."])
def test_read_refuses_path_traversal(root: Path, tmp_path: Path, unit_id: str) -> None:
    write(tmp_path, "outside.md")
    write(root, "docs/a.md")
    with pytest.raises(InvalidRequestError) as caught:
        FolderReader(root).read(unit_id)
    assert caught.value.message == "path traversal denied"


def test_read_through_a_linked_folder_leading_outside_is_traversal(root: Path, tmp_path: Path) -> None:
    write(tmp_path / "outside", "secret.md")
    (root / "docs").symlink_to(tmp_path / "outside")
    with pytest.raises(InvalidRequestError) as caught:
        FolderReader(root).read("docs/secret.md")
    assert caught.value.message == "path traversal denied"


def test_read_through_a_linked_folder_inside_is_refused(root: Path) -> None:
    write(root, "real/a.md")
    (root / "alias").symlink_to(root / "real")
    with pytest.raises(InvalidRequestError, match="symbolic link"):
        FolderReader(root).read("alias/a.md")


@pytest.mark.parametrize(
    ("unit_id", "error", "message"),
    [
        ("missing.md", NotFoundError, "file does not exist"),
        ("a.md/x", NotFoundError, "file does not exist"),
        ("link.md", InvalidRequestError, "symbolic link"),
        ("loop", InvalidRequestError, "symbolic link"),
        ("docs", InvalidRequestError, r"not a regular file \(directory\)"),
        (".secret", InvalidRequestError, "hidden or ignored path"),
        ("node_modules/x.js", InvalidRequestError, "hidden or ignored path"),
        ("env/site.py", InvalidRequestError, "inside a virtualenv"),
        ("a.log", InvalidRequestError, "ignored by .gitignore"),
        ("", InvalidRequestError, "invalid unit id"),
        ("docs//a.md", InvalidRequestError, "invalid unit id"),
        ("./a.md", InvalidRequestError, "invalid unit id"),
        ("a\x00.md", InvalidRequestError, "invalid unit id"),
    ],
)
def test_read_refusals(root: Path, unit_id: str, error: type[Exception], message: str) -> None:
    write(root, "a.md")
    write(root, "docs/a.md")
    write(root, ".secret")
    write(root, "node_modules/x.js")
    write(root, "env/pyvenv.cfg")
    write(root, "env/site.py")
    write(root, "a.log")
    write(root, ".gitignore", b"*.log\n")
    (root / "link.md").symlink_to(root / "a.md")
    (root / "loop").symlink_to(root / "loop")
    with pytest.raises(error, match=message):
        FolderReader(root).read(unit_id)


def test_read_refuses_a_file_outside_the_include_glob(root: Path) -> None:
    write(root, "a.txt")
    with pytest.raises(InvalidRequestError, match="not matched by the include pattern"):
        FolderReader(root, include=["**/*.md"]).read("a.txt")


def test_read_refuses_a_file_replaced_by_a_link_after_listing(root: Path, tmp_path: Path) -> None:
    path = write(root, "a.md")
    reader = FolderReader(root)
    assert ids(reader.list_units()) == ["a.md"]
    path.unlink()
    path.symlink_to(write(root, "b.md"))
    with pytest.raises(InvalidRequestError, match="symbolic link"):
        reader.read("a.md")
    path.unlink()
    path.symlink_to(write(tmp_path, "secret.md"))
    with pytest.raises(InvalidRequestError, match="path traversal denied"):
        reader.read("a.md")


def test_stat_unit_matches_the_listing(root: Path) -> None:
    write(root, "d/a.md", b"abc")
    reader = FolderReader(root)
    (listed,) = reader.list_units().units
    assert reader.stat_unit("d/a.md") == listed
    with pytest.raises(NotFoundError):
        reader.stat_unit("d/gone.md")
    os.truncate(root / "d" / "a.md", 11 * MIB)
    with pytest.raises(InvalidRequestError, match="over the 10 MiB file limit"):
        reader.stat_unit("d/a.md")


@pytest.mark.parametrize(
    ("unit_id", "ignored"),
    [
        ("a.md", False),
        ("docs/", False),
        ("docs/new.md", False),
        (".hidden", True),
        ("docs/.hidden/x.md", True),
        ("node_modules/", True),
        ("node_modules/x/y.js", True),
        ("build/", True),
        ("build", False),  # a file named build: the folder-only rule does not apply
        ("x.log", True),
        ("../escape.md", True),
        ("", True),
    ],
)
def test_ignores_answers_for_files_and_folders(root: Path, unit_id: str, ignored: bool) -> None:
    write(root, ".gitignore", b"*.log\nbuild/\n")
    assert FolderReader(root).ignores(unit_id) is ignored


def test_read_gives_the_version_read_and_the_origin_of_its_items(root: Path) -> None:
    path = write(root, "docs/a.md", b"# A\n")
    entry = SourceEntry(id="notes", kind="folder", label="Notes", path=str(root), namespace="team:acme")
    reader = FolderReader(root, entry=entry)
    content = reader.read("docs/a.md")
    (listed,) = reader.list_units().units
    assert (content.unit_id, content.version, content.data) == ("docs/a.md", listed.version, b"# A\n")
    origin = content.origin
    assert (origin.workspace, origin.folder, origin.file_path) == (str(root), str(root / "docs"), str(path))
    assert origin.source == SourceRef(kind=SourceKind.FOLDER, id="notes")
    assert str(origin.namespace) == "team:acme"
    assert origin.observed_at == datetime.fromtimestamp(path.stat().st_mtime_ns / 1e9, UTC)


def test_a_file_read_after_it_changed_reports_the_new_version(root: Path) -> None:
    path = write(root, "a.md", b"one")
    reader = FolderReader(root)
    (listed,) = reader.list_units().units
    path.write_bytes(b"three")
    content = reader.read("a.md")
    assert content.data == b"three" and content.version.startswith("5:") and content.version != listed.version
