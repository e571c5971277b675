"""Machine-readable figures of a benchmark, for the report `make bench` writes (bench/report).

A script calls `emit` beside what it prints. Nothing changes when it runs by hand: only when the environment
names a file in `TM_BENCH_JSON` (bench/report sets it for each run) does every call append one JSON object, on
one line, to that file. A record is a `table` name and flat figures (numbers, strings, booleans); the report
groups records by table and puts the runs of one figure side by side.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

ENV = "TM_BENCH_JSON"

Figure = float | int | str | bool | None


def emit(table: str, **figures: Figure) -> None:
    """Append one record of `table` to the file `TM_BENCH_JSON` names; do nothing when it names none."""
    path = os.environ.get(ENV)
    if not path:
        return
    with Path(path).open("a", encoding="utf-8") as out:
        out.write(json.dumps({"table": table, **figures}) + "\n")
