"""Benchmark of the legacy import: a generated v1 workspace into the local engine, against `store_many` alone.

    .venv/bin/python bench/legacy_import.py [--rows 50000] [--repeat 3] [--keep]

A v1 workspace of `--rows` rows is written with the v1 DDL (tests/fixtures/legacy_workspace.py): 40% documents,
10% learnings, 20% chunk rows (5,000 groups of chat and document chunks), 20% episodic turns (sessions of five)
and 10% profile facets. Then, each `--repeat` times and timed around the work only (wall and CPU):
  floor      `store_many` alone, in calls of 100, into a fresh local engine, on exactly the items the import
             stores (read, mapped and scrubbed beforehand, outside the clock);
  in place   `pipeline.legacy.migrate_with` into a fresh local engine: read, map, scrub, store,
             checkpoint, all in this process (`helper_from=None`);
  helper     the same with reading, mapping and scrubbing in a helper process once it is up (`helper_from=0`);
  migrate    whichever of the two `migrate` picks here (a helper from `HELPER_MIN_CPUS` CPUs and 5,000 items);
  command    the job `tinymemory import-legacy` runs (`worker.legacy.job.import_legacy`): the same, plus its
             record written to the data directory after every batch;
and once, a second import into the same engine (every item a replay). Beside them, with no engine, what the
import adds to the floor: `read` (the workspace's items read and mapped, `LegacyWorkspace.items`) and `scrub`
(those items scrubbed, `pipeline.scrub.scrub_item`), each as a share of the floor; `floor / (floor + scrub)` is
the most the import could reach were reading and mapping free.
The best of the repeats is shown (the machine's load moves single runs; it is printed at start and end). CPU
counts the helper process too.
Target: migrate >= 0.8 of the floor (floor seconds / migrate seconds), checked, with the command's ratio beside
it. The seed's own failure was hours for 5,000 items (per-item waits on CortexDB); here 50,000 rows take seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

# bench/sources.py, first on the path of a script run from bench/, would shadow the `sources` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _report import emit

from engines.contract import MAX_STORE_MANY, StoreItem
from engines.local import LocalEngine
from pipeline.legacy import Checkpoint, LegacyWorkspace, migrate_with, prepared_items
from pipeline.legacy.migrate import HELPER_FROM_ITEMS, HELPER_MIN_CPUS
from pipeline.scrub import Policy, scrub_item
from tests.fixtures.legacy_workspace import generated_workspace
from worker.legacy.job import LegacyImportRequest, LegacyImports, import_legacy
from worker.tuning import collect_less

TARGET_RATIO = 0.8
TABLES = {
    "memory/memory.db": ("memory_docs", "episodic_log", "user_profile"),
    "memory_tree/chunks.db": ("mem_tree_chunks",),
}


@dataclass(frozen=True)
class Timed:
    """One timed step: wall and CPU seconds, and the items it stored and replayed."""

    wall: float
    cpu: float
    stored: int
    replayed: int


async def timed(work: Callable[[], Awaitable[tuple[int, int]]]) -> Timed:
    gc.collect()
    wall, cpu = time.perf_counter(), cpu_seconds()
    stored, replayed = await work()
    return Timed(time.perf_counter() - wall, cpu_seconds() - cpu, stored, replayed)


def cpu_seconds() -> float:
    """CPU of this process and of its children once reaped (the migration reaps its helper process)."""
    times = os.times()
    return time.process_time() + times.children_user + times.children_system


def count_rows(root: Path) -> int:
    total = 0
    for db, tables in TABLES.items():
        conn = sqlite3.connect(root / db)
        try:
            total += sum(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in tables)
        finally:
            conn.close()
    return total


async def read_and_scrub(workspace: LegacyWorkspace) -> tuple[Timed, Timed]:
    """The import's own work without an engine: reading and mapping every item, then scrubbing them."""

    async def read() -> tuple[int, int]:
        return sum(1 for _ in workspace.items()), 0

    mapped = [imported.item for imported in workspace.items()]

    async def scrub() -> tuple[int, int]:
        policy = Policy()
        return sum(1 for item in mapped if scrub_item(item, policy).value), 0

    # The import holds a batch at a time, not the workspace: the collector must not walk every item here.
    read_step = await timed(read)
    gc.freeze()
    try:
        return read_step, await timed(scrub)
    finally:
        gc.unfreeze()


async def floor(items: list[StoreItem], path: Path) -> Timed:
    engine = LocalEngine(path)

    async def store() -> tuple[int, int]:
        replayed = 0
        for start in range(0, len(items), MAX_STORE_MANY):
            receipts = await engine.store_many(items[start : start + MAX_STORE_MANY])
            replayed += sum(r.replayed for r in receipts)
        return len(items) - replayed, replayed

    try:
        return await timed(store)
    finally:
        engine.close()


async def migrated(workspace: LegacyWorkspace, engine: LocalEngine, *, helper: bool) -> Timed:
    async def run() -> tuple[int, int]:
        report = await migrate_with(engine, workspace, None, ignore, helper_from=0 if helper else None)
        return report.stored, report.replayed

    return await timed(run)


async def command(root: Path, data_dir: Path) -> Timed:
    engine = LocalEngine(data_dir / "memory.sqlite3")

    async def run() -> tuple[int, int]:
        record = await import_legacy(LegacyImportRequest(path=str(root)), engine, "local", LegacyImports(data_dir))
        return record.stored, record.replayed

    try:
        return await timed(run)
    finally:
        engine.close()


def ignore(_: Checkpoint) -> None:
    """No checkpoint is kept (as `migrate` keeps none)."""


def load_line(when: str) -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {when}: {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} CPUs)"


def row(name: str, step: Timed, rows: int, items: int, floor_step: Timed | None) -> str:
    ratio = f"{floor_step.wall / step.wall:.2f} (CPU {floor_step.cpu / step.cpu:.2f})" if floor_step else "-"
    return (
        f"{name:<9} {step.wall:7.2f} s  {step.cpu:7.2f} s CPU  {rows / step.wall:9,.0f} rows/s  "
        f"{items / step.wall:8,.0f} items/s  stored {step.stored:,} replayed {step.replayed:,}  vs floor {ratio}"
    )


def share(name: str, step: Timed, floor_step: Timed) -> str:
    return (
        f"{name:<9} {step.wall:7.2f} s  {step.cpu:7.2f} s CPU  {step.wall / floor_step.wall:.2f} of the floor "
        f"(CPU {step.cpu / floor_step.cpu:.2f})"
    )


def best(steps: list[Timed]) -> Timed:
    return min(steps, key=lambda s: s.wall)


async def run(rows: int, repeat: int, work: Path) -> bool:
    started = time.perf_counter()
    ws = generated_workspace(work / "v1", rows)
    rows_written = count_rows(ws.root)
    floors, in_places, helped, commands, reads, scrubs = [], [], [], [], [], []
    cpus = len(os.sched_getaffinity(0))
    with LegacyWorkspace.open(ws.root) as workspace:
        total = sum(1 for _ in workspace.items())
        print(f"workspace: {rows_written:,} rows, {total:,} items, written in {time.perf_counter() - started:.1f} s")
        default = "helper" if cpus >= HELPER_MIN_CPUS and total >= HELPER_FROM_ITEMS else "in place"
        print(
            f"migrate here: {default} ({cpus} CPUs, {total:,} items; a helper from {HELPER_MIN_CPUS} CPUs and "
            f"{HELPER_FROM_ITEMS:,} items)"
        )
        for n in range(repeat):
            read, scrub = await read_and_scrub(workspace)
            reads.append(read)
            scrubs.append(scrub)
            # The floor's items are made outside its clock, and let go before the import runs: held, they
            # would make every collection of the import's own garbage walk them too.
            items = list(prepared_items(workspace))
            floors.append(await floor(items, work / f"floor-{n}.sqlite3"))
            del items
            for name, steps in (("in place", in_places), ("helper", helped)):
                engine = LocalEngine(work / f"{name.replace(' ', '-')}-{n}.sqlite3")
                try:
                    steps.append(await migrated(workspace, engine, helper=name == "helper"))
                    if n == repeat - 1 and name == default:
                        replay = await migrated(workspace, engine, helper=name == "helper")
                finally:
                    engine.close()
            commands.append(await command(ws.root, work / f"command-{n}"))
            print(
                f"run {n + 1}: in place {floors[-1].wall / in_places[-1].wall:.2f} of the floor, helper "
                f"{floors[-1].wall / helped[-1].wall:.2f}, command {floors[-1].wall / commands[-1].wall:.2f} "
                f"({load_line('now')})",
                flush=True,
            )
    best_floor, best_in_place, best_helped, best_command = (
        best(steps) for steps in (floors, in_places, helped, commands)
    )
    best_migrate = best_helped if default == "helper" else best_in_place
    shown = (
        ("floor", best_floor),
        ("in place", best_in_place),
        ("helper", best_helped),
        ("migrate", best_migrate),  # the one of the two `migrate` picks here, under the report's name
        ("command", best_command),
        ("replay", replay),
    )
    for name, step in shown:
        print(row(name, step, rows_written, total, None if name == "floor" else best_floor))
        emit(
            "steps", step=name, wall_s=step.wall, cpu_s=step.cpu, items_per_s=total / step.wall, floor_s=best_floor.wall
        )
    best_read, best_scrub = best(reads), best(scrubs)
    for name, step in (("read", best_read), ("scrub", best_scrub)):
        print(share(name, step, best_floor))
        emit("shares", step=name, wall_s=step.wall, cpu_s=step.cpu, floor_s=best_floor.wall, floor_cpu_s=best_floor.cpu)
    ceiling = best_floor.wall / (best_floor.wall + best_scrub.wall)
    ceiling_cpu = best_floor.cpu / (best_floor.cpu + best_scrub.cpu)
    print(f"ceiling: with reading and mapping free, the scrubber leaves migrate {ceiling:.2f} (CPU {ceiling_cpu:.2f})")
    exact = all(s.stored == total and s.replayed == 0 for s in (*floors, *in_places, *helped, *commands)) and (
        replay.stored,
        replay.replayed,
    ) == (0, total)
    ratio = best_floor.wall / best_migrate.wall
    print(f"checks: every import stored each item once and the re-run replayed them all: {'ok' if exact else 'FAILED'}")
    verdict = "met" if ratio >= TARGET_RATIO else "MISSED"
    print(f"target: migrate ({default}) >= {TARGET_RATIO} of store_many alone: {ratio:.2f} {verdict}")
    return exact and ratio >= TARGET_RATIO


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=50_000, help="rows of the generated workspace")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each step (the best is shown)")
    parser.add_argument("--keep", action="store_true", help="keep the working folder and print where it is")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    collect_less()  # as every pipeline process does (the command line, the runtimes, the workers)
    print(load_line("at start"), flush=True)
    work = Path(tempfile.mkdtemp(prefix="tinymemory-legacy-import-bench-"))
    try:
        met = asyncio.run(run(args.rows, args.repeat, work))
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(load_line("at end"))
    raise SystemExit(0 if met else 1)


if __name__ == "__main__":
    main()
