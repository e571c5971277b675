"""bench/report: records from a script's run, figures side by side over runs, headline ratios, the markdown."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from bench._report import ENV, emit
from bench.report.engine_stdout import engine_records
from bench.report.figures import headline_values, rows_of, span_text
from bench.report.runs import Bench, Headline, Run, run_once
from bench.report.sections import section, summary

ROOT = str(Path(__file__).resolve().parents[3])


def run_of(*records: dict[str, object], rc: int = 0) -> Run:
    return Run(rc=rc, wall_s=1.0, records=[dict(r) for r in records], output="the end\n")  # type: ignore[misc]


def test_emit_appends_one_json_line_per_call_only_when_the_environment_names_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    emit("quiet", figure=1.0)  # no file named: nothing written, nothing raised
    path = tmp_path / "records.jsonl"
    monkeypatch.setenv(ENV, str(path))
    emit("steps", step="first", seconds=0.5)
    emit("steps", step="again", seconds=0.25, ok=True)
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"table": "steps", "step": "first", "seconds": 0.5},
        {"table": "steps", "step": "again", "seconds": 0.25, "ok": True},
    ]


def test_rows_gather_each_figure_over_runs_by_the_fields_that_name_them() -> None:
    runs = [
        run_of({"table": "t", "route": "a", "p50": 2.0}, {"table": "t", "route": "b", "p50": 7.0}),
        run_of({"table": "t", "route": "b", "p50": 5.0}, {"table": "t", "route": "a", "p50": 3.0}),
        run_of({"table": "other", "route": "a", "p50": 100.0}),
    ]
    rows = rows_of(runs, "t")
    assert [dict(row.key)["route"] for row in rows] == ["a", "b"]  # first-seen order
    assert rows[0].values == {"p50": [2.0, 3.0]}
    assert rows[1].span("p50") == (5.0, 7.0)
    assert rows[1].median("p50") == 6.0
    numbered = rows_of(
        [run_of({"table": "w", "wire": "d", "ms": 0.0, "n": 1}, {"table": "w", "wire": "d", "ms": 5.0, "n": 2})],
        "w",
        ("wire", "ms"),
    )
    assert [row.values["n"] for row in numbered] == [[1.0], [2.0]]  # a numeric field can name a row when told
    skipped = rows_of([run_of({"table": "s", "step": "first", "ours": 2.0, "peer": None})], "s")
    assert [name for name, _ in skipped[0].key] == ["step"] and skipped[0].values == {"ours": [2.0]}


def test_a_range_is_shown_once_when_its_ends_agree_and_as_min_to_max_otherwise() -> None:
    assert span_text([]) == "—"
    assert span_text([4.0, 4.0001]) == "4.00"
    assert span_text([12_345.0, 9_876.0, 10_000.0]) == "9,876–12,345"
    assert span_text([0.0312, 0.0298]) == "0.0298–0.0312"
    assert span_text([400.0, 400.0]) == "400" and span_text([3.0, 12.0]) == "3–12"  # whole figures as they are


def test_a_headline_ratio_is_taken_within_each_run_then_given_as_its_range() -> None:
    headline = Headline("ours / anchor", "steps", "anchor_s", (("step", "first"),), over="ours_s")
    runs = [
        run_of({"table": "steps", "step": "first", "ours_s": 2.0, "anchor_s": 6.0}),
        run_of({"table": "steps", "step": "first", "ours_s": 1.0, "anchor_s": 4.0}),
        run_of({"table": "steps", "step": "other", "ours_s": 1.0, "anchor_s": 100.0}),  # no match: left out
        run_of({"table": "steps", "step": "first", "ours_s": 0.0, "anchor_s": 1.0}),  # no denominator: left out
    ]
    assert headline_values(runs, headline) == [3.0, 4.0]


def engine_output(rate: int, p95: dict[str, float]) -> str:
    lines = [
        "generating 2,000 documents of about 2 KB ...",
        f"store_many (static:x/256): {rate:,} items/s overall (1.4 s), 3,802 items/s for the last tenth  target",
        "vectors: 1,950 passages still waiting when the last store returned; all embedded 15.6 s after the first store",
    ]
    for mode, value in p95.items():
        lines.append(
            f"fetch {mode:8s} p50    5.0 ms  p95 {value:6.1f} ms  target p95 <= 30 ms  ratio 0.46  "
            "p95 / keyword p95 1.00 (target <= 1.00)  source doc in top 10: 34%"
        )
    lines.append("file size: 23.1 MiB (4,846 bytes per item) at /tmp/x/bench.sqlite3")
    lines += [
        "fresh process hybrid   open + first answer  0.45 s  target <= 2 s (hybrid, at 300,000)  ratio 0.22  whole "
        "process  1.18 s  RSS 686 MiB, peak 1,686 MiB  target <= 1 GB (at 300,000)  ratio 0.72",
        "data dir: 2,101.7 MiB in 45 files (7,346 bytes per item; 78.2 MiB beside the SQLite file)  item text 2,063 "
        "bytes  ratio 3.56 x the text at /work/b300",
        "embed: plain onnxruntime (anchor)     13.9 passages/s   peak RSS   1540 MB",
        "embed: ours (fused graph)             24.3 passages/s   peak RSS    226 MB",
        "embed: ratio ours / plain             1.75x   target >= 1.5x: met, stretch missed",
        "embed: min cosine to plain         0.9999998 target >= 0.999: met",
    ]
    return "\n".join(lines) + "\n"


def test_engine_local_figures_are_read_from_what_it_prints() -> None:
    records = engine_records(engine_output(12_345, {"keyword": 10.0, "vector": 5.0, "hybrid": 25.0}))
    store = next(r for r in records if r["table"] == "store")
    assert store["items_per_s"] == 12_345 and store["vectors_done_s"] == 15.6
    fetch = {r["mode"]: r for r in records if r["table"] == "fetch"}
    assert fetch["hybrid"]["p95_ms"] == 25.0
    assert fetch["hybrid"]["p95_over_keyword"] == pytest.approx(2.5)
    assert fetch["keyword"]["source_in_top10"] == pytest.approx(0.34)
    assert next(r for r in records if r["table"] == "file")["bytes_per_item"] == 4_846
    assert next(r for r in records if r["table"] == "data_dir")["bytes_per_item"] == 7_346
    fresh = next(r for r in records if r["table"] == "fresh")
    assert (fresh["mode"], fresh["open_s"], fresh["rss_mib"], fresh["peak_mib"]) == ("hybrid", 0.45, 686, 1_686)
    embed = next(r for r in records if r["table"] == "embed")
    assert embed["ratio"] == pytest.approx(24.3 / 13.9) and embed["min_cosine"] == 0.9999998
    assert (embed["peak_rss_mb"], embed["anchor_peak_rss_mb"]) == (226, 1_540)
    assert engine_records("Traceback (most recent call last):\n") == []


def test_a_run_collects_the_records_a_script_emits_and_its_exit_status(tmp_path: Path) -> None:
    script = tmp_path / "fake_bench.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            sys.path.insert(0, sys.argv[3])  # the repository, as a script of bench/ finds bench/_report.py
            from bench._report import emit
            for n in range(int(sys.argv[1])):
                emit("steps", step=f"s{n}", seconds=n / 10)
            print("done")
            sys.exit(int(sys.argv[2]))
            """
        )
    )
    bench = Bench(
        name="fake", title="Fake", script=str(script), full=("3", "1", ROOT), quick=("1", "0", ROOT), anchor="none"
    )
    full = run_once(bench, quick=False, timeout_s=60)
    assert full.rc == 1 and "done" in full.tail
    assert [r["step"] for r in full.records] == ["s0", "s1", "s2"]
    quick = run_once(bench, quick=True, timeout_s=60)
    assert quick.rc == 0 and len(quick.records) == 1


def test_a_run_past_its_time_limit_is_stopped_and_keeps_what_it_emitted(tmp_path: Path) -> None:
    script = tmp_path / "slow_bench.py"
    script.write_text(
        f"import sys, time\nsys.path.insert(0, {ROOT!r})\n"
        "from bench._report import emit\nemit('t', x=1)\ntime.sleep(30)\n"
    )
    bench = Bench(name="slow", title="Slow", script=str(script), full=(), quick=None, anchor="none")
    run = run_once(bench, quick=True, timeout_s=3)
    assert run.rc == -9 and run.records == [{"table": "t", "x": 1}]
    assert bench.command(quick=True) == bench.command(quick=False)  # no quick size: the full one


def test_the_markdown_has_the_anchor_each_table_with_ranges_and_the_end_of_a_failed_run() -> None:
    headline = Headline("anchor / ours", "erase", "ratio")
    bench = Bench(
        name="erasure",
        title="Erasure",
        script="bench/erasure.py",
        full=(),
        quick=(),
        anchor="page by page",
        headlines=(headline,),
    )
    runs = [
        run_of({"table": "erase", "ratio": 4.5, "ours_s": 0.5}),
        run_of({"table": "erase", "ratio": 6.25, "ours_s": 0.25}, rc=1),
    ]
    text = "\n".join(section(bench, runs, quick=False))
    assert "**Anchor:** page by page." in text
    assert "| anchor / ours | 4.50–6.25 |" in text
    assert "| 4.50–6.25 | 0.250–0.500 |" in text  # the erase table: each figure's range
    assert "exit status 1" in text and "the end" in text
    assert "| Erasure | anchor / ours | 4.50–6.25 | 2 |" in "\n".join(summary([(bench, runs)]))


def test_the_charts_are_drawn_from_the_records(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from bench.report import charts

    formats = [
        run_of({"table": "formats", "format": f, "ours_mb_per_s": s, "markitdown_mb_per_s": s / 2})
        for f, s in (("pdf", 1.0), ("html", 3.0))
    ]
    routes = [
        run_of(
            {"table": "routes", "wire": "direct", "latency_ms": 0.0, "POST bulk": 1.0, "GET events": 3.0},
            {"table": "batches", "wire": "direct", "latency_ms": 0.0, "anchor_requests_per_batch": 400.0},
        )
    ]
    assert charts.throughput_by_format(formats, tmp_path) == "throughput_by_format.png"
    assert charts.requests_per_batch(routes, tmp_path) == "requests_per_batch.png"
    assert charts.latency_per_route([], tmp_path) is None  # no records, no chart
    for name in ("throughput_by_format.png", "requests_per_batch.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")
    assert sys.modules["matplotlib"].get_backend().lower() == "agg"
