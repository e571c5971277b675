"""The local engine's own rules beyond the conformance suite: passages, pages, cursors, schema, embedder."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from engines.contract import (
    ConfigError,
    Conversation,
    Document,
    EraseRequest,
    ExploreRequest,
    Facet,
    FetchMode,
    FetchRequest,
    ForgetTarget,
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
    Role,
    TimeHint,
    Turn,
)
from engines.local import HashingEmbedder, LocalEngine
from engines.local.schema import SCHEMA_VERSION
from engines.local.search import TermCounts, informative_words

PAGE_WORDS = ("lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "eiusmod")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[LocalEngine]:
    engine = LocalEngine(tmp_path / "memory.sqlite3")
    yield engine
    engine.close()


def _page(n: int) -> str:
    # About 2,500 characters: one page per 3,000-character passage.
    words = [PAGE_WORDS[(n + i) % len(PAGE_WORDS)] for i in range(420)]
    return f"Page {n}\n" + "\n".join(" ".join(words[i : i + 12]) for i in range(0, 420, 12))


def _book(pages: int, special_page: int, word: str) -> str:
    texts = [_page(n) for n in range(1, pages + 1)]
    texts[special_page - 1] += f"\nThe {word} appears only here.\n"
    return "\f".join(texts)


# Vector mode is left out: one rare word barely moves a lexical vector of a 2,500-character page.
@pytest.mark.parametrize("mode", [FetchMode.KEYWORD, FetchMode.HYBRID])
async def test_a_word_on_page_250_of_300_is_found_with_its_page(engine: LocalEngine, mode: FetchMode) -> None:
    book = Document.from_text(_book(300, 250, "quetzalcoatlus"), title="The Long Book", mime="application/pdf")
    await engine.store(Document.from_text("a short unrelated note about lunch"))
    receipt = await engine.store(book)
    page = await engine.fetch(FetchRequest(query="quetzalcoatlus", mode=mode, limit=5))
    assert page.hits[0].id == receipt.id
    assert "page:250" in page.hits[0].meta.tags
    assert "quetzalcoatlus" in page.hits[0].text
    assert page.hits[0].text.startswith("# The Long Book\n\n")
    # One hit per document, whatever the number of passages that match.
    assert len({hit.id for hit in page.hits}) == len(page.hits)


async def test_listing_returns_a_split_document_whole(engine: LocalEngine) -> None:
    book = Document.from_text(_book(20, 3, "pterodactyl"), title="Twenty pages")
    receipt = await engine.store(book)
    listed = await engine.list(ListRequest(limit=5))
    assert [hit.text for hit in listed.items] == [book.render_text()]
    assert listed.items[0].meta == book.meta
    exported = await engine.export(ListRequest(limit=5))
    assert exported.items[0].item == book and exported.items[0].id == receipt.id


async def test_sections_are_reported_for_split_markdown(engine: LocalEngine) -> None:
    body = "\n\n".join(f"# Chapter {n}\n\n" + (f"chapter {n} text " * 200) for n in range(1, 6))
    body += "\n\nthe secret word is archaeopteryx\n"
    await engine.store(Document.from_text(body))
    hit = (await engine.fetch(FetchRequest(query="archaeopteryx", mode=FetchMode.KEYWORD, limit=1))).hits[0]
    assert "section:Chapter 5" in hit.meta.tags


async def test_fetch_pages_with_cursors_and_refuses_foreign_ones(engine: LocalEngine) -> None:
    for n in range(7):
        await engine.store(Document.from_text(f"shared topic gardening note {n}"))
    seen: list[str] = []
    cursor = None
    while True:
        page = await engine.fetch(FetchRequest(query="gardening", mode=FetchMode.HYBRID, limit=3, cursor=cursor))
        seen.extend(hit.id for hit in page.hits)
        if page.next_cursor is None:
            break
        assert page.next_cursor != cursor
        cursor = page.next_cursor
    assert len(seen) == len(set(seen)) == 7
    for bad in ("3", "s3", "o-1", "o01", "x"):
        with pytest.raises(InvalidRequestError, match=f"unknown cursor `{bad}`"):
            await engine.fetch(FetchRequest(query="gardening", mode=FetchMode.KEYWORD, limit=3, cursor=bad))
    for bad in ("3", "o3", "s01"):
        with pytest.raises(InvalidRequestError, match="unknown cursor"):
            await engine.list(ListRequest(limit=3, cursor=bad))


async def test_keyword_ranks_by_bm25_and_ignores_query_syntax(engine: LocalEngine) -> None:
    strong = await engine.store(Document.from_text("tokio tokio tokio runtime scheduling"))
    weak = await engine.store(Document.from_text("a runtime mentioned once, among many other words here"))
    page = await engine.fetch(FetchRequest(query='tokio AND "runtime" OR NEAR(', mode=FetchMode.KEYWORD, limit=5))
    assert [hit.id for hit in page.hits] == [strong.id, weak.id]
    assert page.hits[0].score > page.hits[1].score
    nothing = await engine.fetch(FetchRequest(query="***", mode=FetchMode.KEYWORD, limit=5))
    assert nothing.hits == []


async def test_keyword_search_stems_words_and_skips_stop_words(engine: LocalEngine) -> None:
    target = await engine.store(Document.from_text("notes on deployment pipelines and their configuration"))
    await engine.store(Document.from_text("a recipe for lemon cake, and the icing of the cake"))
    # Porter stemming: "deploying" and "configurations" share stems with "deployment" and "configuration".
    stemmed = await engine.fetch(FetchRequest(query="deploying configurations", mode=FetchMode.KEYWORD, limit=5))
    assert [hit.id for hit in stemmed.hits] == [target.id]
    # "the", "of" and "and" are in both documents; a query keeps only its other words.
    stopped = await engine.fetch(
        FetchRequest(query="the configuration of the pipeline", mode=FetchMode.KEYWORD, limit=5)
    )
    assert [hit.id for hit in stopped.hits] == [target.id]
    only_stop_words = await engine.fetch(FetchRequest(query="and the", mode=FetchMode.KEYWORD, limit=5))
    assert len(only_stop_words.hits) == 2  # nothing else to search for: the stop words are searched


async def test_vector_mode_finds_by_meaning_what_keyword_misses(engine: LocalEngine) -> None:
    target = await engine.store(Document.from_text("the car needs new brakes and an oil change at the garage"))
    await engine.store(Document.from_text("a recipe for lemon cake with sugar icing"))
    query = "automobile mechanic"
    assert (await engine.fetch(FetchRequest(query=query, mode=FetchMode.KEYWORD, limit=5))).hits == []
    vector = await engine.fetch(FetchRequest(query=query, mode=FetchMode.VECTOR, limit=5))
    assert [hit.id for hit in vector.hits] == [target.id]
    hybrid = await engine.fetch(FetchRequest(query=query, mode=FetchMode.HYBRID, limit=5))
    assert [hit.id for hit in hybrid.hits] == [target.id]


async def test_hashing_vectors_find_spelling_variants(tmp_path: Path) -> None:
    engine = LocalEngine(tmp_path / "hashing.sqlite3", embedder=HashingEmbedder())
    try:
        target = await engine.store(Document.from_text("notes on deployment pipelines and their configuration"))
        await engine.store(Document.from_text("a recipe for lemon cake"))
        page = await engine.fetch(
            FetchRequest(query="deploying pipeline configurations", mode=FetchMode.VECTOR, limit=5)
        )
        assert [hit.id for hit in page.hits] == [target.id]
    finally:
        engine.close()


async def test_hybrid_fuses_both_rankings(engine: LocalEngine) -> None:
    both = await engine.store(Document.from_text("kubernetes cluster upgrade checklist"))
    lexical = await engine.store(Document.from_text("kubernetes"))
    page = await engine.fetch(FetchRequest(query="kubernetes cluster upgrades", mode=FetchMode.HYBRID, limit=5))
    assert [hit.id for hit in page.hits][:2] == [both.id, lexical.id]


async def test_time_hint_ranks_matching_days_first_without_excluding(engine: LocalEngine) -> None:
    old = MemoryMeta(observed_at="2026-01-01T10:00:00Z")  # type: ignore[arg-type]
    new = MemoryMeta(observed_at="2026-03-05T10:00:00Z")  # type: ignore[arg-type]
    early = await engine.store(Document.from_text("standup notes standup notes standup", meta=old))
    late = await engine.store(Document.from_text("standup notes", meta=new))
    hint = TimeHint.model_validate({"from": "2026-03-05", "to": "2026-03-05"})
    page = await engine.fetch(FetchRequest(query="standup", mode=FetchMode.KEYWORD, limit=5, refers_to=hint))
    assert [hit.id for hit in page.hits] == [late.id, early.id]


async def test_recall_quotes_the_best_sentences_with_numbered_citations(engine: LocalEngine) -> None:
    await engine.store(
        Document.from_text("The deploy runs at noon. The database migrates first. Lunch is at one.", title="Ops")
    )
    await engine.store(
        Learning(text="The user prefers deploys on Tuesdays", kind=LearningKind.PREFERENCE, confidence=0.9)
    )
    answer = await engine.recall(RecallRequest(question="when does the deploy run?", limit=2))
    assert answer.model == "local-extractive"
    assert "The deploy runs at noon." in answer.answer
    assert "[1]" in answer.answer and len(answer.citations) == 2
    listed = {hit.id for hit in (await engine.list(ListRequest(limit=10))).items}
    assert {c.id for c in answer.citations} <= listed
    empty = await engine.recall(RecallRequest(question="zebra", limit=2, filter=MetaFilter(workspace="none")))
    assert (empty.answer, empty.citations) == ("", [])


async def test_erase_counts_node_kind_pairs_and_reaches_sandboxes(engine: LocalEngine) -> None:
    team = Namespace.parse("team:t")
    flow = Namespace.parse("team:t/service:flow")
    for ns in (team, flow):
        await engine.store(Document.from_text(f"doc at {ns}", meta=MemoryMeta(namespace=ns)))
        await engine.store(
            Learning(text=f"fact at {ns}", kind=LearningKind.FACT, confidence=1, meta=MemoryMeta(namespace=ns))
        )
    await engine.store(Document.from_text("root doc"))
    report = await engine.erase(EraseRequest(reach=Reach.subtree(team), kinds=[ItemKind.DOCUMENT]))
    assert report.erased_scopes == 2
    report = await engine.erase(EraseRequest(reach=Reach.subtree(team)))
    assert report.erased_scopes == 2
    left = await engine.list(ListRequest(filter=MetaFilter(reach=Reach(at=Namespace.ROOT, descendants=True)), limit=10))
    assert [hit.text for hit in left.items] == ["root doc"]


async def test_forget_removes_passages_from_every_index(engine: LocalEngine, tmp_path: Path) -> None:
    title = "Fossils"
    body = "ephemeral ichthyosaur note\f" + "page two mentions ichthyosaur again " * 200
    kept = await engine.store(Document.from_text("a plesiosaur stays", title=title))
    receipt = await engine.store(Document.from_text(body, title=title, meta=MemoryMeta(tags=["gone"])))
    for mode in FetchMode:
        assert (await engine.fetch(FetchRequest(query="ichthyosaur", mode=mode, limit=3))).hits
    assert (await engine.forget(ForgetTarget.by_ids([receipt.id, receipt.id]))).forgotten == 1
    for mode in FetchMode:
        # A semantic model still finds the kept plesiosaur near an ichthyosaur; never the forgotten note.
        found = [hit.id for hit in (await engine.fetch(FetchRequest(query="ichthyosaur", mode=mode, limit=3))).hits]
        assert found == ([] if mode is FetchMode.KEYWORD else [kept.id]), mode
    conn = sqlite3.connect(tmp_path / "memory.sqlite3")
    # The index keeps no text, so it must have been told exactly what it indexed: no posting is left.
    assert conn.execute("SELECT rowid FROM passage_text WHERE passage_text MATCH 'ichthyosaur'").fetchall() == []
    assert conn.execute("SELECT count(*) FROM passage_text WHERE passage_text MATCH 'fossils'").fetchone() == (1,)
    counts = [
        conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in ("items", "passages", "item_tags")
    ]
    conn.close()
    assert counts == [1, 1, 0]
    assert [
        h.id for h in (await engine.fetch(FetchRequest(query="plesiosaur", mode=FetchMode.KEYWORD, limit=3))).hits
    ] == [kept.id]


async def test_another_engine_on_the_file_sees_writes_and_deletions(engine: LocalEngine, tmp_path: Path) -> None:
    other = LocalEngine(tmp_path / "memory.sqlite3")
    try:
        assert (await other.fetch(FetchRequest(query="mammoth", mode=FetchMode.VECTOR, limit=3))).hits == []
        receipt = await engine.store(Document.from_text("woolly mammoth"))
        assert [
            h.id for h in (await other.fetch(FetchRequest(query="mammoth", mode=FetchMode.VECTOR, limit=3))).hits
        ] == [receipt.id]
        await engine.forget(ForgetTarget.by_ids([receipt.id]))
        assert (await other.fetch(FetchRequest(query="mammoth", mode=FetchMode.VECTOR, limit=3))).hits == []
        # A passage written after a removal gets a new number, so the other copy still loads it.
        again = await engine.store(Document.from_text("woolly mammoths again"))
        found = await other.fetch(FetchRequest(query="mammoth", mode=FetchMode.VECTOR, limit=3))
        assert [h.id for h in found.hits] == [again.id]
    finally:
        other.close()


async def test_explore_counts_tags_once_per_item_and_never_truncates(engine: LocalEngine) -> None:
    await engine.store(Document.from_text("a", meta=MemoryMeta(tags=["x", "x", "y"])))
    await engine.store(Document.from_text("b", meta=MemoryMeta(tags=["x"])))
    await engine.store(Document.from_text("c"))
    page = await engine.explore(ExploreRequest(facet=Facet.TAG, limit=10, scan_limit=1))
    assert [(b.value, b.count) for b in page.buckets] == [("x", 2), ("y", 1)]
    assert (page.total, page.missing, page.truncated) == (3, 1, False)


async def test_conversation_hits_render_turns(engine: LocalEngine) -> None:
    convo = Conversation(turns=[Turn(role=Role.USER, text="which port?"), Turn(role=Role.ASSISTANT, text="8080")])
    await engine.store(convo)
    hit = (await engine.fetch(FetchRequest(query="port", mode=FetchMode.KEYWORD, limit=1))).hits[0]
    assert hit.text == convo.render_text()
    assert hit.confidence is None


def test_a_file_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.sqlite3"
    created = LocalEngine(path)
    created._db.open_now()
    created.close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    engine = LocalEngine(path)
    with pytest.raises(ConfigError, match="written by a newer tinymemory"):
        engine._db.open_now()


async def test_health_reports_a_broken_file_as_down(tmp_path: Path) -> None:
    path = tmp_path / "garbage.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    engine = LocalEngine(path)
    health = await engine.health()
    assert not health.is_serving()
    assert "cannot open memory file" in (health.reason or "")


async def test_hashing_embedder_is_deterministic_and_unit_length() -> None:
    embedder = HashingEmbedder(128)
    a = await embedder.embed(["The quick brown fox", "", "quick brown foxes"])
    b = await embedder.embed(["The quick brown fox"])
    assert np.array_equal(a[0], b[0])
    assert np.isclose(np.linalg.norm(a[0]), 1.0) and not a[1].any()
    assert float(a[0] @ a[2]) > 0.5
    with pytest.raises(ValueError, match="power of two"):
        HashingEmbedder(100)


def test_hashing_embedder_vectors_stay_those_of_its_identity() -> None:
    # Files indexed under "hashing-ngram-v2/256" are searched with vectors computed later: any
    # change to the vectors (a rewrite for speed included) must come with a new identity.
    texts = ["The quick brown fox", "", "Grüße aus Köln: naïve café — 東京 2026", "x" * 9000]
    texts += [f"note {n}: alpha beta gamma" for n in range(40)]
    vectors = HashingEmbedder(256).embed_sync(texts)
    assert HashingEmbedder(256).identity == "hashing-ngram-v2/256"
    assert hashlib.sha256(vectors.tobytes()).hexdigest() == (
        "657cbcab2eb6da7ec5f42f439f1c9d2325de2e4101d78ebda999a49c0c300581"
    )


@pytest.mark.parametrize("rounds", [1, 4])
@pytest.mark.parametrize("mode", list(FetchMode))
async def test_a_selective_filter_finds_its_item_among_thousands_of_matches(
    engine: LocalEngine, mode: FetchMode, rounds: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With one round of ranking before filtering, the filtered-first fallback has to find it.
    monkeypatch.setattr("engines.local.search._CHECK_ROUNDS", rounds)
    crowd = [Document.from_text(f"common words shared by everybody, number {n}") for n in range(2_400)]
    for start in range(0, len(crowd), 100):
        await engine.store_many(crowd[start : start + 100])
    target = await engine.store(
        Document.from_text("common words shared by everybody, and one more", meta=MemoryMeta(workspace="rare"))
    )
    page = await engine.fetch(
        FetchRequest(query="common words shared", mode=mode, limit=5, filter=MetaFilter(workspace="rare"))
    )
    assert [hit.id for hit in page.hits] == [target.id]


async def test_words_in_most_passages_are_not_searched_in_a_large_file(engine: LocalEngine) -> None:
    crowd = [Document.from_text(f"the common crowd, note {n}") for n in range(2_100)]
    for start in range(0, len(crowd), 100):
        await engine.store_many(crowd[start : start + 100])
    rare = await engine.store(Document.from_text("the one about narwhals"))
    page = await engine.fetch(FetchRequest(query="the narwhals", mode=FetchMode.KEYWORD, limit=5))
    # "the" is in every passage: it could not rank anything, so only "narwhals" is searched.
    assert [hit.id for hit in page.hits] == [rare.id]
    common_only = await engine.fetch(FetchRequest(query="the common", mode=FetchMode.KEYWORD, limit=3))
    assert len(common_only.hits) == 3  # the rarer of two common words is still searched


async def test_remembered_term_counts_are_forgotten_when_the_file_changes(engine: LocalEngine, tmp_path: Path) -> None:
    async def store(texts: list[str]) -> None:
        for start in range(0, len(texts), 100):
            await engine.store_many([Document.from_text(t) for t in texts[start : start + 100]])

    await store([f"the common crowd, note {n}" for n in range(2_100)])
    counts = TermCounts()
    with closing(sqlite3.connect(tmp_path / "memory.sqlite3")) as reader:
        assert informative_words(reader, ["the", "narwhals"], counts) == ["narwhals"]
        # Another connection's commit: now both words are in most passages and the rarer one is
        # kept; remembered counts would still say "narwhals" is rare.
        await store([f"narwhals everywhere, sighting {n}" for n in range(2_500)])
        assert informative_words(reader, ["the", "narwhals"], counts) == ["the"]


async def test_a_common_word_is_recognised_however_its_accents_are_written(engine: LocalEngine, tmp_path: Path) -> None:
    crowd = [Document.from_text(f"the cafe crowd, table {n}") for n in range(2_100)]
    for start in range(0, len(crowd), 100):
        await engine.store_many(crowd[start : start + 100])
    with closing(sqlite3.connect(tmp_path / "memory.sqlite3")) as reader:
        # The index folds "café" to "cafe", which is in every passage: not worth searching.
        assert informative_words(reader, ["café", "narwhal"], TermCounts()) == ["narwhal"]


async def test_planner_statistics_are_refreshed_as_the_store_grows(engine: LocalEngine, tmp_path: Path) -> None:
    def analyzed() -> list[tuple[str, str]]:
        conn = sqlite3.connect(tmp_path / "memory.sqlite3")
        try:
            return conn.execute("SELECT tbl, idx FROM sqlite_stat1 WHERE tbl = 'items'").fetchall()
        except sqlite3.OperationalError:  # no statistics table yet
            return []
        finally:
            conn.close()

    batch = [Document.from_text(f"note {n}", meta=MemoryMeta(folder=f"/f/{n % 7}")) for n in range(100)]
    for round_ in range(9):
        await engine.store_many([d.model_copy(update={"title": str(round_)}) for d in batch])
    assert analyzed() == []
    for round_ in range(9, 11):
        await engine.store_many([d.model_copy(update={"title": str(round_)}) for d in batch])
    assert ("items", "items_folder") in analyzed()


async def test_the_file_may_be_named_by_a_string(tmp_path: Path) -> None:
    engine = LocalEngine(str(tmp_path / "named.sqlite3"))
    try:
        assert (await engine.health()).ok
        assert engine.path == tmp_path / "named.sqlite3"
    finally:
        engine.close()
