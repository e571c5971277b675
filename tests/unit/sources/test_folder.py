"""`FolderReader.list_units`: selection, ignores, the cap, links and special files, and what cannot be listed."""

from __future__ import annotations

import builtins
import os
import time
from pathlib import Path
from typing import Any

import pytest

from engines.contract import EngineError, InvalidRequestError, NotFoundError
from sources import FOLDER_FILE_SIZE_CAP_BYTES, FolderReader, Listing
from tests.unit.sources.helpers import ids, skipped, write

MIB = 1024 * 1024
SYMLINK = "symbolic link (not followed)"


def test_lists_every_regular_file_with_relative_ids_sorted(root: Path) -> None:
    # Documents too, not only text and code: the pipeline's sniffing decides what it can convert.
    files = ["b.md", "a/z.py", "a/b/c.txt", "report.pdf", "deck.pptx", "sheet.xls", "mail.msg", "noext"]
    for rel in files:
        write(root, rel)
    listing = FolderReader(root).list_units()
    assert ids(listing) == sorted(files)
    assert listing.skipped == ()


def test_unit_version_is_size_and_mtime(root: Path) -> None:
    path = write(root, "d/a.md", b"12345")
    (unit,) = FolderReader(root).list_units().units
    st = path.stat()
    assert (unit.id, unit.version, unit.size) == ("d/a.md", f"5:{st.st_mtime_ns}", 5)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000))
    (touched,) = FolderReader(root).list_units().units
    assert touched.version != unit.version  # a touch is a new version; the content hash tells it is the same


def test_listing_reads_no_file_contents(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(root, "a.md")
    write(root, "b.bin", os.urandom(64))
    write(root, ".gitignore", b"*.log\n")
    real_open = os.open

    def guarded(path: Any, *args: Any, **kwargs: Any) -> int:
        # The root may be opened (reading .gitignore starts there); no file but .gitignore may be.
        assert str(path).endswith(".gitignore") or Path(path).is_dir(), path
        return real_open(path, *args, **kwargs)

    def no_builtin_open(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("listing opened a file")

    monkeypatch.setattr(os, "open", guarded)
    monkeypatch.setattr(builtins, "open", no_builtin_open)
    assert ids(FolderReader(root).list_units()) == ["a.md", "b.bin"]


def test_default_ignores(root: Path) -> None:
    ignored = [
        ".hidden.md",
        ".config/x.md",
        ".git/config",
        ".hg/store",
        ".svn/entries",
        "node_modules/lib/index.js",
        "deep/node_modules/x.js",
        "__pycache__/m.cpython-311.pyc",
        "target/debug/out",
        "venv/lib/site.py",
        ".venv/lib/site.py",
        "env/lib/site.py",
        "tools/my-env/bin/python",
    ]
    for rel in ignored:
        write(root, rel)
    write(root, "env/pyvenv.cfg", b"home = /usr\n")
    write(root, "tools/my-env/pyvenv.cfg", b"home = /usr\n")
    kept = ["docs/target", "node_modules.md", "environment/env.md", "mytarget/a.rs", "docs/venv.md"]
    for rel in kept:
        write(root, rel)
    listing = FolderReader(root).list_units()
    assert ids(listing) == sorted(kept)
    assert listing.skipped == ()


def test_a_root_that_is_itself_hidden_or_a_virtualenv_is_still_listed(tmp_path: Path) -> None:
    folder = tmp_path / ".notes"
    write(folder, "a.md")
    write(folder, "pyvenv.cfg")
    assert ids(FolderReader(folder).list_units()) == ["a.md", "pyvenv.cfg"]


def test_gitignore_root_and_nested_with_negation(root: Path) -> None:
    write(root, ".gitignore", b"*.log\nbuild/\n/top.txt\nlogs/\n!logs/keep.md\n")
    write(root, "sub/.gitignore", b"!keep.log\nlocal.txt\n")
    files = {
        "a.log": False,
        "sub/keep.log": True,
        "sub/other.log": False,
        "build/out.md": False,
        "sub/build/x.md": False,
        "docs/build": True,  # `build/` names folders only
        "top.txt": False,
        "sub/top.txt": True,
        "sub/local.txt": False,
        "local.txt": True,
        "logs/keep.md": False,  # like git: a file in an ignored folder cannot be re-included
        "sub/deeper/keep.log": True,
        "a.md": True,
    }
    for rel in files:
        write(root, rel)
    reader = FolderReader(root)
    assert ids(reader.list_units()) == sorted(rel for rel, kept in files.items() if kept)
    for rel, kept in files.items():
        assert reader.ignores(rel) is not kept, rel


def test_gitignore_changes_are_seen_by_the_next_listing(root: Path) -> None:
    write(root, "a.md")
    write(root, "b.txt")
    reader = FolderReader(root)
    assert ids(reader.list_units()) == ["a.md", "b.txt"]
    write(root, ".gitignore", b"*.txt\n")
    assert ids(reader.list_units()) == ["a.md"]
    write(root, ".gitignore", b"*.md\n# a longer file, so its size changes too\n")
    assert ids(reader.list_units()) == ["b.txt"]


def test_invalid_gitignore_lines_are_dropped(root: Path) -> None:
    write(root, ".gitignore", b"!\n*.tmp\n\\\n")
    write(root, "a.tmp")
    write(root, "a.md")
    assert ids(FolderReader(root).list_units()) == ["a.md"]


def test_gitignore_that_is_a_link_is_reported_and_not_applied(root: Path) -> None:
    write(root, "rules.txt", b"*.md\n")
    (root / ".gitignore").symlink_to(root / "rules.txt")
    write(root, "a.md")
    listing = FolderReader(root).list_units()
    assert ids(listing) == ["a.md", "rules.txt"]
    assert skipped(listing) == {".gitignore": f"rules not applied: cannot read '.gitignore': {SYMLINK}"}


@pytest.mark.parametrize(
    ("include", "expected"),
    [
        (["**/*.md"], ["a.md", "docs/b.md", "docs/deep/c.md"]),
        (["*.md"], ["a.md"]),
        (["docs/**"], ["docs/b.md", "docs/deep/c.md", "docs/x.pdf"]),
        (["**/*.md", "*.py"], ["a.md", "docs/b.md", "docs/deep/c.md", "main.py"]),
        ([], ["a.md", "docs/b.md", "docs/deep/c.md", "docs/x.pdf", "main.py"]),
        (None, ["a.md", "docs/b.md", "docs/deep/c.md", "docs/x.pdf", "main.py"]),
    ],
)
def test_include_globs_narrow_the_selection(root: Path, include: list[str] | None, expected: list[str]) -> None:
    for rel in ["a.md", "docs/b.md", "docs/deep/c.md", "docs/x.pdf", "main.py"]:
        write(root, rel)
    reader = FolderReader(root, include=include)
    assert ids(reader.list_units()) == expected
    assert reader.ignores("docs/") is False  # folders are walked whatever the glob


def test_an_excluded_file_is_not_reported_as_skipped(root: Path, tmp_path: Path) -> None:
    (root / "link.txt").symlink_to(tmp_path)
    os.truncate(write(root, "big.txt", b""), 20 * MIB)
    listing = FolderReader(root, include=["**/*.md"]).list_units()
    assert listing == Listing()


def test_files_over_the_cap_are_skipped_with_a_reason(root: Path) -> None:
    os.truncate(write(root, "twelve.bin", b""), 12 * MIB)
    os.truncate(write(root, "exact.bin", b""), FOLDER_FILE_SIZE_CAP_BYTES)
    listing = FolderReader(root).list_units()
    assert ids(listing) == ["exact.bin"]
    assert skipped(listing) == {"twelve.bin": "12.0 MiB is over the 10 MiB file limit"}


def test_sparse_gigabyte_file_is_skipped_and_refused_instantly(root: Path) -> None:
    os.truncate(write(root, "huge.md", b""), 1024**3)
    reader = FolderReader(root)
    started = time.monotonic()
    listing = reader.list_units()
    with pytest.raises(InvalidRequestError, match="over the 10 MiB file limit"):
        reader.read("huge.md")
    assert time.monotonic() - started < 1.0
    assert skipped(listing) == {"huge.md": "1.0 GiB is over the 10 MiB file limit"}


def test_symlinks_are_skipped_never_followed(root: Path, tmp_path: Path) -> None:
    write(root, "real/a.md")
    write(tmp_path / "outside", "secret.md")
    (root / "to_file.md").symlink_to(root / "real" / "a.md")
    (root / "to_dir").symlink_to(root / "real")
    (root / "to_outside").symlink_to(tmp_path / "outside")
    (root / "dangling.md").symlink_to(root / "missing.md")
    (root / "loop_a").symlink_to(root / "loop_b")
    (root / "loop_b").symlink_to(root / "loop_a")
    (root / "self").symlink_to(root / "self")
    (root / "real" / "up").symlink_to(root)
    listing = FolderReader(root).list_units()
    assert ids(listing) == ["real/a.md"]
    links = ["dangling.md", "loop_a", "loop_b", "real/up", "self", "to_dir", "to_file.md", "to_outside"]
    assert skipped(listing) == dict.fromkeys(links, SYMLINK)


def test_fifo_is_skipped_and_reading_it_does_not_hang(root: Path) -> None:
    os.mkfifo(root / "pipe.md")
    reader = FolderReader(root)
    assert skipped(reader.list_units()) == {"pipe.md": "not a regular file (fifo)"}
    with pytest.raises(InvalidRequestError, match=r"not a regular file \(fifo\)"):
        reader.read("pipe.md")


def test_unreadable_subfolder_is_skipped_not_fatal(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(root, "ok.md")
    write(root, "locked/a.md")
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    listing = FolderReader(root).list_units()
    assert ids(listing) == ["ok.md"]
    assert skipped(listing) == {"locked": "permission denied: cannot list this folder"}


def test_missing_root_is_not_found_with_both_paths(tmp_path: Path) -> None:
    reader = FolderReader(Path("gone"), workspace=tmp_path)
    with pytest.raises(NotFoundError) as caught:
        reader.list_units()
    assert caught.value.message == f"folder does not exist: gone (resolved to {tmp_path / 'gone'})"


def test_unreadable_root_is_an_engine_error(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def scandir(path: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(EngineError, match="permission denied"):
        FolderReader(root).list_units()


def test_root_that_is_a_file_is_refused(root: Path) -> None:
    with pytest.raises(InvalidRequestError, match="not a folder"):
        FolderReader(write(root, "a.md")).list_units()


def test_root_given_through_a_link_is_followed(root: Path, tmp_path: Path) -> None:
    write(root, "a.md", b"hello")
    (tmp_path / "alias").symlink_to(root)
    reader = FolderReader(tmp_path / "alias")
    assert ids(reader.list_units()) == ["a.md"]
    assert reader.read("a.md").data == b"hello"


def test_file_name_that_is_not_utf8_is_skipped(root: Path) -> None:
    write(root, "ok.md")
    fd = os.open(os.fsencode(root) + b"/bad\xff.md", os.O_CREAT | os.O_WRONLY)
    os.close(fd)
    listing = FolderReader(root).list_units()
    assert ids(listing) == ["ok.md"]
    assert skipped(listing) == {"bad\\xff.md": "file name is not valid UTF-8"}


def test_listing_hundreds_of_files_is_quick(root: Path) -> None:
    for index in range(500):
        write(root, f"d{index % 20}/f{index}.md")
    reader = FolderReader(root)
    started = time.perf_counter()
    assert len(reader.list_units().units) == 500
    # Generous for a slow CI machine; the point is "a stat per file", not "a read per file".
    assert time.perf_counter() - started < 2.0
