"""The markdown of the report: a summary of every headline, then one section per benchmark."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from bench.report.figures import Row, headline_values, rows_of, span_text, tables_of
from bench.report.runs import REPO, Bench, Run

Ran = tuple[Bench, list[Run]]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows),
    ]


def _command(bench: Bench, quick: bool) -> str:
    words = [".venv/bin/python", *bench.command(quick)[1:]]
    return shlex.join(w.replace(str(REPO) + "/", "").replace(str(REPO.parent), "..") for w in words)


def summary(ran: Sequence[Ran]) -> list[str]:
    """Every benchmark's headlines in one table: the figure's range over its runs, and how many runs."""
    rows = [
        [bench.title, headline.label, span_text(headline_values(runs, headline)), str(len(runs))]
        for bench, runs in ran
        for headline in bench.headlines
    ]
    return _table(
        ["benchmark", "figure (ratio: ours against the anchor, side by side in one run)", "range", "runs"], rows
    )


def figures_table(rows: Sequence[Row]) -> list[str]:
    """Key columns, then every numeric figure as its range over the runs."""
    if not rows:
        return []
    keys = [name for name, _ in rows[0].key]
    values = list(dict.fromkeys(name for row in rows for name in row.values))
    body = [
        [*("" if v is None else str(v) for _, v in row.key), *(span_text(row.values.get(n, [])) for n in values)]
        for row in rows
    ]
    return _table([*keys, *values], body)


def section(bench: Bench, runs: Sequence[Run], quick: bool) -> list[str]:
    walls, cpus = span_text([run.wall_s for run in runs]), span_text([run.cpu_s for run in runs])
    codes = sorted({run.rc for run in runs})
    lines = [
        f"## {bench.title}",
        "",
        f"`{_command(bench, quick)}`: {len(runs)} run(s), {walls} s of wall time and {cpus} s of CPU each, "
        f"exit status {', '.join(map(str, codes))}.",
        "",
        f"**Anchor:** {bench.anchor}.",
        "",
    ]
    if bench.headlines:
        rows = [[h.label, span_text(headline_values(runs, h))] for h in bench.headlines]
        lines += [*_table(["figure", "range over runs"], rows), ""]
    for table in tables_of(runs):
        lines += [f"**{table}**", "", *figures_table(rows_of(runs, table, bench.keys.get(table))), ""]
    if not any(run.records for run in runs):
        lines.append("No figures were recorded.")
    failed = [run for run in runs if run.rc != 0]
    if failed or not any(run.records for run in runs):
        shown = failed[-1] if failed else runs[-1]
        lines += [
            f"The end of what a run printed (exit status {shown.rc}; non-zero: a target missed, or a failure):",
            "",
            "```",
            shown.tail,
            "```",
            "",
        ]
    return lines
