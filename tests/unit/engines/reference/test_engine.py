"""The reference engine's own rules (docs/spec/contract.md §17): scoring, cursors, recall wording, forget and erase."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, date, datetime

import pytest

from engines.contract import (
    Document,
    DocumentBody,
    EraseRequest,
    FetchMode,
    FetchRequest,
    ForgetTarget,
    GetRequest,
    InvalidRequestError,
    ItemKind,
    Learning,
    LearningKind,
    ListRequest,
    MemoryMeta,
    MetaFilter,
    Namespace,
    Reach,
    RecallRequest,
    TimeHint,
)
from engines.reference import ReferenceEngine
from engines.reference.scoring import (
    DIMENSIONS,
    VECTOR_THRESHOLD,
    TextFeatures,
    cosine,
    embed,
    keyword,
    score,
    words,
)

TEAM = Namespace.parse("team:acme")
WRITER = Namespace.parse("team:acme/agent:writer")
FLOW = Namespace.parse("team:acme/service:flow")


def doc(text: str, at: Namespace = Namespace.ROOT, observed: datetime | None = None) -> Document:
    return Document(body=DocumentBody.of_text(text), meta=MemoryMeta(namespace=at, observed_at=observed))


def fact(text: str, at: Namespace = Namespace.ROOT) -> Learning:
    return Learning(text=text, kind=LearningKind.FACT, confidence=0.5, meta=MemoryMeta(namespace=at))


async def stored(engine: ReferenceEngine, *items: Document | Learning) -> list[str]:
    return [(await engine.store(item)).id for item in items]


async def listed(engine: ReferenceEngine, filter: MetaFilter | None = None) -> list[str]:
    page = await engine.list(ListRequest(filter=filter or MetaFilter(), limit=1000))
    return [hit.id for hit in page.items]


# Scoring


def test_words_split_on_every_non_alphanumeric_and_lowercase() -> None:
    assert words("Hello, World! foo_bar 42x  Ünïcode-ÉTÉ") == [
        "hello",
        "world",
        "foo",
        "bar",
        "42x",
        "ünïcode",
        "été",
    ]
    assert words(" \t!?") == []


def test_keyword_is_the_share_of_distinct_query_words_found() -> None:
    assert keyword("alpha beta gamma", "Beta, and ALPHA.") == pytest.approx(2 / 3)
    assert keyword("alpha alpha beta", "alpha") == 0.5
    assert keyword("alpha", "alphabet") == 0.0
    assert keyword("?!", "anything") == 0.0


def test_embed_counts_padded_trigrams_into_64_buckets_then_normalises() -> None:
    # " a " is the only trigram of "a"; FNV-1a-32 over its code points is 0xa096ccee, bucket 46.
    vector = embed("a")
    assert len(vector) == DIMENSIONS
    assert vector[46] == 1.0
    assert sum(vector) == 1.0
    assert math.isclose(math.fsum(x * x for x in embed("the quick brown fox, the end")), 1.0)


def test_embed_of_a_text_without_words_is_the_zero_vector() -> None:
    assert embed("") == embed("... ---") == (0.0,) * DIMENSIONS


def test_cosine_of_unit_vectors() -> None:
    assert math.isclose(cosine(embed("alpha beta"), embed("beta alpha")), 1.0)
    assert cosine(embed("alpha"), embed("")) == 0.0


def test_vector_threshold_is_inclusive() -> None:
    assert VECTOR_THRESHOLD == 0.2
    query = TextFeatures(words=frozenset({"q"}), vector=(1.0, 0.0))
    at_threshold = TextFeatures(words=frozenset(), vector=(0.2, math.sqrt(1 - 0.04)))
    below = TextFeatures(words=frozenset(), vector=(0.19, math.sqrt(1 - 0.19**2)))
    assert score(FetchMode.VECTOR, query, at_threshold) == 0.2
    assert score(FetchMode.VECTOR, query, below) is None
    assert score(FetchMode.HYBRID, query, below) is None
    assert score(FetchMode.HYBRID, query, at_threshold) == pytest.approx(0.1)


def test_hybrid_scores_the_mean_and_hits_on_either_signal() -> None:
    query = TextFeatures(words=frozenset({"q"}), vector=(1.0, 0.0))
    lexical = TextFeatures(words=frozenset({"q"}), vector=(0.0, 1.0))
    assert score(FetchMode.KEYWORD, query, lexical) == 1.0
    assert score(FetchMode.VECTOR, query, lexical) is None
    assert score(FetchMode.HYBRID, query, lexical) == 0.5


async def test_fetch_modes_admit_by_their_own_rule() -> None:
    engine = ReferenceEngine()
    exact, near, far = await stored(engine, doc("alpha"), doc("alphabet soup"), doc("kiwi"))
    by_mode = {}
    for mode in FetchMode:
        page = await engine.fetch(FetchRequest(query="alpha", mode=mode, limit=10))
        by_mode[mode] = [hit.id for hit in page.hits]
    assert by_mode[FetchMode.KEYWORD] == [exact]
    assert by_mode[FetchMode.VECTOR] == [exact, near]
    assert by_mode[FetchMode.HYBRID] == [exact, near]
    assert far not in by_mode[FetchMode.HYBRID]


async def test_fetch_ties_keep_store_order_and_scores_are_reported() -> None:
    engine = ReferenceEngine()
    ids = await stored(engine, doc("beta one"), doc("alpha beta"), doc("beta two"))
    page = await engine.fetch(FetchRequest(query="alpha beta", mode=FetchMode.KEYWORD, limit=10))
    assert [hit.id for hit in page.hits] == [ids[1], ids[0], ids[2]]
    assert [hit.score for hit in page.hits] == [1.0, 0.5, 0.5]


# Descriptor, store, store_many


def test_descriptor() -> None:
    descriptor = ReferenceEngine().descriptor()
    assert (descriptor.id, descriptor.label) == ("reference", "Reference")
    assert not (descriptor.hosted or descriptor.needs_endpoint or descriptor.needs_key)
    assert descriptor.default_endpoint is None
    assert list(descriptor.fetch_modes) == [FetchMode.KEYWORD, FetchMode.VECTOR, FetchMode.HYBRID]


async def test_health_is_ok() -> None:
    assert (await ReferenceEngine().health()).state == "ok"


async def test_a_replay_keeps_the_first_copy() -> None:
    engine = ReferenceEngine()
    first = doc("kept", observed=datetime(2024, 1, 1, tzinfo=UTC))
    later = doc("kept", observed=datetime(2025, 1, 1, tzinfo=UTC))
    assert not (await engine.store(first)).replayed
    assert (await engine.store(later)).replayed
    page = await engine.export(ListRequest(limit=10))
    assert [entry.item for entry in page.items] == [first]


async def test_concurrent_stores_of_one_item_store_it_once() -> None:
    engine = ReferenceEngine()
    receipts = await asyncio.gather(*(engine.store(doc("same")) for _ in range(20)))
    assert sorted(r.replayed for r in receipts) == [False] + [True] * 19


async def test_store_many_with_a_duplicate_stores_it_once() -> None:
    engine = ReferenceEngine()
    d, e = doc("twice"), doc("once")
    receipts = await engine.store_many([d, e, d])
    assert [r.replayed for r in receipts] == [False, False, True]
    assert receipts[0].id == receipts[2].id == d.fingerprint()
    assert await listed(engine) == [d.fingerprint(), e.fingerprint()]


async def test_store_many_refuses_the_whole_batch_for_one_bad_item() -> None:
    engine = ReferenceEngine()
    with pytest.raises(InvalidRequestError, match="document body must not be empty"):
        await engine.store_many([doc("fine"), doc("  ")])
    assert await listed(engine) == []


# Cursors


@pytest.mark.parametrize("cursor", ["01", "-1", "x", "", " 1", "1.0", "+1", "١"])
async def test_a_cursor_that_is_not_a_canonical_offset_is_unknown(cursor: str) -> None:
    engine = ReferenceEngine()
    await stored(engine, doc("one"), doc("two"))
    message = f"unknown cursor `{cursor}`"
    with pytest.raises(InvalidRequestError) as listing:
        await engine.list(ListRequest(limit=1, cursor=cursor))
    with pytest.raises(InvalidRequestError) as fetching:
        await engine.fetch(FetchRequest(query="one", mode=FetchMode.HYBRID, limit=1, cursor=cursor))
    with pytest.raises(InvalidRequestError) as exporting:
        await engine.export(ListRequest(limit=1, cursor=cursor))
    assert listing.value.message == fetching.value.message == exporting.value.message == message


async def test_cursors_are_decimal_offsets() -> None:
    engine = ReferenceEngine()
    ids = await stored(engine, doc("one"), doc("two"), doc("three"))
    first = await engine.list(ListRequest(limit=2, cursor="0"))
    assert ([h.id for h in first.items], first.next_cursor) == (ids[:2], "2")
    last = await engine.list(ListRequest(limit=2, cursor="2"))
    assert ([h.id for h in last.items], last.next_cursor) == (ids[2:], None)
    exported = await engine.export(ListRequest(limit=3))
    assert ([e.id for e in exported.items], exported.next_cursor, exported.incomplete) == (ids, None, [])


@pytest.mark.parametrize("cursor", ["3", "4", "99", "9" * 40])
async def test_a_cursor_past_the_end_gives_an_empty_page(cursor: str) -> None:
    engine = ReferenceEngine()
    await stored(engine, doc("one"), doc("two"), doc("three"))
    page = await engine.list(ListRequest(limit=5, cursor=cursor))
    assert (page.items, page.next_cursor) == ([], None)
    fetched = await engine.fetch(FetchRequest(query="one", mode=FetchMode.KEYWORD, limit=5, cursor=cursor))
    assert (fetched.hits, fetched.next_cursor) == ([], None)


async def test_fetch_pages_by_offset() -> None:
    engine = ReferenceEngine()
    ids = await stored(engine, doc("note a"), doc("note b"), doc("note c"))
    first = await engine.fetch(FetchRequest(query="note", mode=FetchMode.KEYWORD, limit=2))
    second = await engine.fetch(FetchRequest(query="note", mode=FetchMode.KEYWORD, limit=2, cursor="2"))
    assert [h.id for h in first.hits + second.hits] == ids
    assert (first.next_cursor, second.next_cursor) == ("2", None)


# Recall


async def test_recall_cites_collapsed_snippets_cut_at_200_characters() -> None:
    engine = ReferenceEngine()
    long_text = "alpha   " + "word\n\t" * 60
    short, long = await stored(engine, fact("alpha  short\nfact"), doc(long_text))
    answer = await engine.recall(RecallRequest(question="alpha", limit=5))
    flat = " ".join(long_text.split())
    assert [c.id for c in answer.citations] == [short, long]
    assert answer.citations[0].snippet == "alpha short fact"
    assert answer.citations[1].snippet == flat[:200] + "…"
    assert answer.answer == f"- alpha short fact\n- {flat[:200]}…"
    assert answer.model == "reference"
    assert answer.citations[0].kind is ItemKind.LEARNING
    assert answer.citations[0].score == pytest.approx((1.0 + cosine(embed("alpha"), embed("alpha short fact"))) / 2)


async def test_recall_takes_at_most_limit_citations() -> None:
    engine = ReferenceEngine()
    await stored(engine, *(doc(f"alpha {i}") for i in range(4)))
    answer = await engine.recall(RecallRequest(question="alpha", limit=2))
    assert len(answer.citations) == 2


async def test_recall_with_nothing_admitted_answers_empty() -> None:
    engine = ReferenceEngine()
    await stored(engine, doc("alpha", at=WRITER))
    answer = await engine.recall(RecallRequest(question="alpha", filter=MetaFilter(reach=Reach.exact(TEAM)), limit=5))
    assert (answer.answer, answer.citations) == ("", [])


async def test_refers_to_ranks_hinted_days_first_in_fetch_and_recall() -> None:
    engine = ReferenceEngine()
    best = doc("alpha beta")
    hinted = doc("alpha", observed=datetime(2024, 5, 1, 23, 30, tzinfo=UTC))
    best_id, hinted_id = await stored(engine, best, hinted)
    hint = TimeHint(from_=date(2024, 5, 2), to=date(2024, 5, 2), zone="Asia/Tokyo")
    plain = await engine.fetch(FetchRequest(query="alpha beta", mode=FetchMode.KEYWORD, limit=5))
    ranked = await engine.fetch(FetchRequest(query="alpha beta", mode=FetchMode.KEYWORD, limit=5, refers_to=hint))
    answer = await engine.recall(RecallRequest(question="alpha beta", limit=1, refers_to=hint))
    assert [h.id for h in plain.hits] == [best_id, hinted_id]
    assert [h.id for h in ranked.hits] == [hinted_id, best_id]
    assert [c.id for c in answer.citations] == [hinted_id]


# Forget


async def test_forget_by_ids_counts_each_removed_item_once() -> None:
    engine = ReferenceEngine()
    a, b, c = await stored(engine, doc("a"), doc("b", at=FLOW), doc("c"))
    report = await engine.forget(ForgetTarget.by_ids([a, a, b, "unknown"]))
    assert report.forgotten == 2
    assert await listed(engine, MetaFilter(reach=Reach.subtree(Namespace.ROOT))) == [c]
    assert await listed(engine, MetaFilter(reach=Reach.exact(FLOW))) == []


async def test_forget_by_filter_without_reach_leaves_sandboxes() -> None:
    engine = ReferenceEngine()
    _, _, sandboxed = await stored(engine, fact("root"), fact("team", at=TEAM), fact("flow", at=FLOW))
    report = await engine.forget(ForgetTarget.by_filter(MetaFilter.of_kinds(ItemKind.LEARNING)))
    assert report.forgotten == 2
    assert await listed(engine, MetaFilter(reach=Reach.exact(FLOW))) == [sandboxed]


async def test_a_forgotten_item_stored_again_is_new() -> None:
    engine = ReferenceEngine()
    (item_id,) = await stored(engine, doc("again"))
    await engine.forget(ForgetTarget.by_ids([item_id]))
    assert not (await engine.store(doc("again"))).replayed


async def test_forget_within_and_get_use_the_reach() -> None:
    engine = ReferenceEngine()
    at_team, at_writer = await stored(engine, doc("t", at=TEAM), doc("w", at=WRITER))
    hits = await engine.get(GetRequest(ids=[at_writer, at_team], reach=Reach.exact(TEAM)))
    assert [h.id for h in hits] == [at_team]
    report = await engine.forget_within([at_writer, at_team], Reach.exact(WRITER))
    assert report.forgotten == 1
    assert await listed(engine) == [at_team]


# Erase


async def test_erase_counts_node_kind_pairs_and_includes_sandboxes() -> None:
    engine = ReferenceEngine()
    await stored(engine, doc("d", at=TEAM), fact("f", at=TEAM), fact("g", at=TEAM), fact("w", at=WRITER))
    await stored(engine, doc("s", at=FLOW), fact("root"))
    report = await engine.erase(EraseRequest(reach=Reach.subtree(TEAM)))
    assert (report.erased_scopes, report.receipts) == (4, [])
    assert await listed(engine, MetaFilter(reach=Reach.subtree(Namespace.ROOT))) == [fact("root").fingerprint()]


async def test_erase_of_some_kinds_at_one_node_ignores_inherit() -> None:
    engine = ReferenceEngine()
    d, _, w, r = await stored(engine, doc("d", at=TEAM), fact("f", at=TEAM), fact("w", at=WRITER), fact("r"))
    report = await engine.erase(EraseRequest(reach=Reach.of(TEAM), kinds=[ItemKind.LEARNING]))
    assert report.erased_scopes == 1
    assert await listed(engine) == [d, w, r]
    assert (await engine.erase(EraseRequest(reach=Reach.exact(TEAM), kinds=[ItemKind.LEARNING]))).erased_scopes == 0


async def test_erase_of_the_whole_tree_needs_the_interlock() -> None:
    engine = ReferenceEngine()
    await stored(engine, doc("d"), fact("s", at=FLOW))
    with pytest.raises(InvalidRequestError, match="erasing the whole tree needs whole_tree: true"):
        await engine.erase(EraseRequest(reach=Reach.subtree(Namespace.ROOT), kinds=list(ItemKind)))
    assert len(await listed(engine)) == 1
    report = await engine.erase(EraseRequest(reach=Reach.subtree(Namespace.ROOT), whole_tree=True))
    assert report.erased_scopes == 2
    assert await listed(engine, MetaFilter(reach=Reach.exact(FLOW))) == []


async def test_erase_of_one_kind_over_the_whole_tree_needs_no_interlock() -> None:
    engine = ReferenceEngine()
    (_, learning) = await stored(engine, doc("d"), fact("f"))
    report = await engine.erase(EraseRequest(reach=Reach.subtree(Namespace.ROOT), kinds=[ItemKind.DOCUMENT]))
    assert report.erased_scopes == 1
    assert await listed(engine) == [learning]


async def test_an_erased_item_stored_again_is_new() -> None:
    engine = ReferenceEngine()
    await stored(engine, fact("gone", at=WRITER))
    await engine.erase(EraseRequest(reach=Reach.exact(WRITER)))
    assert not (await engine.store(fact("gone", at=WRITER))).replayed


# Requests are checked first


async def test_requests_are_checked_first() -> None:
    engine = ReferenceEngine()
    with pytest.raises(InvalidRequestError, match="fetch limit must be positive"):
        await engine.fetch(FetchRequest(query="x", mode=FetchMode.KEYWORD, limit=0))
    with pytest.raises(InvalidRequestError, match="list limit must be positive"):
        await engine.export(ListRequest(limit=0))
    with pytest.raises(InvalidRequestError, match="forget refuses an empty filter"):
        await engine.forget(ForgetTarget.by_filter(MetaFilter()))
    with pytest.raises(InvalidRequestError, match="recall question must not be empty"):
        await engine.recall(RecallRequest(question=" ", limit=1))
