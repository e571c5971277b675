"""Benchmark of erasures: a 10,000-item source erased from the local engine, against the peers' way of erasing
it, and how soon an erasure starts when it is asked for in the middle of a backfill.

    .venv/bin/python -P bench/erasure.py [--items 10000] [--backfill 5000] [--skip-backfill]

(`-P`: the packages are imported from the repository root, not from bench/, whose own modules could shadow them.)

Each in this process, on fresh data directories, timed around the work only:
  ours          a source of `--items` items in the local engine with its manifest in the SQLite state (stored by
                `store_many` and committed as an ingest leaves them), beside a second source of as many items;
                erased through `worker.control.request_erasure` and the in-process runner, the same job the
                erase workers run. The clock runs from the request to the verified receipt.
  page by page  the second source, erased the way the peers do it (the anchor): list a page of its items
                (`LISTING_PAGE`), forget those ids, again until a listing comes back empty.
  start delay   `EmbeddedRuntime.sync` of a `--backfill`-file folder; once its first batches are committed, the
                erasure of that source is asked for through the runtime's own in-process runner. The delay is
                the receipt's `started_at` minus its `requested_at`; the time to its verified end, and what was
                left of the source once the backfill returned, are printed too.
Targets: ours <= 2 s; >= 5x faster than page by page; start delay <= 2 s.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from pathlib import Path

from engines.contract import (
    LISTING_PAGE,
    Document,
    ForgetTarget,
    ListRequest,
    MetaFilter,
    SourceKind,
)
from engines.local import LocalEngine
from sources import SourceEntry
from worker import control
from worker.embedded import EmbeddedRuntime, InProcessErasures
from worker.erasure.request import ErasureReceipt, ErasureTarget
from worker.records import ManifestEntry
from worker.settings import Settings
from worker.state.sqlite import SqliteStateStore

# bench/ is on the path only for this import: its sources.py would shadow the `sources` package in the
# processes the runtime spawns, which re-import this script with the path it has when they start.
sys.path.append(str(Path(__file__).resolve().parent))
from _report import emit

sys.path.pop()

TARGET_ERASE_S = 2.0
TARGET_RATIO = 5.0
TARGET_START_S = 2.0
_STORE = 100


async def build_source(engine: LocalEngine, state: SqliteStateStore, source_id: str, items: int) -> None:
    """`items` one-item units of a folder source, stored and committed as an ingest leaves them."""
    entry = SourceEntry(id=source_id, kind="folder", label=source_id, path=f"/bench/{source_id}")
    state.put_source(entry)
    for start in range(0, items, _STORE):
        units = [f"{source_id}/note-{n:06}.md" for n in range(start, min(start + _STORE, items))]
        batch = [
            Document.from_text(
                f"note {n} of {source_id}: the quarterly figures, the plan and the people in it",
                meta=entry.origin(SourceKind.FOLDER, file_path=f"/bench/{unit}"),
            )
            for n, unit in enumerate(units, start)
        ]
        receipts = await engine.store_many(batch)
        state.commit(
            source_id,
            {unit: ManifestEntry(version="1", item_ids=[r.id]) for unit, r in zip(units, receipts, strict=True)},
        )


async def count(engine: LocalEngine, source_id: str) -> int:
    total, cursor = 0, None
    while True:
        page = await engine.list(ListRequest(limit=1000, cursor=cursor, filter=MetaFilter(source_id=source_id)))
        total += len(page.items)
        if page.next_cursor is None:
            return total
        cursor = page.next_cursor


async def erase_ours(engine: LocalEngine, state: SqliteStateStore, source_id: str) -> tuple[float, ErasureReceipt]:
    runner = InProcessErasures.over(state, engine)
    started = time.perf_counter()
    receipt = await control.request_erasure(state, runner, ErasureTarget(source_id=source_id), "bench")
    await runner.drain()
    seconds = time.perf_counter() - started
    done = state.get_erasure(receipt.id)
    assert done is not None
    return seconds, done


async def erase_page_by_page(engine: LocalEngine, source_id: str) -> tuple[float, int, int]:
    """The peers' way: list a page, forget its ids, until nothing is listed; (seconds, forgotten, pages)."""
    started = time.perf_counter()
    forgotten = pages = 0
    while True:
        page = await engine.list(ListRequest(limit=LISTING_PAGE, filter=MetaFilter(source_id=source_id)))
        if not page.items:
            return time.perf_counter() - started, forgotten, pages
        pages += 1
        forgotten += (await engine.forget(ForgetTarget.by_ids([hit.id for hit in page.items]))).forgotten


async def run_erasures(items: int, root: Path) -> None:
    engine = LocalEngine(root / "memory.sqlite3")
    state = SqliteStateStore(root / "state.sqlite3")
    try:
        built = time.perf_counter()
        await build_source(engine, state, "ours", items)
        await build_source(engine, state, "peers", items)
        print(f"built two sources of {items:,} items each in {time.perf_counter() - built:.1f} s")
        seconds, receipt = await erase_ours(engine, state, "ours")
        left_ours = await count(engine, "ours")
        anchor, forgotten, pages = await erase_page_by_page(engine, "peers")
        left_peers = await count(engine, "peers")
    finally:
        state.close()
        engine.close()
    check = receipt.verification
    verified = check is not None and check.passed
    print(
        f"ours          {seconds:7.3f} s  request to verified receipt ({receipt.status}, "
        f"{receipt.forgotten:,} forgotten, verified: {verified}, {left_ours} left)"
    )
    print(f"page by page  {anchor:7.3f} s  {pages} pages of {LISTING_PAGE}, {forgotten:,} forgotten, {left_peers} left")
    ratio = anchor / seconds if seconds > 0 else float("inf")
    print(f"ratio         {ratio:7.1f}x faster than page by page")
    emit("erase", items=items, ours_s=seconds, page_by_page_s=anchor, pages=pages, ratio=ratio, verified=verified)
    print(
        f"targets       <= {TARGET_ERASE_S:g} s: {'met' if seconds <= TARGET_ERASE_S else 'MISSED'}; "
        f">= {TARGET_RATIO:g}x: {'met' if ratio >= TARGET_RATIO else 'MISSED'}"
    )


def write_folder(folder: Path, files: int) -> None:
    for n in range(files):
        path = folder / f"d{n % 50:02}" / f"note-{n:05}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Note {n}\n\nthe body of note {n}, with the word quill{n}x in it\n")


async def run_start_delay(files: int, root: Path) -> None:
    folder = root / "notes"
    write_folder(folder, files)
    settings = Settings(data_dir=root / "data", convert_workers=1)  # type: ignore[arg-type]
    with EmbeddedRuntime(settings) as runtime:
        entry = control.ensure_local_source(runtime.state, folder)
        started = time.perf_counter()
        backfill = asyncio.create_task(runtime.sync(entry.id))
        while True:  # the first batches are committed: the backfill is well under way
            if len(runtime.state.unit_states(entry.id)) >= 300 or backfill.done():
                break
            await asyncio.sleep(0.01)
        committed = len(runtime.state.unit_states(entry.id))
        asked = time.perf_counter()
        receipt = await control.request_erasure(
            runtime.state, runtime.erasures, ErasureTarget(source_id=entry.id), "bench"
        )
        await runtime.erasures.drain()
        ended = time.perf_counter()
        await backfill
        returned = time.perf_counter()
        done = runtime.state.get_erasure(receipt.id)
        left = await count_any(runtime, entry.id)
    assert done is not None and done.started_at is not None and done.finished_at is not None
    delay = (done.started_at - done.requested_at).total_seconds()
    print(
        f"backfill      {files:,} files; {committed} units committed {asked - started:.2f} s in, when the erasure "
        "was asked for"
    )
    print(
        f"start delay   {delay:7.3f} s  requested to started (target <= {TARGET_START_S:g} s: "
        f"{'met' if delay <= TARGET_START_S else 'MISSED'})"
    )
    print(f"erasure       {ended - asked:7.3f} s  to its verified end ({done.status}, {done.forgotten:,} forgotten)")
    emit("start_delay", files=files, delay_s=delay, erase_s=ended - asked, left=left)
    print(f"backfill      returned {returned - asked:.3f} s after the request; {left} items of the source left")


async def count_any(runtime: EmbeddedRuntime, source_id: str) -> int:
    page = await runtime.engine.list(ListRequest(limit=100, filter=MetaFilter(source_id=source_id)))
    return len(page.items)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--backfill", type=int, default=5_000)
    parser.add_argument("--skip-backfill", action="store_true")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="tm-bench-erasure-") as tmp:
        asyncio.run(run_erasures(args.items, Path(tmp) / "erase"))
        if not args.skip_backfill:
            asyncio.run(run_start_delay(args.backfill, Path(tmp) / "backfill"))


if __name__ == "__main__":
    main()
