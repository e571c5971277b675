"""The words keyword search and recall read, as pure functions (fusion's rules: test_fusion.py)."""

from __future__ import annotations

import pytest

from engines.local.words import content_terms, light_stem, search_words


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
