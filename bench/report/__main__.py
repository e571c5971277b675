"""`make bench`: every benchmark of bench/ end to end, and one report of them, bench/report/REPORT.md.

    .venv/bin/python -m bench.report [--quick] [--only NAME ...] [--repeats N] [--out DIR]

Each benchmark (bench/report/plan.py) runs as a process of its own, one after another, `repeats` times (3 for
most in a full run, 1 in a quick one), on the corpora in ../shared/corpus. The scripts write their figures as
JSON lines (bench/_report.py; engine_local.py's are read from what it prints). The report puts each figure's
runs side by side as a range `min–max` (the machine's speed moves single runs), each ratio computed within one
run, where ours and its anchor ran side by side; then the charts (PNG beside the report).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.report import charts
from bench.report.plan import PLAN
from bench.report.runs import REPO, Bench, Run, run_once
from bench.report.sections import Ran, section, summary

OUT = REPO / "bench" / "report"
TIMEOUT_S = {False: 420.0, True: 90.0}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, one run each (about 2 minutes)")
    parser.add_argument("--only", nargs="+", choices=[b.name for b in PLAN], help="these benchmarks only")
    parser.add_argument("--repeats", type=int, default=None, help="runs of each benchmark (default: its own)")
    parser.add_argument("--out", type=Path, default=OUT, help="where REPORT.md and the charts go")
    return parser.parse_args()


def chosen(args: argparse.Namespace) -> list[Bench]:
    return [b for b in PLAN if (args.only is None or b.name in args.only) and not (args.quick and b.quick is None)]


def run_all(benches: list[Bench], quick: bool, repeats: int | None) -> list[Ran]:
    ran: list[Ran] = []
    for bench in benches:
        runs: list[Run] = []
        for n in range((1 if quick else bench.repeats) if repeats is None else repeats):
            run = run_once(bench, quick, TIMEOUT_S[quick])
            runs.append(run)
            print(
                f"{bench.name} run {n + 1}: {run.wall_s:.1f} s ({run.cpu_s:.1f} s CPU), exit {run.rc}, "
                f"{len(run.records)} records",
                flush=True,
            )
        ran.append((bench, runs))
    return ran


def draw(ran: list[Ran], out: Path) -> list[str]:
    runs = {bench.name: bench_runs for bench, bench_runs in ran}
    drawn = [
        charts.throughput_by_format(runs.get("formats", []), out),
        charts.latency_per_route(runs.get("api_load", []), out),
        charts.requests_per_batch(runs.get("cortex_requests", []), out),
        charts.backfill_steps(runs.get("backfill", []), out),
    ]
    return [name for name in drawn if name is not None]


def load_text() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def write_report(ran: list[Ran], pictures: list[str], args: argparse.Namespace, wall_s: float, load: str) -> Path:
    mode = "--quick" if args.quick else "full"
    lines = [
        "# Benchmark report",
        "",
        f"Written by `make bench{' QUICK=1' if args.quick else ''}` ({mode}) on {datetime.now(UTC):%Y-%m-%d %H:%M} "
        f"UTC: {os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()}, "
        f"load average {load} at start and {load_text()} at end; {wall_s / 60:.1f} minutes in all, "
        f"{sum(run.cpu_s for _, runs in ran for run in runs) / 60:.1f} minutes of CPU in the benchmarks' processes.",
        "",
        "A figure that depends on the machine is the range `min–max` over the runs shown; a ratio is computed "
        "within each run, between ours and its anchor measured side by side, and then given as its range. "
        "The machine was shared with other work, so single figures are noisy; ratios much less so.",
        "",
        "## Summary",
        "",
        *summary(ran),
        "",
        "## Charts",
        "",
        *(f"![{name}]({name})\n" for name in pictures),
    ]
    for bench, runs in ran:
        lines += section(bench, runs, args.quick)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "REPORT.md"
    path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return path


def main() -> int:
    args = parse_args()
    load, started = load_text(), time.perf_counter()
    ran = run_all(chosen(args), args.quick, args.repeats)
    args.out.mkdir(parents=True, exist_ok=True)
    pictures = draw(ran, args.out)
    path = write_report(ran, pictures, args, time.perf_counter() - started, load)
    print(f"wrote {path} and {len(pictures)} charts in {(time.perf_counter() - started) / 60:.1f} minutes")
    return 0 if all(run.records for _, runs in ran for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
