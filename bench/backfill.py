"""Benchmark of a folder backfill: first ingest, unchanged re-sync, deletions; against markitdown and two peers.

    .venv/bin/python bench/backfill.py ../shared/corpus/tldr-pages [--workers N] [--deleted 10]
                                       [--skip-peers] [--skip-floor]

The folder is copied into a temporary directory first (the original is never touched), then, each in this
process and timed around the work only (not start-up):
  ours        `EmbeddedRuntime.sync` on a fresh data directory: the first ingest, a second sync of the unchanged
              folder (checked to read and convert nothing), and a sync after deleting `--deleted` files (chosen
              deterministically, checked to leave none of their items in memory);
  peers       LangChain's `index()` (in-memory record manager and vector store, fake embeddings,
              `cleanup="full"`) and LlamaIndex's `IngestionPipeline` (`UPSERTS_AND_DELETE`, mock embeddings) over
              the same files and the same deletions (needs the `bench` extra; skipped without it);
  floor       markitdown alone (`MarkItDown().convert(path)`, exceptions swallowed) over the same files in a warm
              pool of as many processes as our converter pool has;
  command     the wall time of the whole `tinymemory ingest FOLDER --json`, first and unchanged.
Targets (scrubbing, persistent engine): unchanged re-sync <= 0.15 s with zero reads; 10 deletions <= 0.2 s;
first ingest of tldr-pages <= 2 s; first ingest >= 0.9 of the markitdown floor (floor time / ours; for another
folder the table's first-ingest target is the floor's time / 0.9); `tinymemory ingest` of an unchanged folder
< 1 s of wall time. The issue's figures for the peers over tldr-pages (first / unchanged / 10 deleted):
LangChain 0.48 / 0.29 / 0.34 s, LlamaIndex 2.48 / 0.34 / 0.18 s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from engines.contract import ListRequest, MetaFilter
from worker.embedded import EmbeddedRuntime
from worker.model import BatchReport, SyncReport
from worker.settings import Settings

TARGET_FIRST_S = {"tldr-pages": 2.0}
TARGET_UNCHANGED_S = 0.15
TARGET_DELETED_S = 0.2
TARGET_FLOOR_RATIO = 0.9
TARGET_COMMAND_S = 1.0
STEPS = ("first ingest", "unchanged re-sync", "deletions")

T = TypeVar("T")


@dataclass(frozen=True)
class Synced:
    """One timed sync: its seconds and what it reported."""

    seconds: float
    sync: SyncReport
    batches: list[BatchReport]

    @property
    def items(self) -> int:
        return sum(b.stored + b.replayed for b in self.batches)

    @property
    def failed(self) -> int:
        return sum(b.failed for b in self.batches)

    @property
    def units(self) -> int:
        return sum(b.units + b.unchanged + b.failed for b in self.batches)


@dataclass
class Ours:
    """Our three steps and the item counts the deletion check needs."""

    steps: list[Synced] = field(default_factory=list)
    total_before: int = 0
    total_after: int = 0
    deleted_items_before: int = 0
    deleted_items_after: int = 0
    deleted_letters_before: int = 0
    deleted_letters_after: int = 0
    failed_units: list[str] = field(default_factory=list)


# -- the folder ------------------------------------------------------------------------------------------


def copy_folder(folder: Path, into: Path) -> Path:
    """A copy of `folder` under `into` (links copied as links), so deletions never touch the original."""
    target = into / (folder.resolve().name or "root")
    shutil.copytree(folder, target, symlinks=True)
    return Path(os.path.realpath(target))


def folder_files(root: Path) -> list[str]:
    """Relative paths of the regular files below `root`, sorted, leaving out hidden names (as our listing does)."""
    found = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if path.is_file() and not path.is_symlink() and not any(part.startswith(".") for part in rel.parts):
            found.append(rel.as_posix())
    return sorted(found)


def pick_deleted(files: Sequence[str], count: int) -> list[str]:
    """`count` files spread evenly over the sorted list: the same ones every run."""
    count = min(count, len(files))
    return [files[(2 * k + 1) * len(files) // (2 * count)] for k in range(count)]


# -- ours ------------------------------------------------------------------------------------------------


async def timed(work: Awaitable[T]) -> tuple[float, T]:
    started = time.perf_counter()
    result = await work
    return time.perf_counter() - started, result


async def timed_sync(runtime: EmbeddedRuntime, source_id: str) -> Synced:
    gc.collect()
    seconds, (sync, batches) = await timed(runtime.sync(source_id))
    return Synced(seconds, sync, batches)


async def count_items(runtime: EmbeddedRuntime, file_path: str | None = None) -> int:
    """Items in memory, all of them or those of one file (`engine.list`, paged)."""
    count, cursor = 0, None
    while True:
        page = await runtime.engine.list(ListRequest(filter=MetaFilter(file_path=file_path), limit=1000, cursor=cursor))
        count += len(page.items)
        cursor = page.next_cursor
        if cursor is None or not page.items:
            return count


def count_letters(runtime: EmbeddedRuntime, source_id: str, units: Sequence[str]) -> int:
    """Dead letters left for these units (a file that failed and is then deleted should leave none)."""
    wanted = set(units)
    return sum(letter.unit_id in wanted for letter in runtime.state.dead_letters(source_id, limit=1_000_000))


async def run_ours(root: Path, deleted: Sequence[str], workers: int, data_dir: Path) -> Ours:
    ours = Ours()
    with EmbeddedRuntime(Settings(data_dir=data_dir, convert_workers=workers)) as runtime:
        # Warm like the floor's pool: both are timed converting, not starting processes.
        runtime.converter.warm(wait=True)
        source_id = runtime.source_for_path(root).id
        ours.steps.append(await timed_sync(runtime, source_id))
        ours.failed_units = sorted({letter.unit_id for letter in runtime.state.dead_letters(source_id)})
        ours.steps.append(await timed_sync(runtime, source_id))
        ours.total_before = await count_items(runtime)
        ours.deleted_letters_before = count_letters(runtime, source_id, deleted)
        for rel in deleted:
            ours.deleted_items_before += await count_items(runtime, f"{root}/{rel}")
            (root / rel).unlink()
        ours.steps.append(await timed_sync(runtime, source_id))
        ours.total_after = await count_items(runtime)
        ours.deleted_letters_after = count_letters(runtime, source_id, deleted)
        for rel in deleted:
            ours.deleted_items_after += await count_items(runtime, f"{root}/{rel}")
    return ours


# -- the peers ---------------------------------------------------------------------------------------------


def run_peers(root: Path, files: Sequence[str], deleted: Sequence[str]) -> dict[str, list[Any]]:
    """Each peer's three steps (`PeerStep`s): over `files` twice, then over `files` without `deleted`."""
    from _peers import build_peers

    gone = set(deleted)
    kept = [rel for rel in files if rel not in gone]
    results: dict[str, list[Any]] = {}
    for peer in build_peers():
        steps = []
        for step_files in (files, files, kept):
            gc.collect()
            steps.append(peer.step(root, step_files))
        results[peer.name] = steps
    return results


def restore(source: Path, root: Path, files: Sequence[str]) -> None:
    """Put `files` back into the copy after our deletion step."""
    for rel in files:
        shutil.copy2(source / rel, root / rel)


# -- the command -------------------------------------------------------------------------------------------


def command_walls(root: Path, data_dir: Path) -> list[tuple[float, dict[str, Any]]]:
    """Wall time and JSON summary of `tinymemory ingest ROOT --json`, run twice on a fresh data directory."""
    command = [str(Path(sys.executable).with_name("tinymemory")), "ingest", str(root), "--json"]
    env = {**os.environ, "TINYMEMORY_DATA_DIR": str(data_dir)}
    walls = []
    for _ in range(2):
        started = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        walls.append((wall, command_summary(done)))
    return walls


def command_summary(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The command's JSON summary, or its exit status and last line of error output."""
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        return dict(json.loads(lines[-1]))
    errors = done.stderr.strip().splitlines()
    return {"exit": done.returncode, "error": errors[-1] if errors else ""}


# -- printing ----------------------------------------------------------------------------------------------


def fmt_s(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds:.3f} s"


def fmt_ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def over(a: float, b: float | None) -> float | None:
    return None if b is None or b <= 0 else a / b


def print_table(ours: Ours, peers: dict[str, list[Any]], deleted: int, first_target: float | None) -> None:
    targets = [first_target, TARGET_UNCHANGED_S, TARGET_DELETED_S]
    names = ["LangChain", "LlamaIndex"]
    header = ["step", "ours", *names, *(f"ours/{n}" for n in names), "target", "ours/target"]
    rows = [header]
    for n, (label, target) in enumerate(zip(STEPS, targets, strict=True)):
        ours_s = ours.steps[n].seconds
        theirs = [peers[name][n].seconds if name in peers else None for name in names]
        label = f"{deleted} deleted" if label == "deletions" else label
        rows.append(
            [
                label,
                fmt_s(ours_s),
                *(fmt_s(t) for t in theirs),
                *(fmt_ratio(over(ours_s, t)) for t in theirs),
                "—" if target is None else f"<= {target:.3g} s",
                fmt_ratio(over(ours_s, target)),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print(" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def print_checks(ours: Ours, deleted: int) -> None:
    first, unchanged, gone = ours.steps
    print(
        f"first ingest: {first.sync.listed} files listed, {first.sync.upserts} changed, {first.items} items stored "
        f"({first.items / first.seconds:,.0f} items/s, {first.sync.upserts / first.seconds:,.0f} files/s), "
        f"{first.failed} failed, {first.sync.skipped} skipped at listing"
        + (f" (failed: {', '.join(ours.failed_units)})" if ours.failed_units else "")
    )
    reads = unchanged.sync.upserts + unchanged.units
    verdict = "OK" if reads == 0 and unchanged.sync.deletes == 0 else "FAIL"
    held_back = getattr(unchanged.sync, "held_back", 0)  # failed files left alone until they change
    print(
        f"unchanged re-sync: {unchanged.sync.listed} listed, {unchanged.sync.upserts} read and converted, "
        f"{unchanged.sync.deletes} deleted, {held_back} failed ones held back, {unchanged.sync.batches} batches  "
        f"[{verdict}: zero reads]"
    )
    expected = ours.total_before - ours.deleted_items_before
    ok = ours.deleted_items_after == 0 and ours.total_after == expected
    print(
        f"{deleted} deleted: sync saw {gone.sync.deletes} deletes, {gone.sync.upserts} upserts; items of those files "
        f"{ours.deleted_items_before} before, {ours.deleted_items_after} after; items in memory "
        f"{ours.total_before:,} -> {ours.total_after:,} (expected {expected:,})  [{'OK' if ok else 'FAIL'}]; "
        f"their dead letters {ours.deleted_letters_before} before, {ours.deleted_letters_after} after"
    )


def print_peer_notes(peers: dict[str, list[Any]]) -> None:
    for name, steps in peers.items():
        print(f"{name}: " + " | ".join(f"{label}: {step.did}" for label, step in zip(STEPS, steps, strict=True)))


def print_floor(floor_s: float, converted: int, files: int, workers: int, ours_s: float) -> None:
    ratio = floor_s / ours_s
    print(
        f"floor: markitdown alone, {workers} warm processes: {floor_s:.3f} s for {files} files ({converted} converted)"
        f"; floor/ours = {ratio:.2f}  target >= {TARGET_FLOOR_RATIO}  ratio to target {ratio / TARGET_FLOOR_RATIO:.2f}"
    )


def print_command(walls: list[tuple[float, dict[str, Any]]]) -> None:
    (first, first_summary), (again, again_summary) = walls
    print(f"command `tinymemory ingest --json`: first {first:.3f} s wall ({first_summary})")
    print(
        f"command `tinymemory ingest --json`: unchanged {again:.3f} s wall ({again_summary})  "
        f"target < {TARGET_COMMAND_S:g} s  ratio {again / TARGET_COMMAND_S:.2f}"
    )


def first_target(folder: str, floor: tuple[float, int] | None) -> float | None:
    """The first ingest's target: a fixed time for tldr-pages, else the floor's time over the floor ratio."""
    if folder in TARGET_FIRST_S:
        return TARGET_FIRST_S[folder]
    return None if floor is None else floor[0] / TARGET_FLOOR_RATIO


def load_line(when: str) -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {when}: {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} CPUs)"


# -- main --------------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="the folder to ingest (copied first; never modified)")
    parser.add_argument("--workers", type=int, default=None, help="converter processes (default: as Settings)")
    parser.add_argument("--deleted", type=int, default=10, help="how many files to delete for the third step")
    parser.add_argument("--skip-peers", action="store_true", help="do not run LangChain and LlamaIndex")
    parser.add_argument("--skip-floor", action="store_true", help="do not run markitdown alone")
    return parser.parse_args()


def floor_time(paths: list[str], workers: int) -> tuple[float, int]:
    from _peers import run_floor

    return run_floor(paths, workers)


def peers_or_skip(skip: bool, root: Path, files: list[str], deleted: list[str]) -> dict[str, list[Any]]:
    from _peers import available

    if skip or not available():
        print("peers skipped: " + ("--skip-peers" if skip else "the `bench` extra is not installed"))
        return {}
    return run_peers(root, files, deleted)


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.ERROR)  # dead letters are counted and named below, not logged one by one
    source = args.folder.resolve()
    workers = args.workers or Settings(data_dir=Path(tempfile.gettempdir())).convert_workers
    print(load_line("at start"), flush=True)
    with tempfile.TemporaryDirectory(prefix="tm-backfill-") as scratch:
        work = Path(scratch)
        root = copy_folder(source, work / "folder")
        files = folder_files(root)
        deleted = pick_deleted(files, args.deleted)
        print(f"{source.name}: {len(files):,} files copied to {root}; deleting {', '.join(deleted)}", flush=True)
        ours = asyncio.run(run_ours(root, deleted, workers, work / "data"))
        restore(source, root, deleted)  # the peers, the floor and the command start from the whole folder
        peers = peers_or_skip(args.skip_peers, root, files, deleted)
        floor = None if args.skip_floor else floor_time([str(root / rel) for rel in files], workers)
        walls = command_walls(root, work / "command-data")
        print()
        print_table(ours, peers, len(deleted), first_target(source.name, floor))
        print()
        print_checks(ours, len(deleted))
        print_peer_notes(peers)
        if floor is not None:
            print_floor(*floor, len(files), workers, ours.steps[0].seconds)
        print_command(walls)
    print(load_line("at end"))


if __name__ == "__main__":
    main()
