"""Benchmark of the local engine: store_many throughput, fetch latency per mode, file size.

    .venv/bin/python bench/engine_local.py [--items 50000] [--queries 200] [--dir DIR]

Documents are generated (about 2 KB of English-like text from a Zipf-distributed vocabulary),
stored in batches of 100, then queried with 2-3 word queries drawn from the same vocabulary.
Targets on a 2-core machine: store_many >= 5,000 items/s; keyword p95 <= 30 ms; hybrid p95 <= 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path

from engines.contract import Document, FetchMode, FetchRequest, MemoryMeta
from engines.local import LocalEngine

TARGET_STORE_PER_S = 5_000
TARGET_P95_MS = {FetchMode.KEYWORD: 30.0, FetchMode.VECTOR: 100.0, FetchMode.HYBRID: 100.0}


def vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    words = set()
    while len(words) < size:
        length = rng.randint(2, 10)
        words.add("".join(rng.choices(letters, weights=range(len(letters), 0, -1), k=length)))
    return sorted(words)


def documents(count: int, words: list[str], rng: random.Random) -> list[Document]:
    weights = [1 / (rank + 1) for rank in range(len(words))]
    docs = []
    for n in range(count):
        text = " ".join(rng.choices(words, weights=weights, k=330))
        meta = MemoryMeta(workspace=f"ws-{n % 10}", folder=f"/notes/{n % 100}", file_path=f"/notes/{n % 100}/{n}.md")
        docs.append(Document.from_text(text[:2048], meta=meta, title=f"Note {n}"))
    return docs


async def store_all(engine: LocalEngine, docs: list[Document], in_flight: int = 1) -> float:
    """Store in batches of 100 with up to `in_flight` calls outstanding, as the pipeline's batcher does:
    one batch is prepared and embedded while the previous one is written."""
    started = time.perf_counter()
    pending: set[asyncio.Task[object]] = set()
    for start in range(0, len(docs), 100):
        if len(pending) >= in_flight:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        pending.add(asyncio.create_task(engine.store_many(docs[start : start + 100])))
    for task in pending:
        await task
    return time.perf_counter() - started


async def latencies(engine: LocalEngine, mode: FetchMode, queries: list[str]) -> list[float]:
    await engine.fetch(FetchRequest(query=queries[0], mode=mode, limit=10))  # warm caches
    times = []
    for query in queries:
        started = time.perf_counter()
        await engine.fetch(FetchRequest(query=query, mode=mode, limit=10))
        times.append((time.perf_counter() - started) * 1000)
    return times


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    rng = random.Random(7)
    words = vocabulary(rng)
    print(f"generating {args.items:,} documents of about 2 KB ...", flush=True)
    docs = documents(args.items, words, rng)
    folder = args.dir or Path(tempfile.mkdtemp(prefix="tm-bench-"))
    path = folder / "bench.sqlite3"
    engine = LocalEngine(path)
    half = len(docs) // 10
    elapsed = await store_all(engine, docs[:half])
    print(f"store_many, one call at a time: {half / elapsed:,.0f} items/s over {half:,} items")
    elapsed = await store_all(engine, docs[half:], in_flight=2)
    rate = (len(docs) - half) / elapsed
    print(f"store_many, two calls in flight: {rate:,.0f} items/s ({elapsed:.1f} s)  "
          f"target >= {TARGET_STORE_PER_S:,}  ratio {rate / TARGET_STORE_PER_S:.2f}")
    queries = [" ".join(rng.sample(words[:3000], rng.randint(2, 3))) for _ in range(args.queries)]
    for mode in FetchMode:
        times = await latencies(engine, mode, queries)
        target = TARGET_P95_MS[mode]
        print(f"fetch {mode.value:8s} p50 {statistics.median(times):6.1f} ms  p95 {p95(times):6.1f} ms  "
              f"target p95 <= {target:.0f} ms  ratio {p95(times) / target:.2f}")
    engine.close()
    size = sum(p.stat().st_size for p in folder.glob("bench.sqlite3*"))
    print(f"file size: {size / 2**20:,.1f} MiB ({size / args.items:,.0f} bytes per item) at {path}")


if __name__ == "__main__":
    asyncio.run(main())
