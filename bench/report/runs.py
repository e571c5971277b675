"""Running one benchmark script: its command, its repeated runs, and the records each run left."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench._report import ENV, Figure

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "corpus"

Record = dict[str, Figure]
StdoutParser = Callable[[str], list[Record]]


@dataclass(frozen=True)
class Headline:
    """A figure the report leads a benchmark's section with: `field` (over `over`, when given, both from the
    same record: a ratio measured side by side) of the first record of `table` that matches, in each run."""

    label: str
    table: str
    field: str
    match: tuple[tuple[str, Figure], ...] = ()
    over: str | None = None

    def picks(self, record: Record) -> bool:
        return record.get("table") == self.table and all(record.get(k) == v for k, v in self.match)

    def value(self, record: Record) -> float | None:
        top, bottom = record.get(self.field), 1.0 if self.over is None else record.get(self.over)
        if not isinstance(top, int | float) or not isinstance(bottom, int | float) or not bottom:
            return None
        return float(top) / float(bottom)


@dataclass(frozen=True)
class Bench:
    """A script of bench/ and how the report runs it: arguments for a full and a quick run, and what to show."""

    name: str
    title: str
    script: str  # a path under the repository, or `-m module`
    full: tuple[str, ...]
    quick: tuple[str, ...] | None  # None: left out of a quick run
    anchor: str
    headlines: tuple[Headline, ...] = ()
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)  # per table: the fields naming a row
    repeats: int = 3
    python_flags: tuple[str, ...] = ()
    parse_stdout: StdoutParser | None = None  # for a script that writes no records (engine_local.py)

    def command(self, quick: bool) -> list[str]:
        args = self.quick if quick and self.quick is not None else self.full
        target = self.script.split() if self.script.startswith("-m ") else [str(REPO / self.script)]
        return [sys.executable, *self.python_flags, *target, *args]


@dataclass(frozen=True)
class Run:
    """One run of a benchmark: exit status, wall time, its records, the end of what it printed, and the CPU
    its processes spent (those it waited for), which says more of its cost than wall time on a busy machine."""

    rc: int
    wall_s: float
    records: list[Record]
    output: str
    cpu_s: float = 0.0

    @property
    def tail(self) -> str:
        return "\n".join(self.output.strip().splitlines()[-15:])


def run_once(bench: Bench, quick: bool, timeout_s: float) -> Run:
    """Run the script once with `TM_BENCH_JSON` set; a run past `timeout_s` is stopped and reported as rc -9."""
    with tempfile.TemporaryDirectory(prefix="tm-bench-report-") as scratch:
        records_path = Path(scratch) / "records.jsonl"
        env = {**os.environ, ENV: str(records_path), "PYTHONWARNINGS": "ignore"}
        started, cpu = time.perf_counter(), children_cpu_s()
        try:
            done = subprocess.run(
                bench.command(quick), cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
            )
            rc, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as expired:
            rc, output = -9, _text(expired.stdout) + _text(expired.stderr) + f"\nstopped after {timeout_s:g} s"
        wall = time.perf_counter() - started
        records = read_records(records_path)
    if bench.parse_stdout is not None:
        records = bench.parse_stdout(output)
    return Run(rc, wall, records, output, children_cpu_s() - cpu)


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode(errors="replace")


def read_records(path: Path) -> list[Record]:
    """The records of a JSON-lines file; none when the script wrote none."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
