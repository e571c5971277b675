"""The markdown bodies of a repository's commits, issues and pull requests (docs/spec/sources-and-documents.md §7.4), as
pure functions.

Each body is exactly the spec's template: the fields in its order, timestamps as GitHub writes them
(`2024-02-01T10:00:00Z`), an absent text as empty, and a comments section only when there are comments. A
user GitHub no longer knows (a deleted account) is `@ghost`, as GitHub itself shows one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

from sources.github_api import CommentRow, CommitRow, IssueRow, User

GHOST: Final = "ghost"


def stamp(moment: datetime) -> str:
    """An instant as GitHub writes it: UTC, to the second, with `Z`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def first_line(message: str) -> str:
    lines = message.strip().splitlines()
    return lines[0].strip() if lines else ""


def render_commit(row: CommitRow) -> str:
    """A commit: its first line as the title, its sha, author and author date, then the whole message."""
    author = row.commit.author
    return (
        f"# Commit: {first_line(row.commit.message)}\n\n"
        f"**SHA:** {row.sha}\n"
        f"**Author:** {author.name} <{author.email}>\n"
        f"**Date:** {stamp(author.date)}\n\n"
        f"## Message\n\n"
        f"{row.commit.message}"
    )


def render_issue(row: IssueRow, comments: Sequence[CommentRow]) -> str:
    """An issue, then its comments in the order given."""
    return _conversation(f"# Issue #{row.number}: {row.title}", row.state, row, comments)


def render_pull(row: IssueRow, comments: Sequence[CommentRow]) -> str:
    """A pull request: as an issue, its state saying whether (and when) it was merged."""
    merged = f"merged at {stamp(row.merged_at)}" if row.merged_at is not None else "not merged"
    return _conversation(f"# PR #{row.number}: {row.title}", f"{row.state} ({merged})", row, comments)


def participants(row: IssueRow, comments: Sequence[CommentRow]) -> list[str]:
    """The author, then each commenter, each once, in order of first appearance."""
    logins = [_login(row.user), *(_login(comment.user) for comment in comments)]
    return list(dict.fromkeys(logins))


def _conversation(heading: str, state: str, row: IssueRow, comments: Sequence[CommentRow]) -> str:
    labels = ", ".join(label.name for label in row.labels) or "none"
    people = " ".join(f"@{login}" for login in participants(row, comments))
    text = (
        f"{heading}\n\n"
        f"**State:** {state}\n"
        f"**Author:** @{_login(row.user)}\n"
        f"**Participants:** {people}\n"
        f"**Labels:** {labels}\n"
        f"**Created:** {stamp(row.created_at)}\n"
        f"**Updated:** {stamp(row.updated_at)}\n\n"
        f"## Description\n\n"
        f"{row.body or ''}"
    )
    if comments:
        text += "\n\n## Comments\n"
        for comment in comments:
            text += f"\n### @{_login(comment.user)} ({stamp(comment.created_at)})\n\n{comment.body or ''}\n"
    return text


def _login(user: User | None) -> str:
    return user.login if user is not None and user.login else GHOST
