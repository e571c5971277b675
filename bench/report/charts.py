"""The report's pictures (PNG, matplotlib): bars at the median of the runs, whiskers at their min and max."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: files only
import matplotlib.pyplot as plt

from bench.report.figures import Row, rows_of
from bench.report.runs import Run

Series = tuple[str, str]  # (legend label, figure name in the rows)


def _bars(
    rows: Sequence[Row], labels: list[str], series: Sequence[Series], title: str, unit: str, log: bool
) -> plt.Figure:
    figure, axes = plt.subplots(figsize=(max(6.0, 0.9 * len(labels) + 2), 4.2))
    width = 0.8 / len(series)
    for n, (legend, name) in enumerate(series):
        medians = [row.median(name) or 0.0 for row in rows]
        spans = [row.span(name) or (0.0, 0.0) for row in rows]
        low = [m - s[0] for m, s in zip(medians, spans, strict=True)]
        high = [s[1] - m for m, s in zip(medians, spans, strict=True)]
        places = [k + (n - (len(series) - 1) / 2) * width for k in range(len(rows))]
        axes.bar(places, medians, width, yerr=[low, high], capsize=3, label=legend)
    axes.set_xticks(range(len(rows)), labels, rotation=30, ha="right")
    axes.set_ylabel(unit)
    axes.set_title(title)
    if log:
        axes.set_yscale("log")
    axes.legend()
    figure.tight_layout()
    return figure


def _save(figure: plt.Figure, out: Path, name: str) -> str:
    figure.savefig(out / name, dpi=90)
    plt.close(figure)
    return name


def throughput_by_format(runs: Sequence[Run], out: Path) -> str | None:
    rows = [row for row in rows_of(runs, "formats") if row.median("ours_mb_per_s")]
    if not rows:
        return None
    labels = [str(dict(row.key)["format"]) for row in rows]
    series = [("ours (convert, scrub, chunk)", "ours_mb_per_s"), ("markitdown (anchor)", "markitdown_mb_per_s")]
    figure = _bars(rows, labels, series, "Throughput by format (input MB per CPU second)", "MB/s", log=True)
    return _save(figure, out, "throughput_by_format.png")


def latency_per_route(runs: Sequence[Run], out: Path) -> str | None:
    rows = rows_of(runs, "load", ("route", "clients"))
    if not rows:
        return None
    labels = [f"{dict(row.key)['route']}" for row in rows]
    series = [("p50", "p50_ms"), ("p95", "p95_ms"), ("p99", "p99_ms")]
    clients = dict(rows[0].key).get("clients")
    figure = _bars(rows, labels, series, f"Read API latency under load ({clients} clients)", "ms", log=False)
    return _save(figure, out, "latency_per_route.png")


def requests_per_batch(runs: Sequence[Run], out: Path) -> str | None:
    """Stacked by route, one bar per wire, beside the one-request-per-item anchor's requests for 100 items."""
    routes = [row for row in rows_of(runs, "routes", ("wire", "latency_ms")) if dict(row.key)["latency_ms"] == 0]
    batches = {dict(r.key)["wire"]: r for r in rows_of(runs, "batches", ("wire", "latency_ms"))}
    if not routes:
        return None
    figure, axes = plt.subplots(figsize=(7.0, 4.2))
    for n, row in enumerate(routes):
        wire = str(dict(row.key)["wire"])
        bottom = 0.0
        for route in sorted(row.values):
            height = row.median(route) or 0.0
            axes.bar(n * 2, height, 0.8, bottom=bottom, label=f"{wire}: {route}")
            bottom += height
        axes.text(n * 2, bottom, f"{bottom:.0f}", ha="center", va="bottom")
        anchor = batches[wire].median("anchor_requests_per_batch") if wire in batches else None
        axes.bar(n * 2 + 1, anchor or 0.0, 0.8, color="lightgray", hatch="//", edgecolor="gray")
        axes.text(n * 2 + 1, anchor or 0.0, f"{anchor or 0:.0f}", ha="center", va="bottom")
    ticks = [
        (n * 2 + k, f"{dict(r.key)['wire']}\n{'batched' if k == 0 else 'store() per item'}")
        for n, r in enumerate(routes)
        for k in (0, 1)
    ]
    axes.set_xticks([t for t, _ in ticks], [label for _, label in ticks], fontsize=8)
    axes.set_ylabel("requests per 100 items")
    axes.set_title("CortexDB requests per 100-item batch, by wire and route")
    axes.legend(fontsize=7)
    figure.tight_layout()
    return _save(figure, out, "requests_per_batch.png")


def backfill_steps(runs: Sequence[Run], out: Path) -> str | None:
    rows = rows_of(runs, "steps", ("step",))
    if not rows or not rows[0].values:
        return None
    names = list(dict.fromkeys(name for row in rows for name in row.values))
    figure = _bars(
        rows,
        [str(dict(r.key)["step"]) for r in rows],
        [(n, n) for n in names],
        "Folder backfill of tldr-pages, seconds per step",
        "s",
        log=True,
    )
    return _save(figure, out, "backfill_steps.png")
