"""Rendering `context.md` and trimming it to the token budget (docs/spec/tools-and-context.md §11, §12).

Private to `engines.tools`: `engines.tools.context` gathers the sections and learnings, this module
turns them into markdown whose frontmatter states its own token count.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from engines.contract import Hit, ItemId, format_instant

CHARS_PER_TOKEN = 4
MIN_BRIEF_CHARS = 40
FIXED_POINT_ROUNDS = 8
ELLIPSIS = "…"


@dataclass(frozen=True)
class Section:
    """A kept brief: its heading, its answer stripped, and the ids it cites (first citation first)."""

    heading: str
    body: str
    refs: tuple[ItemId, ...]


@dataclass(frozen=True)
class Header:
    """What the frontmatter records besides the token count and the refs."""

    generated_at: datetime
    engine: str


@dataclass(frozen=True)
class Rendered:
    """One rendering: the markdown, its token estimate, and the ids it draws on in document order."""

    markdown: str
    tokens: int
    refs: list[ItemId]


def estimate(text: str) -> int:
    """The token estimate of `text`: characters (not bytes) over `CHARS_PER_TOKEN`, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def shorten(text: str, keep: int) -> str:
    """`text` cut to `keep` characters, at the last whitespace when that keeps over half, then `…`."""
    cut = text[:keep]
    spaces = [i for i, ch in enumerate(cut) if ch.isspace()]
    if spaces and spaces[-1] * 2 > len(cut):
        cut = cut[: spaces[-1]]
    return cut.rstrip() + ELLIPSIS


def trim(sections: list[Section], learnings: list[Hit], header: Header, budget: int) -> Rendered:
    """Render, then drop learnings from the end, then shorten or drop the last section, until it fits.

    Every step removes at least seven characters, and the empty document always fits, so this ends.
    """
    sections, learnings = list(sections), list(learnings)
    while True:
        rendered = _render(sections, learnings, header)
        if rendered.tokens <= budget:
            return rendered
        if learnings:
            learnings.pop()
        elif sections:
            shortened = _cut_last(sections.pop(), (rendered.tokens - budget) * CHARS_PER_TOKEN)
            if shortened is not None:
                sections.append(shortened)
        else:
            return rendered


def _cut_last(last: Section, overflow: int) -> Section | None:
    """The last section shortened by `overflow` characters (and three for the ellipsis), or None to drop it."""
    keep = len(last.body) - (overflow + 3)
    if keep < MIN_BRIEF_CHARS:
        return None
    return replace(last, body=shorten(last.body, keep))


def _render(sections: Sequence[Section], learnings: Sequence[Hit], header: Header) -> Rendered:
    if not sections and not learnings:
        return Rendered(markdown="", tokens=0, refs=[])
    body = _body(sections, learnings)
    refs = unique([*(ref for section in sections for ref in section.refs), *(hit.id for hit in learnings)])
    # The frontmatter states the document's own token count, which its digits change: iterate to a fixed point.
    tokens = estimate(_frontmatter(header, 0, refs) + "\n" + body)
    for _ in range(FIXED_POINT_ROUNDS):
        again = estimate(_frontmatter(header, tokens, refs) + "\n" + body)
        if again == tokens:
            break
        tokens = again
    markdown = _frontmatter(header, tokens, refs) + "\n" + body
    return Rendered(markdown=markdown, tokens=estimate(markdown), refs=refs)


def _body(sections: Iterable[Section], learnings: Sequence[Hit]) -> str:
    body = "# Context\n"
    for section in sections:
        body += f"\n## {section.heading}\n\n{section.body}\n"
    if learnings:
        body += "\n## Learnings\n\n"
        body += "".join("- " + " ".join(hit.text.split()) + "\n" for hit in learnings)
    return body


def _frontmatter(header: Header, tokens: int, refs: Sequence[ItemId]) -> str:
    return (
        "---\n"
        f"generated_at: {format_instant(header.generated_at)}\n"
        f"engine: {header.engine}\n"
        f"tokens: {tokens}\n"
        f"refs: [{', '.join(refs)}]\n"
        "---\n"
    )


def unique(ids: Iterable[ItemId]) -> list[ItemId]:
    """`ids` without repeats, each at its first occurrence."""
    return list(dict.fromkeys(ids))
