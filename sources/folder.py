"""The folder source (docs/spec/sources-and-documents.md §3): every selected regular file below a root is a unit, its id
the relative path.

Selection differs from docs/spec/sources-and-documents.md §3's default in one way, on purpose: without an include glob
every regular file that is not ignored is offered (documents as well as text and code), because the pipeline's sniffing,
not the file name, decides what can be converted. A ZIP archive is not a unit: its members are, `archive.zip!/path`,
under the same rules (`sources.archive`). Listing costs one `lstat` per file and reads no file contents except
`.gitignore` files and archives' central directories (each cached by its own `lstat`), so re-listing an unchanged folder
is cheap.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from engines.contract import EngineError, Error, InvalidRequestError, NotFoundError, SourceKind
from sources.archive import (
    MAX_ARCHIVE_BYTES,
    REASON_AMBIGUOUS,
    ArchiveCache,
    MemberRules,
    is_archive_name,
    read_member,
    split_member_id,
    stat_member,
)
from sources.base import (
    FOLDER_FILE_SIZE_CAP_BYTES,
    ChangeCallback,
    Listing,
    ReaderOptions,
    Skipped,
    Unit,
    UnitContent,
    resolve_source_path,
)
from sources.config import SourceConfigKind, SourceEntry, SourceRequest, configured_entry, source_id_for
from sources.local_files import (
    REASON_SYMLINK,
    configured_path,
    file_content,
    id_parts,
    local_path,
    local_version,
    read_beneath,
    refusal,
    stat_beneath,
)
from sources.registry import KindSpec
from sources.selection import (
    GITIGNORE,
    REASON_GITIGNORED,
    REASON_HIDDEN,
    REASON_NOT_INCLUDED,
    REASON_VENV,
    VENV_MARKER,
    GitignoreLayer,
    IncludeGlob,
    is_gitignored,
    is_ignored_name,
    parse_gitignore,
)
from sources.watch import FolderWatcher

# A `.gitignore` larger than this is not a list of patterns a person wrote; refuse it rather than parse it.
_GITIGNORE_CAP = 1024 * 1024

_StatKey = tuple[int, int, int]


class FolderReader:
    """Lists and reads the selected files below `root`; never follows a symbolic link below it.

    `root` may be relative only with a `workspace` to join it to. `include` narrows the selection to files whose
    whole relative path matches one of the docs/spec/sources-and-documents.md §3 globs. Files over `max_file_bytes` are
    listed as skipped and refused when read; so are archive members declaring more. Items read carry `entry`'s source
    reference and namespace (none without an entry). Also a `WatchableSource`; `stat_unit` examines one id as a listing
    would.
    """

    kind = SourceConfigKind.FOLDER

    def __init__(
        self,
        root: Path,
        include: list[str] | None = None,
        max_file_bytes: int = FOLDER_FILE_SIZE_CAP_BYTES,
        *,
        workspace: Path | None = None,
        entry: SourceEntry | None = None,
    ) -> None:
        self._configured = root
        self._entry = entry
        self.root = resolve_source_path(root, workspace)
        self.include = IncludeGlob(include or ())
        self.max_file_bytes = max_file_bytes
        self._gitignores = _GitignoreCache()
        self._archives = ArchiveCache()
        self._members = MemberRules(self.include, max_file_bytes)
        self._folders: dict[str, tuple[str | None, list[GitignoreLayer]]] = {}

    def list_units(self) -> Listing:
        """Every selected file and archive member now; raises only when the root itself cannot be listed."""
        self._folders.clear()
        walk = _Walk(os.fspath(self.root), self._members, self._gitignores, self._archives)
        walk.run(missing_root=NotFoundError(f"folder does not exist: {self._configured} (resolved to {self.root})"))
        self._archives.keep_only(walk.archives_seen)
        units = sorted(walk.units, key=lambda unit: unit.id)
        skipped = sorted(walk.skipped, key=lambda entry: entry.unit_id)
        return Listing(units=tuple(units), skipped=tuple(skipped))

    def read(self, unit_id: str) -> UnitContent:
        """One selected file or archive member, re-checking selection, containment, type, the cap and, for a
        member, the archive's limits at read time."""
        member = self._check_selected(unit_id)
        root = os.fspath(self.root)
        if member is not None:
            data, st, version = read_member(root, *member, self._members)
            return file_content(self._entry, SourceKind.FOLDER, root, unit_id, data, st, version)
        data, st = read_beneath(root, unit_id, self.max_file_bytes)
        return file_content(self._entry, SourceKind.FOLDER, root, unit_id, data, st)

    def stat_unit(self, unit_id: str) -> Unit:
        """One unit's listing entry now, with the checks `read` makes; `NotFoundError` once it is gone."""
        member = self._check_selected(unit_id)
        if member is not None:
            return stat_member(os.fspath(self.root), *member, self._members)
        st = stat_beneath(os.fspath(self.root), unit_id, self.max_file_bytes)
        return Unit(id=unit_id, version=local_version(st), size=st.st_size)

    def ignores(self, unit_id: str) -> bool:
        """True when events for `unit_id` concern nothing this source offers; a trailing `/` marks a folder."""
        rel = unit_id.rstrip("/")
        try:
            id_parts(rel)
        except InvalidRequestError:
            return True
        return self._refusal(rel, is_dir=unit_id.endswith("/")) is not None

    def watch(self, on_change: ChangeCallback, *, debounce_s: float = 0.5, reconcile_s: float = 300.0) -> FolderWatcher:
        """An unstarted recursive watcher of the root that drops events for paths `ignores` rejects; a changed
        archive asks for a full listing, as only its directory says which members changed or went."""
        return FolderWatcher(
            self.root,
            on_change,
            debounce_s=debounce_s,
            reconcile_s=reconcile_s,
            ignore=self.ignores,
            rescan_for=is_archive_name,
        )

    def _check_selected(self, unit_id: str) -> tuple[str, str] | None:
        """Refuse an id this source does not offer; for an archive member, its `(archive, member)`."""
        member = split_member_id(unit_id)
        archive = unit_id if member is None else member[0]
        id_parts(archive)  # a path escape is reported as such before anything else
        if member is not None:
            id_parts(member[1])
        if member is None and is_archive_name(unit_id):
            raise InvalidRequestError(f"cannot read '{unit_id}': an archive is read by its members ('{unit_id}!/…')")
        reason = self._refusal(archive, is_dir=False)
        if reason is None and member is not None:
            reason = self._members.exclusion(*member)
        if reason is not None:
            raise InvalidRequestError(f"cannot read '{unit_id}': {reason}")
        return member

    def _refusal(self, rel: str, *, is_dir: bool) -> str | None:
        """Why `rel` is not selected, applying the walk's rules to one path (folders outermost first). An
        archive's own path is not matched against the include globs: its members are."""
        parts = rel.split("/")
        hidden = any(is_ignored_name(part, is_dir=True) for part in parts[:-1])
        if hidden or is_ignored_name(parts[-1], is_dir=is_dir):
            return REASON_HIDDEN
        if split_member_id(rel) is not None:
            return REASON_AMBIGUOUS
        if not is_dir and not self.include.matches(rel) and not is_archive_name(rel):
            return REASON_NOT_INCLUDED
        parent = rel.rpartition("/")[0]
        reason, layers = self._folder_state(parent)
        if reason is not None:
            return reason
        if is_dir:
            return self._folder_refusal(rel, layers)
        return REASON_GITIGNORED if is_gitignored(layers, rel, is_dir=False) else None

    def _folder_state(self, folder: str) -> tuple[str | None, list[GitignoreLayer]]:
        """Why `folder` or a folder above it is refused (None: it is walked), and the rules in force in it.

        Remembered until the next listing: a read checks the folders of every file, and they repeat.
        """
        cached = self._folders.get(folder)
        if cached is not None:
            return cached
        if not folder:
            state: tuple[str | None, list[GitignoreLayer]] = (None, self._layer_at(""))
        else:
            reason, layers = self._folder_state(folder.rpartition("/")[0])
            if reason is None:
                reason = self._folder_refusal(folder, layers)
            state = (reason, layers if reason is not None else [*layers, *self._layer_at(folder)])
        self._folders[folder] = state
        return state

    def _folder_refusal(self, folder: str, layers: list[GitignoreLayer]) -> str | None:
        if self.root.joinpath(folder, VENV_MARKER).exists():
            return REASON_VENV
        return REASON_GITIGNORED if is_gitignored(layers, folder, is_dir=True) else None

    def _layer_at(self, rel_dir: str) -> list[GitignoreLayer]:
        path = self.root.joinpath(rel_dir, GITIGNORE)
        try:
            st = path.lstat()
            return [self._gitignores.layer(os.fspath(self.root), rel_dir, (st.st_ino, st.st_size, st.st_mtime_ns))]
        except (OSError, Error):
            # Unreadable rules are reported by the listing; a point check just goes without them.
            return []


@dataclass
class _GitignoreCache:
    """Parsed `.gitignore` files keyed by path, valid while their (inode, size, mtime) stay the same."""

    entries: dict[str, tuple[_StatKey, GitignoreLayer]] = field(default_factory=dict)

    def layer(self, root: str, rel_dir: str, key: _StatKey) -> GitignoreLayer:
        """The rules of `rel_dir/.gitignore` whose `lstat` gave `key`; raises a contract error if unreadable."""
        folder = f"{root}/{rel_dir}" if rel_dir else root
        cached = self.entries.get(folder)
        if cached is not None and cached[0] == key:
            return cached[1]
        data, _ = read_beneath(folder, GITIGNORE, _GITIGNORE_CAP)
        layer = GitignoreLayer(rel_dir, parse_gitignore(data.decode("utf-8", errors="replace")))
        self.entries[folder] = (key, layer)
        return layer


class _Walk:
    """One listing: a depth-first walk with `os.scandir` that never follows a link."""

    def __init__(self, root: str, rules: MemberRules, gitignores: _GitignoreCache, archives: ArchiveCache) -> None:
        self.root = root
        self.include = rules.include
        self.cap = rules.cap
        self.rules = rules
        self.gitignores = gitignores
        self.archives = archives
        self.units: list[Unit] = []
        self.skipped: list[Skipped] = []
        self.archives_seen: set[str] = set()

    def run(self, *, missing_root: NotFoundError) -> None:
        """Walk the whole tree; `missing_root` is raised when the root does not exist."""
        stack: list[tuple[str, str, tuple[GitignoreLayer, ...]]] = [(self.root, "", ())]
        while stack:
            path, rel_dir, layers = stack.pop()
            entries = self._entries(path, rel_dir, missing_root)
            if rel_dir and any(entry.name == VENV_MARKER for entry in entries):
                continue
            layers = self._with_gitignore(entries, rel_dir, layers)
            for entry in entries:
                self._visit(entry, rel_dir, layers, stack)

    def _entries(self, path: str, rel_dir: str, missing_root: NotFoundError) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(path) as it:
                return list(it)
        except OSError as exc:
            if not rel_dir:
                raise (missing_root if isinstance(exc, FileNotFoundError) else self._root_error(exc)) from exc
            self.skipped.append(Skipped(rel_dir, _os_reason(exc, "cannot list this folder")))
            return []

    def _root_error(self, exc: OSError) -> Error:
        if isinstance(exc, NotADirectoryError):
            return InvalidRequestError(f"not a folder: {self.root}; use a file source for a single file")
        return EngineError(f"cannot list folder {self.root}: {_os_reason(exc, 'unreadable')}")

    def _with_gitignore(
        self, entries: list[os.DirEntry[str]], rel_dir: str, layers: tuple[GitignoreLayer, ...]
    ) -> tuple[GitignoreLayer, ...]:
        entry = next((entry for entry in entries if entry.name == GITIGNORE), None)
        if entry is None:
            return layers
        rel = f"{rel_dir}/{GITIGNORE}" if rel_dir else GITIGNORE
        try:
            st = entry.stat(follow_symlinks=False)
            layer = self.gitignores.layer(self.root, rel_dir, (st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError as exc:
            self.skipped.append(Skipped(rel, f"rules not applied: {_os_reason(exc, 'unreadable')}"))
            return layers
        except Error as exc:
            self.skipped.append(Skipped(rel, f"rules not applied: {exc.message}"))
            return layers
        return (*layers, layer)

    def _visit(
        self,
        entry: os.DirEntry[str],
        rel_dir: str,
        layers: tuple[GitignoreLayer, ...],
        stack: list[tuple[str, str, tuple[GitignoreLayer, ...]]],
    ) -> None:
        rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
        try:
            is_link = entry.is_symlink()
            is_dir = not is_link and entry.is_dir(follow_symlinks=False)
        except OSError:
            return  # vanished while listing: the next listing settles it
        # A link named like an ignored folder (a pnpm `node_modules` link) is as ignored as the folder.
        if is_ignored_name(entry.name, is_dir=is_dir or is_link):
            return
        if not _is_utf8(rel):
            self.skipped.append(Skipped(_printable(rel), "file name is not valid UTF-8"))
        elif is_dir:
            if not is_gitignored(layers, rel, is_dir=True):
                stack.append((entry.path, rel, layers))
        elif (is_archive_name(rel) or self.include.matches(rel)) and not is_gitignored(layers, rel, is_dir=False):
            self._offer(entry, rel, is_link=is_link)

    def _offer(self, entry: os.DirEntry[str], rel: str, *, is_link: bool) -> None:
        if is_link or split_member_id(rel) is not None:
            self.skipped.append(Skipped(rel, REASON_SYMLINK if is_link else REASON_AMBIGUOUS))
            return
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            return
        except OSError as exc:
            self.skipped.append(Skipped(rel, _os_reason(exc, "cannot read its metadata")))
            return
        archive = is_archive_name(rel)
        reason = refusal(st, MAX_ARCHIVE_BYTES if archive else self.cap)
        if reason is not None:
            self.skipped.append(Skipped(rel, reason))
        elif archive:
            self.archives_seen.add(rel)
            units, skipped = self.archives.listing(self.root, rel, st, self.rules)
            self.units.extend(units)
            self.skipped.extend(skipped)
        else:
            self.units.append(Unit(rel, local_version(st), st.st_size))


def _os_reason(exc: OSError, what: str) -> str:
    if isinstance(exc, PermissionError):
        return f"permission denied: {what}"
    return f"{what}: {exc.strerror or type(exc).__name__}"


def _is_utf8(text: str) -> bool:
    # Names that are not UTF-8 reach Python as lone surrogates; they could not travel as JSON ids.
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _printable(text: str) -> str:
    return os.fsencode(text).decode("utf-8", errors="backslashreplace")


def _configure(request: SourceRequest) -> SourceEntry:
    request.refuse_options(SourceConfigKind.FOLDER.alias, "include")
    path = local_path(request.target)
    if not path.is_dir():
        raise InvalidRequestError(f"{request.target} is not a folder; use a file source for a single file")
    return configured_entry(
        request, source_id_for(path), os.path.realpath(path), path=os.path.realpath(path), include=request.include
    )


def _build(entry: SourceEntry, options: ReaderOptions) -> FolderReader:
    root = configured_path(entry)
    return FolderReader(root, include=entry.include or None, max_file_bytes=options.max_file_bytes, entry=entry)


SPEC = KindSpec(
    kind=SourceConfigKind.FOLDER,
    target="path",
    summary="every selected file below a folder",
    configure=_configure,
    build=_build,
)
