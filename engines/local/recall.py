"""Recall for the local engine: an extractive answer drawn from the best passages.

The answer quotes, for each cited item in rank order (the hybrid ranking, best first), the
sentences of its best passage that share the most words with the question (stop words aside,
plurals folded), each line ending with the citation's number. Nothing is invented, so every
statement in the answer can be checked against its citation.
"""

from __future__ import annotations

import re

from engines.contract import Citation, Hit, RecallAnswer
from engines.local.words import content_terms

EXTRACTIVE_MODEL = "local-extractive"
SNIPPET_CHARS = 300
_SENTENCES_PER_HIT = 2

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def best_sentences(question: str, passage: str, count: int = _SENTENCES_PER_HIT) -> str:
    """The `count` sentences of `passage` sharing most words with `question`, in passage order."""
    wanted = content_terms(question)
    sentences = [s.strip() for s in _SENTENCE_END.split(passage) if s.strip() and not s.strip().startswith("#")]
    if not sentences:
        return _clip(passage, SNIPPET_CHARS)
    scored = sorted(range(len(sentences)), key=lambda i: (-len(wanted & content_terms(sentences[i])), i))
    chosen = sorted(scored[:count])
    return _clip(" ".join(sentences[i] for i in chosen), SNIPPET_CHARS)


def citation_of(hit: Hit, snippet: str) -> Citation:
    return Citation(id=hit.id, kind=hit.kind, snippet=snippet, meta=hit.meta, score=hit.score)


def extractive_answer(question: str, hits: list[Hit]) -> RecallAnswer:
    """Quote the best sentences of each hit, numbered as its citation."""
    if not hits:
        return RecallAnswer(answer="", citations=[], model=EXTRACTIVE_MODEL)
    snippets = [best_sentences(question, hit.text) for hit in hits]
    lines = [f"- {snippet} [{n}]" for n, snippet in enumerate(snippets, start=1)]
    citations = [citation_of(hit, snippet) for hit, snippet in zip(hits, snippets, strict=True)]
    return RecallAnswer(answer="\n".join(lines), citations=citations, model=EXTRACTIVE_MODEL)
