"""Keyword search in PostgreSQL, ranked by BM25 as the local engine's FTS5 ranks it.

`ts_rank` is not BM25 (no inverse document frequency, no length normalisation against the average), so the
ranking is computed from the statistics BM25 needs: each passage's length (`passages.tokens`), each term's
frequency in a passage (read back from `ts_rank` of the term alone: `champions.TERM_FREQUENCY`), the number of
passages holding each term (counted on the GIN index, or kept with a common word's champion list) and the
passages' count and average length. The formula is FTS5's `bm25()` (k1 1.2, b 0.75, an inverse document
frequency floored at 1e-6 for a term in half the passages or more), so the two engines score alike; the words
are the local engine's (`search_words`: its stop words left out of a query) and Porter-stemmed as its index
stems them (`schema.TEXT_CONFIG`).

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
from engines.postgres import champions
from engines.postgres.schema import TEXT_CONFIG
from engines.postgres.sql import sql_of
from engines.postgres.writes import indexed_words

K1 = champions.K1
B = champions.B
MIN_IDF = 1e-6
PRUNE_FROM_PASSAGES = 2_000
"""From this many passages, a word in half of them or more is left out of a query (as the local engine does)."""
FIRST_ROUND = 10_000
"""How many passages a read's first MaxScore round may read (every term it covers, rarest first)."""
REFRESH_S = 2.0
"""How stale the statistics of a large table may be while writes come."""
LARGE = 10_000
_LEXEMES = 50_000

ADMIT_DEPTH = 4
"""How many times the wanted items a ranking checks against the filter before it ranks admitted items only."""

_MARK = "SELECT (SELECT last_value FROM passages_id_seq), (SELECT last_value FROM deletions)"
_TF = champions.TERM_FREQUENCY.format(query="%s::tsquery")


def _ranking_sql(score: str, frequencies: str, held: str, where: str, *, admit_first: bool) -> str:
    """The best items by their best passage among those `held` selects, by BM25 (`score`) over the query's terms.

    Each term's part is a flat expression (no subquery a row), and the passages are scored before they meet their
    items (`OFFSET 0` keeps the planner from hashing whole passages, tsvectors and all, for a join). Checking an
    item against the read's filter `where` costs about as much as scoring its passage, so by default only the
    best `ADMIT_DEPTH` times the wanted items are checked, which serves whenever the filter admits enough of them
    (a tenant's or a workspace's items in a database mostly theirs); the statement also counts the items ranked
    (`items`). With `admit_first` each passage's item is checked before ranking: for a filter that leaves too few
    of the best (a small tenant, a narrow folder)."""
    admitted = f"JOIN items i ON i.seq = s.item_seq WHERE ({where})" if admit_first else ""
    best = (
        "SELECT DISTINCT ON (s.item_seq) s.item_seq, s.id, s.score FROM ("
        f"SELECT p.item_seq, p.id, {score} AS score FROM passages p CROSS JOIN LATERAL (SELECT {frequencies}) f "
        f"WHERE ({held}) OFFSET 0) s {admitted} ORDER BY s.item_seq, s.score DESC, s.id"
    )
    if admit_first:
        return f"SELECT item_seq, id, score FROM ({best}) b ORDER BY score DESC, id LIMIT %s"
    return (
        "SELECT b.item_seq, b.id, b.score, b.items FROM ("
        f"SELECT d.item_seq, d.id, d.score, count(*) OVER () AS items FROM ({best}) d "
        "ORDER BY d.score DESC, d.id LIMIT %s"
        f") b JOIN items i ON i.seq = b.item_seq WHERE ({where}) ORDER BY b.score DESC, b.id LIMIT %s"
    )


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
        """The passages' count and average length, and how many passages hold each of `terms`.

        A word is counted on the index up to `champions.COMMON_FROM`; one held by that many is common, and its
        count is its champion list's (built now if it has none, or built again once the table moved enough)."""
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
        listed = champions.known(conn, missing)
        for term in missing:
            found = listed.get(term)
            if found is None:
                held = champions.counted_up_to(conn, _tsquery([term]), champions.COMMON_FROM)
                if held < champions.COMMON_FROM:
                    stats.frequency[term] = held
                    continue
            if found is None or found.stale(stats.passages):
                found = champions.build(conn, term, _tsquery([term]), stats.passages, stats.average)
            elif found.changes >= champions.FOLD_FROM:
                champions.fold(conn, term)
            stats.frequency[term] = found.passages
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
    keyword read, are then never visited; when the bound does not hold, the next rarest term joins the scan.

    A word held by `champions.COMMON_FROM` passages or more is scanned through its champion list, whose bound is
    its threshold's weight: when even that leaves the bound unmet once every term is scanned, the ranking is the
    best of the passages read (the lists' best, by the impact BM25 ranks them with). Should a filter leave fewer
    than `want` items among them, every passage of the query's words is scored, as without lists."""
    words = search_words(query)
    terms = stats.lexemes(conn, words) if words else []
    if not terms or want < 1:
        return []
    total, average, frequency = stats.statistics(conn, terms)
    terms = informative(terms, total, frequency)
    weights = [idf(total, frequency[t]) for t in terms]
    lists = champions.read(conn, [t for t in terms if frequency[t] >= champions.COMMON_FROM])
    rarest_first = sorted(range(len(terms)), key=lambda n: (-weights[n], n))
    scorer = _Scorer(conn, where, terms, weights, average)
    cost = [len(lists[t].passages) if t in lists else frequency[t] for t in terms]
    for scanned in _rounds([cost[n] for n in rarest_first]):
        essential = [terms[n] for n in rarest_first[:scanned]]
        bound = (K1 + 1) * sum(weights[n] for n in rarest_first[scanned:])
        bound += (K1 + 1) * sum(
            weights[n] * lists[terms[n]].bound(average) for n in rarest_first[:scanned] if terms[n] in lists
        )
        read = [p for t in essential if t in lists for p in lists[t].passages]
        ranked = scorer.ranked([t for t in essential if t not in lists], read, want)
        if len(ranked) >= want and ranked[want - 1].score > bound:
            return ranked
        if scanned == len(terms):
            return ranked if len(ranked) >= want or not lists else scorer.ranked(terms, [], want)
    return []  # not reached: the last round returns


def _rounds(costs: list[int]) -> range:
    """How many of the terms (rarest first, each costing `costs` passages to read) each round reads: the first
    reads as many as `FIRST_ROUND` passages allow (at least one), each later round one more. A round reads its
    terms' passages again, so a first round of cheap terms costs less than a round for each."""
    first, read = 1, costs[0]
    while first < len(costs) and read + costs[first] <= FIRST_ROUND:
        read += costs[first]
        first += 1
    return range(first, len(costs) + 1)


class _Scorer:
    """Scores the passages holding some terms (and some passages by id) for every term of a query, in SQL."""

    def __init__(self, conn: psycopg.Connection, where: Where, terms: list[str], weights: list[float], average: float):
        self._conn = conn
        self._clause, self._params = sql_of(where)
        self._terms = [_tsquery([t]) for t in terms]
        length = K1 * B / average if average > 0 else 0.0
        self._weights = [value for weight in weights for value in (weight, length, K1 * (1 - B))]
        self._score = " + ".join(f"%s * f.t{n} * {K1 + 1} / (f.t{n} + %s * p.tokens + %s)" for n in range(len(terms)))
        self._frequencies = ", ".join(f"{_TF} AS t{n}" for n in range(len(terms)))

    def ranked(self, scanned: list[str], passages: list[int], want: int) -> list[Ranked]:
        """The best `want` items among the passages holding one of `scanned` or listed in `passages`."""
        held = ["p.words @@ %s::tsquery"] if scanned else []
        held += ["p.id = ANY(%s::bigint[])"] if passages else []
        if not held:  # only emptied lists to read
            return []
        parts = (self._score, self._frequencies, " OR ".join(held), self._clause)
        found = ([_tsquery(scanned)] if scanned else []) + ([passages] if passages else [])
        head = (*self._weights, *self._terms, *found)
        depth = max(want * ADMIT_DEPTH, 100)
        rows = self._conn.execute(
            _ranking_sql(*parts, admit_first=False).encode(), (*head, depth, *self._params, want)
        ).fetchall()
        if len(rows) < want and not (rows and rows[0][3] <= depth):  # the filter left too few of the best
            rows = self._conn.execute(
                _ranking_sql(*parts, admit_first=True).encode(), (*head, *self._params, want)
            ).fetchall()
        return [Ranked(int(row[0]), int(row[1]), float(row[2] or 0.0)) for row in rows]


__all__ = ["KeywordStats", "idf", "informative", "keyword_ranking"]
