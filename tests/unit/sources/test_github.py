"""The GitHub source against a fake GitHub on loopback: URLs, configuration, selection, deltas, the
docs/spec/sources-and-documents.md §7.4 bodies, and GitHub's refusals (rate limits, 404, 401, broken answers) as
contract errors."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engines.contract import EngineError, InvalidRequestError, NotFoundError, UnavailableError
from sources import REGISTRY, Listing, ReaderOptions, SourceEntry, SourceRequest
from sources import github as github_source
from sources.github import GithubReader
from sources.github_api import CommentRow, CommitRow, IssueRow, parse_repo, web_origin
from sources.github_history import HistoryLimits
from sources.github_render import render_commit, render_issue, render_pull
from tests.fixtures.github_fake import FakeGitHub, FakeRepo, GitRepo, comment_json, issue_json, pull_json

MIB = 1024 * 1024


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo.create(tmp_path / "widgets")


@pytest.fixture
def served(fake: FakeGitHub, repo: GitRepo) -> FakeRepo:
    return fake.add_repo("acme/widgets", repo)


def _entry(target: str = "acme/widgets", **fields: object) -> SourceEntry:
    return REGISTRY.configure(SourceRequest(kind="github", target=target, **fields))  # type: ignore[arg-type]


def _reader(fake: FakeGitHub, entry: SourceEntry | None = None, **options: object) -> GithubReader:
    return GithubReader(entry or _entry(), ReaderOptions(github_api_url=fake.url, **options))  # type: ignore[arg-type]


def _ids(listing: Listing) -> list[str]:
    return [unit.id for unit in listing.units]


def _skipped(listing: Listing) -> dict[str, str]:
    return {s.unit_id: s.reason for s in listing.skipped}


# -- URLs and configuration ------------------------------------------------------------------------------------

ACCEPTED = [
    ("https://github.com/acme/widgets", "acme", "widgets"),
    ("https://github.com/acme/widgets/", "acme", "widgets"),
    ("https://github.com/acme/widgets.git", "acme", "widgets"),
    ("https://github.com/acme/widgets.git/", "acme", "widgets"),
    ("http://github.com/acme/widgets", "acme", "widgets"),
    ("https://GitHub.com/Acme-Co/my.repo_2", "Acme-Co", "my.repo_2"),
    ("git@github.com:acme/widgets.git", "acme", "widgets"),
    ("git@github.com:acme/widgets", "acme", "widgets"),
    ("acme/widgets", "acme", "widgets"),
    ("  acme/widgets  ", "acme", "widgets"),
]
REFUSED = [
    "https://github.com/acme/widgets/tree/main",
    "https://github.com/acme",
    "https://gitlab.com/acme/widgets",
    "https://github.com.evil.example/acme/widgets",
    "git@github.com:acme/widgets/",
    "acme/widgets/extra",
    "acme/..",
    "acme/.git",
    "-acme/widgets",
    "acme widgets",
    "",
]


@pytest.mark.parametrize(("target", "owner", "name"), ACCEPTED)
def test_accepted_repository_urls(target: str, owner: str, name: str) -> None:
    repo = parse_repo(target)
    assert (repo.owner, repo.name) == (owner, name)


@pytest.mark.parametrize("target", REFUSED)
def test_refused_repository_urls(target: str) -> None:
    with pytest.raises(InvalidRequestError, match="not a github repository"):
        parse_repo(target)


def test_configure_normalises_the_url_and_keeps_the_github_fields() -> None:
    entry = _entry(
        "git@github.com:acme/widgets.git",
        branch="dev",
        extras=["prs", "issues"],
        token_env="GH_TOKEN",
        include=["*.md"],
    )
    assert (entry.kind, entry.url, entry.label) == ("github_repo", "https://github.com/acme/widgets", "acme/widgets")
    assert (entry.branch, entry.extras, entry.token_env, entry.include) == (
        "dev",
        ["issues", "prs"],
        "GH_TOKEN",
        ["*.md"],
    )
    assert entry.id.startswith("acme-widgets-")
    # The same repository and branch, however written, is the same source; another branch is another one.
    assert _entry("https://github.com/acme/widgets/", branch="dev").id == entry.id
    assert _entry("acme/widgets", branch="main").id != entry.id


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"extras": ["issues", "wiki"]}, "extras: unknown 'wiki'; github sources read issues, prs, commits"),
        ({"branch": "a..b"}, "branch: 'a..b' is not a branch name"),
        ({"branch": "has space"}, "is not a branch name"),
        ({"token_env": "GH-TOKEN"}, "token_env: 'GH-TOKEN' is not an environment variable name"),
        ({"sitemap": True}, "sitemap does not apply to github sources"),
        ({"max_items": 3}, "max_items does not apply to github sources"),
    ],
)
def test_configure_refuses_what_a_github_source_cannot_read(fields: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _entry(**fields)


def test_cli_adds_a_github_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinymemory_ingest.cli import app

    monkeypatch.setenv("TINYMEMORY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("TINYMEMORY_CONFIG", raising=False)
    runner = CliRunner()
    added = runner.invoke(app, ["sources", "add", "github", "acme/widgets", "--branch", "main", "--with", "issues,prs"])
    assert added.exit_code == 0, added.output
    listed = runner.invoke(app, ["sources", "list", "--json"])
    (source,) = json.loads(listed.stdout)
    assert source["id"] == added.stdout.strip()
    assert (source["kind"], source["url"], source["branch"]) == (
        "github_repo",
        "https://github.com/acme/widgets",
        "main",
    )
    assert source["extras"] == ["issues", "prs"]
    refused = runner.invoke(app, ["sources", "add", "github", "acme/widgets/tree/main"])
    assert refused.exit_code == 2 and "not a github repository" in refused.output


@pytest.mark.parametrize(
    ("api", "web"),
    [
        ("https://api.github.com", "https://github.com"),
        ("https://api.github.com/", "https://github.com"),
        ("https://ghe.example.com/api/v3", "https://ghe.example.com"),
        ("https://user:secret@ghe.example.com/api/v3/", "https://ghe.example.com"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
    ],
)
def test_web_urls_are_derived_from_the_api_url(api: str, web: str) -> None:
    assert web_origin(api) == web


# -- the docs/spec/sources-and-documents.md §7.4 bodies --------------------------------------------------------------


def test_commit_body_is_the_spec_template() -> None:
    row = CommitRow.model_validate(
        {
            "sha": "a" * 40,
            "commit": {
                "message": "Fix the parser\n\nIt dropped the last line.",
                "author": {"name": "Ada", "email": "ada@example.com", "date": "2024-03-01T09:30:00+01:00"},
                "committer": {"name": "Bob", "email": "bob@example.com", "date": "2024-03-02T00:00:00Z"},
            },
        }
    )
    assert render_commit(row) == (
        "# Commit: Fix the parser\n\n"
        f"**SHA:** {'a' * 40}\n"
        "**Author:** Ada <ada@example.com>\n"
        "**Date:** 2024-03-01T08:30:00Z\n\n"
        "## Message\n\n"
        "Fix the parser\n\nIt dropped the last line."
    )


def _issue(**fields: object) -> IssueRow:
    row = issue_json(7, "Crash on start", body="Steps to reproduce.", labels=("bug", "p1"), login="ann")
    return IssueRow.model_validate({**row, "html_url": "https://github.com/acme/widgets/issues/7", **fields})


COMMENTS = [
    CommentRow.model_validate(comment_json("bob", "Seen it too.", "2024-02-01T11:00:00Z")),
    CommentRow.model_validate(comment_json("ann", "Fixed by #8?", "2024-02-01T12:00:00Z")),
    CommentRow.model_validate({"user": None, "body": None, "created_at": "2024-02-01T13:00:00Z"}),
]
ISSUE_HEAD = (
    "**Author:** @ann\n"
    "**Participants:** @ann @bob @ghost\n"
    "**Labels:** bug, p1\n"
    "**Created:** 2024-02-01T10:00:00Z\n"
    "**Updated:** 2024-02-02T10:00:00Z\n\n"
    "## Description\n\n"
    "Steps to reproduce."
)
ISSUE_COMMENTS = (
    "\n\n## Comments\n"
    "\n### @bob (2024-02-01T11:00:00Z)\n\nSeen it too.\n"
    "\n### @ann (2024-02-01T12:00:00Z)\n\nFixed by #8?\n"
    "\n### @ghost (2024-02-01T13:00:00Z)\n\n\n"
)


def test_issue_body_with_comments_is_the_spec_template() -> None:
    expected = "# Issue #7: Crash on start\n\n**State:** open\n" + ISSUE_HEAD + ISSUE_COMMENTS
    assert render_issue(_issue(), COMMENTS) == expected


def test_issue_body_without_comments_or_labels() -> None:
    body = render_issue(_issue(labels=[], body=None, state="closed"), [])
    assert body == (
        "# Issue #7: Crash on start\n\n**State:** closed\n**Author:** @ann\n**Participants:** @ann\n"
        "**Labels:** none\n**Created:** 2024-02-01T10:00:00Z\n**Updated:** 2024-02-02T10:00:00Z\n\n"
        "## Description\n\n"
    )


def test_pull_request_bodies_say_whether_it_was_merged() -> None:
    merged = render_pull(_issue(state="closed", merged_at="2024-02-03T08:00:00Z"), COMMENTS)
    assert merged == "# PR #7: Crash on start\n\n**State:** closed (merged at 2024-02-03T08:00:00Z)\n" + (
        ISSUE_HEAD + ISSUE_COMMENTS
    )
    assert "**State:** open (not merged)\n" in render_pull(_issue(), [])


# -- listing: selection ---------------------------------------------------------------------------------------


def test_lists_the_selected_files_of_the_head_by_blob_sha(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    repo.write_many(
        {
            "README.md": "# Widgets\n",
            "src/app.py": "print('hi')\n",
            "docs/guide.pdf": b"%PDF-1.4 not really",
            ".github/workflows/ci.yml": "on: push\n",
            "node_modules/left/index.js": "x",
            "env/pyvenv.cfg": "home = /usr\n",
            "env/lib/site.py": "x",
            "big.bin": b"\0" * (MIB + 1),
        }
    )
    repo.symlink("latest.md", "README.md")
    repo.submodule("vendor/lib")
    head = repo.commit("first")
    listing = _reader(fake, max_file_bytes=MIB).list_units()
    assert _ids(listing) == ["file:README.md", "file:docs/guide.pdf", "file:src/app.py"]
    assert _skipped(listing) == {
        "file:big.bin": "1.0 MiB is over the 1 MiB file limit",
        "file:latest.md": "symbolic link (not followed)",
        "file:vendor/lib": "submodule (not read)",
    }
    blob = repo.path.joinpath("README.md").read_bytes()
    readme = listing.units[0]
    assert (readme.version, readme.size) == (_blob_sha(repo, "README.md"), len(blob))
    assert listing.cursor == head
    assert fake.requests == {"repo": 1, "branch": 1, "tree": 1}  # no blob is read to list


def _blob_sha(repo: GitRepo, path: str) -> str:
    from tests.fixtures.github_fake import git

    return git(repo.path, "rev-parse", f"HEAD:{path}").decode().strip()


def test_include_globs_narrow_the_selection(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    repo.write_many({"a.md": "a", "docs/b.md": "b", "docs/c.txt": "c", "src/d.py": "d"})
    repo.commit("files")
    listing = _reader(fake, _entry(include=["docs/**", "*.py"])).list_units()
    assert _ids(listing) == ["file:docs/b.md", "file:docs/c.txt"]
    assert _ids(_reader(fake, _entry(include=["**/*.py"])).list_units()) == ["file:src/d.py"]


def test_a_configured_branch_is_read_instead_of_the_default(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    repo.write("main.md", "on main")
    repo.commit("main")
    from tests.fixtures.github_fake import git

    git(repo.path, "checkout", "-q", "-b", "feature/x")
    repo.write("feature.md", "on the feature")
    feature_head = repo.commit("feature")
    listing = _reader(fake, _entry(branch="feature/x")).list_units()
    assert _ids(listing) == ["file:feature.md", "file:main.md"] and listing.cursor == feature_head
    assert fake.requests["repo"] == 0  # the default branch was not needed


def test_a_truncated_tree_is_walked_folder_by_folder(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    repo.write_many({"a.md": "a", "x/b.md": "b", "x/y/c.md": "c", "node_modules/z/d.js": "d", "z.md": "z"})
    repo.commit("files")
    fake.truncate_over = 2
    listing = _reader(fake).list_units()
    assert _ids(listing) == ["file:a.md", "file:x/b.md", "file:x/y/c.md", "file:z.md"]
    assert fake.requests["tree"] == 4  # the truncated one, then the root, x and x/y (never node_modules)


# -- listing: what changed --------------------------------------------------------------------------------------


def _first(fake: FakeGitHub, repo: GitRepo) -> str:
    repo.write_many({"keep.md": "kept", "edit.md": "v1", "gone.md": "bye", "old/name.md": "moving", "link": "x"})
    return repo.commit("first")


def test_a_delta_names_what_a_commit_changed(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    base = _first(fake, repo)
    repo.write("edit.md", "v2")
    repo.write("new.md", "fresh")
    repo.remove("gone.md")
    repo.rename("old/name.md", "new/name.md")
    head = repo.commit("second")
    fake.reset_counts()
    delta = _reader(fake).list_changes(base)
    assert delta is not None and delta.cursor == head
    assert [u.id for u in delta.units] == ["file:edit.md", "file:new.md", "file:new/name.md"]
    assert delta.units[0].version == _blob_sha(repo, "edit.md")
    assert delta.removed == ("file:gone.md", "file:old/name.md")
    assert fake.requests == {"repo": 1, "branch": 1, "compare": 1, "tree": 1}


def test_a_delta_forgets_a_file_that_became_a_link_or_too_large(
    fake: FakeGitHub, repo: GitRepo, served: FakeRepo
) -> None:
    base = _first(fake, repo)
    repo.remove("link")
    repo.symlink("link", "keep.md")
    repo.write("edit.md", b"x" * (MIB + 1))
    repo.commit("second")
    delta = _reader(fake, max_file_bytes=MIB).list_changes(base)
    assert delta is not None and delta.units == ()
    assert delta.removed == ("file:edit.md", "file:link")
    assert {s.unit_id for s in delta.skipped} == {"file:edit.md", "file:link"}


def test_an_unchanged_head_costs_no_comparison_and_no_tree(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    head = _first(fake, repo)
    delta = _reader(fake).list_changes(head)
    assert delta is not None and (delta.cursor, delta.units, delta.removed) == (head, (), ())
    assert fake.requests == {"repo": 1, "branch": 1}


def test_a_rewritten_history_asks_for_a_full_listing(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    base = _first(fake, repo)
    repo.rewrite({"only.md": "a new history"})
    from tests.fixtures.github_fake import git

    git(repo.path, "reflog", "expire", "--expire=now", "--all")
    git(repo.path, "gc", "-q", "--prune=now")  # the old commits are gone, as after a force-push
    assert _reader(fake).list_changes(base) is None
    assert fake.requests["compare"] == 1


def test_a_diverged_or_behind_branch_asks_for_a_full_listing(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    first = _first(fake, repo)
    repo.write("edit.md", "v2")
    second = repo.commit("second")
    from tests.fixtures.github_fake import git

    git(repo.path, "reset", "-q", "--hard", first)
    repo.write("edit.md", "v3")
    repo.commit("elsewhere")
    assert _reader(fake).list_changes(second) is None  # diverged: second is not below the new head
    git(repo.path, "reset", "-q", "--hard", first)
    assert _reader(fake).list_changes(second) is None  # behind


def test_too_many_changed_files_ask_for_a_full_listing(
    fake: FakeGitHub, repo: GitRepo, served: FakeRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _first(fake, repo)
    repo.write_many({f"n{i}.md": str(i) for i in range(3)})
    repo.commit("three more")
    monkeypatch.setattr(github_source, "COMPARE_FILE_LIMIT", 3)
    fake.compare_file_limit = 3  # as GitHub lists at most 300
    assert _reader(fake).list_changes(base) is None


# -- reading ----------------------------------------------------------------------------------------------------


def test_reads_a_file_with_its_repository_metadata(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    repo.write("src/my app.py", "print('hi')\n")
    head = repo.commit("first", when=datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC))
    content = _reader(fake).read("file:src/my app.py")
    assert (content.data, content.name, content.version) == (
        b"print('hi')\n",
        "src/my app.py",
        _blob_sha(repo, "src/my app.py"),
    )
    meta = content.origin
    assert (meta.repo, meta.commit, meta.file_path, meta.folder) == ("acme/widgets", head, "src/my app.py", "src")
    assert meta.url == f"{fake.origin}/acme/widgets/blob/{head}/src/my%20app.py"
    assert meta.observed_at == datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    assert meta.source.id == _entry().id and meta.source.kind == "github"


def test_a_reader_fetches_the_head_tree_once_for_all_its_reads(
    fake: FakeGitHub, repo: GitRepo, served: FakeRepo
) -> None:
    repo.write_many({f"n{i:02}.md": f"note {i}" for i in range(30)})
    repo.commit("notes")
    reader = _reader(fake)
    started = time.monotonic()
    texts = [reader.read(f"file:n{i:02}.md").data for i in range(30)]
    assert texts[29] == b"note 29"
    assert fake.requests == {"repo": 1, "branch": 1, "tree": 1, "blob": 30}
    assert time.monotonic() - started < 3  # PyGithub's default pause between requests would take 7.5 s


@pytest.mark.parametrize(
    ("unit_id", "error", "message"),
    [
        ("file:missing.md", NotFoundError, "missing.md is not in acme/widgets at "),
        ("file:latest.md", InvalidRequestError, "cannot read 'file:latest.md': symbolic link"),
        ("file:.env", InvalidRequestError, "cannot read 'file:.env': hidden or ignored path"),
        ("file:../etc/passwd", InvalidRequestError, "not a path within a repository"),
        ("file:", InvalidRequestError, "not a path within a repository"),
        ("README.md", InvalidRequestError, "github units are file:<path>, issue:<n>, pr:<n> or commit:<sha>"),
        ("issue:1", InvalidRequestError, "this source does not read issues"),
    ],
)
def test_read_refuses_what_it_would_not_list(
    fake: FakeGitHub, repo: GitRepo, served: FakeRepo, unit_id: str, error: type[Exception], message: str
) -> None:
    repo.write_many({"README.md": "hi", ".env": "SECRET=1"})
    repo.symlink("latest.md", "README.md")
    repo.commit("first")
    with pytest.raises(error, match=message.replace("(", r"\(")):
        _reader(fake).read(unit_id)


# -- history extras ---------------------------------------------------------------------------------------------


def _with_history(served: FakeRepo, repo: GitRepo) -> None:
    repo.write("README.md", "hi")
    repo.commit("first")
    repo.commit("second\n\nwith a body")
    served.issues = [issue_json(n, f"issue {n}", updated=f"2024-02-{n:02}T10:00:00Z") for n in range(1, 13)]
    served.pulls = [pull_json(20, "a change", merged_at="2024-03-01T00:00:00Z", login="bob")]
    served.comments = {3: [comment_json("cat", "a comment")], 20: [comment_json("ann", "looks good")]}


def test_extras_are_listed_to_their_limits(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    _with_history(served, repo)
    listing = _reader(fake, _entry(extras=["issues", "prs", "commits"])).list_units()
    ids = _ids(listing)
    issues = [i for i in ids if i.startswith("issue:")]
    assert len(issues) == 10 and "issue:12" in issues and "issue:2" not in issues  # the newest ten
    assert "issue:20" not in ids and "pr:20" in ids  # a pull request is not an issue
    commits = [u for u in listing.units if u.id.startswith("commit:")]
    assert [u.id for u in commits] == sorted(f"commit:{sha}" for sha in [repo.head(), _parent(repo)])
    assert {u.version for u in commits} == {repo.head(), _parent(repo)}
    assert dict((u.id, u.version) for u in listing.units)["issue:3"] == "2024-02-03T10:00:00Z"


def _parent(repo: GitRepo) -> str:
    from tests.fixtures.github_fake import git

    return git(repo.path, "rev-parse", "HEAD~1").decode().strip()


def test_long_listings_are_read_a_page_at_a_time(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    repo.commit("first")
    served.issues = [issue_json(n, f"issue {n}") for n in range(1, 251)]
    reader = GithubReader(_entry(extras=["issues"]), ReaderOptions(github_api_url=fake.url), limits=HistoryLimits())
    assert len(_ids(reader.list_units())) == 250
    assert fake.requests["issues"] == 3
    short = GithubReader(
        _entry(extras=["issues"]), ReaderOptions(github_api_url=fake.url), limits=HistoryLimits(issues=5)
    )
    fake.reset_counts()
    assert len(_ids(short.list_units())) == 5 and fake.requests["issues"] == 1


def test_extras_are_read_as_markdown(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    _with_history(served, repo)
    reader = _reader(fake, _entry(extras=["issues", "prs", "commits"]))
    issue = reader.read("issue:3")
    assert (issue.name, issue.mime, issue.version) == ("issue-3.md", "text/markdown", "2024-02-03T10:00:00Z")
    assert issue.data is not None and issue.data.startswith(b"# Issue #3: issue 3\n\n**State:** open\n")
    assert issue.data.endswith(b"## Comments\n\n### @cat (2024-02-01T12:00:00Z)\n\na comment\n")
    assert (issue.origin.repo, issue.origin.url) == ("acme/widgets", f"{fake.origin}/acme/widgets/issues/3")
    pull = reader.read("pr:20")
    assert pull.data is not None and b"**State:** open (merged at 2024-03-01T00:00:00Z)" in pull.data
    assert b"**Participants:** @bob @ann" in pull.data and pull.origin.url == f"{fake.origin}/acme/widgets/pull/20"
    commit = reader.read(f"commit:{repo.head()}")
    assert commit.data is not None and commit.data.startswith(b"# Commit: second\n\n")
    assert commit.data.endswith(b"## Message\n\nsecond\n\nwith a body")
    assert (commit.origin.commit, commit.version, commit.name) == (repo.head(), repo.head(), f"commit-{repo.head()}.md")
    with pytest.raises(NotFoundError):
        reader.read("issue:20")  # a pull request
    with pytest.raises(InvalidRequestError, match="not a commit sha"):
        reader.read("commit:HEAD")


def test_comments_are_best_effort(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    _with_history(served, repo)
    fake.failures["comments"] = 403
    issue = _reader(fake, _entry(extras=["issues"])).read("issue:3")
    assert issue.data is not None and b"## Comments" not in issue.data


def test_issues_turned_off_are_one_skipped_entry(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    _with_history(served, repo)
    fake.failures["issues"] = 410
    listing = _reader(fake, _entry(extras=["issues", "prs"])).list_units()
    assert _ids(listing) == ["file:README.md", "pr:20"]
    assert list(_skipped(listing)) == ["issues"] and "issues of acme/widgets not found" in _skipped(listing)["issues"]


# -- GitHub's refusals ------------------------------------------------------------------------------------------


def test_a_primary_rate_limit_is_unavailable_until_the_reset(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    repo.commit("first")
    fake.limited = "primary"
    fake.reset_in_s = 600
    started = time.monotonic()
    with pytest.raises(UnavailableError, match=r"github rate limit reached .* retry after 20\d\d-.*Z \(in \d+ s\)"):
        _reader(fake).list_units()
    assert time.monotonic() - started < 2  # never sleeps until the reset
    assert fake.count() == 1  # nor retries


def test_a_secondary_rate_limit_says_when_to_retry(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    repo.commit("first")
    fake.limited = "secondary"
    fake.reset_in_s = 90
    started = time.monotonic()
    with pytest.raises(UnavailableError, match="retry in 90 s"):
        _reader(fake).list_units()
    assert time.monotonic() - started < 2 and fake.count() == 1
    fake.limited = None
    assert _reader(fake).list_units().cursor == repo.head()


def test_a_missing_repository_or_branch_is_not_found_by_name(fake: FakeGitHub, repo: GitRepo, served: FakeRepo) -> None:
    repo.commit("first")
    with pytest.raises(NotFoundError, match="github repository acme/nothing not found; check the owner and name"):
        _reader(fake, _entry("acme/nothing")).list_units()
    with pytest.raises(NotFoundError, match="branch 'gone' not found in github repository acme/widgets"):
        _reader(fake, _entry(branch="gone")).list_units()
    with pytest.raises(NotFoundError, match="github repository acme/nothing not found"):
        _reader(fake, _entry("acme/nothing", branch="main")).list_units()


def test_a_refused_token_is_named_by_where_it_came_from_never_by_value(
    fake: FakeGitHub, repo: GitRepo, served: FakeRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.commit("first")
    monkeypatch.setenv("WIDGETS_TOKEN", "ghp_s3cr3t")
    reader = REGISTRY.reader_for(_entry(token_env="WIDGETS_TOKEN"), ReaderOptions(github_api_url=fake.url))
    assert reader.list_units().cursor == repo.head()
    assert fake.authorization[-1] == "token ghp_s3cr3t"
    fake.failures["branch"] = 401
    with pytest.raises(InvalidRequestError) as caught:
        reader.list_units()
    assert "github refused the token (401)" in caught.value.message
    assert "$WIDGETS_TOKEN" in caught.value.message and "ghp_s3cr3t" not in str(caught.value)


def test_the_token_comes_from_the_setting_when_the_entry_names_none(
    fake: FakeGitHub, repo: GitRepo, served: FakeRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.commit("first")
    options = ReaderOptions(github_api_url=fake.url, github_token="from-settings")
    REGISTRY.reader_for(_entry(), options).list_units()
    assert set(fake.authorization) == {"token from-settings"}
    REGISTRY.reader_for(_entry(), ReaderOptions(github_api_url=fake.url)).list_units()
    assert fake.authorization[-1] is None
    monkeypatch.delenv("NO_SUCH_TOKEN", raising=False)
    unset = REGISTRY.reader_for(_entry(token_env="NO_SUCH_TOKEN"), options)  # building it asks nothing
    requests = fake.count()
    with pytest.raises(InvalidRequestError, match=r"the environment variable NO_SUCH_TOKEN .* is not set"):
        unset.list_units()
    assert fake.count() == requests  # nor is anything sent without the token the entry names


@pytest.mark.parametrize(
    ("route", "body", "message"),
    [
        ("tree", {"sha": "nope", "tree": []}, "shape this reader cannot read"),
        ("tree", ["not", "a", "tree"], "shape this reader cannot read"),
        ("blob", {"sha": "a" * 40, "size": 3, "content": "!!!", "encoding": "base64"}, "bytes of a 3-byte blob"),
        ("issues", {"message": "not a list"}, "something other than a list"),
    ],
)
def test_broken_answers_are_engine_errors(
    fake: FakeGitHub, repo: GitRepo, served: FakeRepo, route: str, body: object, message: str
) -> None:
    repo.write("README.md", "hi")
    repo.commit("first")
    fake.bodies[route] = body
    reader = _reader(fake, _entry(extras=["issues"]))
    with pytest.raises(EngineError, match=message):
        reader.read("file:README.md") if route == "blob" else reader.list_units()


def test_server_errors_and_an_unreachable_api_are_unavailable(
    fake: FakeGitHub, repo: GitRepo, served: FakeRepo
) -> None:
    repo.commit("first")
    fake.failures["tree"] = 502
    with pytest.raises(UnavailableError, match="github answered 502 while reading the tree"):
        _reader(fake).list_units()
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    options = ReaderOptions(github_api_url=f"http://127.0.0.1:{port}/api/v3", fetch_timeout_s=2)
    started = time.monotonic()
    with pytest.raises(UnavailableError, match="github api unreachable while reading the repository"):
        GithubReader(_entry(), options).list_units()
    assert time.monotonic() - started < 5  # two quick retries, no more
