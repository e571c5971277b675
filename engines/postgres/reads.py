"""The PostgreSQL engine's reads: paging, lookup by id, facet counts aggregated on the server, and ranked hits.

Rows become hits exactly as the local engine's do (`engines.local.rows`), from the same stored wire JSON, and
cursors are spelled as its are (`engines.local.reads`): `s<seq>` for listings, `o<offset>` for ranked reads.
"""

from __future__ import annotations

from collections import Counter

import psycopg

from engines.contract import ExplorePage, Exported, Facet, Hit, ItemId, page_explore
from engines.local.reads import FACET_COLUMN, PageRow, exported_page, listed_page
from engines.local.rows import listed_hit, passage_tags, ranked_hit
from engines.local.search import Ranked
from engines.local.where import Where, ns_from_key
from engines.postgres.sql import sql_of


def _page_rows(conn: psycopg.Connection, where: Where, after: int, limit: int) -> list[PageRow]:
    clause, params = sql_of(where)
    return conn.execute(
        f"SELECT i.seq, i.id, i.body FROM items i WHERE ({clause}) AND i.seq > %s ORDER BY i.seq LIMIT %s",
        (*params, after, limit + 1),
    ).fetchall()


def list_page(conn: psycopg.Connection, where: Where, after: int, limit: int) -> tuple[list[Hit], str | None]:
    """Admitted items in store order after `after`, and the cursor of the next page if any."""
    return listed_page(_page_rows(conn, where, after, limit), limit)


def export_page(conn: psycopg.Connection, where: Where, after: int, limit: int) -> tuple[list[Exported], str | None]:
    return exported_page(_page_rows(conn, where, after, limit), limit)


def get_hits(conn: psycopg.Connection, where: Where, ids: list[ItemId]) -> dict[ItemId, Hit]:
    """The admitted items among `ids`, looked up directly by (tenant, id)."""
    clause, params = sql_of(where)
    rows = conn.execute(
        f"SELECT i.id, i.body FROM items i WHERE ({clause}) AND i.id = ANY(%s)", (*params, list(dict.fromkeys(ids)))
    )
    return {item_id: listed_hit(item_id, body) for item_id, body in rows}


def explore_counts(conn: psycopg.Connection, where: Where, facet: Facet, limit: int) -> ExplorePage:
    """Facet counts over every admitted item, grouped on the server (never truncated)."""
    clause, params = sql_of(where)
    if facet is Facet.TAG:
        totals = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM item_tags t WHERE t.item_seq = i.seq)) "
            f"FROM items i WHERE {clause}",
            params,
        ).fetchone() or (0, 0)
        rows = conn.execute(
            f"SELECT t.tag, count(*) FROM items i JOIN item_tags t ON t.item_seq = i.seq WHERE {clause} GROUP BY 1",
            params,
        ).fetchall()
        return page_explore(Facet.TAG, Counter(dict(rows)), totals[0], totals[1], limit, truncated=False)
    column = FACET_COLUMN[facet]
    counts: Counter[str] = Counter()
    total = missing = 0
    for value, count in conn.execute(f"SELECT {column}, count(*) FROM items i WHERE {clause} GROUP BY 1", params):
        total += count
        if value is None:
            missing += count
        else:
            counts[str(ns_from_key(value)) if facet is Facet.NAMESPACE else value] += count
    return page_explore(facet, counts, total, missing, limit, truncated=False)


def ranked_hits(conn: psycopg.Connection, ranked: list[Ranked]) -> list[Hit]:
    """Hits for ranked passages, in rank order; a split item's hit is tagged with its page/section."""
    if not ranked:
        return []
    rows = conn.execute(
        "SELECT p.id, i.id, i.body, p.page_first, p.page_last, p.section, p.start, p.stop, "
        "(SELECT count(*) FROM passages q WHERE q.item_seq = i.seq) "
        "FROM passages p JOIN items i ON i.seq = p.item_seq WHERE p.id = ANY(%s)",
        ([r.passage for r in ranked],),
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


__all__ = ["explore_counts", "export_page", "get_hits", "list_page", "ranked_hits"]
