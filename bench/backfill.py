"""Benchmark of a folder backfill: first ingest, unchanged re-sync, deletions; against markitdown and two peers.

    .venv/bin/python bench/backfill.py ../shared/corpus/tldr-pages [--mode embedded|celery|both] [--workers N]
                                       [--deleted 10] [--skip-peers] [--skip-floor]
    .venv/bin/python bench/backfill.py --searchable [--corpora nfcorpus,tldr] [--limit N]

`--searchable` measures something else, the time until NFCorpus and tldr-pages are fully searchable (every
vector stored) against LangChain's `index()` with sentence-transformers' MiniLM: see `searchable.py`. Without
it:

The folder is copied into a temporary directory first (the original is never touched), then, each in this
process and timed around the work only (not start-up):
  ours        `EmbeddedRuntime.sync` on a fresh data directory: the first ingest, a second sync of the unchanged
              folder (checked to read and convert nothing), and a sync after deleting `--deleted` files (chosen
              deterministically, checked to leave none of their items in memory). The converter pool is warmed
              first (as the floor's is); the text pool is not: it starts inside the timed first ingest;
  peers       LangChain's `index()` (in-memory record manager and vector store, fake embeddings,
              `cleanup="full"`) and LlamaIndex's `IngestionPipeline` (`UPSERTS_AND_DELETE`, mock embeddings) over
              the same files and the same deletions (needs the `bench` extra; skipped without it);
  floor       markitdown alone (`MarkItDown().convert(path)`, exceptions swallowed) over the same files in a warm
              pool of as many processes as our converter pool has;
  command     the wall time of the whole `tinymemory ingest FOLDER --json --no-wait-vectors`, first and unchanged
              (without waiting for the background vectors, which MiniLM computes for minutes after a large
              first ingest; the command waits for them by default, with a progress bar);
  celery      (`--mode celery` or `both`) the same three steps through `--workers` `tinymemory worker --concurrency 1`
              processes on the local Redis (a fresh prefix, data directory and copy of the folder; started and
              warmed before the clock, which starts at the enqueue: see `_celery.py`), with each worker's peak RSS
              and Redis's memory after the run. `--mode embedded` (the default) prints what it always did.
Targets (scrubbing, persistent engine): unchanged re-sync <= 0.15 s with zero reads; 10 deletions <= 0.2 s;
first ingest of tldr-pages <= 2 s; first ingest >= 0.9 of the markitdown floor (floor time / ours; for another
folder the table's first-ingest target is the floor's time / 0.9); `tinymemory ingest` of an unchanged folder
< 1 s of wall time; Celery mode >= 0.85 of the floor with two workers, Redis < 50 MB after the run. The issue's
figures for the peers over tldr-pages (first / unchanged / 10 deleted):
LangChain 0.48 / 0.29 / 0.34 s, LlamaIndex 2.48 / 0.34 / 0.18 s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

# bench/sources.py, first on the path of a script run from bench/, would shadow the `sources` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _celery import CeleryPipeline, MemorySampler, count_items, embedded_rss_line, print_report, run_celery
from _report import emit
from searchable import CORPORA, SHARED
from searchable import run as run_searchable

from engines.contract import MetaFilter
from worker.control import ensure_local_source
from worker.embedded.runtime import EmbeddedRuntime
from worker.records import BatchReport, SyncReport
from worker.settings import Settings
from worker.state.base import StateStore

TARGET_FIRST_S = {"tldr-pages": 2.0}
TARGET_UNCHANGED_S = 0.15
TARGET_DELETED_S = 0.2
TARGET_FLOOR_RATIO = 0.9
TARGET_CELERY_FLOOR_RATIO = 0.85
TARGET_COMMAND_S = 1.0
STEPS = ("first ingest", "unchanged re-sync", "deletions")


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

    @property
    def unfinished(self) -> int:
        """Changes the sync dispatched that no batch reported done or failed (a batch that raised)."""
        return max(0, self.sync.upserts + self.sync.deletes - self.units)


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


async def timed_sync(runtime: EmbeddedRuntime, source_id: str) -> Synced:
    gc.collect()
    started = time.perf_counter()
    sync, batches = await runtime.sync(source_id)
    return Synced(time.perf_counter() - started, sync, batches)


Sync = Callable[[], Awaitable[Synced]]
Items = Callable[[str | None], Awaitable[int]]  # items in memory of one file path, or of all (None)
Letters = Callable[[], list[str]]  # the units of the source's dead letters


async def run_steps(sync: Sync, items: Items, letters: Letters, root: Path, deleted: Sequence[str]) -> Ours:
    """The three steps through either pipeline, with the counts the checks need."""
    ours, gone = Ours(), set(deleted)
    ours.steps.append(await sync())
    ours.failed_units = sorted(set(letters()))
    ours.steps.append(await sync())
    ours.total_before = await items(None)
    ours.deleted_letters_before = sum(unit in gone for unit in letters())
    for rel in deleted:
        ours.deleted_items_before += await items(f"{root}/{rel}")
        (root / rel).unlink()
    ours.steps.append(await sync())
    ours.total_after = await items(None)
    ours.deleted_letters_after = sum(unit in gone for unit in letters())
    for rel in deleted:
        ours.deleted_items_after += await items(f"{root}/{rel}")
    return ours


def letters_of(state: StateStore, source_id: str) -> Letters:
    return lambda: [letter.unit_id for letter in state.dead_letters(source_id, limit=1_000_000)]


async def run_ours(root: Path, deleted: Sequence[str], workers: int, data_dir: Path) -> Ours:
    with EmbeddedRuntime(Settings(data_dir=data_dir, convert_workers=workers)) as runtime:
        # Warm like the floor's pool: both are timed converting, not starting processes.
        runtime.converter.warm(wait=True)
        source_id = ensure_local_source(runtime.state, root).id
        letters = letters_of(runtime.state, source_id)

        async def items(file_path: str | None) -> int:
            return await count_items(runtime.engine, MetaFilter(file_path=file_path))

        return await run_steps(lambda: timed_sync(runtime, source_id), items, letters, root, deleted)


async def celery_steps(cluster: CeleryPipeline, root: Path, deleted: Sequence[str]) -> Ours:
    """The same steps through Celery workers (`_celery.run_celery` starts, warms and measures them)."""
    source_id = cluster.add_folder("bench", root)

    async def sync() -> Synced:
        step = cluster.sync(source_id)
        return Synced(step.seconds, step.sync, step.batches)

    return await run_steps(sync, partial(cluster.items, source_id), letters_of(cluster.state, source_id), root, deleted)


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
    command = [str(Path(sys.executable).with_name("tinymemory")), "ingest", str(root), "--json", "--no-wait-vectors"]
    # As a user's first run does, the first run writes the modules' bytecode and the second reads it: a
    # PYTHONDONTWRITEBYTECODE inherited from a sandbox would compile every module of ours at each start.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["TINYMEMORY_DATA_DIR"] = str(data_dir)
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


def print_table(runs: dict[str, Ours], peers: dict[str, list[Any]], deleted: int, first_target: float | None) -> None:
    """One row per step: each run's time (ours = embedded, celery), the peers', the ratios and the targets."""
    targets = [first_target, TARGET_UNCHANGED_S, TARGET_DELETED_S]
    names = ["LangChain", "LlamaIndex"]
    first, both = next(iter(runs)), len(runs) > 1
    header = ["step", *runs, *(["celery/ours"] if both else []), *names, *(f"{first}/{n}" for n in names), "target"]
    rows = [[*header, *(f"{run}/target" for run in runs)]]
    for n, (label, target) in enumerate(zip(STEPS, targets, strict=True)):
        times = [run.steps[n].seconds for run in runs.values()]
        theirs = [peers[name][n].seconds if name in peers else None for name in names]
        emit("steps", step=label, **dict(zip(runs, times, strict=True)), **dict(zip(names, theirs, strict=True)))
        label = f"{deleted} deleted" if label == "deletions" else label
        rows.append(
            [
                label,
                *(fmt_s(t) for t in times),
                *([fmt_ratio(over(times[1], times[0]))] if both else []),
                *(fmt_s(t) for t in theirs),
                *(fmt_ratio(over(times[0], t)) for t in theirs),
                "—" if target is None else f"<= {target:.3g} s",
                *(fmt_ratio(over(t, target)) for t in times),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def print_checks(ours: Ours, deleted: int, run: str = "") -> None:
    first, unchanged, gone = ours.steps
    print(
        f"{run}first ingest: {first.sync.listed} files listed, {first.sync.upserts} changed, {first.items} items "
        f"stored ({first.items / first.seconds:,.0f} items/s, {first.sync.upserts / first.seconds:,.0f} files/s), "
        f"{first.failed} failed, {first.sync.skipped} skipped at listing"
        + (f" (failed: {', '.join(ours.failed_units)})" if ours.failed_units else "")
        + (f"  [FAIL: {first.unfinished} changes never finished]" if first.unfinished else "")
    )
    emit("first", run=run.strip() or "ours", files=first.sync.upserts, items=first.items, seconds=first.seconds)
    reads = unchanged.sync.upserts + unchanged.units
    verdict = "OK" if reads == 0 and unchanged.sync.deletes == 0 else "FAIL"
    held_back = getattr(unchanged.sync, "held_back", 0)  # failed files left alone until they change
    print(
        f"{run}unchanged re-sync: {unchanged.sync.listed} listed, {unchanged.sync.upserts} read and converted, "
        f"{unchanged.sync.deletes} deleted, {held_back} failed ones held back, {unchanged.sync.batches} batches  "
        f"[{verdict}: zero reads]"
    )
    expected = ours.total_before - ours.deleted_items_before
    ok = ours.deleted_items_after == 0 and ours.total_after == expected
    print(
        f"{run}{deleted} deleted: sync saw {gone.sync.deletes} deletes, {gone.sync.upserts} upserts; items of those "
        f"files {ours.deleted_items_before} before, {ours.deleted_items_after} after; items in memory "
        f"{ours.total_before:,} -> {ours.total_after:,} (expected {expected:,})  [{'OK' if ok else 'FAIL'}]; "
        f"their dead letters {ours.deleted_letters_before} before, {ours.deleted_letters_after} after"
    )


def print_peer_notes(peers: dict[str, list[Any]]) -> None:
    for name, steps in peers.items():
        print(f"{name}: " + " | ".join(f"{label}: {step.did}" for label, step in zip(STEPS, steps, strict=True)))


def print_floor(floor: tuple[float, int], files: int, workers: int, run: str, first: Synced, target: float) -> None:
    floor_s, converted = floor
    ratio = floor_s / first.seconds
    emit("floor", run=run, files=files, converted=converted, floor_s=floor_s, ours_s=first.seconds, ratio=ratio)
    print(
        f"floor: markitdown alone, {workers} warm processes: {floor_s:.3f} s for {files} files ({converted} converted)"
        f"; floor/{run} = {ratio:.2f}  target >= {target}  ratio to target {ratio / target:.2f}"
        + ("  [FAIL: the first ingest did not finish]" if first.unfinished else "")
    )


def print_command(walls: list[tuple[float, dict[str, Any]]]) -> None:
    (first, first_summary), (again, again_summary) = walls
    emit("command", first_s=first, unchanged_s=again)
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
    parser.add_argument("folder", type=Path, nargs="?", help="the folder to ingest (copied first; never modified)")
    parser.add_argument("--mode", choices=("embedded", "celery", "both"), default="embedded", help="which pipeline")
    parser.add_argument(
        "--workers", type=int, default=None, help="converter processes / Celery workers (default: CPUs, at most 4)"
    )
    parser.add_argument("--deleted", type=int, default=10, help="how many files to delete for the third step")
    parser.add_argument("--skip-peers", action="store_true", help="do not run LangChain and LlamaIndex")
    parser.add_argument("--skip-floor", action="store_true", help="do not run markitdown alone")
    parser.add_argument(
        "--searchable", action="store_true", help="time until fully searchable, against LangChain (searchable.py)"
    )
    parser.add_argument("--corpora", default="nfcorpus,tldr", help="--searchable: which corpora, in order")
    parser.add_argument("--limit", type=int, default=None, help="--searchable: each corpus's first N documents")
    parser.add_argument("--nfcorpus", type=Path, default=SHARED / "ir" / "nfcorpus", help="--searchable: NFCorpus")
    parser.add_argument("--tldr", type=Path, default=SHARED / "tldr-pages", help="--searchable: tldr-pages")
    args = parser.parse_args()
    corpora = args.corpora.split(",")
    if args.searchable and not set(corpora) <= set(CORPORA):
        parser.error(f"--corpora: choose among {', '.join(CORPORA)}")
    if not args.searchable and args.folder is None:
        parser.error("give the folder to ingest (or --searchable)")
    return args


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
    if args.searchable:
        print(load_line("at start"), flush=True)
        run_searchable(args.corpora.split(","), {"nfcorpus": args.nfcorpus, "tldr": args.tldr}, args.limit)
        print(load_line("at end"))
        return
    logging.basicConfig(level=logging.ERROR)  # dead letters are counted and named below, not logged one by one
    source = args.folder.resolve()
    workers = args.workers or Settings(data_dir=Path(tempfile.gettempdir())).convert_workers
    embedded, celery = args.mode in ("embedded", "both"), args.mode in ("celery", "both")
    print(load_line("at start"), flush=True)
    with tempfile.TemporaryDirectory(prefix="tm-backfill-") as scratch:
        work = Path(scratch)
        root = copy_folder(source, work / "folder")
        files = folder_files(root)
        deleted = pick_deleted(files, args.deleted)
        print(f"{source.name}: {len(files):,} files copied to {root}; deleting {', '.join(deleted)}", flush=True)
        runs: dict[str, Ours] = {}
        shipped_gc = gc.get_threshold()
        if embedded:
            with MemorySampler({"embedded": os.getpid()}) as sampler:
                runs["ours"] = asyncio.run(run_ours(root, deleted, workers, work / "data"))
            rss = embedded_rss_line(sampler.peaks["embedded"], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
            restore(source, root, deleted)  # the peers, the floor and the command start from the whole folder
        if celery:  # on a copy of its own, as the embedded run found its copy
            print(f"celery mode: {workers} workers, logs under {work / 'celery'}", flush=True)
            steps = partial(celery_steps, root=copy_folder(source, work / "celery-folder"), deleted=deleted)
            runs["celery"], report = run_celery(work / "celery", workers, steps)
        # Our runtime tunes the collector for itself (worker/tuning.py); the peers and the floor run
        # with the interpreter's settings, as they ship.
        gc.set_threshold(*shipped_gc)
        peers = peers_or_skip(args.skip_peers, root, files, deleted)
        floor = None if args.skip_floor else floor_time([str(root / rel) for rel in files], workers)
        walls = command_walls(root, work / "command-data") if embedded else []
        print()
        print_table(runs, peers, len(deleted), first_target(source.name, floor))
        print()
        for name, ours in runs.items():
            print_checks(ours, len(deleted), "celery " if name == "celery" else "")
        print_peer_notes(peers)
        for name, ours in runs.items():
            target = TARGET_CELERY_FLOOR_RATIO if name == "celery" else TARGET_FLOOR_RATIO
            if floor is not None:
                print_floor(floor, len(files), workers, name, ours.steps[0], target)
        if celery:
            print_report(report, ["first ingest", "unchanged re-sync", f"{len(deleted)} deleted"])
            if embedded:
                print(rss)
        if walls:
            print_command(walls)
    print(load_line("at end"))


if __name__ == "__main__":
    main()
