"""ZIP archives in a folder source: members as units (`archive.zip!/path`), the folder's rules applied inside,
nothing inflated at listing, and every way an archive can lie refused one member at a time."""

from __future__ import annotations

import io
import os
import struct
import threading
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from engines.contract import InvalidRequestError, NotFoundError
from sources import RESCAN, FolderReader
from sources import archive as archives
from sources.archive import split_member_id
from tests.unit.sources.helpers import ids, skipped, write

KIB = 1024
MIB = 1024 * KIB
BOMB_REASON = "times its stored size, over the 100 times limit (a zip bomb)"
MISMATCH = "inflated data does not match its declared size and checksum (damaged, or a zip bomb)"

# The central header's fields (APPNOTE 4.3.12), and the local header's, by offset from their signatures.
CENTRAL, LOCAL = b"PK\x01\x02", b"PK\x03\x04"
FIELDS = {
    "flags": ((8, "<H"), (6, "<H")),
    "method": ((10, "<H"), (8, "<H")),
    "file_size": ((24, "<I"), (22, "<I")),
}


def zip_bytes(members: Mapping[str, bytes | str], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A real archive holding `members` in order; a name ending in `/` is a folder entry."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def patched(data: bytes, name: str, **fields: int) -> bytes:
    """`data` with `name`'s `flags`, `method` or `file_size` rewritten in its central and local headers."""
    out, encoded = bytearray(data), name.encode()
    for signature, name_len_at, name_at, which in ((CENTRAL, 28, 46, 0), (LOCAL, 26, 30, 1)):
        at = out.find(signature)
        while at >= 0:
            length = struct.unpack_from("<H", out, at + name_len_at)[0]
            if out[at + name_at : at + name_at + length] == encoded:
                for field, value in fields.items():
                    offset, fmt = FIELDS[field][which]
                    struct.pack_into(fmt, out, at + offset, value)
            at = out.find(signature, at + 4)
    return bytes(out)


def with_end_record(data: bytes, *, entries: int | None = None, directory_bytes: int | None = None) -> bytes:
    """`data` with its end-of-central-directory record claiming other entry counts or directory size."""
    out = bytearray(data)
    at = out.rfind(b"PK\x05\x06")
    if entries is not None:
        struct.pack_into("<HH", out, at + 8, entries, entries)
    if directory_bytes is not None:
        struct.pack_into("<I", out, at + 12, directory_bytes)
    return bytes(out)


def with_zip64_records(data: bytes, entries: int) -> bytes:
    """`data` with zip64 end records before its classic record, which then defers to them (saturated fields)."""
    at = data.rfind(b"PK\x05\x06")
    _, _, _, _, _, size, offset, _ = struct.unpack_from("<4s4H2LH", data, at)
    record = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, size, offset)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, at, 1)
    classic = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return data[:at] + record + locator + classic


NOTES = {
    "README.md": "# Marsh notes\n\nThe heronite survey.\n",
    "docs/": "",
    "docs/deep/guide.md": "# Guide\n\nWaders by the reeds.\n",
    "src/tool.py": "def wade():\n    return 1\n",
    ".hidden.md": "hidden inside the archive",
    "docs/.secret/key.md": "in a hidden folder",
    "node_modules/dep/index.js": "module.exports = 1",
    "lib/__pycache__/m.pyc": "compiled",
    "env/pyvenv.cfg": "home = /usr",
    "env/lib/site.py": "a virtualenv packed in",
    "__MACOSX/._README.md": "resource fork",
    ".gitignore": "*.md\n",  # an archive's own rules are not applied
}
OFFERED = ["a.zip!/README.md", "a.zip!/docs/deep/guide.md", "a.zip!/src/tool.py"]


def test_members_are_units_and_the_archive_is_not(root: Path) -> None:
    write(root, "a.zip", zip_bytes(NOTES))
    write(root, "plain.md", b"# Plain\n")
    listing = FolderReader(root).list_units()
    assert ids(listing) == [*OFFERED, "plain.md"]
    assert listing.skipped == ()


def test_a_member_is_read_with_folder_metadata_and_its_version(root: Path) -> None:
    path = write(root, "box/a.zip", zip_bytes(NOTES))
    reader = FolderReader(root)
    listed = {unit.id: unit for unit in reader.list_units().units}
    content = reader.read("box/a.zip!/docs/deep/guide.md")
    info = zipfile.ZipFile(path).getinfo("docs/deep/guide.md")
    st = path.stat()
    assert content.data == b"# Guide\n\nWaders by the reeds.\n"
    assert content.version == f"{st.st_size}:{st.st_mtime_ns}!/{info.CRC:08x}:{info.file_size}"
    assert content.version == listed["box/a.zip!/docs/deep/guide.md"].version
    assert listed["box/a.zip!/docs/deep/guide.md"].size == info.file_size
    assert content.name == "box/a.zip!/docs/deep/guide.md"  # its extension is what sniffing sees
    real = os.path.realpath(root)
    assert content.origin.file_path == f"{real}/box/a.zip!/docs/deep/guide.md"
    assert content.origin.folder == f"{real}/box/a.zip!/docs/deep"
    assert content.origin.workspace == real
    assert reader.stat_unit("box/a.zip!/docs/deep/guide.md") == listed["box/a.zip!/docs/deep/guide.md"]


def test_rewriting_the_archive_gives_every_member_a_new_version(root: Path) -> None:
    path = write(root, "a.zip", zip_bytes(NOTES))
    before = {unit.id: unit.version for unit in FolderReader(root).list_units().units}
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    after = {unit.id: unit.version for unit in FolderReader(root).list_units().units}
    assert before.keys() == after.keys() and all(before[key] != after[key] for key in before)


def test_listing_inflates_nothing_and_reads_an_unchanged_archive_once(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(root, "a.zip", zip_bytes(NOTES))
    opened: list[object] = []
    real_init = zipfile.ZipFile.__init__

    def counting_init(self: zipfile.ZipFile, *args: Any, **kwargs: Any) -> None:
        opened.append(args[0])
        real_init(self, *args, **kwargs)

    def no_inflating(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("listing inflated a member")

    monkeypatch.setattr(zipfile.ZipFile, "__init__", counting_init)
    monkeypatch.setattr(zipfile.ZipFile, "open", no_inflating)
    reader = FolderReader(root)
    assert ids(reader.list_units()) == OFFERED
    assert ids(reader.list_units()) == OFFERED
    assert len(opened) == 1


@pytest.mark.parametrize(
    ("include", "expected"),
    [
        (["**/*.md"], ["a.zip!/README.md", "a.zip!/docs/deep/guide.md", "plain.md"]),
        (["*.zip"], OFFERED),  # the archive's own path selects every member
        (["a.zip!/src/**"], ["a.zip!/src/tool.py"]),
        (["docs/**"], []),  # a member's path is inside its archive's, not beside it
        (["*.md"], ["plain.md"]),
    ],
)
def test_include_globs_match_the_member_id_or_the_archive(root: Path, include: list[str], expected: list[str]) -> None:
    write(root, "a.zip", zip_bytes(NOTES))
    write(root, "plain.md", b"# Plain\n")
    reader = FolderReader(root, include=include)
    assert ids(reader.list_units()) == expected
    for unit_id in expected:
        reader.read(unit_id)
    if "a.zip!/src/tool.py" not in expected:
        with pytest.raises(InvalidRequestError, match="not matched by the include pattern"):
            reader.read("a.zip!/src/tool.py")


def test_the_archive_itself_obeys_the_folder_ignores(root: Path) -> None:
    data = zip_bytes(NOTES)
    for rel in (".backup.zip", "node_modules/pkg/a.zip", "build/a.zip", "skip.zip"):
        write(root, rel, data)
    write(root, ".gitignore", b"build/\nskip.zip\n")
    assert FolderReader(root).list_units().units == ()
    with pytest.raises(InvalidRequestError, match=r"ignored by \.gitignore"):
        FolderReader(root).read("build/a.zip!/README.md")
    with pytest.raises(InvalidRequestError, match="hidden or ignored path"):
        FolderReader(root).read("a.zip!/.hidden.md")


def hostile_archive() -> bytes:
    """Good members around every kind of bad one."""
    data = zip_bytes(
        {
            "good/first.md": "# First\n\nkept\n",
            "bomb.txt": b"\0" * (5 * MIB),  # declared honestly: its ratio gives it away
            "liar.txt": b"heron " * 100_000,  # will declare a tenth of what it inflates to
            "big.bin": os.urandom(64 * KIB),  # will declare more than the reader's cap
            "secret.md": "was encrypted",
            "inner.zip": zip_bytes({"x.md": "nested"}),
            "odd.md": "stored with a method nobody knows",
            "/abs.md": "an absolute name",
            "a//b.md": "an empty part",
            "../up.md": "climbs out",
            "twice.md": "one",
            "garbled.txt": "egret " * 5_000,  # its compressed stream is damaged below
            "good/last.md": "# Last\n\nkept too\n",
        }
    )
    data = patched(data, "liar.txt", file_size=60_000)
    data = patched(data, "big.bin", file_size=11 * MIB)
    data = patched(data, "secret.md", flags=0x1)
    data = patched(data, "odd.md", method=99)
    data = _garbled(data, "garbled.txt")
    # A second `twice.md`: zipfile warns about duplicate names when writing, so splice one in by hand.
    dup = zip_bytes({"twice.md": "two"})
    return _append_member(data, dup)


def _garbled(data: bytes, name: str) -> bytes:
    """`data` with bytes inside `name`'s compressed stream flipped, its headers left as they were."""
    out = bytearray(data)
    at = out.find(LOCAL)
    while struct.unpack_from("<H", out, at + 26)[0] != len(name) or out[at + 30 : at + 30 + len(name)] != name.encode():
        at = out.find(LOCAL, at + 4)
    start = at + 30 + len(name) + struct.unpack_from("<H", out, at + 28)[0]
    for index in range(start + 4, start + 36):
        out[index] ^= 0x5A
    return bytes(out)


def _append_member(data: bytes, single: bytes) -> bytes:
    """`data` with the one member of `single` appended (its local record and central header)."""
    eocd = data.rfind(b"PK\x05\x06")
    entries, size, offset = struct.unpack_from("<HLL", data, eocd + 10)
    s_eocd = single.rfind(b"PK\x05\x06")
    s_size, s_offset = struct.unpack_from("<LL", single, s_eocd + 12)
    local, central = single[:s_offset], bytearray(single[s_offset : s_offset + s_size])
    struct.pack_into("<I", central, 42, offset)  # the appended local record starts where the directory did
    body = data[:offset] + local
    directory = data[offset : offset + size] + bytes(central)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, entries + 1, entries + 1, len(directory), len(body), 0)
    return body + directory + end


def test_every_bad_member_is_refused_and_the_rest_is_offered(root: Path) -> None:
    write(root, "h.zip", hostile_archive())
    reader = FolderReader(root)
    listing = reader.list_units()
    # A damaged stream or a lie about sizes shows only when inflating: both are offered, and refused when read.
    assert ids(listing) == ["h.zip!/garbled.txt", "h.zip!/good/first.md", "h.zip!/good/last.md", "h.zip!/liar.txt"]
    reasons = skipped(listing)
    assert BOMB_REASON in reasons.pop("h.zip!/bomb.txt")
    assert reasons == {
        "h.zip!/big.bin": "declares 11.0 MiB, over the 10 MiB file limit",
        "h.zip!/secret.md": "encrypted member (no password to open it)",
        "h.zip!/inner.zip": "archive inside an archive (not opened)",
        "h.zip!/odd.md": "compression method 99 is not supported",
        "h.zip!//abs.md": archives.REASON_UNSAFE_NAME,
        "h.zip!/a//b.md": archives.REASON_UNSAFE_NAME,
        "h.zip!/../up.md": archives.REASON_UNSAFE_NAME,
        "h.zip!/twice.md": "member name occurs more than once in the archive",
    }
    assert reader.read("h.zip!/good/last.md").data == b"# Last\n\nkept too\n"


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        ("bomb.txt", BOMB_REASON),
        ("liar.txt", MISMATCH),  # its declared size looked fine; inflating shows the lie, and stops there
        ("big.bin", "declares 11.0 MiB, over the 10 MiB file limit"),
        ("secret.md", "encrypted member"),
        ("inner.zip", "archive inside an archive"),
        ("odd.md", "compression method 99 is not supported"),
        ("twice.md", "occurs more than once"),
        ("garbled.txt", "its compressed data is damaged (zlib.error)"),
    ],
)
def test_reading_a_bad_member_is_an_invalid_request_naming_it(root: Path, member: str, reason: str) -> None:
    write(root, "h.zip", hostile_archive())
    with pytest.raises(InvalidRequestError) as caught:
        FolderReader(root).read(f"h.zip!/{member}")
    assert caught.value.message.startswith(f"cannot read 'h.zip!/{member}': ")
    assert reason in caught.value.message


def test_a_lying_member_is_never_inflated_past_its_declared_size(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(root, "h.zip", hostile_archive())
    taken: list[int] = []
    real_read = zipfile.ZipExtFile.read

    def counting_read(self: zipfile.ZipExtFile, n: int = -1) -> bytes:
        chunk = real_read(self, n)
        taken.append(len(chunk))
        return chunk

    monkeypatch.setattr(zipfile.ZipExtFile, "read", counting_read)
    with pytest.raises(InvalidRequestError, match="does not match its declared size"):
        FolderReader(root).read("h.zip!/liar.txt")
    assert sum(taken) <= 60_000 + 1


def test_a_member_over_the_cap_is_refused_even_if_it_declares_less(root: Path) -> None:
    data = patched(zip_bytes({"notes.txt": b"reeds " * 20_000}), "notes.txt", file_size=4 * KIB)
    write(root, "a.zip", data)
    reader = FolderReader(root, max_file_bytes=8 * KIB)
    assert ids(reader.list_units()) == ["a.zip!/notes.txt"]
    with pytest.raises(InvalidRequestError, match=MISMATCH.split(" (")[0]):
        reader.read("a.zip!/notes.txt")


def test_a_small_member_may_compress_well(root: Path) -> None:
    # Below the ratio floor a long run of one byte is just a dull file, not a bomb.
    write(root, "a.zip", zip_bytes({"zeros.txt": b"0" * (512 * KIB)}))
    assert FolderReader(root).read("a.zip!/zeros.txt").data == b"0" * (512 * KIB)


@pytest.mark.parametrize(
    "data",
    [b"PK\x03\x04 not really an archive", b"", zip_bytes(NOTES)[:200], zip_bytes(NOTES)[:-30]],
    ids=["garbage", "empty", "truncated-start", "truncated-end"],
)
def test_an_unreadable_archive_is_one_skipped_entry(root: Path, data: bytes) -> None:
    write(root, "broken.zip", data)
    write(root, "plain.md", b"# Plain\n")
    listing = FolderReader(root).list_units()
    assert ids(listing) == ["plain.md"]
    assert skipped(listing) == {"broken.zip": "not a readable zip archive"}


def test_a_directory_announcing_too_much_is_refused_before_it_is_parsed(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = zip_bytes(NOTES)
    write(root, "many.zip", with_end_record(good, entries=50_000))
    write(root, "huge.zip", with_end_record(good, directory_bytes=64 * MIB))
    write(root, "zip64.zip", with_zip64_records(good, entries=len(NOTES)))
    write(root, "zip64-many.zip", with_zip64_records(good, entries=2_000_000))

    def no_parsing(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("zipfile parsed a directory over the limits")

    reader = FolderReader(root)
    monkeypatch.setattr(zipfile.ZipFile, "_RealGetContents", no_parsing)
    for rel, reason in (("many.zip", "50,000 members, over the 10,000 limit"), ("huge.zip", "over the 4 MiB limit")):
        assert reason in skipped(reader.list_units())[rel]
    assert "2,000,000 members" in skipped(reader.list_units())["zip64-many.zip"]
    monkeypatch.undo()
    # A zip64 end record with sane figures is honoured: the archive is listed as usual, and the failure seen
    # while zipfile was disabled was not remembered.
    assert [u for u in ids(reader.list_units()) if u.startswith("zip64.zip")] == [
        u.replace("a.zip", "zip64.zip") for u in OFFERED
    ]


def test_more_members_than_the_end_record_admits_are_counted_after_parsing(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archives, "MAX_ARCHIVE_MEMBERS", 3)
    write(root, "a.zip", with_end_record(zip_bytes(NOTES), entries=1))
    assert skipped(FolderReader(root).list_units()) == {"a.zip": f"{len(NOTES)} members, over the 3 limit"}


def test_the_archive_declared_budget(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archives, "MAX_ARCHIVE_DECLARED_BYTES", 100)
    write(root, "a.zip", zip_bytes({"one.md": b"1" * 60, "two.md": b"2" * 30, "three.md": b"3" * 30}))
    reader = FolderReader(root)
    listing = reader.list_units()
    assert ids(listing) == ["a.zip!/one.md", "a.zip!/two.md"]
    assert skipped(listing) == {"a.zip!/three.md": "the archive's members declare over 100 bytes in all"}
    with pytest.raises(InvalidRequestError, match="declare over 100 bytes in all"):
        reader.read("a.zip!/three.md")


def test_an_archive_over_its_own_limit_is_skipped(root: Path) -> None:
    with (root / "backup.zip").open("wb") as sparse:
        sparse.truncate(2 * 1024 * MIB)
    assert skipped(FolderReader(root).list_units()) == {"backup.zip": "2.0 GiB is over the 1 GiB file limit"}


def test_paths_that_read_as_members_are_refused(root: Path) -> None:
    write(root, "odd.zip!/notes.md", b"a folder whose name ends in .zip!")
    write(root, "fine!/notes.md", b"a folder named fine!")
    listing = FolderReader(root).list_units()
    assert ids(listing) == ["fine!/notes.md"]
    assert skipped(listing) == {"odd.zip!/notes.md": archives.REASON_AMBIGUOUS}


def test_ids_that_are_not_members(root: Path) -> None:
    write(root, "a.zip", zip_bytes(NOTES))
    reader = FolderReader(root)
    with pytest.raises(InvalidRequestError, match="an archive is read by its members"):
        reader.read("a.zip")
    with pytest.raises(InvalidRequestError, match="path traversal denied"):
        reader.read("a.zip!/../plain.md")
    with pytest.raises(NotFoundError, match=r"no member 'missing\.md' in archive a\.zip"):
        reader.read("a.zip!/missing.md")
    with pytest.raises(NotFoundError):
        reader.read("gone.zip!/README.md")


def test_a_member_removed_from_the_archive_is_no_longer_listed(root: Path) -> None:
    reader = FolderReader(root)
    path = write(root, "a.zip", zip_bytes(NOTES))
    assert "a.zip!/src/tool.py" in ids(reader.list_units())
    path.write_bytes(zip_bytes({k: v for k, v in NOTES.items() if k != "src/tool.py"}))
    assert ids(reader.list_units()) == ["a.zip!/README.md", "a.zip!/docs/deep/guide.md"]
    with pytest.raises(NotFoundError):
        reader.read("a.zip!/src/tool.py")


@pytest.mark.parametrize(
    ("unit_id", "expected"),
    [
        ("a.zip!/x.md", ("a.zip", "x.md")),
        ("d/B.ZIP!/x/y.md", ("d/B.ZIP", "x/y.md")),
        ("a.zip!/inner.zip!/x.md", ("a.zip", "inner.zip!/x.md")),
        ("wow!/a.zip!/x.md", ("wow!/a.zip", "x.md")),
        ("a.zip", None),
        ("notes!/x.md", None),
        ("a.zipper!/x.md", None),
    ],
)
def test_split_member_id(unit_id: str, expected: tuple[str, str] | None) -> None:
    assert split_member_id(unit_id) == expected


def test_a_changed_archive_asks_the_watcher_for_a_rescan(root: Path) -> None:
    calls: list[set[str]] = []
    arrived = threading.Condition()

    def record(changed: set[str]) -> None:
        with arrived:
            calls.append(changed)
            arrived.notify_all()

    with FolderReader(root).watch(record, debounce_s=0.1, reconcile_s=60):
        write(root, "node_modules/ignored.zip", zip_bytes(NOTES))
        write(root, "plain.md", b"# Plain\n")
        with arrived:
            assert arrived.wait_for(lambda: {"plain.md"} in calls, timeout=5)
        write(root, "a.zip", zip_bytes(NOTES))
        with arrived:
            assert arrived.wait_for(lambda: {RESCAN} in calls, timeout=5)
    assert all(call in ({"plain.md"}, {RESCAN}) for call in calls), calls
