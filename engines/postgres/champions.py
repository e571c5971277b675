"""Champion lists: for each word held by many passages, the passages where it weighs most.

A keyword read scores every passage holding the query's rarest word. When even that word is in tens of thousands
of passages, scoring them all is most of the read (each one's tsvector read and ranked), and the ranking's head
is almost always among the passages where the word weighs most. So a word held by `COMMON_FROM` passages or more
is *common* and gets a list of its `CHAMPIONS` best passages, which a read scores instead of all of them.

Within one word BM25's idf is fixed, so a passage's place among the word's passages is its *impact*,
tf / (tf + k1 (1 - b + b len / avg)) (BM25's term factor over k1 + 1). The first keyword read that meets a common
word builds its list in one scan of its passages (and counts them: the word's document frequency), keeping the
best `CHAMPIONS` and, as `threshold`, the best impact left out. From then on the list holds every passage of the
word whose impact beats the threshold: a store adds its new passages that do, in its own transaction (`add_new`),
and a removal takes its passages off.

A word's count is kept exact as the table changes: a store records how many of its new passages hold each common
word, and a removal how many of its removed passages held one, as rows of `term_changes` that a read adds up and
a build folds into the count (as does a read that finds `FOLD_FROM` of them waiting: a table whose size holds
steady under churn would never be built again).

A passage outside the list therefore scores at most idf (k1 + 1) threshold for the word, which is what lets a
read prove its ranking exact (`engines.postgres.keyword`). Impacts are taken against the average passage length
when the list was built (`average`): should the average grow to avg', a length weighs avg / avg' as much, and an
impact grows by that ratio at most, so the bound is scaled by it.

A list is built again once the passages' number moved by a quarter since, so the lists stay about `CHAMPIONS`
long (and their average close) as the table grows.

Building takes an exclusive advisory lock, and a store takes it shared for its last statement, so a build's scan
sees every batch committed before it, and every batch committing after it sees the new list: no weighty passage
is left off. Counts need no lock: a build counts and folds the changes in one statement (one snapshot), and a
removal counts its passages out and takes them off the lists in its own `DELETE` statement (`FORGET_GONE`), so a
removal never waits for a build nor a store for a removal. The lists have no foreign keys for that reason: a
build racing a removal may list a passage the removal is deleting, a row naming no passage, which reads ignore and
the next build drops. A removal drops the lists whose word no passage holds any more (an erasure leaves no word
of its passages behind).
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

COMMON_FROM = 5_000
"""A word held by this many passages or more is read from its champion list rather than scored in all of them."""
CHAMPIONS = 1_000
"""How many passages a list keeps when built, and how deep a read takes it."""
REBUILD_RATIO = 1.25
"""A list is built again once the passages' number is this many times (or 1 / this) what it was at its build."""
FOLD_FROM = 1_000
"""A word's count is folded once this many changes wait to be added up (stores and removals of as many batches)."""
K1 = 1.2
B = 0.75
ZETA_2 = 1.64493406685
"""The sum of 1/n² (π²/6): `ts_rank`'s scale."""
TS_RANK_WEIGHT = 0.1
"""`ts_rank`'s weight of a lexeme without a weight label (D)."""
TERM_FREQUENCY = f"round(1 / ({ZETA_2} - {ZETA_2 / TS_RANK_WEIGHT} * ts_rank(p.words, {{query}})) - 0.5)"
"""A term's frequency in passage `p`, in SQL, from `ts_rank` of the term alone (`{query}`, its tsquery): for an
unweighted lexeme that is 0.1 (1 + 1/4 + ... + 1/tf²) / (π²/6), one lookup where unnesting reads the whole tsvector."""
_LOCK = 0x746D_6368  # pg_advisory_xact_lock key ("tmch"): builds exclusive, stores shared

_IMPACT = f"{{tf}} / ({{tf}} + {K1}::float8 * (1 - {B}::float8 + {B}::float8 * {{tokens}} / {{average}}))"
"""A passage's impact for a word, in SQL: built lists and stores compute it alike, so thresholds compare exactly."""

_SCORE_ALL = f"""
WITH scored AS MATERIALIZED (
    SELECT p.id, {_IMPACT.format(tf="f.tf", tokens="p.tokens", average="%(average)s")} AS impact
    FROM passages p CROSS JOIN LATERAL (
        SELECT {TERM_FREQUENCY.format(query="%(term)s::tsquery")}::float8 AS tf
    ) f
    WHERE p.words @@ %(term)s::tsquery
), folded AS (
    DELETE FROM term_changes WHERE term = %(word)s RETURNING 1
)
SELECT id, impact, (SELECT count(*) FROM scored) FROM scored ORDER BY impact DESC, id LIMIT %(limit)s
"""
"""A word's passages scored and counted, and the changes to its count folded away, in one statement: one snapshot
for both, so a store or removal is either in the count or still among the changes, never both nor neither."""
_ADD_NEW = f"""
WITH held AS MATERIALIZED (
    SELECT c.term, p.id, c.threshold, {_IMPACT.format(tf="t.tf", tokens="p.tokens", average="c.average")} AS impact
    FROM passages p
    CROSS JOIN LATERAL (SELECT lexeme, cardinality(positions)::float8 AS tf FROM unnest(p.words)) t
    JOIN common_terms c ON c.term = t.lexeme
    WHERE p.id = ANY(%s) AND EXISTS (SELECT 1 FROM common_terms)
), counted AS (
    INSERT INTO term_changes (term, change) SELECT term, count(*) FROM held GROUP BY term
)
INSERT INTO champions (term, passage, impact) SELECT term, id, impact FROM held WHERE impact > threshold
"""
FORGET_GONE = """
counted_out AS (
    INSERT INTO term_changes (term, change)
    SELECT c.term, -count(*) FROM gone g JOIN passages p ON p.item_seq = g.seq
    CROSS JOIN LATERAL unnest(p.words) t JOIN common_terms c ON c.term = t.lexeme
    WHERE EXISTS (SELECT 1 FROM common_terms) GROUP BY c.term
), unlisted AS (
    DELETE FROM champions h USING gone g JOIN passages p ON p.item_seq = g.seq WHERE h.passage = p.id
)"""
"""Common table expressions for a removal's `DELETE ... RETURNING seq` named `gone`: its passages counted out of the
common words' counts and taken off their lists, in the removal's own statement (its passages are still readable
there: the cascade that deletes them runs at the statement's end)."""
_COUNT = "c.passages + coalesce((SELECT sum(d.change) FROM term_changes d WHERE d.term = c.term), 0)"
_FOLD = """
WITH folded AS (DELETE FROM term_changes WHERE term = %(word)s RETURNING change)
UPDATE common_terms SET passages = passages + coalesce((SELECT sum(change) FROM folded), 0) WHERE term = %(word)s
"""
"""A word's changes added into its count and dropped, in one statement (one snapshot)."""


@dataclass(frozen=True, slots=True)
class Known:
    """A common word's row: how many passages hold it, the total when its list was built, and the average length
    its impacts used."""

    passages: int
    counted_of: int
    average: float
    changes: int = 0
    """How many rows of `term_changes` its count was added up from."""

    def stale(self, total: int) -> bool:
        return not self.counted_of / REBUILD_RATIO <= total <= self.counted_of * REBUILD_RATIO


@dataclass(frozen=True, slots=True)
class Champions:
    """A read of a common word's list: its best passages, and the most any other passage's impact can be."""

    passages: list[int]
    threshold: float
    average: float

    def bound(self, average: float) -> float:
        """The most a passage outside `passages` weighs for the word, as an impact at today's `average`."""
        grown = self.average / average if average > 0 else 1.0
        return self.threshold * max(1.0, grown)


def known(conn: psycopg.Connection, terms: list[str]) -> dict[str, Known]:
    """The common words among `terms`, as their rows say."""
    if not terms:
        return {}
    rows = conn.execute(
        "SELECT c.term, c.passages + d.change, c.counted_of, c.average, d.changes FROM common_terms c "
        "CROSS JOIN LATERAL (SELECT coalesce(sum(change), 0) AS change, count(*) AS changes FROM term_changes "
        "WHERE term = c.term) d WHERE c.term = ANY(%s)",
        (terms,),
    ).fetchall()
    return {
        term: Known(int(passages), int(of), float(average), int(changes))
        for term, passages, of, average, changes in rows
    }


def counted_up_to(conn: psycopg.Connection, tsquery: str, cap: int) -> int:
    """How many passages match `tsquery`, counted no further than `cap` (a common word costs no more than a rare)."""
    row = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM passages WHERE words @@ %s::tsquery LIMIT %s) held", (tsquery, cap)
    ).fetchone()
    return int(row[0]) if row else 0


def build(conn: psycopg.Connection, term: str, tsquery: str, total: int, average: float) -> Known:
    """Count `term`'s passages and keep its best `CHAMPIONS` as its list (replacing any), in one transaction."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        meanwhile = known(conn, [term]).get(term)  # another process may have built it while this one waited
        if meanwhile is not None and not meanwhile.stale(total):
            return meanwhile
        rows = conn.execute(
            _SCORE_ALL.encode(),
            {"average": average, "term": tsquery, "word": term, "limit": CHAMPIONS + 1},
        ).fetchall()
        holding = int(rows[0][2]) if rows else 0
        kept, left = rows[:CHAMPIONS], rows[CHAMPIONS:]
        threshold = float(left[0][1]) if left else 0.0
        conn.execute("DELETE FROM champions WHERE term = %s", (term,))
        conn.execute(
            "INSERT INTO common_terms (term, passages, counted_of, average, threshold) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (term) DO UPDATE SET passages = excluded.passages, counted_of = excluded.counted_of, "
            "average = excluded.average, threshold = excluded.threshold",
            (term, holding, max(total, holding), average, threshold),
        )
        conn.execute(  # a passage a removal took away since the scan is left out
            "INSERT INTO champions (term, passage, impact) SELECT %s, u.id, u.impact "
            "FROM unnest(%s::bigint[], %s::float8[]) u(id, impact) WHERE EXISTS (SELECT 1 FROM passages p "
            "WHERE p.id = u.id)",
            (term, [row[0] for row in kept], [row[1] for row in kept]),
        )
    return Known(holding, max(total, holding), average)


def fold(conn: psycopg.Connection, term: str) -> None:
    """Add `term`'s waiting changes into its count (under the builds' lock, so no build folds them too): a
    database whose size holds steady under churn would otherwise add up ever more of them at each count."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        conn.execute(_FOLD.encode(), {"word": term})


def read(conn: psycopg.Connection, terms: list[str]) -> dict[str, Champions]:
    """The lists of `terms` (common words), each read `CHAMPIONS` deep, best first, in one round trip. A word
    without a row (dropped by a removal since) is left out: the caller scans its passages instead."""
    if not terms:
        return {}
    rows = conn.execute(
        "SELECT c.term, c.threshold, c.average, h.passages, h.impacts FROM common_terms c CROSS JOIN LATERAL ("
        "SELECT coalesce(array_agg(passage ORDER BY impact DESC), '{}') AS passages, "
        "coalesce(array_agg(impact ORDER BY impact DESC), '{}') AS impacts FROM ("
        "SELECT passage, impact FROM champions WHERE term = c.term ORDER BY impact DESC LIMIT %s) best) h "
        "WHERE c.term = ANY(%s)",
        (CHAMPIONS, terms),
    ).fetchall()
    found: dict[str, Champions] = {}
    for term, threshold, average, passages, impacts in rows:
        if len(passages) == CHAMPIONS:  # the list grew past its depth: what is left unread weighs no more than its last
            threshold = max(threshold, impacts[-1])
        found[term] = Champions([int(passage) for passage in passages], float(threshold), float(average))
    return found


def add_new(conn: psycopg.Connection, passages: list[int]) -> None:
    """Count the new `passages` of each common word, and add those that beat its threshold to its list (a store's
    last statement)."""
    conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (_LOCK,))
    conn.execute(_ADD_NEW.encode(), (passages,))


def drop_emptied(conn: psycopg.Connection) -> None:
    """After a removal: drop the lists of words no passage holds any more, with their rows."""
    conn.execute(
        f"WITH dropped AS (DELETE FROM common_terms c WHERE {_COUNT} <= 0 RETURNING term), "
        "unlisted AS (DELETE FROM champions WHERE term IN (SELECT term FROM dropped)) "
        "DELETE FROM term_changes WHERE term IN (SELECT term FROM dropped)"
    )


__all__ = [
    "CHAMPIONS",
    "COMMON_FROM",
    "FORGET_GONE",
    "Champions",
    "Known",
    "add_new",
    "build",
    "counted_up_to",
    "drop_emptied",
    "fold",
    "known",
    "read",
]
