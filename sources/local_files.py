"""Reading one local file below a root without following links, escaping the root, or reading past a cap.

Folder and file sources both read through here. The id is checked lexically (no `..`, not absolute), then every
component is opened relative to its parent with `O_NOFOLLOW`, so no link anywhere below the root is followed and
nothing outside it can be reached, even if a directory is swapped for a link mid-read. Only when that walk meets
a link is `realpath` consulted (docs/spec/sources-and-documents.md §3 containment), to say whether the link points
outside the root. Only regular files are opened, and with `O_NONBLOCK`, so a FIFO or a device put in a file's place
cannot hang or disturb the reader.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Final

from engines.contract import EngineError, InvalidRequestError, MemoryMeta, NotFoundError, SourceKind, SourceRef
from sources.base import UnitContent
from sources.config import SourceEntry

KIB: Final = 1024
MIB: Final = 1024 * 1024
GIB: Final = 1024 * MIB
_READ_CHUNK: Final = MIB

PATH_TRAVERSAL: Final = "path traversal denied"
REASON_SYMLINK: Final = "symbolic link (not followed)"

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

_FILE_TYPES: Final = (
    (stat.S_ISDIR, "directory"),
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


def format_size(size: int) -> str:
    """A size as a person reads it: `1.0 GiB`, `12.0 MiB`, `3.5 KiB`, `17 bytes`."""
    if size >= GIB:
        return f"{size / GIB:.1f} GiB"
    if size >= MIB:
        return f"{size / MIB:.1f} MiB"
    if size >= KIB:
        return f"{size / KIB:.1f} KiB"
    return f"{size} bytes"


def format_limit(limit: int) -> str:
    """A limit without a spurious decimal: `10 MiB`, `64 KiB`, `100 bytes`."""
    for unit, name in ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if limit >= unit and limit % unit == 0:
            return f"{limit // unit} {name}"
    return f"{limit} bytes"


def over_cap_reason(size: int, cap: int) -> str:
    return f"{format_size(size)} is over the {format_limit(cap)} file limit"


def refusal(st: os.stat_result, cap: int) -> str | None:
    """Why a file with this `lstat` result is not offered, or None when it is a regular file under the cap."""
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        return REASON_SYMLINK
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _FILE_TYPES if test(mode)), "special file")
        return f"not a regular file ({kind})"
    return over_cap_reason(st.st_size, cap) if st.st_size > cap else None


def id_parts(unit_id: str) -> list[str]:
    """The components of a relative, `/`-separated id; anything that could climb out is a path escape."""
    if unit_id.startswith("/") or ".." in unit_id.split("/"):
        raise InvalidRequestError(PATH_TRAVERSAL)
    parts = unit_id.split("/")
    if "\x00" in unit_id or any(part in ("", ".") for part in parts):
        raise InvalidRequestError(f"invalid unit id {unit_id!r}: expected a relative path like 'notes/a.md'")
    return parts


def check_contained(root_real: str, unit_id: str) -> None:
    """docs/spec/sources-and-documents.md §3 containment by `realpath`, and no link anywhere below the root (links are
    never followed)."""
    joined = f"{root_real.rstrip('/')}/{unit_id}"
    target = os.path.realpath(joined)
    if target != root_real and not target.startswith(root_real.rstrip("/") + "/"):
        raise InvalidRequestError(PATH_TRAVERSAL)
    if target != joined:
        raise InvalidRequestError(f"cannot read '{unit_id}': {REASON_SYMLINK}")


def stat_beneath(root: str, unit_id: str, cap: int) -> os.stat_result:
    """The `lstat` of `root/unit_id` after every check `read_beneath` makes, short of reading."""
    parts = id_parts(unit_id)
    try:
        with _parent_dir(root, parts) as dir_fd:
            st = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        raise _translated(exc, root, unit_id) from exc
    if stat.S_ISLNK(st.st_mode):
        _check_link(root, unit_id)
    _refuse(st, cap, unit_id)
    return st


def configured_path(entry: SourceEntry) -> Path:
    """The real path of a local source's entry; an entry without one is refused, naming the source."""
    if not entry.path:
        raise InvalidRequestError(f"source {entry.id}: path is required for a {entry.kind} source")
    return Path(os.path.realpath(entry.path))


def local_path(target: str) -> Path:
    """A path a person configured, with `~` expanded; `NotFoundError` when nothing is there, and
    `InvalidRequestError` when it cannot be looked at (a `~user` with no home, a name too long, no permission)."""
    try:
        path = Path(target).expanduser()
        exists = path.exists()
    except RuntimeError as exc:
        raise InvalidRequestError(f"{target}: no home directory to expand `~` to; give the full path") from exc
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InvalidRequestError(f"{target} cannot be examined ({reason}); give a path this process reads") from exc
    if not exists:
        raise NotFoundError(f"{target} does not exist")
    return path


def file_content(
    entry: SourceEntry | None,
    item_source: SourceKind,
    root: str,
    unit_id: str,
    data: bytes,
    st: os.stat_result,
    version: str | None = None,
) -> UnitContent:
    """One local file as read, with the docs/spec/sources-and-documents.md §2.4 metadata: the root as workspace, the
    canonical absolute path and its folder, observed at its mtime (an item's id does not depend on the mtime).

    `st` is the file's `fstat` (an archive's, for a member: the path and folder then run through the
    archive, `root/a.zip!/docs/x.md`); `version` defaults to the file's own."""
    path = f"{root.rstrip('/')}/{unit_id}"
    fields = {
        "workspace": root,
        "folder": path.rpartition("/")[0] or "/",
        "file_path": path,
        "observed_at": datetime.fromtimestamp(st.st_mtime_ns / 1e9, UTC),
    }
    if entry is None:
        origin = MemoryMeta.model_validate({"source": SourceRef(kind=item_source), **fields})
    else:
        origin = entry.origin(item_source, **fields)
    return UnitContent(unit_id, version or local_version(st), origin, data=data, name=unit_id)


def local_version(st: os.stat_result) -> str:
    """A local file's unit version: `size:mtime_ns` (a touched file gets a new one, and is hashed to tell)."""
    return f"{st.st_size}:{st.st_mtime_ns}"


def read_beneath(root: str, unit_id: str, cap: int) -> tuple[bytes, os.stat_result]:
    """The bytes of regular file `root/unit_id` and the `fstat` of what was read, refusing the file when it
    is over `cap` now (it may have grown).

    At most `cap + 1` bytes are ever read, so a file that grows (or a sparse file) cannot exhaust memory.
    `root` is the source's resolved root (its own links, chosen by the user, are already followed).
    """
    parts = id_parts(unit_id)
    try:
        with _parent_dir(root, parts) as dir_fd:
            fd, st = _open_file(dir_fd, parts[-1], cap, unit_id, root)
        try:
            return _read_capped(fd, cap, unit_id), st
        finally:
            os.close(fd)
    except OSError as exc:
        raise _translated(exc, root, unit_id) from exc


@contextmanager
def open_beneath(root: str, unit_id: str, cap: int) -> Iterator[tuple[BinaryIO, os.stat_result]]:
    """Regular file `root/unit_id`, opened for reading after every check `read_beneath` makes, with the
    `fstat` of what was opened: for a reader that seeks instead of reading it whole (a zip's directory).

    Errors reaching the file are contract errors; an `OSError` while the caller reads is the caller's.
    """
    parts = id_parts(unit_id)
    try:
        with _parent_dir(root, parts) as dir_fd:
            fd, st = _open_file(dir_fd, parts[-1], cap, unit_id, root)
    except OSError as exc:
        raise _translated(exc, root, unit_id) from exc
    with os.fdopen(fd, "rb") as file:
        yield file, st


def _check_link(root: str, unit_id: str) -> None:
    """A link met below the root: a path escape when it leads outside, else simply not followed."""
    check_contained(os.path.realpath(root), unit_id)
    raise InvalidRequestError(f"cannot read '{unit_id}': {REASON_SYMLINK}")


@contextmanager
def _parent_dir(root_real: str, parts: list[str]) -> Iterator[int]:
    """A descriptor of the id's parent folder, reached one component at a time without following links."""
    try:
        dir_fd = os.open(root_real, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise NotFoundError(f"folder does not exist: {root_real}") from exc
    try:
        for part in parts[:-1]:
            next_fd = os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = next_fd
        yield dir_fd
    finally:
        os.close(dir_fd)


def _open_file(dir_fd: int, name: str, cap: int, unit_id: str, root: str) -> tuple[int, os.stat_result]:
    """A descriptor of regular file `name` in `dir_fd` under `cap`, and its `fstat`; the caller closes it."""
    # Check the type before opening: opening a device can have side effects even with O_NONBLOCK.
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        _check_link(root, unit_id)
    _refuse(st, cap, unit_id)
    fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    try:
        # Re-check what was opened: the entry may have been replaced since the stat.
        opened = os.fstat(fd)
        _refuse(opened, cap, unit_id)
    except BaseException:
        os.close(fd)
        raise
    return fd, opened


def _read_capped(fd: int, cap: int, unit_id: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while chunk := os.read(fd, min(_READ_CHUNK, cap + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        if total > cap:
            raise InvalidRequestError(f"cannot read '{unit_id}': grew past the {format_limit(cap)} file limit")
    return b"".join(chunks)


def _refuse(st: os.stat_result, cap: int, unit_id: str) -> None:
    reason = refusal(st, cap)
    if reason is not None:
        raise InvalidRequestError(f"cannot read '{unit_id}': {reason}")


def _translated(exc: OSError, root: str, unit_id: str) -> Exception:
    """The contract error for a filesystem failure while reaching or reading one file."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _through_link(root, unit_id):
        # O_NOFOLLOW refused a link on the way: say whether it leads outside, or just that it is one.
        try:
            _check_link(root, unit_id)
        except InvalidRequestError as refused:
            return refused
    if isinstance(exc, FileNotFoundError | NotADirectoryError):
        return NotFoundError(f"file does not exist: {root.rstrip('/')}/{unit_id}")
    if exc.errno == errno.ELOOP:
        return InvalidRequestError(f"cannot read '{unit_id}': {REASON_SYMLINK}")
    if isinstance(exc, PermissionError):
        return EngineError(f"cannot read '{unit_id}': permission denied; check the file's permissions")
    return EngineError(f"cannot read '{unit_id}': {exc.strerror or type(exc).__name__}")


def _through_link(root: str, unit_id: str) -> bool:
    joined = f"{root.rstrip('/')}/{unit_id}"
    return os.path.realpath(joined) != f"{os.path.realpath(root).rstrip('/')}/{unit_id}"
