"""The context compiler: `context.md`, a token-budgeted markdown brief built from `recall` and `list`.

Spec: tools-and-context.md, Part B (docs/spec/tools-and-context.md §8–§13). The compiler works on every engine: it asks
one recall per brief, lists the learnings, renders the document with a frontmatter whose token count is its own, and
trims it to the budget (learnings first, then the last brief). Contract errors from the engine cost a brief or the
learnings, never the document; any other exception is a bug and propagates.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from pydantic import Field

from engines.contract import (
    Error,
    Hit,
    Instant,
    InvalidRequestError,
    ItemId,
    ItemKind,
    ListRequest,
    MemoryEngine,
    MetaFilter,
    Reach,
    RecallRequest,
    Text,
    WireModel,
    as_utc,
)
from engines.tools.context_render import (
    CHARS_PER_TOKEN,
    ELLIPSIS,
    FIXED_POINT_ROUNDS,
    MIN_BRIEF_CHARS,
    Header,
    Section,
    estimate,
    shorten,
    trim,
    unique,
)

BRIEF_CITATIONS = 8
LEARNINGS_PAGE = 100
LEARNINGS_MAX_PAGES = 50
BRIEF_INSTRUCTIONS = (
    "Reply briefly as markdown bullet points suited to a context brief, and state only what the stored items support."
)

_DEFAULT_BUDGET_TOKENS = 1500
_DEFAULT_LEARNINGS_LIMIT = 20

logger = logging.getLogger(__name__)

_Clock = Callable[[], datetime]
"""Where a `ContextCompiler` reads the current instant."""


class Brief(WireModel):
    """One section of the document: the recall `question` asked under `filter`, shown under `heading`."""

    heading: Text
    question: Text
    filter: MetaFilter = Field(default_factory=MetaFilter)


def default_briefs() -> list[Brief]:
    """The four briefs a `ContextSpec` asks by default, in the order the document shows them
    (docs/spec/tools-and-context.md §9)."""
    return [
        Brief(
            heading="About the user",
            question="Who is the user, what is their role, and how do they prefer to work?",
        ),
        Brief(
            heading="Active work",
            question="What is the user working on right now: which projects, workspaces and code bases?",
        ),
        Brief(
            heading="Preferences and standing instructions",
            question="Which preferences and standing instructions has the user given?",
        ),
        Brief(heading="Recent important events", question="Which important events have happened recently?"),
    ]


class ContextSpec(WireModel):
    """What to compile: the budget, the briefs in order, how many learnings, and whose memory (`reach`).

    A set `reach` replaces the reach of every brief's filter and confines the learnings listing, so a
    host compiles one node's document by setting it once. `reach` is omitted on the wire when None.
    """

    budget_tokens: int = _DEFAULT_BUDGET_TOKENS
    briefs: list[Brief] = Field(default_factory=default_briefs)
    # Unsigned in the seed (`usize`); a negative count has no meaning, so it is refused on construction.
    learnings_limit: int = Field(default=_DEFAULT_LEARNINGS_LIMIT, ge=0)
    reach: Reach | None = None

    def check(self) -> None:
        """Refuse a spec the compiler cannot honour, with `InvalidRequestError`."""
        if self.budget_tokens < 1:
            raise InvalidRequestError("budget_tokens must be positive")
        if any(not brief.heading.strip() or not brief.question.strip() for brief in self.briefs):
            raise InvalidRequestError("every brief needs a heading and a question")


class ContextDoc(WireModel):
    """A compiled `context.md`: `tokens` is `ceil(len(markdown) / 4)` and `refs` every item it draws on."""

    markdown: Text
    tokens: int
    generated_at: Instant
    engine: Text
    refs: list[ItemId] = Field(default_factory=list)


async def compile_context(
    engine: MemoryEngine, spec: ContextSpec | None = None, *, now: datetime | None = None
) -> ContextDoc:
    """Compile `context.md` from `engine` (docs/spec/tools-and-context.md §10).

    Raises only `spec.check()`'s `InvalidRequestError` for a working engine: a brief whose recall fails
    with a contract error is skipped with a warning, and a failed learnings listing means no learnings.
    An engine holding nothing gives the empty document.
    """
    spec = spec if spec is not None else ContextSpec()
    spec.check()
    moment = as_utc(now if now is not None else datetime.now(UTC)).replace(microsecond=0)
    sections = await _ask_briefs(engine, spec)
    learnings = await _learnings(engine, spec)
    header = Header(generated_at=moment, engine=engine.descriptor().id)
    rendered = trim(sections, learnings, header, spec.budget_tokens)
    return ContextDoc(
        markdown=rendered.markdown,
        tokens=rendered.tokens,
        generated_at=moment,
        engine=header.engine,
        refs=rendered.refs,
    )


class ContextCompiler:
    """`compile_context` bound to one engine and a clock (the current UTC instant when none is given)."""

    def __init__(self, engine: MemoryEngine, clock: _Clock | None = None) -> None:
        self._engine = engine
        self._clock = clock

    async def compile(self, spec: ContextSpec | None = None) -> ContextDoc:
        now = self._clock() if self._clock is not None else None
        return await compile_context(self._engine, spec, now=now)


# --- briefs and learnings (docs/spec/tools-and-context.md §10) ------------------------------------------------------


async def _ask_briefs(engine: MemoryEngine, spec: ContextSpec) -> list[Section]:
    """The kept briefs in spec order. They run concurrently; every one finishes before a bug is raised,
    so no recall is left running unattended, and the first bug in spec order is the one raised."""
    asked = [_ask(engine, brief, spec.reach) for brief in spec.briefs]
    outcomes = await asyncio.gather(*asked, return_exceptions=True)
    sections: list[Section] = []
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
        if outcome is not None:
            sections.append(outcome)
    return sections


async def _ask(engine: MemoryEngine, brief: Brief, reach: Reach | None) -> Section | None:
    """One brief's section, or None when it is skipped (a contract error, a blank answer, no citations)."""
    filter = brief.filter if reach is None else brief.filter.model_copy(update={"reach": reach})
    request = RecallRequest(
        question=brief.question, filter=filter, limit=BRIEF_CITATIONS, instructions=BRIEF_INSTRUCTIONS
    )
    try:
        answer = await engine.recall(request)
    except Error as err:
        logger.warning("context brief %r skipped: %s", brief.heading, err)
        return None
    body = answer.answer.strip()
    if not body or not answer.citations:
        return None
    return Section(heading=brief.heading, body=body, refs=tuple(unique(c.id for c in answer.citations)))


async def _learnings(engine: MemoryEngine, spec: ContextSpec) -> list[Hit]:
    """The first `learnings_limit` learnings, ranked; none when the listing fails with a contract error."""
    if spec.learnings_limit == 0:
        return []
    try:
        hits = await _list_learnings(engine, spec.reach)
    except Error as err:
        logger.warning("context learnings left out: %s", err)
        return []
    return _rank_learnings(hits)[: spec.learnings_limit]


async def _list_learnings(engine: MemoryEngine, reach: Reach | None) -> list[Hit]:
    # At most LEARNINGS_MAX_PAGES pages, so an engine that never stops paging cannot stall the compile.
    filter = MetaFilter(kinds=[ItemKind.LEARNING], reach=reach)
    hits: list[Hit] = []
    cursor: str | None = None
    for _ in range(LEARNINGS_MAX_PAGES):
        page = await engine.list(ListRequest(filter=filter, limit=LEARNINGS_PAGE, cursor=cursor))
        hits.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    return hits


def _rank_learnings(hits: Sequence[Hit]) -> list[Hit]:
    """Newest first with undated hits after dated ones, then by confidence (missing is 0); stable."""
    # Sorting by the secondary key first and then by the primary one relies on sort stability.
    by_confidence = sorted(hits, key=_confidence, reverse=True)
    dated = [hit for hit in by_confidence if hit.meta.observed_at is not None]
    undated = [hit for hit in by_confidence if hit.meta.observed_at is None]
    return sorted(dated, key=_observed, reverse=True) + undated


def _confidence(hit: Hit) -> float:
    return 0.0 if hit.confidence is None else hit.confidence


def _observed(hit: Hit) -> datetime:
    # Only called on dated hits; the fallback keeps the key total for the type checker.
    return hit.meta.observed_at or datetime.min.replace(tzinfo=UTC)


__all__ = [
    "BRIEF_CITATIONS",
    "BRIEF_INSTRUCTIONS",
    "CHARS_PER_TOKEN",
    "ELLIPSIS",
    "FIXED_POINT_ROUNDS",
    "LEARNINGS_MAX_PAGES",
    "LEARNINGS_PAGE",
    "MIN_BRIEF_CHARS",
    "Brief",
    "ContextCompiler",
    "ContextDoc",
    "ContextSpec",
    "compile_context",
    "default_briefs",
    "estimate",
    "shorten",
]
