"""How often each query term occurs in each of a search's candidates, read back from tantivy's scores.

The derived keyword index scores its candidates again with FTS5's formula, which needs each term's exact
frequency in each candidate. tantivy's Python bindings give no postings, only scores and explanations, and an
explanation per candidate costs 15 to 50 microseconds (it builds the query's weight again each time), which at
hundreds of candidates was most of a hybrid search. So each term is searched once, among the candidates alone,
and its frequency in each is solved from its BM25 score:

    score = weight * tf / (tf + norm),  so  tf = norm * v / (1 - v)  with  v = score / weight,

where `weight` is the term's idf times (k1 + 1) and `norm` is k1 * (1 - b + b * dl / avgdl). Both are tantivy's:
its idf and average length are read from one explanation per term, and `dl` is the document's length as tantivy
keeps it, in one byte (`stored_lengths`). The answer must be the one whole number whose score, computed as tantivy
computes it in float32, is the score tantivy gave; a candidate where it is not (a word repeated thousands of times,
whose neighbouring frequencies float32 cannot tell apart) is explained instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import numpy as np
import tantivy
from numpy.typing import NDArray

K1 = 1.2
B = 0.75
ALONE_UP_TO = 20
"""A term held by at most this many documents per candidate is searched alone, all its documents scored (about
0.3 microseconds each), rather than among the candidates (about 10 microseconds a candidate, looked up by rowid)."""
_FREE = 24
"""Lengths below this are kept exactly; above, Lucene's SmallFloat scheme (as tantivy's `fieldnorm::code`)."""


def _decoded(code: int) -> int:
    if code < _FREE:
        return code
    bits, shift = (code - _FREE) & 0x07, ((code - _FREE) >> 3) - 1
    return _FREE + (bits if shift < 0 else (bits | 0x08) << shift)


_LENGTHS = np.array([_decoded(code) for code in range(256)], dtype=np.int64)
"""tantivy's one-byte field norms, decoded: 0 to 40 exactly, then steps that widen by a tenth or so."""


def stored_lengths(lengths: NDArray[np.int64]) -> NDArray[np.int64]:
    """Documents' lengths as tantivy's field norm keeps them: the largest decoded value not above each."""
    return _LENGTHS[np.searchsorted(_LENGTHS, lengths, side="right") - 1]


_IDF = re.compile(r'"value": ([0-9.eE+-]+),\s*"description": "idf, computed')
_AVERAGE = re.compile(r'"value": ([0-9.eE+-]+),\s*"description": "avgdl, average length')
_FREQ = re.compile(r'"value": ([0-9.eE+-]+),\s*"description": "freq, occurrences')
_TERM = re.compile(r'Term=Term\(field=\d+, type=Str, \\"(.*?)\\"\)"')


def frequencies(
    searcher: tantivy.Searcher,
    schema: tantivy.Schema,
    field: str,
    terms: Sequence[str],
    candidates: Sequence[tantivy.DocAddress],
    rowids: Sequence[int],
    lengths: Sequence[int],
    query: tantivy.Query,
) -> list[dict[str, int]]:
    """Each candidate's frequency of each of `terms` in `field` (terms it lacks left out). `rowids` and `lengths`
    are the candidates' `rowid` and `length` fast fields; `query` is explained for a candidate whose frequencies
    cannot be solved from the scores."""
    found: list[dict[str, int]] = [{} for _ in candidates]
    if not candidates:
        return found
    at = {(address.segment_ord, address.doc): n for n, address in enumerate(candidates)}
    length_array = np.asarray(lengths, dtype=np.int64)
    among = tantivy.Query.const_score_query(tantivy.Query.term_set_query(schema, "rowid", list(rowids)), 0.0)
    unsolved: set[int] = set()
    for term in dict.fromkeys(terms):
        alone = tantivy.Query.term_query(schema, field, term)
        held = searcher.doc_freq(field, term)
        if held <= ALONE_UP_TO * len(candidates):
            # A rare term: every document holding it, scored, costs less than looking the candidates up.
            hits = searcher.search(alone, max(held, 1), count=False).hits
        else:
            both = tantivy.Query.boolean_query([(tantivy.Occur.Must, alone), (tantivy.Occur.Must, among)])
            hits = searcher.search(both, len(candidates), count=False).hits
        if not hits:
            continue
        weight, average = _scoring(alone.explain(searcher, hits[0][1]).to_json())
        mine = [(n, score) for score, address in hits if (n := at.get((address.segment_ord, address.doc))) is not None]
        if not mine:
            continue
        rows = np.array([n for n, _ in mine], dtype=np.int64)
        scores = np.array([score for _, score in mine], dtype=np.float32)
        solved = _solved(scores, weight, average, length_array[rows])
        for n, tf in zip(rows.tolist(), solved.tolist(), strict=True):
            if tf > 0:
                found[n][term] = tf
            else:
                unsolved.add(n)
    for n in unsolved:
        found[n] = explained(query.explain(searcher, candidates[n]).to_json())
    return found


def _scoring(explanation: str) -> tuple[np.float32, np.float32]:
    """A term query's weight (idf times k1 + 1) and the field's average length, as tantivy computes them."""
    idf = np.float32(_IDF.findall(explanation)[0])
    average = np.float32(_AVERAGE.findall(explanation)[0])
    return idf * (np.float32(1.0) + np.float32(K1)), average


def _solved(
    scores: NDArray[np.float32], weight: np.float32, average: np.float32, lengths: NDArray[np.int64]
) -> NDArray[np.int64]:
    """For each score, the frequency whose BM25 score, computed as tantivy does in float32, is that score; 0 where
    there is none, or where the next frequency up or down scores the same (thousands of one word: float32 cannot
    tell them apart). Array arithmetic in float32, operation for operation as tantivy's scalar code."""
    stored = stored_lengths(lengths).astype(np.float32)
    norm = np.float32(K1) * (np.float32(1.0 - B) + np.float32(B) * stored / average)
    share = scores.astype(np.float64) / float(weight)
    possible = (share > 0.0) & (share < 1.0)
    share = np.where(possible, share, 0.5)
    tf = np.rint(norm.astype(np.float64) * share / (1.0 - share))

    def scored(n: NDArray[np.float64]) -> NDArray[np.float32]:
        frequency = n.astype(np.float32)
        return (weight * (frequency / (frequency + norm))).astype(np.float32, copy=False)

    exact = (scored(tf) == scores) & (scored(tf - 1) != scores) & (scored(tf + 1) != scores)
    return np.where(possible & (tf >= 1) & exact, tf, 0).astype(np.int64)


def explained(explanation: str) -> dict[str, int]:
    """Each query term's frequency in one document, from tantivy's explanation of its score."""
    freqs = [int(float(v)) for v in _FREQ.findall(explanation)]
    terms = [json.loads(f'"{t}"') for t in _TERM.findall(explanation)]
    return dict(zip(terms, freqs, strict=True))
