"""The documentation stays true to the tree: every relative link resolves, every spec citation names a heading
that exists, the README stays an introduction, and no tracked file points outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 200
SPEC = ROOT / "docs" / "spec"
# Sections of standards the code cites beside our own pages.
EXTERNAL = re.compile(r"(MS-OXMSG|OCF \d+(\.\d+)*|RFC \d+) $")
NUMBER = r"\d+(?:\.\d+)*"
CITATION = re.compile(
    rf"docs/spec/(?P<page>[\w-]+)\.md(?P<refs>\s+§{NUMBER}"
    rf"(?:(?:\s*[–-]\s*§?|\s*,\s*(?:#\s*)?§|\s+and\s+§|\s+or\s+§){NUMBER})*)?"
)
HEADING = re.compile(rf"^#{{1,6}}\s+(?P<number>{NUMBER})\.?\s", re.M)
LINK = re.compile(r"!?\[[^\]]*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*(?P<target>\S+)", re.M)


def _tracked(*patterns: str) -> list[Path]:
    """Files git tracks (what CI's clone holds), matching `patterns`."""
    listed = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / line for line in listed.stdout.splitlines() if (ROOT / line).is_file()]


def _markdown() -> list[Path]:
    return sorted({*ROOT.joinpath("docs").rglob("*.md"), ROOT / "README.md"})


def _prose(text: str) -> str:
    """Markdown without fenced blocks and inline code, where a bracket is not a link."""
    text = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercased, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*$", _prose(path.read_text(encoding="utf-8")), flags=re.M)
    return {_slug(h) for h in headings}


def _section_numbers(page: str) -> set[str]:
    path = SPEC / f"{page}.md"
    return set(HEADING.findall(path.read_text(encoding="utf-8"))) if path.is_file() else set()


def test_docs_exist_with_their_pages() -> None:
    pages = {p.relative_to(ROOT).as_posix() for p in _markdown()}
    expected = {
        "README.md",
        "docs/architecture.md",
        "docs/operations.md",
        "docs/extending.md",
        "docs/api.md",
        "docs/performance.md",
        *(
            f"docs/spec/{page}.md"
            for page in (
                "contract",
                "cortexdb",
                "safety",
                "sources-and-documents",
                "tools-and-context",
                "legacy-import",
            )
        ),
    }
    assert expected <= pages


@pytest.mark.parametrize("path", _markdown(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(path: Path) -> None:
    text = _prose(path.read_text(encoding="utf-8"))
    broken = []
    for target in [m["target"] for m in LINK.finditer(text)] + [m["target"] for m in REFERENCE_LINK.finditer(text)]:
        if re.match(r"^[a-z][a-z+.-]*:", target) or target.startswith("//"):
            continue  # a URL, not a file of ours
        file, _, anchor = target.partition("#")
        resolved = path if not file else (path.parent / file).resolve()
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif ROOT not in resolved.parents and resolved != ROOT:
            broken.append(f"{target}: outside the repository")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading #{anchor}")
    assert broken == []


def test_the_link_check_finds_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\nSee [there](missing.md), [here](#title) and `[code](not-a-link.md)`.\n")
    text = _prose(page.read_text())
    assert [m["target"] for m in LINK.finditer(text)] == ["missing.md", "#title"]
    assert _anchors(page) == {"title"}


def _python_files() -> list[Path]:
    # This file writes citations as examples of what it checks.
    return [
        p for p in _tracked("*.py") if not p.relative_to(ROOT).as_posix().startswith("docs/") and p != Path(__file__)
    ]


def _citations(text: str) -> list[tuple[str, list[str]]]:
    return [(m["page"], re.findall(NUMBER, m["refs"] or "")) for m in CITATION.finditer(text)]


@pytest.mark.parametrize("path", _python_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_spec_citation_names_a_heading_that_exists(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    wrong = []
    for page, numbers in _citations(text):
        known = _section_numbers(page)
        if not (SPEC / f"{page}.md").is_file():
            wrong.append(f"docs/spec/{page}.md: no such page")
        wrong += [f"docs/spec/{page}.md §{n}: no such heading" for n in numbers if n not in known]
    # Every other section sign cites a standard, never a page of ours by a short name.
    rest = CITATION.sub("", text)
    wrong += [
        f"bare {rest[m.start() : m.end() + 8]!r}"
        for m in re.finditer("§", rest)
        if not EXTERNAL.search(rest[: m.start()])
    ]
    assert wrong == []


def test_the_citation_check_reads_lists_and_ranges() -> None:
    text = "(docs/spec/cortexdb.md §11.3,\n§11.4) and docs/spec/contract.md §9.3–9.5 and docs/spec/safety.md"
    assert _citations(text) == [("cortexdb", ["11.3", "11.4"]), ("contract", ["9.3", "9.5"]), ("safety", [])]


def test_the_readme_is_an_introduction() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES
    assert any("make run" in line for line in lines) and any("make test" in line for line in lines)


def _outside(path: Path) -> list[str]:
    """Where `path` points outside the repository: `../shared`, or a path built to reach it."""
    text = path.read_text(encoding="utf-8", errors="replace")
    found = re.findall(r"\.\./shared(?:/[\w.-]+)*|/work/shared\S*|/\s*[\"']shared[\"']|[\"']shared/[\w./-]*[\"']", text)
    if path.relative_to(ROOT).parts[0] == "bench":
        # A benchmark's default corpus lies beside the checkout (the corpora are not ours to commit).
        found = [f for f in found if "corpus" not in f and f.strip("/ \"'") != "shared"]
    return found


def test_no_tracked_file_points_outside_the_repository() -> None:
    pointing = {
        path.relative_to(ROOT).as_posix(): found
        for path in _tracked()
        if path.suffix not in {".png", ".jpg", ".pdf", ".zip", ".gz", ".onnx"}
        and path != Path(__file__).resolve()
        and (found := _outside(path))
    }
    assert pointing == {}
