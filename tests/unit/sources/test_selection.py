"""The pure selection rules: docs/spec/sources-and-documents.md §3 globs, default ignores, `.gitignore` precedence."""

from __future__ import annotations

import pytest

from sources.selection import (
    GitignoreLayer,
    IncludeGlob,
    glob_to_regex,
    is_gitignored,
    is_ignored_name,
    parent_dirs,
    parse_gitignore,
)

# (pattern, paths it matches, paths it does not match): docs/spec/sources-and-documents.md §3 matches the whole relative
# path.
GLOB_VECTORS: list[tuple[str, list[str], list[str]]] = [
    ("*.md", ["a.md", ".md"], ["docs/a.md", "a.mdx", "a.md/b"]),
    ("**/*.md", ["a.md", "docs/a.md", "x/y/z.md"], ["a.txt", "docs/a.md.bak"]),
    ("docs/**", ["docs/a", "docs/x/y.pdf"], ["doc/a", "a/docs/b"]),
    ("src/**/*.py", ["src/a.py", "src/x/y/a.py"], ["a.py", "src/a.pyc"]),
    ("?.txt", ["a.txt"], ["ab.txt", "/.txt", "d/a.txt"]),
    ("notes (1).md", ["notes (1).md"], ["notes 1.md", "notes (1)xmd"]),
    ("{a,b}.md", ["{a,b}.md"], ["a.md", "b.md"]),
    ("[ab].md", ["[ab].md"], ["a.md"]),
    ("a+b^$|.md", ["a+b^$|.md"], ["aab.md"]),
    ("back\\slash", ["back\\slash"], ["backslash"]),
]


@pytest.mark.parametrize(("pattern", "matching", "other"), GLOB_VECTORS)
def test_include_glob_vectors(pattern: str, matching: list[str], other: list[str]) -> None:
    include = IncludeGlob([pattern])
    for path in matching:
        assert include.matches(path), (pattern, path)
    for path in other:
        assert not include.matches(path), (pattern, path)


def test_glob_translation_follows_the_spec_table() -> None:
    assert glob_to_regex("**/a*?.md") == r"(?:.*/)?a[^/]*[^/]\.md"
    assert glob_to_regex("x/**") == "x/.*"


def test_several_patterns_select_their_union() -> None:
    include = IncludeGlob(["**/*.md", "src/**"])
    assert include.matches("a/b.md")
    assert include.matches("src/main.rs")
    assert not include.matches("lib/main.rs")


@pytest.mark.parametrize("patterns", [[], [""], ["  "]])
def test_blank_patterns_narrow_nothing(patterns: list[str]) -> None:
    assert IncludeGlob(patterns).matches("any/file.bin")


def test_newline_in_a_path_does_not_escape_a_glob() -> None:
    assert IncludeGlob(["*.md"]).matches("odd\nname.md")
    assert not IncludeGlob(["*.md"]).matches("odd/name.md")


@pytest.mark.parametrize(
    ("name", "is_dir", "ignored"),
    [
        (".hidden", False, True),
        (".git", True, True),
        ("node_modules", True, True),
        ("__pycache__", True, True),
        ("target", True, True),
        ("venv", True, True),
        (".venv", True, True),
        ("target", False, False),  # only folders of these names are tool output
        ("node_modules", False, False),
        ("env", True, False),  # a virtualenv is recognised by its pyvenv.cfg, not by this name
        ("docs", True, False),
    ],
)
def test_default_ignored_names(name: str, is_dir: bool, ignored: bool) -> None:
    assert is_ignored_name(name, is_dir=is_dir) is ignored


def test_nested_rules_take_precedence_and_negation_re_includes() -> None:
    root = GitignoreLayer("", parse_gitignore("*.log\nbuild/\n/top.txt\n"))
    sub = GitignoreLayer("sub", parse_gitignore("!keep.log\nlocal.txt\n"))
    layers = [root, sub]
    assert is_gitignored(layers, "a.log", is_dir=False)
    assert not is_gitignored(layers, "sub/keep.log", is_dir=False)
    assert is_gitignored(layers, "sub/other.log", is_dir=False)
    assert is_gitignored(layers, "sub/build", is_dir=True)
    assert not is_gitignored(layers, "sub/build", is_dir=False)  # `build/` names folders only
    assert is_gitignored(layers, "top.txt", is_dir=False)
    assert not is_gitignored(layers, "sub/top.txt", is_dir=False)  # anchored to the root's folder
    assert is_gitignored(layers, "sub/local.txt", is_dir=False)
    assert not is_gitignored([root], "local.txt", is_dir=False)


def test_invalid_gitignore_line_is_dropped_not_the_file() -> None:
    spec = parse_gitignore("!\n*.tmp\n\\\n# comment\n")
    assert spec.match_file("x.tmp")
    assert not spec.match_file("x.md")


def test_parent_dirs() -> None:
    assert parent_dirs("a/b/c.md") == ["a", "a/b"]
    assert parent_dirs("c.md") == []
