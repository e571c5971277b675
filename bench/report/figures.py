"""The records of repeated runs put side by side: one row per record key, each figure as its range over runs."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench._report import Figure
from bench.report.runs import Headline, Record, Run


def is_number(value: Figure) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class Row:
    """One row of a table: what names it, and each numeric figure's values, one per run that had it."""

    key: tuple[tuple[str, Figure], ...]
    values: dict[str, list[float]]

    def median(self, name: str) -> float | None:
        found = self.values.get(name)
        return statistics.median(found) if found else None

    def span(self, name: str) -> tuple[float, float] | None:
        found = self.values.get(name)
        return (min(found), max(found)) if found else None


def key_fields(records: Sequence[Record], keys: tuple[str, ...] | None) -> tuple[str, ...]:
    """The fields that name a row: those given, else every field that is not a number."""
    if keys is not None:
        return keys
    names: dict[str, None] = {}
    for record in records:
        # A figure a run left empty (a peer skipped) names nothing: only words and flags name rows.
        names.update((k, None) for k, v in record.items() if k != "table" and isinstance(v, str | bool))
    return tuple(names)


def rows_of(runs: Sequence[Run], table: str, keys: tuple[str, ...] | None = None) -> list[Row]:
    """The table's rows in first-seen order, each figure gathered over the runs."""
    records = [r for run in runs for r in run.records if r.get("table") == table]
    naming = key_fields(records, keys)
    rows: dict[tuple[tuple[str, Figure], ...], dict[str, list[float]]] = {}
    for record in records:
        key = tuple((name, record.get(name)) for name in naming)
        values = rows.setdefault(key, {})
        for name, value in record.items():
            if name != "table" and name not in naming and is_number(value) and value is not None:
                values.setdefault(name, []).append(float(value))
    return [Row(key, values) for key, values in rows.items()]


def tables_of(runs: Sequence[Run]) -> list[str]:
    return list(dict.fromkeys(str(r["table"]) for run in runs for r in run.records))


def headline_values(runs: Sequence[Run], headline: Headline) -> list[float]:
    """The headline's figure in each run (the first record of a run that matches), runs without it left out."""
    found = []
    for run in runs:
        value = next((headline.value(r) for r in run.records if headline.picks(r)), None)
        if value is not None:
            found.append(value)
    return found


def number(value: float, whole: bool | None = None) -> str:
    """Three significant figures, thousands separated, no exponent; a whole number (or `whole`) as it is."""
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if whole if whole is not None else value == int(value):
        return f"{round(value):,}"
    if value == 0:
        return "0"
    digits = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:,.{digits}f}"


def span_text(values: Sequence[float]) -> str:
    """One value, or the range `min–max` of several (equal values shown once); whole numbers only if all are."""
    if not values:
        return "—"
    whole = all(v == int(v) for v in values if not (math.isnan(v) or math.isinf(v)))
    low, high = number(min(values), whole), number(max(values), whole)
    return low if low == high else f"{low}–{high}"
