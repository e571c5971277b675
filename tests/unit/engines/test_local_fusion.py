"""Hybrid fusion's rules and the words keyword search and recall read, as pure functions."""

from __future__ import annotations

import pytest

from engines.local import HashingEmbedder
from engines.local.fusion import EQUAL, LEXICAL, SEMANTIC, fuse, fusion_for
from engines.local.search import Ranked
from engines.local.static import StaticEmbedder
from engines.local.words import content_terms, light_stem, search_words


def _ranking(*seqs: int) -> list[Ranked]:
    return [Ranked(seq, seq * 10, 1.0) for seq in seqs]


def _order(ranked: list[Ranked]) -> list[int]:
    return [hit.item_seq for hit in ranked]


def test_a_weak_vector_ranking_cannot_pull_the_keyword_leaders_down() -> None:
    keyword = _ranking(1, 2, 3)
    vector = _ranking(9, 8, 7)  # items keyword never found lead the vector ranking
    assert _order(fuse(keyword, vector, 10, SEMANTIC, set())) == [1, 2, 3, 9, 8, 7]
    # Plain fusion (equal weights) interleaves them with keyword's best.
    assert _order(fuse(keyword, vector, 10, EQUAL, set())) == [1, 9, 2, 8, 3, 7]
    # What both rankings found still rises: keyword's fifth, first by the vectors, passes keyword's fourth.
    order = _order(fuse(_ranking(1, 2, 3, 4, 5), _ranking(5), 10, SEMANTIC, set()))
    assert order.index(5) < order.index(4)


def test_agreement_of_both_rankings_wins_and_each_item_is_listed_once() -> None:
    fused = fuse(_ranking(1, 2), _ranking(2, 1), 10, SEMANTIC, set())
    assert sorted(_order(fused)) == [1, 2]
    assert fused[0].score == pytest.approx(SEMANTIC.keyword / (SEMANTIC.k + 1) + SEMANTIC.vector / (SEMANTIC.k + 2))


def test_fusion_keeps_the_keyword_passage_and_the_depth_asked() -> None:
    keyword = [Ranked(1, 100, 3.0)]
    vector = [Ranked(1, 101, 0.9), Ranked(2, 200, 0.5)]
    fused = fuse(keyword, vector, 1, SEMANTIC, set())
    assert [(hit.item_seq, hit.passage) for hit in fused] == [(1, 100)]


def test_an_item_without_vectors_ranks_as_if_the_vectors_agreed_with_keyword() -> None:
    keyword, vector = _ranking(1, 2), _ranking(1)
    # Item 2 has no vector yet: its keyword rank counts for both rankings, as item 1's two ranks do.
    fused = fuse(keyword, vector, 10, SEMANTIC, unembedded={2})
    assert fused[1].score == pytest.approx((SEMANTIC.keyword + SEMANTIC.vector) / (SEMANTIC.k + 2))
    # An embedded item that the vectors did not find gets keyword's share only.
    plain = fuse(keyword, vector, 10, SEMANTIC, set())
    assert plain[1].score == pytest.approx(SEMANTIC.keyword / (SEMANTIC.k + 2))


def test_lexical_embedders_weigh_less_in_hybrid_than_semantic_ones() -> None:
    assert fusion_for(HashingEmbedder()) is LEXICAL
    assert fusion_for(StaticEmbedder()) is SEMANTIC
    assert 0 < LEXICAL.vector < SEMANTIC.vector < SEMANTIC.keyword
    assert SEMANTIC.k < EQUAL.k


@pytest.mark.parametrize(
    ("query", "words"),
    [
        (
            "How to Reduce Exposure to Alkylphenols Through Your Diet",
            ["reduce", "exposure", "alkylphenols", "through", "diet"],
        ),
        (
            "Do Cholesterol Statin Drugs Cause Breast Cancer?",
            ["cholesterol", "statin", "drugs", "cause", "breast", "cancer"],
        ),
        ("the who", ["the", "who"]),  # nothing but stop words: search them rather than nothing
        ("snake_case and CamelCase", ["snake", "case", "camelcase"]),
        ("***", []),
    ],
)
def test_search_words_leave_stop_words_out(query: str, words: list[str]) -> None:
    assert search_words(query) == words


@pytest.mark.parametrize(
    ("word", "stem"),
    [("policies", "policy"), ("deploys", "deploy"), ("boxes", "boxe"), ("status", "status"), ("glass", "glass")],
)
def test_light_stemming_folds_plural_endings_only(word: str, stem: str) -> None:
    assert light_stem(word) == stem


def test_content_terms_are_what_a_sentence_and_a_question_share() -> None:
    assert content_terms("When do the deploys run?") & content_terms("The deploy runs at noon.") == {"deploy", "run"}
