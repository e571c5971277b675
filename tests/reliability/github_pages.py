"""A GitHub repository of many small pages, served by the fake GitHub API a little late per blob (a remote API's
latency), so that a sync of it lasts long enough for the kill tests' kills to land in it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.fixtures.github_fake import FakeGitHub, GitRepo

BLOB_DELAY_S = 0.02
REPO = "acme/pages"


class SlowGitHub(FakeGitHub):
    """The fake GitHub API, answering each blob `BLOB_DELAY_S` late."""

    def _answer(self, raw_path: str, authorization: str | None) -> tuple[int, dict[str, str], Any]:
        if "/git/blobs/" in raw_path:
            time.sleep(BLOB_DELAY_S)
        return super()._answer(raw_path, authorization)


def page_path(n: int) -> str:
    """The path of page `n` in the repository."""
    return f"docs/part-{n % 12:02}/page-{n:04}.md"


def pages_repo(path: Path, files: int) -> GitRepo:
    """A git repository at `path` of `files` pages, committed."""
    repo = GitRepo.create(path)
    repo.write_many({page_path(n): f"# Page {n}\n\nThe body of page {n}, wordpage{n}x.\n" for n in range(files)})
    repo.commit("a repository of many small pages")
    return repo
