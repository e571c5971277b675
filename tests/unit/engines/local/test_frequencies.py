"""Term frequencies solved from tantivy's per-term scores equal those its explanations give, for every length."""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest
import tantivy

from engines.local import frequencies as module
from engines.local.frequencies import explained, frequencies, stored_lengths
from engines.local.keyword_index import SCHEMA, open_index

WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord"]


def index_of(path: Path, texts: list[str]) -> tantivy.Searcher:
    index = open_index(path, create=True)
    writer = index.writer(heap_size=15_000_000, num_threads=1)
    for rowid, text in enumerate(texts, start=1):
        doc = tantivy.Document()
        doc.add_integer("rowid", rowid)
        doc.add_unsigned("length", len(text.split()))
        doc.add_text("text", text)
        doc.add_text("every", "every")
        writer.add_document(doc)
    writer.commit()
    index.reload()
    return index.searcher()


def texts(seed: int) -> list[str]:
    """Documents of 1 to 6,000 terms (tantivy keeps lengths past 40 rounded), some repeating one word thousands of
    times, where a float32 score can no longer tell one frequency from the next."""
    rng = random.Random(seed)
    made = []
    for length in [*range(1, 60), *rng.sample(range(60, 6_000), 80)]:
        weights = [rng.random() ** 3 for _ in WORDS]
        made.append(" ".join(rng.choices(WORDS, weights, k=length)))
    made += ["amber " * 4_000 + "dune", "cobalt " * 20_000]
    return made


def test_stored_lengths_are_tantivys(tmp_path: Path) -> None:
    made = texts(1)
    searcher = index_of(tmp_path / "index", made)
    query = tantivy.Query.term_query(SCHEMA, "text", "amber")
    hits = searcher.search(query, len(made), count=False).hits
    assert len(hits) > 50
    lengths = np.array([int(v or 0) for v in searcher.fast_field_values("length", [a for _, a in hits])])
    for (_, address), length, stored in zip(hits, lengths, stored_lengths(lengths), strict=True):
        dl = re.search(r'"value": ([0-9.]+),\s*"description": "dl, length', query.explain(searcher, address).to_json())
        assert dl is not None and stored == float(dl.group(1)), length


@pytest.mark.parametrize("alone_up_to", [0, module.ALONE_UP_TO])  # each term among the candidates, or alone
@pytest.mark.parametrize("terms", [["amber"], ["amber", "dune", "fjord"], ["cobalt", "basalt", "cobalt"], ["absent"]])
def test_solved_frequencies_are_the_explained_ones(
    tmp_path: Path, terms: list[str], alone_up_to: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(module, "ALONE_UP_TO", alone_up_to)
    made = texts(2)
    searcher = index_of(tmp_path / "index", made)
    query = tantivy.Query.boolean_query(
        [(tantivy.Occur.Should, tantivy.Query.term_query(SCHEMA, "text", t)) for t in terms]
    )
    hits = searcher.search(query, 100, count=False).hits  # the candidates: some of the documents, not all
    candidates = [address for _, address in hits]
    rowids = [int(v or 0) for v in searcher.fast_field_values("rowid", candidates)]
    lengths = [int(v or 0) for v in searcher.fast_field_values("length", candidates)]
    fallbacks: list[str] = []
    monkeypatch.setattr(module, "explained", lambda text: fallbacks.append(text) or explained(text))
    solved = frequencies(searcher, SCHEMA, "text", terms, candidates, rowids, lengths, query)
    expected = [explained(query.explain(searcher, address).to_json()) for address in candidates]
    assert solved == expected
    for rowid, found in zip(rowids, solved, strict=True):
        words = made[rowid - 1].split()
        assert found == {t: words.count(t) for t in set(terms) if t in words}
    # Only the documents with thousands of one word are explained.
    assert len(fallbacks) <= 2
