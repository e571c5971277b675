"""The GitHub repository source (docs/spec/sources-and-documents.md §7): the files of one branch, and optionally its
commits, issues and PRs.

Units and their versions:

    file:<path>      a file of the branch head's tree        the blob sha
    commit:<sha>     a commit of the branch (`commits`)      the sha
    issue:<n>        an issue (`issues`)                     its `updated_at`
    pr:<n>           a pull request (`prs`)                  its `updated_at`

A listing reads the head's tree (one request; a truncated tree is walked folder by folder) and selects files as a
folder source does, from names alone: the include globs, hidden entries, VCS and dependency folders, and folders
holding a `pyvenv.cfg`. A repository's `.gitignore` is not applied: it speaks of untracked files, and every file
of the tree is tracked. Submodules, symbolic links and files over the cap are listed as skipped.

As an `IncrementalSource` the cursor is the head commit: `list_changes` compares it with the new head and
offers only the files the comparison names, as the head's tree has them (sizes, links and submodules are known
only there, so the tree is read whenever the head moved), or returns None when GitHub refuses the comparison
or it cannot be trusted (history rewritten, the branch behind or diverged, as many files as GitHub lists at
most), so the host lists everything and diffs blob shas. Commits, issues and pull requests are listed in full
by both (their versions let the host skip unchanged ones), so a delta never removes one; a full listing does.

A file's metadata names the repository, the head commit, its path and folder, its web URL at that commit (on
the web host `web_origin` derives from the API URL) and, as `observed_at`, the head's committer date. A reader
holds the branch head and its tree once fetched: `read` looks a file's blob up there, so one reader
(the host builds one per job) reads every file of a job at the same commit. Listing fetches them afresh.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Final
from urllib.parse import quote

from engines.contract import EngineError, InvalidRequestError, NotFoundError, SourceKind
from sources.base import Delta, Listing, ReaderOptions, Skipped, Unit, UnitContent
from sources.config import SourceConfigKind, SourceEntry, SourceRequest, configured_entry
from sources.github_api import (
    Blob,
    BranchInfo,
    Comparison,
    GithubApi,
    RepoInfo,
    RepoRef,
    TokenChoice,
    Tree,
    TreeEntry,
    parse_repo,
    web_origin,
)
from sources.github_history import ENTRY_LIMITS, EXTRA_OF_KIND, EXTRAS, HistoryLimits, RepoHistory
from sources.local_files import REASON_SYMLINK, over_cap_reason
from sources.registry import KindSpec
from sources.selection import (
    REASON_HIDDEN,
    REASON_NOT_INCLUDED,
    REASON_VENV,
    VENV_MARKER,
    IncludeGlob,
    is_ignored_name,
    parent_dirs,
)

FILE: Final = "file"
REASON_SUBMODULE: Final = "submodule (not read)"

NO_TOKEN: Final = TokenChoice()

# GitHub lists at most this many files in a comparison; a comparison listing that many may have left some out.
COMPARE_FILE_LIMIT: Final = 300

_SYMLINK_MODE: Final = "120000"
_SUBMODULE_MODE: Final = "160000"
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BAD_BRANCH: Final = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|^[-/]|/$")


@dataclass(frozen=True, slots=True)
class _Head:
    sha: str
    date: datetime


class GithubReader:
    """Lists and reads one repository branch's files, and the history extras the entry asks for.

    Built from a configured entry, with the token to send (none by default). Also an `IncrementalSource`.
    """

    kind = SourceConfigKind.GITHUB_REPO

    def __init__(
        self,
        entry: SourceEntry,
        options: ReaderOptions | None = None,
        *,
        token: TokenChoice = NO_TOKEN,
        limits: HistoryLimits = ENTRY_LIMITS,
    ) -> None:
        options = options or ReaderOptions()
        self.entry = entry
        self.repo = parse_repo(entry.url or "")
        self.include = IncludeGlob(entry.include)
        self.max_file_bytes = options.max_file_bytes
        self.web = web_origin(options.github_api_url)
        self.api = GithubApi(
            options.github_api_url,
            self.repo.full_name,
            token=token,
            timeout_s=options.fetch_timeout_s,
            user_agent=options.user_agent,
        )
        self.history = RepoHistory(self.api, entry, frozenset(entry.extras), limits)
        self._lock = threading.RLock()
        self._branch: str | None = entry.branch
        self._head: _Head | None = None
        self._files: dict[str, TreeEntry] | None = None

    def list_units(self) -> Listing:
        """The head's selected files and the history extras, with the head commit as the cursor."""
        self._forget_head()
        head = self._current_head()
        units, skipped = self._file_units(self._current_files().values())
        history, refused = self.history.units(self._current_branch)
        return Listing(
            units=tuple(sorted([*units, *history], key=lambda u: u.id)),
            skipped=tuple(sorted([*skipped, *refused], key=lambda s: s.unit_id)),
            cursor=head.sha,
        )

    def list_changes(self, cursor: str) -> Delta | None:
        """The files changed between `cursor` and the head, and the history extras; None to list everything."""
        self._forget_head()
        head = self._current_head()
        units: list[Unit] = []
        skipped: list[Skipped] = []
        removed: list[str] = []
        if head.sha != cursor:
            touched = self._compared(cursor, head.sha)
            if touched is None:
                return None
            units, skipped, removed = self._touched_units(touched)
        history, refused = self.history.units(self._current_branch)
        return Delta(
            cursor=head.sha,
            units=tuple(sorted([*units, *history], key=lambda u: u.id)),
            removed=tuple(removed),
            skipped=tuple(sorted([*skipped, *refused], key=lambda s: s.unit_id)),
        )

    def read(self, unit_id: str) -> UnitContent:
        """One unit now: a file's blob at the head this reader holds, or a history extra rendered as markdown."""
        kind, sep, key = unit_id.partition(":")
        if sep and kind == FILE:
            return self._read_file(unit_id, key)
        if sep and kind in EXTRA_OF_KIND:
            return self.history.read(unit_id, kind, key)
        raise InvalidRequestError(
            f"cannot read '{unit_id}': github units are file:<path>, issue:<n>, pr:<n> or commit:<sha>"
        )

    # -- the head and its tree ------------------------------------------------------------------------------

    def _forget_head(self) -> None:
        with self._lock:
            self._head = None
            self._files = None

    def _current_branch(self) -> str:
        with self._lock:
            if self._branch is None:
                self._branch = self._repo_info().default_branch
            return self._branch

    def _repo_info(self) -> RepoInfo:
        try:
            return self.api.get("", RepoInfo, what="the repository")
        except NotFoundError:
            raise NotFoundError(
                f"github repository {self.repo.full_name} not found; check the owner and name "
                "(a private repository needs a token that can read it)"
            ) from None

    def _current_head(self) -> _Head:
        with self._lock:
            if self._head is None:
                branch = self._current_branch()
                try:
                    info = self.api.get(f"branches/{quote(branch)}", BranchInfo, what=f"branch '{branch}'")
                except NotFoundError:
                    self._repo_info()  # says so when it is the repository that is missing
                    raise NotFoundError(
                        f"branch '{branch}' not found in github repository {self.repo.full_name}"
                    ) from None
                self._head = _Head(info.commit.sha, info.commit.commit.committer.date)
            return self._head

    def _current_files(self) -> dict[str, TreeEntry]:
        """Every non-folder entry of the head's tree, by path."""
        with self._lock:
            if self._files is None:
                head = self._current_head()
                tree = self._tree(head.sha, recursive=True)
                entries = tree.tree if not tree.truncated else self._walk(tree.sha, "")
                self._files = {e.path: e for e in entries if e.type != "tree"}
            return self._files

    def _tree(self, sha: str, *, recursive: bool) -> Tree:
        params = {"recursive": "1"} if recursive else None
        return self.api.get(f"git/trees/{sha}", Tree, what=f"the tree {sha[:12]}", params=params)

    def _walk(self, sha: str, prefix: str) -> Iterator[TreeEntry]:
        """A truncated tree, read folder by folder (never entering a folder the selection ignores)."""
        for entry in self._tree(sha, recursive=False).tree:
            path = prefix + entry.path
            if entry.type != "tree":
                yield entry.model_copy(update={"path": path})
            elif not is_ignored_name(entry.path, is_dir=True):
                yield from self._walk(entry.sha, path + "/")

    # -- selection ------------------------------------------------------------------------------------------

    def _path_refusal(self, path: str, files: dict[str, TreeEntry]) -> str | None:
        """Why `path` is not selected by name (None: it is), as a folder source would say."""
        parts = path.split("/")
        if any(is_ignored_name(p, is_dir=True) for p in parts[:-1]) or is_ignored_name(parts[-1], is_dir=False):
            return REASON_HIDDEN
        if any(f"{folder}/{VENV_MARKER}" in files for folder in parent_dirs(path)):
            return REASON_VENV
        return None if self.include.matches(path) else REASON_NOT_INCLUDED

    def _entry_refusal(self, entry: TreeEntry) -> str | None:
        """Why a selected tree entry is listed as skipped (None: it is offered)."""
        if entry.type == "commit" or entry.mode == _SUBMODULE_MODE:
            return REASON_SUBMODULE
        if entry.mode == _SYMLINK_MODE:
            return REASON_SYMLINK
        if entry.type != "blob":
            return f"not a file ({entry.type})"
        if entry.size is not None and entry.size > self.max_file_bytes:
            return over_cap_reason(entry.size, self.max_file_bytes)
        return None

    def _file_units(self, entries: Iterable[TreeEntry]) -> tuple[list[Unit], list[Skipped]]:
        files = self._current_files()
        units: list[Unit] = []
        skipped: list[Skipped] = []
        for entry in entries:
            if self._path_refusal(entry.path, files) is not None:
                continue
            reason = self._entry_refusal(entry)
            if reason is not None:
                skipped.append(Skipped(f"{FILE}:{entry.path}", reason))
            else:
                units.append(Unit(f"{FILE}:{entry.path}", entry.sha, entry.size))
        return units, skipped

    # -- what changed ---------------------------------------------------------------------------------------

    def _compared(self, base: str, head: str) -> set[str] | None:
        """The paths a comparison of `base` with `head` names (both sides of a rename), or None when it
        cannot say what changed."""
        try:
            comparison = self.api.get(f"compare/{quote(base, safe='')}...{head}", Comparison, what="the comparison")
        except NotFoundError:
            return None  # the base is gone from the repository: history was rewritten
        if comparison.status not in ("ahead", "identical") or len(comparison.files) >= COMPARE_FILE_LIMIT:
            return None
        touched = {f.filename for f in comparison.files}
        touched.update(f.previous_filename for f in comparison.files if f.previous_filename)
        return touched

    def _touched_units(self, touched: set[str]) -> tuple[list[Unit], list[Skipped], list[str]]:
        """Changed paths as the head has them: offered, skipped, or gone (also when now skipped, so the
        items of a file that became a link or grew over the cap are forgotten, as a full listing would)."""
        files = self._current_files()
        present = [files[path] for path in sorted(touched) if path in files]
        units, skipped = self._file_units(present)
        offered = {unit.id for unit in units}
        removed = [
            f"{FILE}:{path}"
            for path in sorted(touched)
            if f"{FILE}:{path}" not in offered and self._path_refusal(path, files) is None
        ]
        return units, skipped, removed

    # -- reading --------------------------------------------------------------------------------------------

    def _read_file(self, unit_id: str, path: str) -> UnitContent:
        if not path or path.startswith("/") or any(part in ("", ".", "..") for part in path.split("/")):
            raise InvalidRequestError(f"cannot read '{unit_id}': not a path within a repository")
        files = self._current_files()
        head = self._current_head()
        _refuse(unit_id, self._path_refusal(path, files))
        entry = files.get(path)
        if entry is None:
            raise NotFoundError(f"{path} is not in {self.repo.full_name} at {head.sha[:12]}")
        _refuse(unit_id, self._entry_refusal(entry))
        data = self._blob(entry, unit_id)
        folder = path.rpartition("/")[0] or None
        origin = self.entry.origin(
            SourceKind.GITHUB,
            repo=self.repo.full_name,
            commit=head.sha,
            file_path=path,
            folder=folder,
            url=f"{self.web}/{self.repo.full_name}/blob/{head.sha}/{quote(path)}",
            observed_at=head.date,
        )
        return UnitContent(unit_id=unit_id, version=entry.sha, origin=origin, data=data, name=path)

    def _blob(self, entry: TreeEntry, unit_id: str) -> bytes:
        blob = self.api.get(f"git/blobs/{entry.sha}", Blob, what=f"the blob of {entry.path}")
        if blob.size > self.max_file_bytes:
            raise InvalidRequestError(f"cannot read '{unit_id}': {over_cap_reason(blob.size, self.max_file_bytes)}")
        if blob.encoding != "base64":
            return blob.content.encode("utf-8")
        try:
            data = base64.b64decode(blob.content)
        except (binascii.Error, ValueError) as err:
            raise EngineError(f"cannot read '{unit_id}': github sent a blob that is not valid base64") from err
        if len(data) != blob.size:
            raise EngineError(f"cannot read '{unit_id}': github sent {len(data)} bytes of a {blob.size}-byte blob")
        return data


def _refuse(unit_id: str, reason: str | None) -> None:
    if reason is not None:
        raise InvalidRequestError(f"cannot read '{unit_id}': {reason}")


# -- configuration ----------------------------------------------------------------------------------------------


def _source_id(repo: RepoRef, branch: str | None) -> str:
    """A stable id for a repository branch: `owner-name` made id-safe, and a short hash of what it reads."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", f"{repo.owner}-{repo.name}".lower())[:48]
    digest = hashlib.sha256(f"{repo.url.lower()}#{branch or ''}".encode()).hexdigest()[:8]
    return f"{slug}-{digest}"


def _checked_extras(extras: list[str]) -> list[str]:
    wanted = {extra.strip() for extra in extras if extra.strip()}
    unknown = sorted(wanted - set(EXTRAS))
    if unknown:
        raise InvalidRequestError(f"extras: unknown {unknown[0]!r}; github sources read {', '.join(EXTRAS)}")
    return [extra for extra in EXTRAS if extra in wanted]


def _checked_branch(branch: str | None) -> str | None:
    if branch is None or not branch.strip():
        return None
    if _BAD_BRANCH.search(branch) or branch.endswith((".lock", ".")):
        raise InvalidRequestError(f"branch: {branch!r} is not a branch name")
    return branch


def _checked_token_env(name: str | None) -> str | None:
    if name is None or not name.strip():
        return None
    if _ENV_NAME.fullmatch(name) is None:
        raise InvalidRequestError(f"token_env: {name!r} is not an environment variable name")
    return name


def _configure(request: SourceRequest) -> SourceEntry:
    request.refuse_options(
        SourceConfigKind.GITHUB_REPO.alias,
        *("include", "branch", "extras", "token_env", "max_commits", "max_issues", "max_prs"),
    )
    repo = parse_repo(request.target)
    branch = _checked_branch(request.branch)
    return configured_entry(
        request,
        _source_id(repo, branch),
        repo.full_name,
        url=repo.url,
        include=request.include,
        branch=branch,
        extras=_checked_extras(request.extras),
        token_env=_checked_token_env(request.token_env),
        max_commits=request.max_commits or ENTRY_LIMITS.commits,
        max_issues=request.max_issues or ENTRY_LIMITS.issues,
        max_prs=request.max_prs or ENTRY_LIMITS.prs,
    )


def _token(entry: SourceEntry, options: ReaderOptions) -> TokenChoice:
    """The token of a source. The entry names an environment variable rather than holding a secret, so it is
    read here, in the process that reads the source, when its reader is built."""
    if entry.token_env:
        value = os.environ.get(entry.token_env, "").strip()
        if not value:
            missing = f"github source {entry.id}: the environment variable {entry.token_env} (token_env) is not set"
            return TokenChoice(missing=missing)
        return TokenChoice(value, f"the token in ${entry.token_env}")
    if options.github_token:
        return TokenChoice(options.github_token, "the github_token setting")
    return TokenChoice()


def _build(entry: SourceEntry, options: ReaderOptions) -> GithubReader:
    # An entry saved without a limit reads with the reader's defaults (docs/spec/sources-and-documents.md §1.2).
    default = HistoryLimits()
    limits = HistoryLimits(
        commits=entry.max_commits or default.commits,
        issues=entry.max_issues or default.issues,
        prs=entry.max_prs or default.prs,
    )
    return GithubReader(entry, options, token=_token(entry, options), limits=limits)


SPEC = KindSpec(
    kind=SourceConfigKind.GITHUB_REPO,
    target="url",
    summary="the files of a repository's branch, and optionally its issues, pull requests and commits",
    configure=_configure,
    build=_build,
)
