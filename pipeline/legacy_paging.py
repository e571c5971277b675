"""Paging v1 tables in key order, a page a query, with keys bound back exactly as SQLite holds them.

Each page is `... WHERE key > <last key> ORDER BY key LIMIT n`. The last key is bound as stored: text as its
own bytes (`CAST(? AS TEXT)`), anything else as it is. Decoded text would not do, since a key whose bytes are
not UTF-8 reads back with replacement characters that compare differently: the next page would repeat or
miss rows, and a group's own query would find none. A page that does not start past the key before it stops
the read (`LegacySqliteError`) rather than loop.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from pipeline.legacy_checkpoint import ChunkKey
from pipeline.legacy_errors import LegacySqliteError
from pipeline.legacy_schema import lenient_text

Exact = tuple[Any, bool]
"""A key as SQLite holds it: its text's bytes and True, or any other value and False."""
Row = Sequence[Any]
Pair = tuple[Exact, Exact]


def bound(name: str) -> str:
    """The SQL that binds the exact key given as parameters `name` and `name_text`."""
    return f"(CASE WHEN :{name}_text THEN CAST(:{name} AS TEXT) ELSE :{name} END)"


def params(name: str, exact: Exact | None) -> dict[str, Any]:
    value, is_text = exact if exact is not None else (None, False)
    return {name: value, f"{name}_text": is_text}


def exact_tail(key: str) -> str:
    """Columns to select after a row's own, from which `exact_of` recovers `key` exactly."""
    return f"typeof({key}) = 'text', CAST({key} AS BLOB)"


def exact_of(row: Row, key_at: int) -> Exact:
    """The exact key of a row that ends with `exact_tail` of the key in column `key_at`."""
    is_text, stored = row[-2], row[-1]
    return (stored, True) if is_text else (row[key_at], False)


def key_pages(
    conn: sqlite3.Connection,
    key: str,
    columns: str,
    table: str,
    after: str | None,
    page_size: int,
    only: str = "TRUE",
) -> Iterator[list[tuple[Row, Exact]]]:
    """Pages of `columns` (the key first) of rows with a key, ascending, after `after`, where `only` holds."""
    sql = (
        f"SELECT {columns}, {exact_tail(key)} FROM {table} "
        f"WHERE {key} IS NOT NULL AND (:k IS NULL OR {key} > {bound('k')}) AND {only} ORDER BY {key} LIMIT :n"
    )
    cursor: Exact | None = (after, False) if after is not None else None
    while True:
        rows = query(conn, sql, {**params("k", cursor), "n": page_size})
        page = [(row[:-2], exact_of(row, 0)) for row in rows]
        if page:
            _check_progress(cursor, page[0][1], table)
            cursor = page[-1][1]
            yield page
        if len(rows) < page_size:
            return


def pair_pages(
    conn: sqlite3.Connection, after: ChunkKey | None, page_size: int
) -> Iterator[list[tuple[tuple[Any, Any], Pair]]]:
    """Pages of the distinct `(source_kind, source_id)` pairs of `mem_tree_chunks`, ascending, after `after`."""
    sql = (
        f"SELECT DISTINCT source_kind, source_id, {exact_tail('source_kind')}, {exact_tail('source_id')} "
        "FROM mem_tree_chunks WHERE source_kind IS NOT NULL AND source_id IS NOT NULL AND (:kind IS NULL "
        f"OR source_kind > {bound('kind')} OR (source_kind = {bound('kind')} AND source_id > {bound('source')})) "
        "ORDER BY source_kind, source_id LIMIT :n"
    )
    cursor: Pair | None = None
    if after is not None:
        cursor = ((after.source_kind, False), (after.source_id, False))
    while True:
        rows = query(conn, sql, {**pair_params(cursor), "n": page_size})
        page = [((row[0], row[1]), (exact_of(row[:4], 0), exact_of(row, 1))) for row in rows]
        if page:
            _check_progress(cursor, page[0][1], "mem_tree_chunks")
            cursor = page[-1][1]
            yield page
        if len(rows) < page_size:
            return


def pair_params(pair: Pair | None, names: tuple[str, str] = ("kind", "source")) -> dict[str, Any]:
    return {**params(names[0], pair[0] if pair else None), **params(names[1], pair[1] if pair else None)}


def query(conn: sqlite3.Connection, sql: str, bound_params: dict[str, Any]) -> list[Any]:
    """All rows of one query; SQLite's failures are `LegacySqliteError`.

    Text is decoded by SQLite's own (fast) decoder until a value is not UTF-8; from then on the connection
    reads bad bytes as replacement characters, so one damaged row cannot stop an import.
    """
    try:
        try:
            return conn.execute(sql, bound_params).fetchall()
        except sqlite3.OperationalError as err:
            if conn.text_factory is lenient_text or not str(err).startswith("Could not decode to UTF-8"):
                raise
            conn.text_factory = lenient_text
            return conn.execute(sql, bound_params).fetchall()
    except sqlite3.Error as err:
        raise LegacySqliteError(f"reading the v1 workspace failed: {err}") from err


def _check_progress(cursor: Exact | Pair | None, first: Exact | Pair, table: str) -> None:
    if cursor is not None and _order(first) <= _order(cursor):
        raise LegacySqliteError(f"{table} keys do not sort as SQLite sorts them; the workspace may be damaged")


def _order(key: Exact | Pair) -> tuple[Any, ...]:
    """An exact key (or a pair of them) as SQLite sorts it: numbers, then text by its bytes, then blobs."""
    first, second = key
    if isinstance(first, tuple) and isinstance(second, tuple):
        return (_order_one(first), _order_one(second))
    return _order_one((first, bool(second)))


def _order_one(key: Exact) -> tuple[int, Any]:
    value, is_text = key
    if is_text:
        return (1, value)
    if isinstance(value, str):
        return (1, value.encode("utf-8"))
    return (2, value) if isinstance(value, bytes) else (0, value)
