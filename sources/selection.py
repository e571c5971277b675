"""Which paths below a folder root are selected: default ignores, `.gitignore` rules, include globs.

The rules are pure (they look at relative paths with `/` separators and never touch the disk) so the folder walk
and the point checks behind `read` and file events apply exactly the same ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from pathspec import GitIgnoreSpec

# docs/spec/sources-and-documents.md §3 names, plus the virtualenv most tools create (hidden anyway) and the one
# docs/spec/sources-and-documents.md §3 spells out.
IGNORED_DIR_NAMES: Final = frozenset({".git", ".hg", ".svn", "target", "node_modules", "__pycache__", "venv", ".venv"})

# A directory holding this file is a virtualenv whatever its name (`env`, `.tox/py311`, `my-env`).
VENV_MARKER: Final = "pyvenv.cfg"

GITIGNORE: Final = ".gitignore"

# docs/spec/sources-and-documents.md §3 glob translation, longest token first so `**/` is not read as `**` then `/`.
_GLOB_TOKENS: Final = re.compile(r"\*\*/|\*\*|\*|\?|[.+()|^${}\[\]\\]")
_GLOB_REGEX: Final = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}

REASON_HIDDEN: Final = "hidden or ignored path"
REASON_NOT_INCLUDED: Final = "not matched by the include pattern"
REASON_GITIGNORED: Final = "ignored by .gitignore"
REASON_VENV: Final = "inside a virtualenv"


def is_ignored_name(name: str, *, is_dir: bool) -> bool:
    """True for names the walk never enters or offers: hidden entries and tool directories."""
    return name.startswith(".") or (is_dir and name in IGNORED_DIR_NAMES)


def glob_to_regex(pattern: str) -> str:
    """docs/spec/sources-and-documents.md §3: a glob matched against the whole relative path; every other character is
    literal."""

    def token(match: re.Match[str]) -> str:
        text = match.group(0)
        return _GLOB_REGEX.get(text, "\\" + text)

    return _GLOB_TOKENS.sub(token, pattern)


class IncludeGlob:
    """One or several docs/spec/sources-and-documents.md §3 globs; a file is selected when any of them matches its whole
    relative path."""

    def __init__(self, patterns: Iterable[str]) -> None:
        # Blank patterns count as missing (docs/spec/sources-and-documents.md §1.1), so `[""]` narrows nothing.
        self.patterns = tuple(p for p in patterns if p.strip())
        alternatives = "|".join(f"(?:{glob_to_regex(p)})" for p in self.patterns)
        self._regex = re.compile(alternatives, re.DOTALL) if self.patterns else None

    def matches(self, rel: str) -> bool:
        return self._regex is None or self._regex.fullmatch(rel) is not None


def parse_gitignore(text: str) -> GitIgnoreSpec:
    """The rules of one `.gitignore`; an invalid line is dropped, as git drops it, not the whole file."""
    lines = text.splitlines()
    # pathspec's pattern error is a ValueError in every version (its class moved between 0.12 and 1.0).
    try:
        return GitIgnoreSpec.from_lines(lines)
    except ValueError:
        return GitIgnoreSpec.from_lines([line for line in lines if _valid_line(line)])


def _valid_line(line: str) -> bool:
    try:
        GitIgnoreSpec.from_lines([line])
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class GitignoreLayer:
    """The rules of the `.gitignore` in folder `base` (relative to the root, `""` for the root itself)."""

    base: str
    spec: GitIgnoreSpec

    def verdict(self, rel: str, *, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included by a `!` rule; None: no rule of this file speaks of `rel`."""
        local = rel[len(self.base) + 1 :] if self.base else rel
        # A trailing slash lets directory-only rules (`build/`) match directories and nothing else.
        return self.spec.check_file(local + "/" if is_dir else local).include


def is_gitignored(layers: Sequence[GitignoreLayer], rel: str, *, is_dir: bool) -> bool:
    """Git's precedence: the deepest `.gitignore` that has a rule for `rel` decides (within one, the last rule).

    Callers never ask about a path inside an ignored directory: like git, the walk does not enter one, so a `!`
    rule cannot re-include a file below it.
    """
    ignored = False
    for layer in layers:
        verdict = layer.verdict(rel, is_dir=is_dir)
        if verdict is not None:
            ignored = verdict
    return ignored


def parent_dirs(rel: str) -> list[str]:
    """The folders above `rel`, outermost first, as relative paths (`"a/b/c.md"` -> `["a", "a/b"]`)."""
    parts = rel.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]
