"""Storing on CortexDB: what a batch costs on each wire, replays, part-way writes, refusals, unknown outcomes."""

from __future__ import annotations

import pytest

from engines.contract import (
    ConflictError,
    Conversation,
    Document,
    GetRequest,
    InvalidRequestError,
    Learning,
    LearningKind,
    ListRequest,
    MemoryMeta,
    MetaFilter,
    Namespace,
    Role,
    Turn,
    UnavailableError,
)
from engines.cortex import Timing
from tests.fixtures.cortex_double import Served, served
from tinymemory_ingest.cortex_double import ManualClock


def learnings(count: int, word: str = "fact", namespace: Namespace = Namespace.ROOT) -> list[Learning]:
    return [
        Learning(
            text=f"{word} number {n} zq{word}{n}",
            kind=LearningKind.FACT,
            confidence=0.5,
            meta=MemoryMeta(namespace=namespace),
        )
        for n in range(count)
    ]


def live_ids(served: Served) -> list[str]:
    return [record.labels[0] for record in served.double.events()]


async def test_a_direct_batch_of_100_costs_five_requests(direct: Served) -> None:
    async with direct.engine() as engine:
        receipts = await engine.store_many(learnings(100))
        assert [r.replayed for r in receipts] == [False] * 100
        assert direct.routes() == {
            "GET v1/auth/whoami": 1,
            "GET v1/events": 3,  # two lookups of 50 labels, one listing poll
            "POST v1/experience/bulk": 1,
            "POST v1/recall": 1,
        }
        mark = direct.mark()
        again = await engine.store_many(learnings(100))
        assert all(r.replayed for r in again)
        assert direct.routes(mark) == {"GET v1/events": 2}  # a replay costs only the lookups
        assert len(direct.double.events()) == 100


async def test_a_hosted_batch_of_100_costs_104_requests(hosted: Served) -> None:
    async with hosted.engine() as engine:
        await engine.store_many(learnings(100))
    assert hosted.routes() == {"GET memory/events": 3, "POST memory/experience": 100, "POST memory/recall": 1}
    claims = {r.headers["idempotency-key"] for r in hosted.double.requests if r.path == "memory/experience"}
    assert len(claims) == 100 and all(claim.startswith("tm-") for claim in claims)


async def test_every_scope_gets_one_write_and_one_wait(direct: Served) -> None:
    agent = Namespace.parse("agent:scout")
    talk = Conversation(turns=[Turn(role=Role.USER, text="hello"), Turn(role=Role.ASSISTANT, text="hi there")])
    items = [*learnings(3), Document.from_text("a note"), talk, *learnings(2, "other", agent)]
    async with direct.engine() as engine:
        receipts = await engine.store_many(items)
        assert [r.id for r in receipts] == [item.fingerprint() for item in items]
    routes = direct.routes()
    assert routes["POST v1/experience/bulk"] == 3  # root learnings, the conversation's turns, the agent's learnings
    assert routes["POST v1/experience"] == 1  # the one document
    assert routes["GET v1/events"] == 4 + 4 and routes["POST v1/recall"] == 1
    assert len(direct.double.events()) == 3 + 1 + 2 + 2


async def test_a_repeat_within_the_batch_is_a_replay_of_its_first_copy(either: Served) -> None:
    note = Document.from_text("said twice")
    async with either.engine() as engine:
        receipts = await engine.store_many([note, note])
        assert [r.replayed for r in receipts] == [False, True] and receipts[0].id == receipts[1].id
    assert len(either.double.events()) == 1


async def test_a_store_stopped_part_way_writes_only_what_is_missing(hosted: Served) -> None:
    talk = Conversation(turns=[Turn(role=Role.USER, text=f"turn {n}") for n in range(4)])
    # Two turns land, the third is refused: a store that stopped part way.
    hosted.double.faults.fail_next(1, status=400, code="BAD_REQUEST", match="memory/experience", after=2)
    async with hosted.engine() as engine:
        with pytest.raises(InvalidRequestError):
            await engine.store(talk)
        assert [r.content["text"] for r in hosted.double.events()] == ["turn 0", "turn 1"]
        mark = hosted.mark()
        receipt = await engine.store(talk)
        assert not receipt.replayed
        assert hosted.routes(mark)["POST memory/experience"] == 2
        assert [r.content["text"] for r in hosted.double.events()] == [f"turn {n}" for n in range(4)]
        [hit] = await engine.get(GetRequest(ids=[receipt.id]))
        assert hit.text == talk.render_text()
        assert (await engine.store(talk)).replayed


async def test_a_server_without_the_bulk_route_gets_one_request_per_event(direct: Served) -> None:
    direct.double.faults.fail_next(1, status=404, code="NOT_FOUND", match="v1/experience/bulk")
    async with direct.engine() as engine:
        await engine.store_many(learnings(3))
        await engine.store_many(learnings(2, "more"))
    routes = direct.routes()
    assert routes["POST v1/experience/bulk"] == 1 and routes["POST v1/experience"] == 5
    assert len(direct.double.events()) == 5


async def test_a_direct_write_is_sent_once_and_a_retry_is_a_replay(direct: Served) -> None:
    direct.double.faults.fail_after_apply(1, match="v1/experience/bulk")
    batch = learnings(5)
    async with direct.engine() as engine:
        with pytest.raises(UnavailableError):
            await engine.store_many(batch)
        assert direct.routes()["POST v1/experience/bulk"] == 1  # never retried by the engine
        receipts = await engine.store_many(batch)
        assert all(r.replayed for r in receipts)
    assert len(direct.double.events()) == 5
    direct.double.faults.fail_next(1, match="v1/experience/bulk")
    async with direct.engine() as engine:
        with pytest.raises(UnavailableError):
            await engine.store_many(learnings(2, "fresh"))
        assert [r.replayed for r in await engine.store_many(learnings(2, "fresh"))] == [False, False]
    assert len(direct.double.events()) == 7


async def test_durable_but_not_yet_indexed_is_unavailable_and_the_retry_replays() -> None:
    clock = ManualClock()
    with served("direct", clock=clock, listing_lag_s=5.0) as direct:
        async with direct.engine() as engine:
            with pytest.raises(UnavailableError, match="408"):
                await engine.store_many(learnings(2))
            clock.advance(6)
            assert all(r.replayed for r in await engine.store_many(learnings(2)))
        assert len(direct.double.events()) == 2


async def test_an_event_that_never_lists_fails_the_write_loudly(either: Served) -> None:
    either.double.faults.never_list(1)
    if not either.wire.hosted:
        either.double.config.wait_timeout_s = 0.05
    async with either.engine(timing=Timing(visibility=0.2, poll=0.01, settle=0.1, retry_backoff=0.001)) as engine:
        with pytest.raises(UnavailableError) as caught:
            await engine.store(Document.from_text("invisible"))
    assert "did not become readable within 0.2s; reporting the write as done would break read-after-write" in str(
        caught.value
    ) or "408" in str(caught.value)


async def test_hosted_retries_keep_their_claim_and_recover_an_applied_write(hosted: Served) -> None:
    hosted.double.faults.fail_after_apply(1, match="memory/experience")
    async with hosted.engine() as engine:
        receipt = await engine.store(Document.from_text("applied, then answered 503"))
        assert not receipt.replayed
    writes = [r for r in hosted.double.requests if r.path == "memory/experience"]
    assert [r.status for r in writes] == [503, 409]
    assert writes[0].headers["idempotency-key"] == writes[1].headers["idempotency-key"]
    assert len(hosted.double.events()) == 1


async def test_hosted_retries_a_limiter_refusal_and_a_first_conflict_is_a_conflict(hosted: Served) -> None:
    hosted.double.faults.fail_next(1, status=429, retry_after=1, match="memory/experience")
    async with hosted.engine() as engine:
        await engine.store(Document.from_text("after a 429"))
        hosted.double.faults.fail_next(1, status=409, code="CONFLICT", match="memory/experience")
        with pytest.raises(ConflictError):
            await engine.store(Document.from_text("conflicted at once"))
    assert len(hosted.double.events()) == 1


async def test_a_claim_taken_but_never_applied_is_an_unknown_outcome(hosted: Served) -> None:
    hosted.double.faults.fail_next(1, match="memory/experience", after_claim=True)
    async with hosted.engine(timing=Timing(write_recovery=0.1, poll=0.01, retry_backoff=0.001)) as engine:
        with pytest.raises(UnavailableError, match=r"outcome of an event written to scope .* is unknown"):
            await engine.store(Document.from_text("claimed, lost"))
        assert not (await engine.store(Document.from_text("claimed, lost"))).replayed
    assert len(hosted.double.events()) == 1


async def test_an_oversized_learning_refuses_its_whole_batch_before_any_request(either: Served) -> None:
    huge = Learning(text="y" * 800_000, kind=LearningKind.FACT, confidence=0.5)
    async with either.engine() as engine:
        with pytest.raises(InvalidRequestError, match="CortexDB refuses an event over 1 MiB"):
            await engine.store_many([Document.from_text("fine"), huge])
        with pytest.raises(InvalidRequestError, match="between 1 and 100"):
            await engine.store_many([])
    assert either.double.requests == [] and either.double.events() == []


@pytest.mark.parametrize("size", [100_000, 1_000_000])
async def test_large_documents_round_trip_whole(either: Served, size: int) -> None:
    await _round_trip_document(either, size)


@pytest.mark.slow
async def test_a_20_mb_document_round_trips_whole(direct: Served) -> None:
    await _round_trip_document(direct, 20_000_000)


async def _round_trip_document(server: Served, size: int) -> None:
    line = "lorem ipsum dolor sit amet, consectetur adipiscing elit " * 2 + "\n"
    pages = [f"# Chapter {n}\n" + line * (size // len(line) // 8 + 1) for n in range(8)]
    body = "\f".join(pages)[:size]
    doc = Document(title="Big", body={"text": body}, mime="text/markdown", meta=MemoryMeta(workspace="big"))
    async with server.engine() as engine:
        receipt = await engine.store(doc)
        events = server.double.events()
        assert len(events) == (1 if size <= 200_000 else max(2, len(events)))
        [hit] = await engine.get(GetRequest(ids=[receipt.id]))
        assert hit.text == doc.render_text()
        listed = await engine.list(ListRequest(filter=MetaFilter(workspace="big"), limit=5))
        assert [h.id for h in listed.items] == [receipt.id] and listed.items[0].text == doc.render_text()
        exported = await engine.export(ListRequest(filter=MetaFilter(workspace="big"), limit=5))
        assert [e.item for e in exported.items] == [doc] and exported.incomplete == []
        assert (await engine.store(doc)).replayed


async def test_the_hosted_wire_writes_in_item_order_across_scopes(hosted: Served) -> None:
    items = [learnings(1, "first")[0], Document.from_text("second"), learnings(1, "third")[0]]
    async with hosted.engine() as engine:
        await engine.store_many(items)
    written = [r.body["content"]["text"] for r in hosted.double.requests if r.path == "memory/experience"]
    assert written == ["first number 0 zqfirst0", "second", "third number 0 zqthird0"]
    # One listing wait per scope written, then one ranked-recall wait for the very last event.
    assert [r.path for r in hosted.double.requests].count("memory/recall") == 1
