"""Reading a v1 table in key order in one pass, its rows grouped by their exact key.

A section reads its table through one statement, `... WHERE key > <start> ORDER BY key, ...`, fetched a page
at a time. v1 has no index on the group keys of `mem_tree_chunks` and `episodic_log`, so a query a page (as
this module once made) scanned and sorted the whole table once a page: a time growing with the square of the
table. The statement stays open while its section is read (the database keeps one read snapshot for it, as
any reader does), and is closed when the section ends or its reader is closed.

Rows are grouped by their keys as SQLite holds them (`Keys`): text as its own bytes, anything else as it is.
Decoded text would not do, since keys whose bytes are not UTF-8 read back with replacement characters, and
two of them could then look the same. A key is read once, however many rows share it: a section of one row
a key (documents, learnings, profile) takes the first. A start key is bound back exactly (`CAST(? AS TEXT)`
for text); a checkpoint's (decoded text) as it is.

Text is decoded by SQLite's own (fast) decoder until a value is not UTF-8; from then on the connection reads
bad bytes as replacement characters, so one damaged row cannot stop an import: its statement starts again
past the last group it yielded.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from pipeline.legacy.errors import LegacySqliteError
from pipeline.legacy.schema import lenient_text

Row = tuple[Any, ...]
Keys = tuple[Any, ...]
"""A row's keys as SQLite holds them, flat: for each key column, whether it is text, then its text's bytes
(or, when not text, its value)."""

T = TypeVar("T")
Keyed = Callable[[Iterator[list[Row]], int], Iterator[tuple[Keys, T]]]
"""From pages of rows (their keys' exact values last, in so many columns), something made of each key's rows."""

_NOT_UTF8 = "Could not decode to UTF-8"


@dataclass(frozen=True)
class Scan:
    """The rows of `table` whose `keys` are all set and where `only` holds, ordered by the keys and then by
    `then`: `columns`, then the keys' exact values (which `groups` takes off again)."""

    conn: sqlite3.Connection
    table: str
    columns: str
    keys: tuple[str, ...]
    then: str = ""
    only: str = "TRUE"

    def sql(self, start: Keys | None) -> str:
        exact = (
            f"typeof({k}) = 'text', CASE WHEN typeof({k}) = 'text' THEN CAST({k} AS BLOB) ELSE {k} END"
            for k in self.keys
        )
        present = " AND ".join(f"{key} IS NOT NULL" for key in self.keys)
        past = "TRUE" if start is None else _past(self.keys)
        order = ", ".join((*self.keys, self.then) if self.then else self.keys)
        return (
            f"SELECT {self.columns}, {', '.join(exact)} FROM {self.table} "
            f"WHERE {present} AND {past} AND {self.only} ORDER BY {order}"
        )


def checkpoint_keys(*values: str) -> Keys:
    """A checkpoint's keys (decoded text), bound as they are."""
    return tuple(part for value in values for part in (False, value))


def groups(scan: Scan, start: Keys | None, page_size: int) -> Iterator[list[Row]]:
    """Each key's rows (their `columns` only), keys ascending, past `start`; a group is yielded once whole.
    SQLite's failures are `LegacySqliteError`."""
    return _read(scan, start, page_size, _runs)


def first_rows(scan: Scan, after: str | None, page_size: int) -> Iterator[Row]:
    """The first row of each key, keys ascending, past the checkpoint key `after`."""
    return _read(scan, None if after is None else checkpoint_keys(after), page_size, _firsts)


def _read(scan: Scan, start: Keys | None, page_size: int, keyed: Keyed[T]) -> Iterator[T]:
    """What `keyed` makes of the scan's rows past `start`, read again past the last key it made something of
    when a value turns out not to be UTF-8."""
    while True:
        cursor = _execute(scan.conn, scan.sql(start), _params(start))
        try:
            for keys, made in keyed(iter(partial(cursor.fetchmany, page_size), []), 2 * len(scan.keys)):
                yield made
                start = keys
            return
        except sqlite3.Error as err:
            _read_leniently(scan.conn, err)
        finally:
            with suppress(sqlite3.Error):  # the connection may be closed already
                cursor.close()


def query(conn: sqlite3.Connection, sql: str, bound_params: dict[str, Any]) -> list[Any]:
    """All rows of one query; SQLite's failures are `LegacySqliteError`."""
    while True:
        cursor = _execute(conn, sql, bound_params)
        try:
            return cursor.fetchall()
        except sqlite3.Error as err:
            _read_leniently(conn, err)


def _runs(pages: Iterator[list[Row]], width: int) -> Iterator[tuple[Keys, list[Row]]]:
    """Rows in runs of equal keys (the last `width` columns, taken off)."""
    current: Keys | None = None
    rows: list[Row] = []
    for page in pages:
        for row in page:
            keys = row[-width:]
            if keys != current:
                if current is not None:
                    yield current, rows
                current, rows = keys, []
            rows.append(row[:-width])
    if current is not None:
        yield current, rows


def _firsts(pages: Iterator[list[Row]], width: int) -> Iterator[tuple[Keys, Row]]:
    """The first row of each run of equal keys (the last `width` columns, taken off)."""
    current: Keys | None = None
    for page in pages:
        for row in page:
            keys = row[-width:]
            if keys != current:
                current = keys
                yield keys, row[:-width]


def _execute(conn: sqlite3.Connection, sql: str, bound_params: dict[str, Any]) -> sqlite3.Cursor:
    while True:
        try:
            return conn.execute(sql, bound_params)
        except sqlite3.Error as err:
            _read_leniently(conn, err)


def _read_leniently(conn: sqlite3.Connection, err: sqlite3.Error) -> None:
    """After a value that is not UTF-8, read bad bytes as replacement characters from now on (the caller
    then reads again); any other failure, or one while reading leniently, is `LegacySqliteError`."""
    if conn.text_factory is lenient_text or not str(err).startswith(_NOT_UTF8):
        raise LegacySqliteError(f"reading the v1 workspace failed: {err}") from err
    conn.text_factory = lenient_text


def _bound(n: int) -> str:
    """Start key `n`, bound exactly from the parameters `k{n}` and `k{n}_text`."""
    return f"(CASE WHEN :k{n}_text THEN CAST(:k{n} AS TEXT) ELSE :k{n} END)"


def _past(keys: tuple[str, ...]) -> str:
    """Rows whose keys sort after the start keys: a greater first key, or an equal one and a greater next."""
    alternatives = []
    for n, key in enumerate(keys):
        equal = [f"{keys[m]} = {_bound(m)}" for m in range(n)]
        alternatives.append("(" + " AND ".join([*equal, f"{key} > {_bound(n)}"]) + ")")
    return "(" + " OR ".join(alternatives) + ")"


def _params(start: Keys | None) -> dict[str, Any]:
    pairs = zip(start[::2], start[1::2], strict=True) if start is not None else ()
    params: dict[str, Any] = {}
    for n, (is_text, value) in enumerate(pairs):
        params[f"k{n}_text"], params[f"k{n}"] = is_text, value
    return params
