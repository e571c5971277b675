"""Hybrid fusion's rules: normalised score fusion, feedback from keyword's best items, rank fusion."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from engines.contract import Document, FetchMode, FetchRequest
from engines.local import HashingEmbedder, LocalEngine, ranking
from engines.local.embed import Vectors
from engines.local.fusion import LEXICAL, MINILM, SEMANTIC, Fusion, feedback_query, fuse, fuse_ranks, fusion_for
from engines.local.minilm import MiniLMEmbedder
from engines.local.search import Ranked, vector_candidates
from engines.local.static import StaticEmbedder

HALF = Fusion(vector=0.5, feedback_items=3, feedback_weight=1.0)
FLOOR = 0.2


def _ranking(*scored: tuple[int, float]) -> list[Ranked]:
    return [Ranked(seq, seq * 10, score) for seq, score in scored]


def _order(ranked: list[Ranked]) -> list[int]:
    return [hit.item_seq for hit in ranked]


def test_each_ranking_is_scaled_against_its_best_hit() -> None:
    keyword = _ranking((1, 8.0), (2, 4.0))
    vector = _ranking((2, 0.8), (3, 0.5))  # the floor counts as zero: 0.5 is halfway from 0.2 to 0.8
    fused = {hit.item_seq: hit.score for hit in fuse(keyword, vector, 10, HALF, set(), FLOOR)}
    assert fused == pytest.approx({1: 0.5 * 1.0, 2: 0.5 * 0.5 + 0.5 * 1.0, 3: 0.5 * 0.5})
    assert _order(fuse(keyword, vector, 10, HALF, set(), FLOOR)) == [2, 1, 3]


def test_the_vector_share_decides_how_far_either_ranking_leads() -> None:
    keyword, vector = _ranking((1, 5.0), (2, 1.0)), _ranking((3, 0.9))
    assert _order(fuse(keyword, vector, 10, Fusion(0.3, 0, 0.0), set(), FLOOR)) == [1, 3, 2]
    assert _order(fuse(keyword, vector, 10, Fusion(0.8, 0, 0.0), set(), FLOOR)) == [3, 1, 2]


def test_scores_do_not_depend_on_how_deep_the_rankings_were_read() -> None:
    keyword = _ranking(*((seq, 10.0 - seq) for seq in range(1, 9)))
    vector = _ranking(*((seq, 0.9 - seq / 20) for seq in (4, 2, 7, 9, 11)))
    deep = {hit.item_seq: hit.score for hit in fuse(keyword, vector, 20, SEMANTIC, set(), FLOOR)}
    # Items 1 to 4 are in the shallow reads as in the deep ones (2 and 4 in both rankings, 1 and 3 in one).
    shallow = {hit.item_seq: hit.score for hit in fuse(keyword[:4], vector[:2], 20, SEMANTIC, set(), FLOOR)}
    assert shallow == pytest.approx({seq: deep[seq] for seq in (1, 2, 3, 4)})


def test_fusion_keeps_the_keyword_passage_and_the_depth_asked() -> None:
    keyword = [Ranked(1, 100, 3.0)]
    vector = [Ranked(1, 101, 0.9), Ranked(2, 200, 0.5)]
    fused = fuse(keyword, vector, 1, SEMANTIC, set(), FLOOR)
    assert [(hit.item_seq, hit.passage) for hit in fused] == [(1, 100)]


def test_an_item_without_vectors_scores_as_if_the_vectors_agreed_with_keyword() -> None:
    keyword, vector = _ranking((1, 4.0), (2, 2.0)), _ranking((1, 0.9))
    waiting = fuse(keyword, vector, 10, HALF, unembedded={2}, floor=FLOOR)
    assert waiting[1].score == pytest.approx(0.5)  # its keyword score, 2/4, for both shares
    # An embedded item that the vectors did not find gets keyword's share only.
    plain = fuse(keyword, vector, 10, HALF, set(), FLOOR)
    assert plain[1].score == pytest.approx(0.25)


def test_empty_or_flat_rankings_still_fuse() -> None:
    assert fuse([], [], 10, SEMANTIC, set(), FLOOR) == []
    assert _order(fuse(_ranking((1, 0.0)), [], 10, SEMANTIC, set(), FLOOR)) == [1]
    assert _order(fuse([], _ranking((5, FLOOR)), 10, SEMANTIC, set(), FLOOR)) == [5]


def test_rank_fusion_merges_rankings_of_equal_standing() -> None:
    fused = fuse_ranks(_ranking((1, 9.0), (2, 8.0)), _ranking((3, 0.9), (2, 0.8)), 10)
    assert _order(fused) == [2, 1, 3]  # found by both first; then the first of each, tied, by store order
    assert fused[0].score == pytest.approx(2 / 62)


def test_feedback_moves_the_query_towards_keywords_best_items() -> None:
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    best = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    moved = feedback_query(query, best, HALF)
    # A unit step along the mean's direction, (0, 1, 1) / sqrt(2), then unit length again.
    assert moved == pytest.approx(np.array([np.sqrt(0.5), 0.5, 0.5]), abs=1e-6)
    assert feedback_query(query, best[:0], HALF) is query
    assert feedback_query(query, best, Fusion(vector=0.5, feedback_items=3, feedback_weight=0.0)) is query


def test_semantic_embedders_get_a_larger_share_than_lexical_ones() -> None:
    assert fusion_for(HashingEmbedder()) is LEXICAL
    assert fusion_for(StaticEmbedder()) is SEMANTIC
    assert fusion_for(MiniLMEmbedder()) is MINILM  # the default: vectors as good as keyword, the largest share
    assert 0 < LEXICAL.vector < SEMANTIC.vector < MINILM.vector < 1
    assert SEMANTIC.feedback_items > 0 and SEMANTIC.feedback_weight > 0


class _TableEmbedder:
    """Vectors looked up by text: what each text "means" is set by the test."""

    identity = "test-table/4"
    dimensions = 4

    def __init__(self, table: dict[str, int]) -> None:
        self._table = table

    async def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), 4), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, self._table.get(text.strip(), 3)] = 1.0
        return out


async def test_hybrid_reads_vectors_with_the_feedback_of_keywords_best(tmp_path: Path) -> None:
    # The query's own vector is like no document's; the release notes it names by word mean what the
    # changelog means, which shares no word with the query.
    table = {"alpha": 0, "alpha release notes": 1, "what shipped in the spring": 1, "gamma ray bursts": 2}
    engine = LocalEngine(tmp_path / "memory.sqlite3", embedder=_TableEmbedder(table))
    try:
        notes = await engine.store(Document.from_text("alpha release notes"))
        changelog = await engine.store(Document.from_text("what shipped in the spring"))
        await engine.store(Document.from_text("gamma ray bursts"))
        assert await engine.wait_for_vectors(timeout_s=30)

        async def ids(mode: FetchMode) -> list[str]:
            page = await engine.fetch(FetchRequest(query="alpha", mode=mode, limit=5))
            return [str(hit.id) for hit in page.hits]

        assert await ids(FetchMode.KEYWORD) == [str(notes.id)]
        assert await ids(FetchMode.VECTOR) == []  # the vector mode reads the query's own vector
        assert await ids(FetchMode.HYBRID) == [str(notes.id), str(changelog.id)]
    finally:
        engine.close()


async def test_a_large_files_overlapped_hybrid_read_ranks_as_the_sequential_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From `ranking.OVERLAP_FROM` vectors, keyword's best few feed the query while the vector scan runs beside the
    deep keyword read: the same hits, scores and order as reading one after the other."""
    rng = np.random.default_rng(9)
    words = [f"w{n}" for n in range(60)]
    engine = LocalEngine(tmp_path / "memory.sqlite3", embedder=HashingEmbedder())
    try:
        for _ in range(4):
            docs = [Document.from_text(" ".join(rng.choice(words, size=int(rng.integers(3, 40))))) for _ in range(100)]
            await engine.store_many(docs)
        assert await engine.wait_for_vectors(timeout_s=60)
        queries = [" ".join(rng.choice(words, size=3)) for _ in range(25)]

        async def hits() -> list[list[tuple[str, float]]]:
            found = []
            for query in queries:
                page = await engine.fetch(FetchRequest(query=query, mode=FetchMode.HYBRID, limit=10))
                found.append([(str(hit.id), hit.score) for hit in page.hits])
            return found

        monkeypatch.setattr(ranking, "OVERLAP_FROM", 10**9)
        sequential = await hits()
        scans = []
        monkeypatch.setattr(ranking, "OVERLAP_FROM", 0)
        monkeypatch.setattr(ranking, "vector_candidates", lambda *args: scans.append(1) or vector_candidates(*args))
        assert await hits() == sequential
        assert len(scans) == len(queries) and all(sequential)
    finally:
        engine.close()
