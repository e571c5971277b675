"""The PostgreSQL engine's writes: a store call's batch in one transaction, and set-based removals.

A batch is a handful of statements whatever its size: each table's rows go in as arrays unnested by the server
(one multi-row insert per table), items first with `ON CONFLICT (tenant, id) DO NOTHING`, so a replay, or an item
another process stored meanwhile, inserts nothing and reads as replayed. Passages are numbered from their
sequence before they are inserted, so their vectors (a cheap embedder's) or their places in the backlog's queue
go in beside them; the new passages that weigh most for a common word join its champion list
(`engines.postgres.champions`) last. A removal deletes the selected items in one statement (passages, vectors,
queue entries and tags follow by cascade; their champion rows and common-word counts go in the same statement),
checks in the same transaction that nothing of them is left, drops the champion lists it emptied, and moves the
deletions sequence that keyword statistics watch.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import psycopg

from engines.contract import EngineError, ItemId
from engines.local.embed import Vectors
from engines.local.rows import ITEM_COLUMNS, PreparedItem
from engines.local.where import Where
from engines.postgres import champions
from engines.postgres.schema import TEXT_CONFIG
from engines.postgres.sql import sql_of

_TOKEN = re.compile(r"[^\W_]+")
_TEXT_COLUMNS = 12  # tenant .. thread_id
_ITEM_TYPES = ["text"] * _TEXT_COLUMNS + ["bigint", "bigint"] + ["text"] * 4 + ["bigint", "float8", "text", "text"]
_ITEM_NAMES = [name.strip() for name in ITEM_COLUMNS.split(",")]
_UNNESTED = ", ".join(f"%s::{kind}[]" for kind in _ITEM_TYPES)
_INSERT_ITEMS = (
    f"INSERT INTO items ({ITEM_COLUMNS}) SELECT {', '.join(f'u.c{n}' for n in range(len(_ITEM_NAMES)))} "
    f"FROM unnest({_UNNESTED}) WITH ORDINALITY AS u({', '.join(f'c{n}' for n in range(len(_ITEM_NAMES)))}, ord) "
    "ORDER BY u.ord ON CONFLICT (tenant, id) DO NOTHING RETURNING seq, id"
)
_INSERT_PASSAGES = (
    "INSERT INTO passages (id, item_seq, piece, start, stop, page_first, page_last, section, tokens, words) "
    "SELECT u.id, u.seq, u.piece, u.start, u.stop, u.first, u.last, u.section, u.tokens, "
    f"to_tsvector('{TEXT_CONFIG}', u.words) "
    "FROM unnest(%s::bigint[], %s::bigint[], %s::int[], %s::int[], %s::int[], %s::int[], %s::int[], %s::text[], "
    "%s::int[], %s::text[]) AS u(id, seq, piece, start, stop, first, last, section, tokens, words)"
)

_DELETE = f"""
WITH gone AS (DELETE FROM items i WHERE {{where}} RETURNING i.seq, i.ns, i.kind), {champions.FORGET_GONE}
SELECT seq, ns, kind FROM gone
"""
"""A removal: the items `where` selects (their passages, vectors, queue entries and tags follow by cascade), their
passages counted out of the common words' counts and taken off their lists, in one statement."""


def indexed_words(text: str) -> list[str]:
    """The words of `text` as the keyword index takes them: runs of letters and digits, diacritics removed (as
    the local engine's tokenizer splits and folds them); the stemming is the server's."""
    if not text.isascii():
        text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return _TOKEN.findall(text)


@dataclass
class Written:
    """What a batch wrote: the ids inserted (the rest were replays) and the passages queued for vectors."""

    inserted: set[ItemId] = field(default_factory=set)
    queued: list[int] = field(default_factory=list)
    last_queued: list[int] = field(default_factory=list)


def insert_items(conn: psycopg.Connection, items: list[PreparedItem], vectors: dict[ItemId, Vectors] | None) -> Written:
    """Insert `items` (distinct ids) in one transaction. With `vectors` (by item id) their passages' vectors go in
    too; else the passages are queued for the backlog. `last_queued` are the queued passages of the last item."""
    written = Written()
    if not items:
        return written
    with conn.transaction():
        columns: list[list[object]] = [[] for _ in _ITEM_NAMES]
        for prep in items:
            for column, value in zip(columns, prep.values, strict=True):
                column.append(value)
        seqs: dict[str, int] = {item_id: seq for seq, item_id in conn.execute(_INSERT_ITEMS, columns).fetchall()}
        fresh = [prep for prep in items if prep.id in seqs]
        if not fresh:
            return written
        written.inserted = {prep.id for prep in fresh}
        _insert_tags(conn, fresh, seqs)
        ids = _passage_ids(conn, sum(len(prep.passages) for prep in fresh))
        _insert_passages(conn, fresh, seqs, ids)
        _insert_vectors_or_queue(conn, fresh, ids, vectors, written)
        champions.add_new(conn, ids)
    return written


def _insert_tags(conn: psycopg.Connection, fresh: list[PreparedItem], seqs: dict[str, int]) -> None:
    pairs = [(seqs[prep.id], tag) for prep in fresh for tag in prep.tags]
    if pairs:
        conn.execute(
            "INSERT INTO item_tags (item_seq, tag) SELECT * FROM unnest(%s::bigint[], %s::text[])",
            ([seq for seq, _ in pairs], [tag for _, tag in pairs]),
        )


def _passage_ids(conn: psycopg.Connection, count: int) -> list[int]:
    rows = conn.execute("SELECT nextval('passages_id_seq') FROM generate_series(1, %s)", (count,)).fetchall()
    return sorted(row[0] for row in rows)


def _insert_passages(conn: psycopg.Connection, fresh: list[PreparedItem], seqs: dict[str, int], ids: list[int]) -> None:
    columns: list[list[object]] = [[] for _ in range(10)]
    numbers = iter(ids)
    for prep in fresh:
        for passage in prep.passages:
            words = indexed_words(passage.text)
            first, last = passage.pages or (None, None)
            row = (next(numbers), seqs[prep.id], passage.piece, passage.start, passage.stop, first, last,
                   passage.section, len(words), " ".join(words))  # fmt: skip
            for column, value in zip(columns, row, strict=True):
                column.append(value)
    conn.execute(_INSERT_PASSAGES, columns)


def _insert_vectors_or_queue(
    conn: psycopg.Connection,
    fresh: list[PreparedItem],
    ids: list[int],
    vectors: dict[ItemId, Vectors] | None,
    written: Written,
) -> None:
    embedded: list[int] = []
    rows: list[Vectors] = []
    start = 0
    for prep in fresh:
        mine = ids[start : start + len(prep.passages)]
        start += len(prep.passages)
        found = vectors.get(prep.id) if vectors is not None else None
        if found is None:
            written.queued.extend(mine)
            if mine:
                written.last_queued = mine
        else:
            embedded.extend(mine)
            rows.append(found)
    if embedded:
        save_vectors(conn, embedded, np.concatenate(rows))
    if written.queued:
        conn.execute("INSERT INTO pending_vectors (passage) SELECT unnest(%s::bigint[])", (written.queued,))


def save_vectors(conn: psycopg.Connection, passages: list[int], vectors: Vectors) -> None:
    """Store the vectors of `passages` (row for row), binary COPY: the cheapest way in for float arrays."""
    with conn.cursor().copy("COPY passage_vectors (passage, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "vector"])
        for passage, vector in zip(passages, vectors, strict=True):
            copy.write_row((passage, vector))


def delete_where(conn: psycopg.Connection, where: Where) -> list[tuple[str, str]]:
    """Remove every item `where` selects, in one transaction, checked; each removed item's (ns, kind)."""
    clause, params = sql_of(where)
    return [(ns, kind) for _, ns, kind in _delete(conn, clause, params)]


def delete_ids(conn: psycopg.Connection, tenant: str, ids: list[ItemId]) -> int:
    """Remove the tenant's items with these ids, wherever they are, in one transaction, checked."""
    return len(_delete(conn, "i.tenant = %s AND i.id = ANY(%s)", [tenant, ids]))


def _delete(conn: psycopg.Connection, clause: str, params: Sequence[object]) -> list[tuple[int, str, str]]:
    """Remove the items `clause` selects (over `items i`), check nothing of them is left, drop the champion lists
    it emptied, in one transaction; each removed item's (seq, ns, kind)."""
    with conn.transaction():
        rows: list[tuple[int, str, str]] = conn.execute(_DELETE.format(where=clause).encode(), params).fetchall()
        if rows:
            _verify_removed(conn, [row[0] for row in rows])
            champions.drop_emptied(conn)
            conn.execute("SELECT nextval('deletions')")
    return rows


def _verify_removed(conn: psycopg.Connection, seqs: list[int]) -> None:
    """Nothing of the removed items may be left (a cascade dropped, a trigger in the way): else roll back."""
    left = conn.execute(
        "SELECT (SELECT count(*) FROM items WHERE seq = ANY(%s)) + (SELECT count(*) FROM passages WHERE item_seq = "
        "ANY(%s)) + (SELECT count(*) FROM item_tags WHERE item_seq = ANY(%s))",
        (seqs, seqs, seqs),
    ).fetchone()
    if left is None or left[0]:
        raise EngineError(f"a removal of {len(seqs)} items left {left[0] if left else '?'} of their rows; rolled back")


__all__ = ["Written", "delete_ids", "delete_where", "indexed_words", "insert_items", "save_vectors"]
