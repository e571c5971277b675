"""`FileReader`: one configured file, one unit named by the file name, with the folder source's read checks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engines.contract import InvalidRequestError, NotFoundError
from sources import FileReader, Listing, Skipped, Unit

MIB = 1024 * 1024


@pytest.fixture
def note(tmp_path: Path) -> Path:
    path = tmp_path / "notes.md"
    path.write_bytes(b"# notes\n")
    return path


def test_one_unit_named_by_the_file(note: Path) -> None:
    st = note.stat()
    assert FileReader(note).list_units() == Listing(units=(Unit(id="notes.md", version=f"8:{st.st_mtime_ns}", size=8),))
    assert FileReader(note).read("notes.md").data == b"# notes\n"
    assert FileReader(note).root == note.parent  # what the id is relative to, as for a folder


def test_relative_path_resolves_against_the_workspace(note: Path) -> None:
    reader = FileReader(Path("notes.md"), workspace=note.parent)
    assert [unit.id for unit in reader.list_units().units] == ["notes.md"]


def test_missing_file_is_not_found_with_both_paths(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError) as caught:
        FileReader(Path("gone.md"), workspace=tmp_path).list_units()
    assert caught.value.message == f"file does not exist: gone.md (resolved to {tmp_path / 'gone.md'})"


def test_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequestError, match="use a folder source"):
        FileReader(tmp_path).list_units()


def test_a_path_without_a_file_name_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match="not a file path"):
        FileReader(Path("/"))


def test_over_the_cap_is_skipped_and_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.pdf"
    path.touch()
    os.truncate(path, 12 * MIB)
    reader = FileReader(path)
    assert reader.list_units() == Listing(skipped=(Skipped("big.pdf", "12.0 MiB is over the 10 MiB file limit"),))
    with pytest.raises(InvalidRequestError, match="over the 10 MiB file limit"):
        reader.read("big.pdf")


def test_a_configured_link_is_skipped_not_followed(note: Path, tmp_path: Path) -> None:
    link = tmp_path / "alias.md"
    link.symlink_to(note)
    reader = FileReader(link)
    assert reader.list_units() == Listing(skipped=(Skipped("alias.md", "symbolic link (not followed)"),))
    with pytest.raises(InvalidRequestError, match="symbolic link"):
        reader.read("alias.md")


def test_a_link_loop_is_skipped(tmp_path: Path) -> None:
    loop = tmp_path / "loop.md"
    loop.symlink_to(loop)
    assert FileReader(loop).list_units() == Listing(skipped=(Skipped("loop.md", "symbolic link (not followed)"),))


def test_a_fifo_is_skipped_and_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    reader = FileReader(fifo)
    assert reader.list_units() == Listing(skipped=(Skipped("pipe.txt", "not a regular file (fifo)"),))
    with pytest.raises(InvalidRequestError, match="fifo"):
        reader.read("pipe.txt")


def test_a_linked_parent_folder_is_resolved(note: Path, tmp_path: Path) -> None:
    (tmp_path / "via").symlink_to(note.parent)
    assert FileReader(tmp_path / "via" / "notes.md").read("notes.md").data == b"# notes\n"


@pytest.mark.parametrize(("unit_id", "message"), [("other.md", "holds only 'notes.md'"), ("", "invalid unit id")])
def test_read_refuses_other_ids(note: Path, tmp_path: Path, unit_id: str, message: str) -> None:
    (tmp_path / "other.md").write_bytes(b"x")
    with pytest.raises(InvalidRequestError, match=message):
        FileReader(note).read(unit_id)


@pytest.mark.parametrize("unit_id", ["../notes.md", "/etc/passwd", "x/../notes.md"])
def test_read_refuses_traversal(note: Path, unit_id: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        FileReader(note).read(unit_id)
    assert caught.value.message == "path traversal denied"


def test_read_of_a_deleted_file_is_not_found(note: Path) -> None:
    reader = FileReader(note)
    note.unlink()
    with pytest.raises(NotFoundError):
        reader.read("notes.md")
    with pytest.raises(NotFoundError):
        reader.stat_unit("notes.md")


def test_read_rechecks_the_cap(note: Path) -> None:
    reader = FileReader(note, max_file_bytes=10)
    assert reader.read("notes.md").data == b"# notes\n"
    note.write_bytes(b"x" * 11)
    with pytest.raises(InvalidRequestError, match="11 bytes is over the 10 bytes file limit"):
        reader.read("notes.md")


def test_stat_unit_matches_the_listing(note: Path) -> None:
    reader = FileReader(note)
    assert (reader.stat_unit("notes.md"),) == reader.list_units().units
