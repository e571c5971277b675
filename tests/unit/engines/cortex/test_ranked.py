"""Ranked reads on CortexDB: one granular pack per scope, merged rank by rank; one answer; packs rebuilt when gone."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from engines.contract import (
    Conversation,
    Document,
    FetchMode,
    FetchRequest,
    ItemKind,
    Learning,
    LearningKind,
    MemoryMeta,
    MetaFilter,
    Namespace,
    NotFoundError,
    Reach,
    RecallRequest,
    Role,
    TimeHint,
    Turn,
    UnsupportedError,
)
from tests.fixtures.cortex_double import Served, served

AGENT = Namespace.parse("agent:scout")


def fact(text: str, namespace: Namespace = Namespace.ROOT, **meta: object) -> Learning:
    return Learning(text=text, kind=LearningKind.FACT, confidence=0.9, meta=MemoryMeta(namespace=namespace, **meta))  # type: ignore[arg-type]


async def test_fetch_interleaves_scopes_and_pages_with_its_cursor(either: Served) -> None:
    items = [fact(f"zebra stripes fact {n}") for n in range(4)] + [
        fact(f"zebra agent fact {n}", AGENT) for n in range(2)
    ]
    async with either.engine() as engine:
        await engine.store_many(items)
        mark = either.mark()
        request = FetchRequest(query="zebra", mode=FetchMode.HYBRID, filter=MetaFilter(reach=Reach.of(AGENT)), limit=4)
        first = await engine.fetch(request)
        assert [h.score for h in first.hits] == [1.0, 0.5, 1 / 3, 0.25]
        assert [h.meta.namespace for h in first.hits[:2]] == [Namespace.ROOT, AGENT] or [
            h.meta.namespace for h in first.hits[:2]
        ] == [AGENT, Namespace.ROOT]
        assert first.next_cursor is not None
        second = await engine.fetch(request.model_copy(update={"cursor": first.next_cursor}))
        assert second.next_cursor is None
        ids = [h.id for h in first.hits + second.hits]
        assert sorted(ids) == sorted(i.fingerprint() for i in items)
        with pytest.raises(UnsupportedError):
            await engine.fetch(request.model_copy(update={"mode": FetchMode.KEYWORD}))
    recalls = [r.body for r in either.double.requests[mark:] if r.path.endswith("recall")]
    assert {body["view"] for body in recalls} == {"granular"}
    assert recalls[0]["budgets"] == {"max_tokens": 8_388_608, "per_layer_limits": {"events": 15}}


async def test_a_conversation_hit_carries_the_whole_conversation(direct: Served) -> None:
    talk = Conversation(
        turns=[Turn(role=Role.USER, text="where is the quokka"), Turn(role=Role.ASSISTANT, text="on Rottnest")]
    )
    async with direct.engine() as engine:
        await engine.store(talk)
        page = await engine.fetch(FetchRequest(query="quokka", mode=FetchMode.HYBRID, limit=3))
        assert [(h.id, h.text) for h in page.hits] == [(talk.fingerprint(), talk.render_text())]


async def test_a_split_document_gives_one_hit_at_its_best_piece_with_its_page(direct: Served) -> None:
    filler = "plain filler text line\n" * 12_000
    body = filler + "\f" + "the platypus section\n" + filler
    doc = Document(title="Atlas", body={"text": body}, meta=MemoryMeta(tags=["atlas"]))
    async with direct.engine() as engine:
        await engine.store(doc)
        assert len(direct.double.events()) > 1
        page = await engine.fetch(FetchRequest(query="platypus", mode=FetchMode.HYBRID, limit=5))
        [hit] = page.hits
        assert hit.id == doc.fingerprint() and hit.text.startswith("# Atlas\n\n\fthe platypus section")
        assert hit.meta.tags == ["atlas", "page:2"]


async def test_recall_answers_from_the_fullest_pack_and_cites_every_scope(either: Served) -> None:
    async with either.engine() as engine:
        await engine.store_many(
            [
                fact("the wombat sleeps by day"),
                fact("wombat burrows are deep"),
                fact("the wombat is the scout's", AGENT),
            ]
        )
        mark = either.mark()
        answer = await engine.recall(
            RecallRequest(question="wombat", filter=MetaFilter(reach=Reach.of(AGENT)), limit=10)
        )
        assert answer.answer.startswith("Based on memory: ") and answer.model == "double-answer-1"
        assert len(answer.citations) == 3 and {c.kind for c in answer.citations} == {ItemKind.LEARNING}
        requests = either.double.requests[mark:]
        packs = [r.body for r in requests if r.path.endswith("recall")]
        assert len(packs) == 6  # a reach of(agent) names its nodes without discovery: two nodes, three kinds
        assert packs[0]["scope"].endswith("agent:scout/app:documents")  # the most specific node first
        assert packs[0]["budgets"]["per_layer_limits"] == {
            "events": 20,
            "facts": 3,
            "beliefs": 3,
            "episodes": 2,
            "understanding": 2,
        }
        [asked] = [r.body for r in requests if r.path.endswith("answer")]
        assert asked["scope"].endswith("app:tinymemory/app:learnings")  # the root pack held two of the three
        assert asked["cite_sources"] is True and asked["include_context"] is True
        assert ("answer_instructions" in asked) == (not either.wire.hosted)


async def test_recall_over_nothing_asks_for_nothing(either: Served) -> None:
    async with either.engine() as engine:
        answer = await engine.recall(RecallRequest(question="anything", limit=5))
        assert (answer.answer, answer.citations) == ("", [])
        kinds = await engine.recall(RecallRequest(question="x", filter=MetaFilter(kinds=[ItemKind.LEARNING]), limit=1))
        assert kinds.citations == []
    assert all(not r.path.endswith(("recall", "answer")) for r in either.double.requests)


async def test_a_pack_that_expired_before_the_answer_is_rebuilt() -> None:
    with served("direct", pack_ttl_s=0.05) as direct:
        direct.double.faults.delay(0.2, n=1, match="v1/answer")
        async with direct.engine() as engine:
            await engine.store(fact("the okapi is shy"))
            mark = direct.mark()
            answer = await engine.recall(RecallRequest(question="okapi", limit=3))
            assert answer.answer.startswith("Based on memory: the okapi")
        statuses = [(r.path, r.status) for r in direct.double.requests[mark:] if not r.path.endswith("scopes/list")]
        assert statuses == [("v1/recall", 200), ("v1/answer", 404), ("v1/recall", 200), ("v1/answer", 200)]


async def test_a_pack_gone_three_times_is_not_found(direct: Served) -> None:
    direct.double.faults.fail_next(3, status=404, code="PACK_NOT_FOUND", match="v1/answer")
    async with direct.engine() as engine:
        await engine.store(fact("the dugong grazes"))
        with pytest.raises(NotFoundError, match="the pack was gone 3 times"):
            await engine.recall(RecallRequest(question="dugong", limit=2))


async def test_a_time_hint_ranks_the_hinted_days_first(direct: Served) -> None:
    older = fact("heron sighting one", observed_at=datetime(2024, 3, 1, tzinfo=UTC))
    newer = fact("heron sighting two", observed_at=datetime(2025, 3, 1, tzinfo=UTC))
    async with direct.engine() as engine:
        await engine.store_many([older, newer])
        hint = TimeHint.model_validate({"from": date(2024, 3, 1), "to": date(2024, 3, 1)})
        page = await engine.fetch(FetchRequest(query="heron", mode=FetchMode.HYBRID, limit=2, refers_to=hint))
        assert [h.id for h in page.hits] == [older.fingerprint(), newer.fingerprint()]
