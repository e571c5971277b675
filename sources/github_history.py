"""A repository's commits, issues and pull requests as units of its GitHub source
(docs/spec/sources-and-documents.md §7.3), the extras an entry asks for with `extras` (`--with issues,prs,commits`).

Each kind is listed newest first (GitHub's order) and cut to its limit; an issue row that is a pull request is
left out of the issues. A unit is read as the markdown body of docs/spec/sources-and-documents.md §7.4, named
`<kind>-<id>.md` so the pipeline takes it for markdown, with the metadata of docs/spec/sources-and-documents.md §7.4:
the repository, the commit sha of a commit, the web URL of an issue or pull request, and the timestamp its version is
made of.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import Final

from engines.contract import EngineError, InvalidRequestError, MemoryMeta, NotFoundError, SourceKind
from sources.base import Skipped, Unit, UnitContent
from sources.config import SourceEntry
from sources.github_api import CommentRow, CommitRow, GithubApi, IssueRow
from sources.github_render import render_commit, render_issue, render_pull, stamp

EXTRAS: Final = ("issues", "prs", "commits")
ISSUE: Final = "issue"
PR: Final = "pr"
COMMIT: Final = "commit"
EXTRA_OF_KIND: Final = {ISSUE: "issues", PR: "prs", COMMIT: "commits"}

MAX_COMMENTS: Final = 1000
COMMENTS_PER_PAGE: Final = 50  # docs/spec/sources-and-documents.md §7.3

_COMMIT_SHA: Final = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


@dataclass(frozen=True, slots=True)
class HistoryLimits:
    """How many commits, issues and pull requests a listing offers at most (the newest)."""

    commits: int = 1000
    issues: int = 1000
    prs: int = 1000


# docs/spec/sources-and-documents.md §1.2: the limits an entry is created with when its request names none.
ENTRY_LIMITS: Final = HistoryLimits(commits=50, issues=10, prs=10)


class RepoHistory:
    """The history extras of one source: `extras` names the kinds to offer (a subset of `EXTRAS`)."""

    def __init__(
        self, api: GithubApi, entry: SourceEntry, extras: frozenset[str], limits: HistoryLimits = ENTRY_LIMITS
    ) -> None:
        self.api = api
        self.entry = entry
        self.extras = extras
        self.limits = limits

    def units(self, branch: Callable[[], str]) -> tuple[list[Unit], list[Skipped]]:
        """The units of every kind asked for (commits of `branch()`); a kind GitHub says the repository does
        not have (issues turned off) is one skipped entry, named for the kind, with none of it offered."""
        listers = {"commits": lambda: self._commit_units(branch()), "issues": self._issue_units, "prs": self._pulls}
        units: list[Unit] = []
        skipped: list[Skipped] = []
        for extra in EXTRAS:
            if extra in self.extras:
                try:
                    units.extend(listers[extra]())
                except NotFoundError as err:
                    skipped.append(Skipped(extra, err.message))
        return units, skipped

    def read(self, unit_id: str, kind: str, key: str) -> UnitContent:
        """One extra now, `unit_id` being `<kind>:<key>`."""
        extra = EXTRA_OF_KIND[kind]
        if extra not in self.extras:
            raise InvalidRequestError(f"cannot read '{unit_id}': this source does not read {extra} (--with {extra})")
        if kind == COMMIT:
            if _COMMIT_SHA.fullmatch(key) is None:
                raise InvalidRequestError(f"cannot read '{unit_id}': not a commit sha")
            return self._read_commit(unit_id, key)
        if not key.isdigit() or int(key) <= 0:
            raise InvalidRequestError(f"cannot read '{unit_id}': {kind} numbers are positive integers")
        return self._read_conversation(unit_id, kind, int(key))

    def _commit_units(self, branch: str) -> list[Unit]:
        rows = self.api.pages("commits", CommitRow, what="commits", params={"sha": branch})
        return [Unit(f"{COMMIT}:{row.sha}", row.sha) for row in islice(rows, self.limits.commits)]

    def _issue_units(self) -> list[Unit]:
        rows = self.api.pages("issues", IssueRow, what="issues", params={"state": "all"})
        issues = (row for row in rows if row.pull_request is None)  # pull requests are listed as issues too
        return [Unit(f"{ISSUE}:{row.number}", stamp(row.updated_at)) for row in islice(issues, self.limits.issues)]

    def _pulls(self) -> list[Unit]:
        rows = self.api.pages("pulls", IssueRow, what="pull requests", params={"state": "all"})
        return [Unit(f"{PR}:{row.number}", stamp(row.updated_at)) for row in islice(rows, self.limits.prs)]

    def _read_commit(self, unit_id: str, sha: str) -> UnitContent:
        row = self.api.get(f"commits/{sha}", CommitRow, what=f"commit {sha[:12]}")
        origin = self._origin(commit=row.sha, observed_at=row.commit.author.date)
        return _markdown(unit_id, row.sha, origin, render_commit(row), f"commit-{row.sha}.md")

    def _read_conversation(self, unit_id: str, kind: str, number: int) -> UnitContent:
        route, what = (f"pulls/{number}", "pull request") if kind == PR else (f"issues/{number}", "issue")
        row = self.api.get(route, IssueRow, what=f"{what} #{number}")
        if kind == ISSUE and row.pull_request is not None:
            raise NotFoundError(f"#{number} of {self.api.repo} is a pull request, not an issue")
        comments = self._comments(number)
        body = render_pull(row, comments) if kind == PR else render_issue(row, comments)
        origin = self._origin(url=row.html_url, observed_at=row.updated_at)
        return _markdown(unit_id, stamp(row.updated_at), origin, body, f"{kind}-{number}.md")

    def _comments(self, number: int) -> list[CommentRow]:
        """An issue's comments, best effort (docs/spec/sources-and-documents.md §7.3): comments GitHub cannot give are
        left out, but an unavailable GitHub (a rate limit) is raised, so the unit is read again later rather than stored
        without them at its version."""
        rows = self.api.pages(
            f"issues/{number}/comments",
            CommentRow,
            what=f"comments of #{number}",
            params={},
            per_page=COMMENTS_PER_PAGE,
        )
        try:
            return list(islice(rows, MAX_COMMENTS))
        except (NotFoundError, InvalidRequestError, EngineError):
            return []

    def _origin(self, **fields: object) -> MemoryMeta:
        return self.entry.origin(SourceKind.GITHUB, repo=self.api.repo, **fields)


def _markdown(unit_id: str, version: str, origin: MemoryMeta, body: str, name: str) -> UnitContent:
    return UnitContent(
        unit_id=unit_id, version=version, origin=origin, data=body.encode("utf-8"), name=name, mime="text/markdown"
    )
