"""The local engine's filter SQL (`engines.local.where`) as PostgreSQL runs it.

Both engines keep items in tables of the same shape, so a `MetaFilter`, a reach and an erase scope are built once,
by the local engine's `Where`, and only spelled here for PostgreSQL: psycopg's `%s` placeholders for SQLite's `?`,
and `strpos` for SQLite's `instr` (the sandbox test of a namespace key). Neither clause text holds a `%`, a `?`
or `instr(` of its own, so the spelling is exact.
"""

from __future__ import annotations

from engines.local.where import SQLValue, Where

Params = list[SQLValue]


def sql_of(where: Where) -> tuple[str, Params]:
    """`where`'s condition over `items i` and its parameters, for psycopg."""
    clause = where.sql().replace("?", "%s").replace("instr(substr(i.ns, %s)", "strpos(substr(i.ns, %s::int)")
    return ("true" if clause == "1" else clause), list(where.params)


__all__ = ["Params", "sql_of"]
