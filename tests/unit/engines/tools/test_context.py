"""The context compiler (tools-and-context.md Part B): the worked example of docs/spec/tools-and-context.md §13 exactly,
then each rule of docs/spec/tools-and-context.md §8–§12."""

from __future__ import annotations

import asyncio
import logging
import math
from datetime import UTC, datetime, timedelta, timezone

import pytest

from engines.contract import (
    Citation,
    Document,
    DocumentBody,
    Hit,
    InvalidRequestError,
    ItemKind,
    Learning,
    LearningKind,
    ListPage,
    ListRequest,
    MemoryMeta,
    MetaFilter,
    Namespace,
    Reach,
    RecallAnswer,
    RecallRequest,
    UnavailableError,
)
from engines.reference import ReferenceEngine
from engines.tools.context import (
    BRIEF_CITATIONS,
    BRIEF_INSTRUCTIONS,
    ELLIPSIS,
    LEARNINGS_MAX_PAGES,
    LEARNINGS_PAGE,
    Brief,
    ContextCompiler,
    ContextDoc,
    ContextSpec,
    compile_context,
    default_briefs,
    estimate,
    shorten,
)

LOGGER = "engines.tools.context"
NOW = datetime(2026, 10, 4, 9, 30, tzinfo=UTC)
ABOUT = "- Ana Lima, backend engineer at Acme\n- Works in short, focused sittings\n"
PREFS = "- Prefers tabs over spaces\n- Wants answers in British English\n- Asks for tests with every change"
Outcome = RecallAnswer | BaseException


def answer(text: str, *ids: str) -> RecallAnswer:
    return RecallAnswer(answer=text, citations=[Citation(id=i, kind=ItemKind.DOCUMENT, snippet=i) for i in ids])


def learning_hit(item_id: str, text: str, observed: datetime | None, confidence: float | None) -> Hit:
    meta = MemoryMeta(observed_at=observed)
    return Hit(id=item_id, kind=ItemKind.LEARNING, text=text, meta=meta, confidence=confidence)


class ScriptedEngine(ReferenceEngine):
    """Answers each recall question from a table and lists fixed pages; records every request."""

    def __init__(self, outcomes: dict[str, Outcome] | None = None, pages: list[ListPage] | None = None) -> None:
        super().__init__()
        self.outcomes = outcomes or {}
        self.pages = pages or [ListPage()]
        self.recalls: list[RecallRequest] = []
        self.lists: list[ListRequest] = []
        self.list_error: BaseException | None = None
        self.delays: dict[str, float] = {}

    async def recall(self, req: RecallRequest) -> RecallAnswer:
        self.recalls.append(req)
        await asyncio.sleep(self.delays.get(req.question, 0))
        outcome = self.outcomes.get(req.question, RecallAnswer(answer=""))
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def list(self, req: ListRequest) -> ListPage:
        self.lists.append(req)
        if self.list_error is not None:
            raise self.list_error
        return self.pages[min(len(self.lists), len(self.pages)) - 1]


async def compile_learnings(*pages: ListPage, limit: int = 20) -> tuple[ScriptedEngine, ContextDoc]:
    engine = ScriptedEngine(pages=list(pages))
    return engine, await compile_context(engine, ContextSpec(briefs=[], learnings_limit=limit), now=NOW)


OCT_3 = datetime(2026, 10, 3, 8, tzinfo=UTC)
SEP_1 = datetime(2026, 9, 1, 12, tzinfo=UTC)


def example_engine() -> ScriptedEngine:
    """docs/spec/tools-and-context.md §13's engine: two kept briefs, one with no citations, one unavailable; four
    learnings listed unordered."""
    about, active, prefs, recent = (brief.question for brief in default_briefs())
    outcomes: dict[str, Outcome] = {
        about: answer(ABOUT, "a1f0", "b2e1"),
        active: answer("Nothing stored."),
        prefs: answer(PREFS, "c3d2", "a1f0"),
        recent: UnavailableError("recall backend timed out"),
    }
    learnings = [
        learning_hit("g7f6", "Likes dark mode", None, 1.0),
        learning_hit("f6a5", "Uses pytest for every Python project", SEP_1, 0.99),
        learning_hit("e5b4", "The  deploy   script lives in\n ops/deploy.sh", OCT_3, 0.6),
        learning_hit("d4c3", "Prefers tabs over spaces", OCT_3, 0.9),
    ]
    return ScriptedEngine(outcomes, [ListPage(items=learnings)])


EXAMPLE_1500 = """---
generated_at: 2026-10-04T09:30:00Z
engine: reference
tokens: 121
refs: [a1f0, b2e1, c3d2, d4c3, e5b4, f6a5]
---

# Context

## About the user

- Ana Lima, backend engineer at Acme
- Works in short, focused sittings

## Preferences and standing instructions

- Prefers tabs over spaces
- Wants answers in British English
- Asks for tests with every change

## Learnings

- Prefers tabs over spaces
- The deploy script lives in ops/deploy.sh
- Uses pytest for every Python project
"""
ALL_REFS = "refs: [a1f0, b2e1, c3d2, d4c3, e5b4, f6a5]"


async def compile_example(budget: int) -> tuple[str, int, list[str]]:
    doc = await compile_context(example_engine(), ContextSpec(budget_tokens=budget, learnings_limit=3), now=NOW)
    assert (doc.engine, doc.generated_at) == ("reference", NOW)
    return doc.markdown, doc.tokens, doc.refs


async def test_worked_example_within_budget_is_exact(caplog: pytest.LogCaptureFixture) -> None:
    markdown, tokens, refs = await compile_example(1500)
    assert markdown == EXAMPLE_1500
    assert tokens == 121 == estimate(markdown)
    # The fixed point holds from the first round: a zero in the frontmatter gives the same estimate.
    assert estimate(markdown.replace("tokens: 121", "tokens: 0")) == 121
    assert refs == ["a1f0", "b2e1", "c3d2", "d4c3", "e5b4", "f6a5"]
    warned = [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert len(warned) == 1
    assert "Recent important events" in warned[0]


async def test_worked_example_at_80_tokens_drops_learnings_then_shortens_the_last_brief() -> None:
    head = EXAMPLE_1500.partition("\n## Learnings")[0]
    expected = head.replace("tokens: 121", "tokens: 80").replace(ALL_REFS, "refs: [a1f0, b2e1, c3d2]")
    expected = expected.replace("- Asks for tests with every change\n", "- Asks for…\n")
    assert await compile_example(80) == (expected, 80, ["a1f0", "b2e1", "c3d2"])


@pytest.mark.parametrize(
    ("budget", "refs"),
    [
        (110, ["a1f0", "b2e1", "c3d2", "d4c3", "e5b4"]),
        (97, ["a1f0", "b2e1", "c3d2", "d4c3"]),
        (85, ["a1f0", "b2e1", "c3d2"]),
    ],
)
async def test_worked_example_trimming_steps_drop_the_last_learning_first(budget: int, refs: list[str]) -> None:
    # docs/spec/tools-and-context.md §13's table: 121 -> 110 -> 97 -> 85 tokens as the learnings go one by one, from the
    # end.
    markdown, tokens, got_refs = await compile_example(budget)
    assert (tokens, got_refs) == (budget, refs)
    assert markdown.endswith(PREFS + "\n") == (budget == 85)


async def test_worked_example_at_70_tokens_drops_the_last_brief() -> None:
    head = EXAMPLE_1500.partition("\n## Preferences")[0]
    expected = head.replace("tokens: 121", "tokens: 49").replace(ALL_REFS, "refs: [a1f0, b2e1]")
    assert await compile_example(70) == (expected, 49, ["a1f0", "b2e1"])


async def compile_one_brief(body: str, budget: int) -> tuple[int, str]:
    engine = ScriptedEngine({"q?": answer(body, "x1")})
    doc = await compile_context(
        engine, ContextSpec(briefs=[Brief(heading="H", question="q?")], budget_tokens=budget), now=NOW
    )
    return doc.tokens, doc.markdown.partition("## H\n\n")[2]


@pytest.mark.parametrize(("length", "over", "kept"), [(200, 10, 157), (203, 40, 40), (202, 40, None)])
async def test_the_last_brief_keeps_its_length_less_the_overflow_and_three(
    length: int, over: int, kept: int | None
) -> None:
    # No whitespace past the start, so the cut falls exactly at `keep`; under MIN_BRIEF_CHARS the brief goes.
    body = "-" + "x" * (length - 1)
    untrimmed, _ = await compile_one_brief(body, 1500)
    tokens, shown = await compile_one_brief(body, untrimmed - over)
    assert tokens <= untrimmed - over
    assert shown == ("" if kept is None else body[:kept] + ELLIPSIS + "\n")


def test_shorten_cuts_at_the_last_whitespace_past_half_and_estimate_counts_characters() -> None:
    assert (len(PREFS), PREFS[72]) == (96, " ")
    assert shorten(PREFS, 73) == "- Prefers tabs over spaces\n- Wants answers in British English\n- Asks for…"
    # The last space sits at 10 of 20, not past half: the cut stays where it fell.
    assert shorten("abcdefghij klmnopqrstuvwxyz", 20) == "abcdefghij klmnopqrs" + ELLIPSIS
    assert shorten("no-whitespace-at-all", 8) == "no-white" + ELLIPSIS
    assert shorten("ends in spaces   tail", 17) == "ends in spaces" + ELLIPSIS
    # The estimate counts characters, not bytes.
    assert [estimate(text) for text in ("", "abcd", "abcde", "éééé")] == [0, 1, 2, 1]


async def test_an_engine_holding_nothing_gives_the_empty_document() -> None:
    doc = await compile_context(ReferenceEngine(), now=NOW)
    assert (doc.markdown, doc.tokens, doc.refs, doc.engine, doc.generated_at) == ("", 0, [], "reference", NOW)


async def test_briefs_are_asked_as_the_spec_says_and_spec_reach_replaces_each_filter_reach() -> None:
    agent = Namespace.parse("team:acme/agent:writer")
    brief = Brief(heading="H", question="Q?", filter=MetaFilter(workspace="w", reach=Reach.of(Namespace.ROOT)))
    engine = ScriptedEngine()
    await compile_context(engine, ContextSpec(briefs=[brief], reach=Reach.exact(agent)), now=NOW)
    await compile_context(engine, ContextSpec(briefs=[brief]), now=NOW)
    confined, own = engine.recalls
    wanted = MetaFilter(workspace="w", reach=Reach.exact(agent))
    assert confined == RecallRequest(
        question="Q?", filter=wanted, limit=BRIEF_CITATIONS, instructions=BRIEF_INSTRUCTIONS
    )
    assert own.filter == brief.filter
    kinds = [ItemKind.LEARNING]
    assert engine.lists == [
        ListRequest(filter=MetaFilter(kinds=kinds, reach=Reach.exact(agent)), limit=LEARNINGS_PAGE),
        ListRequest(filter=MetaFilter(kinds=kinds), limit=LEARNINGS_PAGE),
    ]


@pytest.mark.parametrize("why", ["limit zero", "listing failed"])
async def test_without_learnings_the_briefs_still_make_the_document(why: str, caplog: pytest.LogCaptureFixture) -> None:
    engine = example_engine()
    engine.list_error = UnavailableError("listing timed out")
    limit = 0 if why == "limit zero" else 3
    doc = await compile_context(engine, ContextSpec(learnings_limit=limit), now=NOW)
    assert (doc.refs, "## Learnings" in doc.markdown) == (["a1f0", "b2e1", "c3d2"], False)
    # With a zero limit nothing is listed at all; a failed listing is logged.
    assert len(engine.lists) == (0 if limit == 0 else 1)
    assert any("listing timed out" in r.getMessage() for r in caplog.records) == (limit != 0)


async def test_paging_follows_cursors_and_stops_after_the_last_allowed_page() -> None:
    endless = [ListPage(items=[learning_hit(f"l{n}", "x", None, n / 100)], next_cursor=f"c{n}") for n in range(60)]
    engine, doc = await compile_learnings(*endless, limit=2)
    assert len(engine.lists) == LEARNINGS_MAX_PAGES
    assert [req.cursor for req in engine.lists] == [None] + [f"c{n}" for n in range(LEARNINGS_MAX_PAGES - 1)]
    # Every listed page was ranked: the most confident of the fifty pages leads.
    assert doc.refs == ["l49", "l48"]


async def test_paging_ends_at_the_first_page_without_a_cursor() -> None:
    first = ListPage(items=[learning_hit("old", "old", datetime(2020, 1, 1, tzinfo=UTC), 0.5)], next_cursor="next")
    last = ListPage(items=[learning_hit("new", "new", datetime(2026, 1, 1, tzinfo=UTC), 0.1)])
    engine, doc = await compile_learnings(first, last)
    assert len(engine.lists) == 2
    assert doc.refs == ["new", "old"]


async def test_learnings_rank_by_date_then_confidence_stably_with_undated_last() -> None:
    day = datetime(2026, 5, 1, tzinfo=UTC)
    hits = [
        learning_hit("undated", "u", None, 1.0),
        learning_hit("tie-b", "b", day, None),
        learning_hit("tie-a", "a", day, 0.0),
        learning_hit("sure", "s", day, 0.7),
        learning_hit("newer", "n", day + timedelta(seconds=1), 0.1),
    ]
    _, doc = await compile_learnings(ListPage(items=hits))
    # A missing confidence counts as 0, and equal keys keep the listing's order.
    assert doc.refs == ["newer", "sure", "tie-b", "tie-a", "undated"]


async def test_blank_or_uncited_answers_are_skipped_silently(caplog: pytest.LogCaptureFixture) -> None:
    briefs = [Brief(heading="Blank", question="b?"), Brief(heading="Uncited", question="u?")]
    engine = ScriptedEngine({"b?": answer("  \n", "x1"), "u?": answer("Something.")})
    doc = await compile_context(engine, ContextSpec(briefs=briefs), now=NOW)
    assert (doc.markdown, doc.refs) == ("", [])
    assert [r for r in caplog.records if r.name == LOGGER] == []


async def test_a_brief_cites_each_id_once_in_first_citation_order() -> None:
    engine = ScriptedEngine({"q?": answer("  - fact\n", "x2", "x1", "x2")})
    doc = await compile_context(engine, ContextSpec(briefs=[Brief(heading="H", question="q?")]), now=NOW)
    assert doc.refs == ["x2", "x1"]
    assert doc.markdown.endswith("# Context\n\n## H\n\n- fact\n")


async def test_sections_keep_spec_order_when_answers_arrive_out_of_order() -> None:
    engine = ScriptedEngine({"first?": answer("- one", "i1"), "second?": answer("- two", "i2")})
    engine.delays["first?"] = 0.05
    briefs = [Brief(heading="First", question="first?"), Brief(heading="Second", question="second?")]
    doc = await compile_context(engine, ContextSpec(briefs=briefs), now=NOW)
    assert doc.markdown.index("## First") < doc.markdown.index("## Second")
    assert doc.refs == ["i1", "i2"]


@pytest.mark.parametrize("where", ["recall", "list"])
async def test_an_exception_outside_the_contract_propagates(where: str) -> None:
    engine = example_engine()
    engine.list_error = RuntimeError("bug") if where == "list" else None
    engine.outcomes[default_briefs()[0].question] = RuntimeError("bug") if where == "recall" else answer("- ok", "o")
    with pytest.raises(RuntimeError, match="bug"):
        await compile_context(engine, now=NOW)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (ContextSpec(budget_tokens=0), "budget_tokens must be positive"),
        (ContextSpec(budget_tokens=-5), "budget_tokens must be positive"),
        (ContextSpec(briefs=[Brief(heading=" ", question="q?")]), "every brief needs a heading and a question"),
        (ContextSpec(briefs=[Brief(heading="H", question="\n")]), "every brief needs a heading and a question"),
    ],
)
async def test_check_refuses_with_the_exact_message_before_asking_the_engine(spec: ContextSpec, message: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        spec.check()
    assert caught.value == InvalidRequestError(message)
    engine = example_engine()
    with pytest.raises(InvalidRequestError):
        await ContextCompiler(engine).compile(spec)
    assert (engine.recalls, engine.lists) == ([], [])


def test_defaults_and_wire_form_omit_reach_when_none() -> None:
    spec = ContextSpec()
    assert (spec.budget_tokens, spec.learnings_limit, spec.reach) == (1500, 20, None)
    assert [(b.heading, b.question) for b in spec.briefs] == [
        ("About the user", "Who is the user, what is their role, and how do they prefer to work?"),
        ("Active work", "What is the user working on right now: which projects, workspaces and code bases?"),
        ("Preferences and standing instructions", "Which preferences and standing instructions has the user given?"),
        ("Recent important events", "Which important events have happened recently?"),
    ]
    wire = spec.model_dump(mode="json")
    assert "reach" not in wire
    assert wire["briefs"][0] == {"heading": "About the user", "question": spec.briefs[0].question, "filter": {}}
    confined = ContextSpec(reach=Reach.exact(Namespace.parse("team:acme")))
    assert confined.model_dump(mode="json")["reach"] == {"at": "team:acme", "inherit": False, "descendants": False}
    assert ContextSpec.model_validate(confined.model_dump(mode="json")) == confined


async def test_the_frontmatter_token_count_is_the_documents_own_and_may_need_several_rounds() -> None:
    # Over 1..120 characters of learning some documents cross a 4-character boundary because of the digits
    # of their own count; there a single estimate from `tokens: 0` would be wrong, and the fixed point is not.
    needed_rounds = 0
    for length in range(1, 121):
        _, doc = await compile_learnings(ListPage(items=[learning_hit("x", "y" * length, None, None)]))
        assert doc.tokens == math.ceil(len(doc.markdown) / 4)
        assert f"\ntokens: {doc.tokens}\n" in doc.markdown
        needed_rounds += estimate(doc.markdown.replace(f"tokens: {doc.tokens}\n", "tokens: 0\n")) != doc.tokens
    assert needed_rounds > 0


async def test_the_compiler_reads_its_clock_and_generated_at_drops_microseconds() -> None:
    local = datetime(2026, 10, 4, 11, 30, 0, 987654, tzinfo=timezone(timedelta(hours=2)))
    spec = ContextSpec(learnings_limit=3)
    doc = await ContextCompiler(example_engine(), clock=lambda: local).compile(spec)
    # The same document as at 09:30:00Z exactly: its frontmatter and `generated_at` are UTC, in whole seconds.
    assert doc == await compile_context(example_engine(), spec, now=NOW)
    before = datetime.now(UTC).replace(microsecond=0)
    assert (await ContextCompiler(ReferenceEngine()).compile()).generated_at >= before


async def test_a_real_reference_engine_compiles_a_consistent_document() -> None:
    engine = ReferenceEngine()
    facts = ["The user prefers tabs", "The user works on the billing service", "The user likes short answers"]
    learning_ids = []
    for n, text in enumerate(facts):
        meta = MemoryMeta(observed_at=datetime(2026, 9, n + 1, tzinfo=UTC))
        item = Learning(text=text, kind=LearningKind.PREFERENCE, confidence=0.8, meta=meta)
        learning_ids.append((await engine.store(item)).id)
    for text in ["The user is a backend engineer and prefers to work in short sittings", "Recent events: release"]:
        await engine.store(Document(body=DocumentBody.of_text(text)))
    for budget in (1500, 90):
        doc = await compile_context(engine, ContextSpec(budget_tokens=budget), now=NOW)
        assert doc.tokens == math.ceil(len(doc.markdown) / 4) <= budget
        assert f"\ntokens: {doc.tokens}\nrefs: [{', '.join(doc.refs)}]\n---\n" in doc.markdown
        assert doc.markdown.startswith("---\ngenerated_at: 2026-10-04T09:30:00Z\nengine: reference\n")
    full = await compile_context(engine, now=NOW)
    newest_first = "- The user likes short answers\n- The user works on the billing service\n- The user prefers tabs\n"
    assert full.markdown.endswith("\n## Learnings\n\n" + newest_first)
    assert set(learning_ids) <= set(full.refs)
