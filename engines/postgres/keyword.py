"""Keyword search in PostgreSQL, ranked by BM25 as the local engine's FTS5 ranks it.

`ts_rank` is not BM25 (no inverse document frequency, no length normalisation against the average), so the
ranking is computed from the statistics BM25 needs: each passage's length (`passages.tokens`), each term's
frequency in a passage (read back from `ts_rank` of the term alone, which for an unweighted lexeme is
0.1 * (1 + 1/4 + ... + 1/tf²) / (π²/6), so tf = round(1 / (π²/6 - 10 (π²/6) rank) - 0.5): one lookup a term,
where unnesting the tsvector read all of it), the number of passages holding each term (counted on the GIN index)
and the passages' count and average length. The formula is FTS5's `bm25()` (k1 1.2, b 0.75, an inverse document
frequency floored at 1e-6 for a term in half the passages or more), so the two
engines score alike; the words are the local engine's (`search_words`: its stop words left out of a query) and
Porter-stemmed as its index stems them (`schema.TEXT_CONFIG`).

The statistics are the whole database's (every tenant's), as they are the whole file's for the local engine.
Counting them is not free at scale, so they are kept per engine and read again when the passages' sequence or the
deletions sequence moved (a store or a removal somewhere), at most every `REFRESH_S` once the table is large: a
ranking may then use statistics a few seconds old, which moves scores by far less than it moves any order.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg

from engines.local.search import Ranked
from engines.local.where import Where
from engines.local.words import search_words
from engines.postgres.schema import TEXT_CONFIG
from engines.postgres.sql import sql_of
from engines.postgres.writes import indexed_words

ZETA_2 = 1.64493406685
"""The sum of 1/n² (π²/6): `ts_rank`'s scale."""
TS_RANK_WEIGHT = 0.1
"""`ts_rank`'s weight of a lexeme without a weight label (D)."""
K1 = 1.2
B = 0.75
MIN_IDF = 1e-6
PRUNE_FROM_PASSAGES = 2_000
"""From this many passages, a word in half of them or more is left out of a query (as the local engine does)."""
REFRESH_S = 2.0
"""How stale the statistics of a large table may be while writes come."""
LARGE = 10_000
_LEXEMES = 50_000

_MARK = "SELECT (SELECT last_value FROM passages_id_seq), (SELECT last_value FROM deletions)"
_RANK = """
WITH q (term, idf) AS (SELECT * FROM unnest(%s::tsquery[], %s::float8[])),
scored AS (
    SELECT p.item_seq, p.id, (
        SELECT sum(f.idf * f.tf * {k1_plus} / (f.tf + %s * p.tokens + %s)) FROM (
            SELECT q.idf, round(1 / ({zeta} - {scale} * ts_rank(p.words, q.term)) - 0.5) AS tf FROM q
        ) f
    ) AS score
    FROM passages p JOIN items i ON i.seq = p.item_seq
    WHERE p.words @@ %s::tsquery AND ({where})
)
SELECT item_seq, id, score FROM (
    SELECT DISTINCT ON (item_seq) item_seq, id, score FROM scored ORDER BY item_seq, score DESC, id
) best ORDER BY score DESC, id LIMIT %s
"""


@dataclass(slots=True)
class _Stats:
    mark: tuple[int, int] = (-1, -1)
    read_at: float = -math.inf
    passages: int = 0
    average: float = 0.0
    frequency: dict[str, int] = field(default_factory=dict)


class KeywordStats:
    """The BM25 statistics one engine reads with, and the stems of words it has seen; safe across threads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._stats = _Stats()
        self._stems: dict[str, list[str]] = {}

    def lexemes(self, conn: psycopg.Connection, words: list[str]) -> list[str]:
        """The index's terms for `words`, distinct, in order (stemming is deterministic, so kept)."""
        with self._lock:
            unknown = [w for w in words if w not in self._stems]
        if unknown:
            rows = conn.execute(
                f"SELECT w, array(SELECT lexeme FROM unnest(to_tsvector('{TEXT_CONFIG}', w))) "
                "FROM unnest(%s::text[]) AS w",
                ([" ".join(indexed_words(w)) for w in unknown],),
            ).fetchall()
            with self._lock:
                if len(self._stems) > _LEXEMES:
                    self._stems.clear()
                for word, (_, stems) in zip(unknown, rows, strict=True):
                    self._stems[word] = list(stems)
        with self._lock:
            return list(dict.fromkeys(stem for w in words for stem in self._stems[w]))

    def statistics(self, conn: psycopg.Connection, terms: list[str]) -> tuple[int, float, dict[str, int]]:
        """The passages' count and average length, and how many passages hold each of `terms`."""
        mark = tuple(conn.execute(_MARK).fetchone() or (0, 0))
        with self._lock:
            stats = self._stats
            stale = mark != stats.mark and (stats.passages < LARGE or self._clock() - stats.read_at >= REFRESH_S)
        if stale:
            count, average = conn.execute("SELECT count(*), coalesce(avg(tokens), 0) FROM passages").fetchone() or (
                0,
                0,
            )
            stats = _Stats((int(mark[0]), int(mark[1])), self._clock(), int(count), float(average))
            with self._lock:
                self._stats = stats
        missing = [t for t in terms if t not in stats.frequency]
        for term in missing:
            row = conn.execute("SELECT count(*) FROM passages WHERE words @@ %s::tsquery", (_tsquery([term]),))
            found = row.fetchone()
            stats.frequency[term] = int(found[0]) if found else 0
        return stats.passages, stats.average, {t: stats.frequency[t] for t in terms}


def _tsquery(terms: list[str]) -> str:
    """A tsquery matching any of `terms` (already stemmed: the cast applies no dictionary)."""
    return " | ".join("'" + term.replace("\\", "\\\\").replace("'", "''") + "'" for term in terms)


def informative(terms: list[str], total: int, frequency: dict[str, int]) -> list[str]:
    """The terms worth scoring: those in at most half of the passages (BM25 gives the rest about nothing), the
    rarest always kept; every term while the table is small (`engines.local.search.informative_words`)."""
    if len(terms) < 2 or total < PRUNE_FROM_PASSAGES:
        return terms
    kept = [t for t in terms if frequency[t] * 2 <= total]
    return kept or [min(terms, key=lambda t: frequency[t])]


def idf(total: int, holding: int) -> float:
    """FTS5's inverse document frequency: log((N - n + 0.5) / (n + 0.5)), at least `MIN_IDF`."""
    value = math.log((total - holding + 0.5) / (holding + 0.5)) if total else 0.0
    return value if value > 0 else MIN_IDF


def keyword_ranking(conn: psycopg.Connection, stats: KeywordStats, where: Where, query: str, want: int) -> list[Ranked]:
    """Items whose passages hold a word of `query` (stop words aside), best passage's BM25 first.

    Only passages holding one of the query's rarer terms are scored, as long as that provably gives the same
    ranking (MaxScore, Turtle and Flood 1995): a term adds at most idf * (k1 + 1) to a passage's score, so once the
    `want`-th item found among the passages holding the rarer terms scores more than the common terms' bounds
    together, no passage holding only common terms can enter the ranking. A common term's passages, the most of a
    keyword read, are then never visited; when the bound does not hold, the next rarest term joins the scan."""
    words = search_words(query)
    terms = stats.lexemes(conn, words) if words else []
    if not terms or want < 1:
        return []
    total, average, frequency = stats.statistics(conn, terms)
    terms = informative(terms, total, frequency)
    weights = [idf(total, frequency[t]) for t in terms]
    length = K1 * B / average if average > 0 else 0.0
    clause, params = sql_of(where)
    statement = _RANK.format(k1_plus=K1 + 1, zeta=ZETA_2, scale=ZETA_2 / TS_RANK_WEIGHT, where=clause).encode()
    rarest_first = sorted(range(len(terms)), key=lambda n: (-weights[n], n))
    for scanned in range(1, len(terms) + 1):
        essential = [terms[n] for n in rarest_first[:scanned]]
        bound = (K1 + 1) * sum(weights[n] for n in rarest_first[scanned:])
        rows = conn.execute(
            statement,
            ([_tsquery([t]) for t in terms], weights, length, K1 * (1 - B), _tsquery(essential), *params, want),
        ).fetchall()
        ranked = [Ranked(int(seq), int(passage), float(score or 0.0)) for seq, passage, score in rows]
        if scanned == len(terms) or (len(ranked) >= want and ranked[want - 1].score > bound):
            return ranked
    return []  # not reached: the last round scans every term


__all__ = ["KeywordStats", "idf", "informative", "keyword_ranking"]
