"""ZIP archives in a folder: every member is a unit of its own, `archive.zip!/path/in/archive`.

An archive (a `.zip` file, by name) is not a unit itself. Listing reads its central directory only, nothing
is inflated, and offers each member under the folder's rules applied to the member's path: hidden names
and tool folders (`node_modules`, `.git`, a virtualenv…) are left out, and an include glob selects a member
when it matches the member's id (`**/*.md` finds `a.zip!/docs/x.md`) or the archive's own path (`*.zip`
takes every member). The archive's own path goes through the folder's ignores and `.gitignore`s like any
file's; rules inside an archive (its own `.gitignore`) are not applied. A member's version is the
archive's version with the member's CRC and size, so a rewritten archive has each member read again, and
its content hash decides whether it changed.

Limits (an archive cannot be trusted to say what it holds):

- each member's declared size is under the reader's file cap (10 MiB by default); its bytes are read
  through that cap and its declared size, whichever is smaller, and more is never inflated;
- a member over `RATIO_FLOOR_BYTES` must not inflate more than `MAX_COMPRESSION_RATIO` times its stored
  size, as declared or as read: a bomb member is refused, the rest of its archive is still offered;
- the members together declare at most `MAX_ARCHIVE_DECLARED_BYTES`: members past that are refused;
- the directory holds at most `MAX_ARCHIVE_MEMBERS` entries in at most `MAX_DIRECTORY_BYTES`, checked from
  its end record before anything parses it, and the archive file is at most `MAX_ARCHIVE_BYTES`.

Encrypted members, unsupported compression, names that could climb out (`../x`, `/etc/x`), names that occur
twice and nested archives (a `.zip` member: never opened) are refused with their reason.
"""

from __future__ import annotations

import os
import posixpath
import struct
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, BinaryIO, Final

from engines.contract import Error, InvalidRequestError, NotFoundError
from sources.base import Skipped, Unit
from sources.local_files import GIB, KIB, MIB, format_limit, format_size, local_version, open_beneath
from sources.selection import (
    REASON_HIDDEN,
    REASON_NOT_INCLUDED,
    REASON_VENV,
    VENV_MARKER,
    IncludeGlob,
    is_ignored_name,
)

ARCHIVE_SEPARATOR: Final = "!/"
ARCHIVE_EXTENSIONS: Final = (".zip",)

MAX_ARCHIVE_BYTES: Final = 1 * GIB
MAX_ARCHIVE_MEMBERS: Final = 10_000
MAX_DIRECTORY_BYTES: Final = 4 * MIB
MAX_ARCHIVE_DECLARED_BYTES: Final = 1 * GIB
MAX_COMPRESSION_RATIO: Final = 100
RATIO_FLOOR_BYTES: Final = 1 * MIB

REASON_ENCRYPTED: Final = "encrypted member (no password to open it)"
REASON_NESTED: Final = "archive inside an archive (not opened)"
REASON_UNSAFE_NAME: Final = "member name could escape the archive (absolute, '..' or empty parts)"
REASON_DUPLICATE: Final = "member name occurs more than once in the archive"
REASON_MISMATCH: Final = "inflated data does not match its declared size and checksum (damaged, or a zip bomb)"
REASON_AMBIGUOUS: Final = "path reads as an archive member ('.zip!/' inside it); rename it to ingest it"

_READ_CHUNK: Final = 256 * KIB
_SUPPORTED_METHODS: Final = frozenset({zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA})
_ENCRYPTED_FLAG: Final = 0x1

# End-of-central-directory records (APPNOTE.TXT 4.3.14–4.3.16), found the way `zipfile` finds them, so the
# sizes checked here are the ones it would go on to read.
_EOCD: Final = struct.Struct("<4s4H2LH")
_EOCD_SIGNATURE: Final = b"PK\x05\x06"
_ZIP64_LOCATOR: Final = struct.Struct("<4sLQL")
_ZIP64_LOCATOR_SIGNATURE: Final = b"PK\x06\x07"
_ZIP64_EOCD: Final = struct.Struct("<4sQ2H2L4Q")
_ZIP64_EOCD_SIGNATURE: Final = b"PK\x06\x06"
_MAX_COMMENT: Final = 65535


def is_archive_name(rel: str) -> bool:
    """True when the file at `rel` is read as an archive of members rather than as one unit."""
    return rel.lower().endswith(ARCHIVE_EXTENSIONS)


def member_id(archive_rel: str, member: str) -> str:
    """The unit id of `member` (its path inside the archive) of the archive at `archive_rel`."""
    return f"{archive_rel}{ARCHIVE_SEPARATOR}{member}"


def split_member_id(unit_id: str) -> tuple[str, str] | None:
    """`(archive_rel, member)` when `unit_id` names an archive member, else None.

    The separator is the first `!/` that follows an archive name, so a folder named `notes!` is no archive.
    """
    start = 0
    while (at := unit_id.find(ARCHIVE_SEPARATOR, start)) != -1:
        if is_archive_name(unit_id[:at]):
            return unit_id[:at], unit_id[at + len(ARCHIVE_SEPARATOR) :]
        start = at + 1
    return None


@dataclass(frozen=True)
class MemberRules:
    """What decides which members of an archive are offered: the folder's include globs and file cap."""

    include: IncludeGlob
    cap: int

    def exclusion(self, archive_rel: str, member: str) -> str | None:
        """Why `member` is left out by the folder's ignores or include globs (module docstring); None: it is not."""
        parts = member.split("/")
        if any(is_ignored_name(part, is_dir=True) for part in parts[:-1]) or is_ignored_name(parts[-1], is_dir=False):
            return REASON_HIDDEN
        if self.include.matches(member_id(archive_rel, member)) or self.include.matches(archive_rel):
            return None
        return REASON_NOT_INCLUDED

    def refusal(self, info: zipfile.ZipInfo) -> str | None:
        """Why a selected member is not offered, from what its directory entry declares; None: it is."""
        if info.flag_bits & _ENCRYPTED_FLAG:
            return REASON_ENCRYPTED
        if is_archive_name(info.filename):
            return REASON_NESTED
        if info.compress_type not in _SUPPORTED_METHODS:
            return f"compression method {info.compress_type} is not supported"
        if info.file_size > self.cap:
            return f"declares {format_size(info.file_size)}, over the {format_limit(self.cap)} file limit"
        return _ratio_refusal(info.file_size, info.compress_size)


@dataclass
class ArchiveCache:
    """Each archive's listing, kept while its (inode, size, mtime) stay the same, so re-listing is cheap."""

    entries: dict[str, tuple[tuple[int, int, int], tuple[list[Unit], list[Skipped]]]] = field(default_factory=dict)

    def listing(self, root: str, rel: str, st: os.stat_result, rules: MemberRules) -> tuple[list[Unit], list[Skipped]]:
        """The units and refusals of the archive at `rel` whose `lstat` is `st`; an archive that cannot be
        opened is one `Skipped` entry, not remembered (a permission may be fixed without touching the file)."""
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self.entries.get(rel)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            found = list_archive(root, rel, rules)
        except Error as exc:
            return [], [Skipped(rel, exc.message.removeprefix(f"cannot read '{rel}': "))]
        self.entries[rel] = (key, found)
        return found

    def keep_only(self, rels: set[str]) -> None:
        """Forget the archives a listing no longer saw."""
        for rel in set(self.entries) - rels:
            del self.entries[rel]


def list_archive(root: str, rel: str, rules: MemberRules) -> tuple[list[Unit], list[Skipped]]:
    """The members of the archive at `rel` as units, and those refused; a contract error when the archive
    itself cannot be opened (damaged, over a limit, gone)."""
    with _archive(root, rel) as (archive, st):
        return _members(archive, rel, local_version(st), rules)


def read_member(root: str, archive_rel: str, member: str, rules: MemberRules) -> tuple[bytes, os.stat_result, str]:
    """The bytes of one member, the archive's `fstat`, and the member's version; re-checks every limit and
    inflates at most the smaller of the cap and the declared size, plus one byte."""
    unit_id = member_id(archive_rel, member)
    with _archive(root, archive_rel) as (archive, st):
        info = _selected_info(archive, archive_rel, member, rules)
        try:
            with archive.open(info) as stream:
                data = _inflate(stream, info, rules.cap, unit_id)
        except (zipfile.BadZipFile, EOFError) as exc:
            raise InvalidRequestError(f"cannot read '{unit_id}': {REASON_MISMATCH}") from exc
        except (Error, MemoryError):
            raise
        except Exception as exc:
            # A damaged stream surfaces as zlib.error, lzma.LZMAError, OSError (bz2) or ValueError: the member's
            # fault, never the reader's.
            raise InvalidRequestError(
                f"cannot read '{unit_id}': its compressed data is damaged ({_kind(exc)})"
            ) from exc
    return data, st, _member_version(local_version(st), info)


def stat_member(root: str, archive_rel: str, member: str, rules: MemberRules) -> Unit:
    """One member's listing entry now, with the checks `read_member` makes short of inflating."""
    with _archive(root, archive_rel) as (archive, st):
        info = _selected_info(archive, archive_rel, member, rules)
    return Unit(member_id(archive_rel, member), _member_version(local_version(st), info), info.file_size)


@contextmanager
def _archive(root: str, rel: str) -> Iterator[tuple[zipfile.ZipFile, os.stat_result]]:
    """The archive at `rel` below `root`, its directory checked against the limits before `zipfile` reads it."""
    with open_beneath(root, rel, MAX_ARCHIVE_BYTES) as (file, st):
        try:
            _check_directory(file, st.st_size, rel)
            archive = zipfile.ZipFile(file)
        except (Error, MemoryError):
            raise
        except Exception as exc:
            # zipfile raises BadZipFile, but also OSError, ValueError or struct.error on damaged directories.
            raise InvalidRequestError(f"cannot read '{rel}': not a readable zip archive") from exc
        with archive:
            _check_members(len(archive.infolist()), rel)  # the end record's count is not what zipfile parsed
            yield archive, st


def _check_directory(file: BinaryIO, size: int, rel: str) -> None:
    """Refuse an archive whose end record announces more entries or directory bytes than the limits allow.

    `zipfile` reads and parses as many bytes as the record announces, so they are bounded before it runs.
    """
    entries, directory_bytes = _directory_extent(file, size)
    _check_members(entries, rel)
    if directory_bytes > MAX_DIRECTORY_BYTES:
        limit = format_limit(MAX_DIRECTORY_BYTES)
        raise InvalidRequestError(f"cannot read '{rel}': its directory is over the {limit} limit")


def _check_members(count: int, rel: str) -> None:
    if count > MAX_ARCHIVE_MEMBERS:
        raise InvalidRequestError(f"cannot read '{rel}': {count:,} members, over the {MAX_ARCHIVE_MEMBERS:,} limit")


def _directory_extent(file: BinaryIO, size: int) -> tuple[int, int]:
    """(entries, directory bytes) as `zipfile` will read them from the end records: the zip64 record's when
    one stands before the classic record; (0, 0) when there is none (then `zipfile` refuses the file)."""
    tail_start = max(0, size - _EOCD.size - _MAX_COMMENT - 1)
    file.seek(tail_start)
    tail = file.read()
    # A record without comment at the very end first, else the last signature in the comment window.
    at = len(tail) - _EOCD.size
    if not (at >= 0 and tail.startswith(_EOCD_SIGNATURE, at) and tail.endswith(b"\0\0")):
        at = tail.rfind(_EOCD_SIGNATURE)
    if at < 0 or at + _EOCD.size > len(tail):
        return 0, 0
    _, _, _, _, entries, directory_bytes, _, _ = _EOCD.unpack_from(tail, at)
    # The zip64 locator sits right before the classic record, the zip64 record right before the locator.
    record_at = tail_start + at - _ZIP64_LOCATOR.size - _ZIP64_EOCD.size
    if record_at < 0:
        return entries, directory_bytes
    file.seek(record_at)
    records = file.read(_ZIP64_EOCD.size + _ZIP64_LOCATOR.size)
    if not records[_ZIP64_EOCD.size :].startswith(_ZIP64_LOCATOR_SIGNATURE) or not records.startswith(
        _ZIP64_EOCD_SIGNATURE
    ):
        return entries, directory_bytes
    fields = _ZIP64_EOCD.unpack_from(records)
    return fields[7], fields[8]


def _members(archive: zipfile.ZipFile, rel: str, version: str, rules: MemberRules) -> tuple[list[Unit], list[Skipped]]:
    units: list[Unit] = []
    skipped: list[Skipped] = []
    for info, reason, silent in _examined(archive, rel, rules):
        unit_id = member_id(rel, info.filename)
        if silent:
            continue
        if reason is not None:
            skipped.append(Skipped(unit_id, reason))
        else:
            units.append(Unit(unit_id, _member_version(version, info), info.file_size))
    return units, skipped


def _examined(
    archive: zipfile.ZipFile, rel: str, rules: MemberRules
) -> Iterator[tuple[zipfile.ZipInfo, str | None, bool]]:
    """Every file member once, in directory order: its entry, why it is refused (None: offered), and whether
    the folder's rules leave it out silently, as the walk leaves out hidden and unselected files.

    Listing and reading both take their verdicts from here, so a member is read exactly when it is listed.
    Only offered and refused members count against the archive's declared budget.
    """
    counts: dict[str, int] = {}
    for info in archive.infolist():
        counts[info.filename] = counts.get(info.filename, 0) + 1
    venvs = {posixpath.dirname(name) for name in counts if posixpath.basename(name) == VENV_MARKER}
    declared = 0
    seen: set[str] = set()
    for info in archive.infolist():
        name = info.filename
        if info.is_dir() or name in seen:
            continue
        seen.add(name)
        if _name_refusal(name, counts) == REASON_UNSAFE_NAME:
            yield info, REASON_UNSAFE_NAME, False  # said out loud, whatever the selection: the archive is hostile
            continue
        excluded = rules.exclusion(rel, name)
        if excluded is None and any(name.startswith(f"{venv}/") for venv in venvs if venv):
            excluded = REASON_VENV
        if excluded is not None:
            yield info, excluded, True
            continue
        declared += info.file_size
        yield info, _name_refusal(name, counts) or rules.refusal(info) or _budget_refusal(declared), False


def _selected_info(archive: zipfile.ZipFile, rel: str, member: str, rules: MemberRules) -> zipfile.ZipInfo:
    """The directory entry of `member`, refused as the listing would refuse it."""
    unit_id = member_id(rel, member)
    for info, reason, _ in _examined(archive, rel, rules):
        if info.filename == member:
            if reason is not None:
                raise InvalidRequestError(f"cannot read '{unit_id}': {reason}")
            return info
    raise NotFoundError(f"no member '{member}' in archive {rel}")


def _inflate(stream: IO[bytes], info: zipfile.ZipInfo, cap: int, unit_id: str) -> bytes:
    """At most the smaller of `cap` and the declared size plus one byte, refused once the ratio is exceeded."""
    limit = min(cap, info.file_size)
    chunks: list[bytes] = []
    total = 0
    while chunk := stream.read(min(_READ_CHUNK, limit + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        reason = _ratio_refusal(total, info.compress_size)
        if total > limit or reason is not None:
            raise InvalidRequestError(f"cannot read '{unit_id}': {reason or REASON_MISMATCH}")
    return b"".join(chunks)


def _ratio_refusal(inflated: int, stored: int) -> str | None:
    if inflated <= RATIO_FLOOR_BYTES or inflated <= MAX_COMPRESSION_RATIO * stored:
        return None
    ratio = inflated / max(stored, 1)
    return f"inflates {ratio:,.0f} times its stored size, over the {MAX_COMPRESSION_RATIO} times limit (a zip bomb)"


def _budget_refusal(declared: int) -> str | None:
    if declared <= MAX_ARCHIVE_DECLARED_BYTES:
        return None
    return f"the archive's members declare over {format_limit(MAX_ARCHIVE_DECLARED_BYTES)} in all"


def _name_refusal(name: str, counts: dict[str, int]) -> str | None:
    if name.startswith("/") or "\x00" in name or any(part in ("", ".", "..") for part in name.split("/")):
        return REASON_UNSAFE_NAME
    return REASON_DUPLICATE if counts[name] > 1 else None


def _kind(exc: Exception) -> str:
    """An exception's class for a message, with its module when not built in (`zlib.error`, `ValueError`)."""
    kind = type(exc)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def _member_version(archive_version: str, info: zipfile.ZipInfo) -> str:
    return f"{archive_version}{ARCHIVE_SEPARATOR}{info.CRC:08x}:{info.file_size}"
