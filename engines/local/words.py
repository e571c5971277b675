"""Words as the local engine's search reads them: query words, English stop words, and light stemming.

The keyword index stems with FTS5's Porter tokenizer, so a query word is stemmed by the same
tokenizer when it is matched. What the index cannot drop are stop words: a query's "the", "of"
and "to" would match nearly every passage and add nothing but cost, so they are left out of
the query (unless the query has nothing else). The recall answer compares sentences with the
question in Python, where a light stemmer (plural endings only) is enough to match "deploys"
with "deploy" without a stemming library.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+")

# Lucene's default English stop set (the list its StandardAnalyzer has long used), which BM25
# baselines such as Anserini's apply too.
_LUCENE_ENGLISH = (
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with"
)
# Agents ask questions ("how do I ...", "what did we ..."): question words, auxiliaries and pronouns
# carry no topic either.
_QUESTIONS = "how what when where which who whom why do does did can could should would i me my we our us you your from"
STOP_WORDS = frozenset(_LUCENE_ENGLISH.split()) | frozenset(_QUESTIONS.split())


def query_words(text: str) -> list[str]:
    """The distinct words of a query, lowercased, as the index's tokenizer splits them."""
    return list(dict.fromkeys(_WORD.findall(text.lower().replace("_", " "))))


def search_words(text: str) -> list[str]:
    """The query words worth searching for: the stop words left out, unless they are all there is."""
    words = query_words(text)
    kept = [w for w in words if w not in STOP_WORDS]
    return kept or words


def light_stem(word: str) -> str:
    """A word without its plural ending (Harman's S-stemmer): "policies" -> "policy", "deploys" -> "deploy"."""
    if len(word) > 3 and word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if len(word) > 2 and word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def content_terms(text: str) -> set[str]:
    """The stemmed words of `text` other than stop words: what a sentence and a question share."""
    return {light_stem(w) for w in _WORD.findall(text.lower()) if w not in STOP_WORDS}
