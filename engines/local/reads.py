"""The local engine's reads: paging, lookup by id, facet counts and hits for ranked passages."""

from __future__ import annotations

import re
import sqlite3
from collections import Counter

from engines.contract import (
    ExplorePage,
    Exported,
    Facet,
    Hit,
    InvalidRequestError,
    ItemId,
    page_explore,
)
from engines.local.rows import exported, listed_hit, passage_tags, ranked_hit
from engines.local.search import Ranked
from engines.local.where import Where, ns_from_key

_LIST_CURSOR = re.compile(r"s(0|[1-9][0-9]*)")
_FETCH_CURSOR = re.compile(r"o(0|[1-9][0-9]*)")
# `int()` refuses more than 4,300 digits; beyond 64 bits a cursor names no row, so it reads as past the end.
_MAX_DIGITS = 19


def _cursor_value(cursor: str | None, pattern: re.Pattern[str]) -> int:
    if cursor is None:
        return 0
    found = pattern.fullmatch(cursor)
    if found is None:
        raise InvalidRequestError(f"unknown cursor `{cursor}`")
    digits = found.group(1)
    return int(digits) if len(digits) <= _MAX_DIGITS else 10**_MAX_DIGITS


def list_after(cursor: str | None) -> int:
    """The store sequence a list cursor resumes after."""
    return _cursor_value(cursor, _LIST_CURSOR)


def fetch_offset(cursor: str | None) -> int:
    """How many ranked hits a fetch cursor skips."""
    return _cursor_value(cursor, _FETCH_CURSOR)


def fetch_cursor(offset: int) -> str:
    return f"o{offset}"


PageRow = tuple[int, str, str]
"""An item as a listing reads it: its store sequence, id and body."""


def _page_rows(conn: sqlite3.Connection, where: Where, after: int, limit: int) -> list[PageRow]:
    return conn.execute(
        f"SELECT i.seq, i.id, i.body FROM items i WHERE {where.sql()} AND i.seq > ? ORDER BY i.seq LIMIT ?",
        (*where.params, after, limit + 1),
    ).fetchall()


def listed_page(rows: list[PageRow], limit: int) -> tuple[list[Hit], str | None]:
    """A list page from `rows` read one past `limit`: the hits, and the cursor of the next page if any."""
    shown, cursor = _paged(rows, limit)
    return [listed_hit(item_id, body) for _, item_id, body in shown], cursor


def exported_page(rows: list[PageRow], limit: int) -> tuple[list[Exported], str | None]:
    """An export page from `rows` read one past `limit`, and the cursor of the next page if any."""
    shown, cursor = _paged(rows, limit)
    return [exported(item_id, body) for _, item_id, body in shown], cursor


def _paged(rows: list[PageRow], limit: int) -> tuple[list[PageRow], str | None]:
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (f"s{rows[-1][0]}" if more else None)


def list_page(conn: sqlite3.Connection, where: Where, after: int, limit: int) -> tuple[list[Hit], str | None]:
    """Admitted items in store order after `after`, and the cursor of the next page if any."""
    return listed_page(_page_rows(conn, where, after, limit), limit)


def export_page(conn: sqlite3.Connection, where: Where, after: int, limit: int) -> tuple[list[Exported], str | None]:
    return exported_page(_page_rows(conn, where, after, limit), limit)


def get_hits(conn: sqlite3.Connection, where: Where, ids: list[ItemId]) -> dict[ItemId, Hit]:
    unique = list(dict.fromkeys(ids))
    marks = ",".join("?" * len(unique))
    rows = conn.execute(
        f"SELECT i.id, i.body FROM items i WHERE {where.sql()} AND i.id IN ({marks})",
        (*where.params, *unique),
    )
    return {item_id: listed_hit(item_id, body) for item_id, body in rows}


FACET_COLUMN = {  # the items tables of both SQL engines name their facet columns alike
    Facet.KIND: "i.kind",
    Facet.SOURCE: "i.source_kind",
    Facet.SOURCE_ID: "i.source_id",
    Facet.WORKSPACE: "i.workspace",
    Facet.FOLDER: "i.folder",
    Facet.FILE_PATH: "i.file_path",
    Facet.LANGUAGE: "i.language",
    Facet.REPO: "i.repo",
    Facet.URL: "i.url",
    Facet.THREAD: "i.thread_id",
    Facet.AGENT: "i.agent_id",
    Facet.TOOL_CALL: "i.tool_call",
    Facet.NAMESPACE: "i.ns",
}


def explore_counts(conn: sqlite3.Connection, where: Where, facet: Facet, limit: int) -> ExplorePage:
    """Facet counts over every admitted item, aggregated in SQL (never truncated)."""
    if facet is Facet.TAG:
        return _explore_tags(conn, where, limit)
    column = FACET_COLUMN[facet]
    rows = conn.execute(f"SELECT {column}, count(*) FROM items i WHERE {where.sql()} GROUP BY 1", where.params)
    counts: Counter[str] = Counter()
    total = missing = 0
    for value, count in rows:
        total += count
        if value is None:
            missing += count
        else:
            counts[str(ns_from_key(value)) if facet is Facet.NAMESPACE else value] += count
    return page_explore(facet, counts, total, missing, limit, truncated=False)


def _explore_tags(conn: sqlite3.Connection, where: Where, limit: int) -> ExplorePage:
    total, missing = conn.execute(
        "SELECT count(*), coalesce(sum(NOT EXISTS (SELECT 1 FROM item_tags t WHERE t.item_seq = i.seq)), 0) "
        f"FROM items i WHERE {where.sql()}",
        where.params,
    ).fetchone()
    rows = conn.execute(
        f"SELECT t.tag, count(*) FROM items i JOIN item_tags t ON t.item_seq = i.seq WHERE {where.sql()} GROUP BY 1",
        where.params,
    )
    return page_explore(Facet.TAG, Counter(dict(rows.fetchall())), total, missing, limit, truncated=False)


def ranked_hits(conn: sqlite3.Connection, ranked: list[Ranked]) -> list[Hit]:
    """Hits for ranked passages, in rank order; a split item's hit is tagged with its page/section."""
    if not ranked:
        return []
    marks = ",".join("?" * len(ranked))
    rows = conn.execute(
        "SELECT p.rowid, i.id, i.body, p.page_first, p.page_last, p.section, p.start, p.stop, "
        "(SELECT count(*) FROM passages q WHERE q.item_seq = i.seq) "
        f"FROM passages p CROSS JOIN items i ON i.seq = p.item_seq WHERE p.rowid IN ({marks})",
        [r.passage for r in ranked],
    )
    by_passage = {row[0]: row[1:] for row in rows}
    hits = []
    for rank in ranked:
        found = by_passage.get(rank.passage)
        if found is None:  # removed by another process since it was ranked
            continue
        item_id, body, first, last, section, start, stop, pieces = found
        pages = (first, last) if first is not None else None
        tags = passage_tags(pages, section) if pieces > 1 else []
        hits.append(ranked_hit(item_id, body, (start, stop), tags, rank.score))
    return hits
