"""How the reference engine words a recall answer from its ranked hits (docs/spec/contract.md §17, "recall")."""

from __future__ import annotations

from collections.abc import Sequence

from engines.contract import Citation, Hit, RecallAnswer

MODEL = "reference"
SNIPPET_CHARS = 200
ELLIPSIS = "…"


def snippet(text: str) -> str:
    """The text with every whitespace run collapsed to one space, cut to 200 characters plus `…`."""
    flat = " ".join(text.split())
    if len(flat) <= SNIPPET_CHARS:
        return flat
    return flat[:SNIPPET_CHARS] + ELLIPSIS


def compose(hits: Sequence[Hit]) -> RecallAnswer:
    """One `- snippet` line per cited hit, in rank order; no hits gives an empty answer."""
    citations = [
        Citation(id=hit.id, kind=hit.kind, snippet=snippet(hit.text), meta=hit.meta, score=hit.score) for hit in hits
    ]
    answer = "\n".join(f"- {citation.snippet}" for citation in citations)
    return RecallAnswer(answer=answer, citations=citations, model=MODEL)
