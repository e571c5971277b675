"""A GitHub repository synced through both runtimes against the fake GitHub on loopback.

The repository is a real local git repository the tests commit to; the fake answers the reader's REST calls
from it (`tests.fixtures.github_fake`). Each runtime syncs it first in full, then incrementally by comparing
commits (reading only the blobs a commit changed), falls back to diffing blob shas after a force-push, and
keeps everything it stored when GitHub answers 404 or a rate limit, until the next sync proceeds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from engines.contract import Hit, ListRequest, MetaFilter, NotFoundError, UnavailableError
from engines.local import LocalEngine
from sources import REGISTRY, SourceEntry, SourceRequest
from tests.fixtures.github_fake import FakeGitHub, FakeRepo, GitRepo, comment_json, issue_json, pull_json
from tests.fixtures.scans import image_bytes, needs_ocr, page_image
from tests.integration.cluster import Cluster, cluster_fixture
from worker import control
from worker.embedded import EmbeddedRuntime
from worker.records import SOURCE_UNIT
from worker.settings import Settings
from worker.state.base import StateStore

CAP_MB = 1 / 64  # 16 KiB: big.txt below is over it
FILES = {
    "README.md": "# Widgets\n\nThe widget service turns quarzite into widgets.\n",
    "src/app.py": "def main() -> None:\n    print('widgets')\n",
    "src/util.py": "def helper() -> int:\n    return 42\n",
    "docs/guide.md": "# Guide\n\nStart the widget service with make run.\n",
    "docs/old-name.md": "# History\n\nWidgets began in 2019.\n",
    "notes/drop.txt": "a note that will be deleted\n",
    "assets/big.txt": "x" * 20_000,
    ".github/ci.yml": "on: push\n",
}
STORED = sorted(set(FILES) - {"assets/big.txt", ".github/ci.yml"})


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo.create(tmp_path / "widgets")
    repo.write_many(dict(FILES))
    repo.commit("first")
    return repo


@pytest.fixture
def served(fake: FakeGitHub, repo: GitRepo) -> FakeRepo:
    return fake.add_repo("acme/widgets", repo)


def _change(repo: GitRepo) -> str:
    """A commit that modifies, adds, deletes and renames a file each."""
    repo.write("src/app.py", "def main() -> None:\n    print('widgets, faster')\n")
    repo.write("docs/new.md", "# New\n\nA page added later.\n")
    repo.remove("notes/drop.txt")
    repo.rename("docs/old-name.md", "docs/history.md")
    return repo.commit("modify, add, delete, rename")


async def _items(engine: LocalEngine, source_id: str) -> dict[str, Hit]:
    """The source's items by file path (extras by url); each file here is small enough to be one item."""
    page = await engine.list(ListRequest(limit=500, filter=MetaFilter(source_id=source_id)))
    assert page.next_cursor is None
    return {h.meta.file_path or h.meta.url or "": h for h in page.items}


def _settings(tmp_path: Path, fake: FakeGitHub) -> Settings:
    return Settings(data_dir=tmp_path / "data", convert_workers=1, github_api_url=fake.url, max_file_mb=CAP_MB)


def _letters(state: StateStore, source_id: str) -> dict[str, tuple[str, str]]:
    return {d.unit_id: (d.stage, d.message) for d in state.dead_letters(source_id)}


@pytest.mark.e2e
async def test_a_repository_synced_in_full_then_by_commits_then_after_a_force_push(
    tmp_path: Path, fake: FakeGitHub, repo: GitRepo, served: FakeRepo
) -> None:
    with EmbeddedRuntime(_settings(tmp_path, fake)) as runtime:
        entry = control.add_source(runtime.state, SourceRequest(kind="github", target="acme/widgets"))
        first_head = repo.head()
        report, _ = await runtime.sync(entry.id)
        assert (report.upserts, report.skipped, report.cursor) == (len(STORED), 1, first_head)
        stored = await _items(runtime.engine, entry.id)
        assert sorted(stored) == STORED
        app = stored["src/app.py"].meta
        assert (app.repo, app.commit, app.language, app.folder) == ("acme/widgets", first_head, "python", "src")
        assert app.url == f"{fake.origin}/acme/widgets/blob/{first_head}/src/app.py"
        assert "quarzite" in stored["README.md"].text
        assert _letters(runtime.state, entry.id) == {
            "file:assets/big.txt": ("list", "19.5 KiB is over the 16 KiB file limit")
        }
        assert fake.requests["blob"] == len(STORED)

        fake.reset_counts()  # unchanged: the head is the cursor, so no comparison, no tree, no blob
        again, batches = await runtime.sync(entry.id)
        assert (again.upserts, again.deletes, batches) == (0, 0, [])
        assert fake.requests == {"repo": 1, "branch": 1}

        head = _change(repo)
        fake.reset_counts()
        changed, batches = await runtime.sync(entry.id)
        assert (changed.upserts, changed.deletes, changed.cursor) == (3, 2, head)
        assert fake.requests["compare"] == 1 and fake.requests["blob"] == 3  # modified, added, renamed
        stored = await _items(runtime.engine, entry.id)
        assert sorted(stored) == sorted(
            [*set(STORED) - {"notes/drop.txt", "docs/old-name.md"}, "docs/new.md", "docs/history.md"]
        )
        assert "faster" in stored["src/app.py"].text and stored["src/app.py"].meta.commit == head
        assert stored["README.md"].meta.commit == first_head  # not read again: its blob did not change
        assert sum(b.forgotten for b in batches) == 3  # the old app.py, drop.txt and old-name.md

        fake.reset_counts()  # a force-push: the old head is no ancestor of the new one
        rewritten = repo.rewrite({"README.md": FILES["README.md"], "fresh.md": "# Fresh\n\nA rewritten history.\n"})
        full, _ = await runtime.sync(entry.id)
        assert full.cursor == rewritten
        assert fake.requests["compare"] == 1 and fake.requests["blob"] == 1  # only fresh.md is new by blob sha
        assert sorted(await _items(runtime.engine, entry.id)) == ["README.md", "fresh.md"]
        assert _letters(runtime.state, entry.id) == {}  # big.txt is gone, and its letter with it


@pytest.mark.e2e
async def test_github_refusing_keeps_what_was_stored_until_a_later_sync_proceeds(
    tmp_path: Path, fake: FakeGitHub, repo: GitRepo, served: FakeRepo
) -> None:
    with EmbeddedRuntime(_settings(tmp_path, fake)) as runtime:
        entry = control.add_source(runtime.state, SourceRequest(kind="github", target="acme/widgets"))
        first, _ = await runtime.sync(entry.id)
        before = await _items(runtime.engine, entry.id)
        head = _change(repo)

        fake.missing = True
        with pytest.raises(NotFoundError, match="github repository acme/widgets not found"):
            await runtime.sync(entry.id)
        fake.missing = False
        fake.limited = "primary"
        with pytest.raises(UnavailableError, match=r"github rate limit reached .* retry after .* \(in \d+ s\)"):
            await runtime.sync(entry.id)
        assert await _items(runtime.engine, entry.id) == before  # nothing forgotten, no unit dead-lettered
        # The failed listing is a letter about the whole source, and the last sync says why.
        assert set(_letters(runtime.state, entry.id)) == {"file:assets/big.txt", SOURCE_UNIT}
        last = runtime.state.last_sync(entry.id)
        assert last is not None and last.cursor == first.cursor and "rate limit" in (last.error or "")

        fake.limited = None  # the limit lifts: the next sync takes up the change from the last cursor
        fake.reset_counts()
        report, _ = await runtime.sync(entry.id)
        assert (report.upserts, report.deletes, report.cursor) == (3, 2, head)
        assert fake.requests["compare"] == 1
        assert "docs/history.md" in await _items(runtime.engine, entry.id)
        assert set(_letters(runtime.state, entry.id)) == {"file:assets/big.txt"}


@pytest.mark.e2e
async def test_issues_and_pull_requests_with_extras(
    tmp_path: Path, fake: FakeGitHub, repo: GitRepo, served: FakeRepo
) -> None:
    served.issues = [
        issue_json(1, "Crash on start", body="It crashes.", labels=("bug",), updated="2024-02-02T10:00:00Z"),
        issue_json(2, "Docs typo", body="A typo.", state="closed"),
    ]
    served.pulls = [pull_json(3, "Fix the crash", body="Fixes #1.", merged_at="2024-02-05T09:00:00Z", login="bob")]
    served.comments = {1: [comment_json("bob", "Reproduced with quarzite.")]}
    request = SourceRequest(kind="github", target="acme/widgets", include=["README.md"], extras=["issues", "prs"])
    with EmbeddedRuntime(_settings(tmp_path, fake)) as runtime:
        entry = control.add_source(runtime.state, request)
        report, _ = await runtime.sync(entry.id)
        assert report.upserts == 4
        stored = await _items(runtime.engine, entry.id)
        issue = stored[f"{fake.origin}/acme/widgets/issues/1"]
        assert "# Issue #1: Crash on start" in issue.text and "### @bob (2024-02-01T12:00:00Z)" in issue.text
        assert issue.meta.repo == "acme/widgets" and issue.meta.observed_at is not None
        pull = stored[f"{fake.origin}/acme/widgets/pull/3"]
        assert "**State:** open (merged at 2024-02-05T09:00:00Z)" in pull.text
        assert sorted(stored) == sorted(
            ["README.md", *(f"{fake.origin}/acme/widgets/{p}" for p in ["issues/1", "issues/2", "pull/3"])]
        )

        served.issues[0] = {
            **served.issues[0],
            "title": "Crash on start (confirmed)",
            "updated_at": "2024-02-09T00:00:00Z",
        }
        fake.reset_counts()
        again, _ = await runtime.sync(entry.id)
        assert again.upserts == 1 and fake.requests["issue"] == 1 and fake.requests["pull"] == 0
        stored = await _items(runtime.engine, entry.id)
        assert "(confirmed)" in stored[f"{fake.origin}/acme/widgets/issues/1"].text and len(stored) == 4


# -- the same repository in real Celery workers ------------------------------------------------------------


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)


def _stored(cluster: Cluster, source_id: str) -> dict[str, Hit]:
    async def read() -> dict[str, Hit]:
        engine = LocalEngine(cluster.data_dir / "memory.sqlite3")
        try:
            return await _items(engine, source_id)
        finally:
            engine.close()

    return asyncio.run(read())


def _settled(cluster: Cluster, source_id: str, paths: list[str]) -> bool:
    return cluster.idle() and sorted(_stored(cluster, source_id)) == sorted(paths)


@pytest.mark.integration
@pytest.mark.slow
def test_a_repository_in_celery_workers(cluster: Cluster, fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    cluster.extra_env.update({"TINYMEMORY_GITHUB_API_URL": fake.url, "TINYMEMORY_MAX_FILE_MB": str(CAP_MB)})
    entry: SourceEntry = REGISTRY.configure(SourceRequest(kind="github", target="acme/widgets", id="gh"))
    cluster.state().put_source(entry)
    cluster.start_worker()
    assert cluster.sync("gh")
    cluster.wait(lambda: _settled(cluster, "gh", STORED), 90, "the first sync")
    assert _stored(cluster, "gh")["src/app.py"].meta.commit == repo.head()
    assert set(_letters(cluster.state(), "gh")) == {"file:assets/big.txt"}

    head = _change(repo)
    fake.limited = "secondary"  # the sync is refused: nothing is forgotten
    refused_at = fake.count()
    assert cluster.sync("gh")
    cluster.wait(lambda: fake.count() > refused_at and cluster.idle(), 60, "the refused sync")
    assert sorted(_stored(cluster, "gh")) == STORED

    fake.limited = None
    fake.reset_counts()
    assert cluster.sync("gh")
    changed = sorted([*set(STORED) - {"notes/drop.txt", "docs/old-name.md"}, "docs/new.md", "docs/history.md"])
    cluster.wait(lambda: _settled(cluster, "gh", changed), 60, "the change")
    assert fake.requests["compare"] == 1 and fake.requests["blob"] == 3
    assert _stored(cluster, "gh")["src/app.py"].meta.commit == head

    repo.rewrite({"README.md": FILES["README.md"], "fresh.md": "# Fresh\n\nA rewritten history.\n"})
    assert cluster.sync("gh")
    cluster.wait(lambda: _settled(cluster, "gh", ["README.md", "fresh.md"]), 60, "the force-push")


@pytest.mark.e2e
@needs_ocr
async def test_a_screenshot_in_a_repository_is_read_by_ocr(tmp_path: Path, fake: FakeGitHub) -> None:
    repo = GitRepo.create(tmp_path / "shots")
    repo.write("docs/error.png", image_bytes([page_image(["Error: the quokkafruit cache is full."])], "PNG"))
    repo.write("README.md", "# Shots\n")
    repo.commit("a screenshot")
    fake.add_repo("acme/shots", repo)
    with EmbeddedRuntime(_settings(tmp_path, fake)) as runtime:
        entry = control.add_source(runtime.state, SourceRequest(kind="github", target="acme/shots"))
        await runtime.sync(entry.id)
        stored = await _items(runtime.engine, entry.id)
    assert "quokkafruit cache is full" in stored["docs/error.png"].text
