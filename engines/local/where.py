"""`MetaFilter` and `Reach` as SQL: every filtered read selects its items inside SQLite.

A namespace is stored as a key: `''` for the root, `'/team:acme/agent:writer'` below it, so a
subtree is a key range and a sandbox below a node is a `/service:` inside the rest of the key
(segment ids hold no `:`, so that text can only start a service segment).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from engines.contract import ItemKind, MetaFilter, Namespace, Reach, as_utc, redacted_id

SQLValue = str | int | float | bytes | None


@dataclass
class Where:
    """An SQL condition over `items` (alias `i`) and its parameters, built up clause by clause."""

    clauses: list[str] = field(default_factory=list)
    params: list[SQLValue] = field(default_factory=list)

    def add(self, clause: str, *params: SQLValue) -> None:
        self.clauses.append(clause)
        self.params.extend(params)

    def sql(self) -> str:
        return " AND ".join(f"({c})" for c in self.clauses) if self.clauses else "1"


def ns_key(ns: Namespace) -> str:
    """The stored key of a namespace."""
    return "".join(f"/{segment}" for segment in ns.segments)


def ns_from_key(key: str) -> Namespace:
    return Namespace.parse(key.lstrip("/")) if key else Namespace.ROOT


def micros(moment: datetime) -> int:
    """An instant as integer microseconds since the epoch, which sorts as time does."""
    delta = as_utc(moment) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


_EPOCH = as_utc(datetime(1970, 1, 1))
_ROOT_SUBTREE = Reach.subtree(Namespace.ROOT)


def _subtree(where: Where, key: str, sandboxes: bool) -> str:
    # Every key strictly below `key` starts with key + '/', and '0' is the character after '/'.
    clause = "i.ns >= ? AND i.ns < ?"
    where.params.extend((key + "/", key + "0"))
    if not sandboxes:
        clause += " AND instr(substr(i.ns, ?), '/service:') = 0"
        where.params.append(len(key) + 1)
    return clause


def add_reach(where: Where, reach: Reach | None) -> None:
    """Confine to the nodes a read's reach admits (no reach: the root's subtree without sandboxes)."""
    reach = reach or _ROOT_SUBTREE
    key = ns_key(reach.at)
    options = ["i.ns = ?"]
    where.params.append(key)
    if reach.inherit and not reach.at.is_root:
        ancestors = [ns_key(a) for a in reach.at.ancestors()]
        options.append(f"i.ns IN ({_marks(len(ancestors))})")
        where.params.extend(ancestors)
    if reach.descendants:
        options.append(_subtree(where, key, sandboxes=False))
    where.clauses.append(" OR ".join(f"({o})" for o in options))


def add_erase_scope(where: Where, reach: Reach) -> None:
    """The nodes an erase reaches: `at`, and every node below it (sandboxes too) with descendants."""
    key = ns_key(reach.at)
    where.params.append(key)
    if reach.descendants:
        where.clauses.append(f"i.ns = ? OR ({_subtree(where, key, sandboxes=True)})")
    else:
        where.clauses.append("i.ns = ?")


def _marks(count: int) -> str:
    return ",".join("?" * count)


_EXACT = {
    "workspace": "workspace",
    "language": "language",
    "repo": "repo",
    "commit": "revision",
    "url": "url",
}
_PREFIX = ("folder", "file_path")
_IDS = {"thread_id": "thread_id", "agent_id": "agent_id", "source_id": "source_id"}


def filter_where(tenant: str, filter: MetaFilter) -> Where:
    """The SQL condition selecting what `filter` admits for one tenant."""
    where = Where()
    where.add("i.tenant = ?", tenant)
    add_reach(where, filter.reach)
    _add_values(where, filter)
    _add_lists(where, filter)
    _add_window(where, filter)
    return where


def _add_values(where: Where, filter: MetaFilter) -> None:
    for name, column in _EXACT.items():
        value = getattr(filter, name)
        if value is not None:
            where.add(f"i.{column} = ?", value)
    for column in _PREFIX:
        wanted = getattr(filter, column)
        if wanted is not None:
            base = wanted.rstrip("/")
            where.add(
                f"i.{column} IN (?, ?) OR (i.{column} >= ? AND i.{column} < ?)",
                wanted,
                base,
                base + "/",
                base + "0",
            )
    for name, column in _IDS.items():
        wanted = getattr(filter, name)
        if wanted is not None:
            where.add(f"i.{column} IN (?, ?)", wanted, redacted_id(wanted))
    if filter.turns is not None:
        where.add("i.turns_first = ? AND i.turns_last = ?", filter.turns.first, filter.turns.last)
    if filter.tool_call is not None:
        where.add("i.tool_call = ?", filter.tool_call)


def _add_lists(where: Where, filter: MetaFilter) -> None:
    kinds_where(where, filter.kinds)
    if filter.sources:
        sources = sorted({s.value for s in filter.sources})
        where.add(f"i.source_kind IN ({_marks(len(sources))})", *sources)
    if filter.tags_any:
        tags = sorted(set(filter.tags_any))
        where.add(
            f"EXISTS (SELECT 1 FROM item_tags t WHERE t.item_seq = i.seq AND t.tag IN ({_marks(len(tags))}))",
            *tags,
        )


def _add_window(where: Where, filter: MetaFilter) -> None:
    if filter.observed_after is not None:
        where.add("i.observed_at >= ?", micros(filter.observed_after))
    if filter.observed_before is not None:
        where.add("i.observed_at < ?", micros(filter.observed_before))


def kinds_where(where: Where, kinds: list[ItemKind]) -> None:
    """Restrict to `kinds` (every kind when empty)."""
    if kinds:
        values = sorted({k.value for k in kinds})
        where.add(f"i.kind IN ({_marks(len(values))})", *values)
