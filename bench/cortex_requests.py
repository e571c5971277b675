"""Benchmark of what a backfill costs on CortexDB: requests per 100-item batch, by route, and items per second.

    .venv/bin/python bench/cortex_requests.py [--items 5000] [--latency-ms 5] [--anchor-items 200] [--in-flight 2]
                                              [--wire both|direct|hosted]

For each wire (Direct `/v1`, hosted `/memory`), 5,000 generated documents (a file's worth of text and metadata
each, as a folder backfill stores them) go through `CortexEngine.store_many` in batches of 100, one call at a time,
into a CortexDB double running in a process of its own on loopback (so the engine and the server do not share a
core). The double's request log gives the requests per batch by route. The anchor, measured in the same run, is
the same items stored one `store()` call at a time: what an engine that writes and waits per item costs. Then the
same again with every request held 5 ms by the double, where per-item waits show. Each run also prints the
figures with two batches in flight at once (`--in-flight`), as the embedded runtime and several workers store.
Every figure includes the CPU both processes spent per batch, since on a shared machine the wall time is partly
waiting for a core. This process tunes its collector as every pipeline process does, and keeps the items it
generated out of it while it stores them (a backfill holds a batch at a time, not 5,000 items).
Targets: Direct <= 6 requests per 100-item batch on average; hosted <= 106; with 5 ms of latency >= 2,000 items/s
on Direct.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from _report import emit

from engines.contract import Document, Item, MemoryMeta, SourceKind, SourceRef
from engines.cortex import CortexEngine, CortexWire, Timing
from engines.settings import EngineCredential
from worker.tuning import collect_less

BATCH = 100
TARGET_DIRECT_PER_BATCH = 6.0
TARGET_HOSTED_PER_BATCH = 106.0
TARGET_DIRECT_ITEMS_PER_S = 2_000.0
REPO = Path(__file__).resolve().parents[1]


def documents(count: int, run: str) -> list[Item]:
    words = ["ledger", "harbor", "quartz", "meadow", "cipher", "lantern", "orbit", "tundra", "velvet", "zephyr"]
    out: list[Item] = []
    for n in range(count):
        # Files differ from their first line on, so a ranked query of an item's first 256 characters finds it.
        body = f"# Note {n}: token{run}{n}\n\n" + " ".join(words[(n + k) % len(words)] for k in range(60)) + "\n"
        meta = MemoryMeta(
            workspace="/home/bench/notes",
            folder=f"/home/bench/notes/d{n % 20:02}",
            file_path=f"/home/bench/notes/d{n % 20:02}/note-{n:05}.md",
            source=SourceRef(kind=SourceKind.FOLDER, id=f"bench-{run}"),
        )
        out.append(Document(title=f"note-{n:05}.md", body={"text": body}, mime="text/markdown", meta=meta))
    return out


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cpu_seconds(pid: int | None = None) -> float:
    """CPU time (user + system) of a process so far: this one, or `pid` (from /proc)."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def double_process(wire: str) -> Iterator[tuple[str, int]]:
    """A CortexDB double in a process of its own (`python -m tinymemory_ingest.cortex_double`): its URL and pid."""
    port = _free_port()
    command = [sys.executable, "-m", "tinymemory_ingest.cortex_double", "--port", str(port), "--wire", wire]
    child = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"{url}/__double__/requests", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the double did not start") from None
                time.sleep(0.05)
        yield url, child.pid
    finally:
        child.terminate()
        child.wait(timeout=10)


class Control:
    """The double's control routes: reset, faults, the request log."""

    def __init__(self, url: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=60)

    def reset(self, latency_s: float) -> None:
        self.client.post("/__double__/reset").raise_for_status()
        if latency_s > 0:
            self.client.post("/__double__/faults", json={"knob": "delay", "seconds": latency_s}).raise_for_status()

    def routes(self) -> Counter[str]:
        log = self.client.get("/__double__/requests").json()["requests"]
        return Counter(f"{r['method']} {r['path']}" for r in log)


@dataclass(frozen=True)
class Run:
    items: int
    seconds: float
    routes: Counter[str]
    engine_cpu: float
    double_cpu: float

    @property
    def requests(self) -> int:
        return sum(self.routes.values())

    @property
    def per_item(self) -> float:
        return self.requests / self.items

    @property
    def items_per_s(self) -> float:
        return self.items / self.seconds


async def backfill(
    url: str, pid: int, wire: CortexWire, items: list[Item], batched: bool, in_flight: int = 1
) -> tuple[float, ...]:
    """(seconds, engine CPU seconds, double CPU seconds) of storing `items`, batched (`in_flight` calls at once, as
    several workers or the embedded runtime's two batches in flight make them) or one by one."""
    engine = CortexEngine(wire, url, EngineCredential.of("bench-key"), timing=Timing())
    async with engine:
        await engine.health()  # connections and the actor lookup happen before the clock starts
        cpu, double_cpu, started = cpu_seconds(), cpu_seconds(pid), time.perf_counter()
        if batched:
            gate = asyncio.Semaphore(in_flight)

            async def store(batch: list[Item]) -> None:
                async with gate:
                    await engine.store_many(batch)

            await asyncio.gather(*(store(items[start : start + BATCH]) for start in range(0, len(items), BATCH)))
        else:
            for item in items:
                await engine.store(item)
        return time.perf_counter() - started, cpu_seconds() - cpu, cpu_seconds(pid) - double_cpu


def measure(
    control: Control,
    server: tuple[str, int],
    wire: CortexWire,
    items: list[Item],
    batched: bool,
    latency_s: float,
    in_flight: int = 1,
) -> Run:
    url, pid = server
    control.reset(latency_s)
    # A backfill holds a batch at a time, not 5,000 items: the collector must not walk all of them here.
    gc.collect()
    gc.freeze()
    try:
        seconds, engine_cpu, double_cpu = asyncio.run(backfill(url, pid, wire, items, batched, in_flight))
    finally:
        gc.unfreeze()
    routes = control.routes()
    for warm_up in ("GET v1/admin/health", "GET v1/auth/whoami", "GET memory/scopes"):
        routes.pop(warm_up, None)
    return Run(len(items), seconds, routes, engine_cpu, double_cpu)


def report(wire: CortexWire, latency_ms: float, batched: Run, anchor: Run) -> None:
    batches = batched.items / BATCH
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"\n{wire.value} wire, {latency_ms:g} ms per request (load {load})")
    for route, count in sorted(batched.routes.items()):
        print(f"  {route:<28} {count / batches:7.2f} per batch")
    per_batch = batched.requests / batches
    print(
        f"  {'all routes':<28} {per_batch:7.2f} per batch of {BATCH}: {batched.per_item:.3f} requests per item, "
        f"{1 / batched.per_item:.1f}x fewer than one request per item"
    )
    print(
        f"  batched:  {batched.items} items in {batched.seconds:.2f} s = {batched.items_per_s:,.0f} items/s "
        f"(CPU per batch: engine {batched.engine_cpu / batches * 1e3:.1f} ms, "
        f"double {batched.double_cpu / batches * 1e3:.1f} ms)\n"
        f"  anchor (store() per item): {anchor.items} items in {anchor.seconds:.2f} s = {anchor.items_per_s:,.0f} "
        f"items/s, {anchor.per_item:.2f} requests per item\n"
        f"  ratio: {batched.items_per_s / anchor.items_per_s:.1f}x the anchor's items/s, "
        f"{anchor.per_item / batched.per_item:.1f}x fewer requests per item"
    )
    emit("routes", wire=wire.value, latency_ms=latency_ms, **{r: n / batches for r, n in batched.routes.items()})
    emit(
        "batches",
        wire=wire.value,
        latency_ms=latency_ms,
        requests_per_batch=per_batch,
        items_per_s=batched.items_per_s,
        anchor_items_per_s=anchor.items_per_s,
        anchor_requests_per_batch=anchor.per_item * BATCH,
        engine_cpu_ms_per_batch=batched.engine_cpu / batches * 1e3,
    )


def check(label: str, ok: bool) -> bool:
    print(f"  target {label}: {'met' if ok else 'MISSED'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=5_000)
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--anchor-items", type=int, default=200)
    parser.add_argument("--wire", choices=("both", "direct", "hosted"), default="both")
    parser.add_argument(
        "--in-flight", type=int, default=2, help="also measure this many batches at once (1: sequential only)"
    )
    args = parser.parse_args()
    collect_less()  # as every pipeline process does (the command line, the runtimes, the workers)
    met = True
    wires = (("direct", CortexWire.DIRECT), ("hosted", CortexWire.TINYHUMANS))
    for wire_name, wire in (w for w in wires if args.wire in ("both", w[0])):
        with double_process(wire_name) as server:
            control = Control(server[0])
            for latency_ms in (0.0, args.latency_ms):
                latency_s = latency_ms / 1000
                run = f"{wire_name}{int(latency_ms)}"
                batched = measure(control, server, wire, documents(args.items, run), True, latency_s)
                anchor = measure(control, server, wire, documents(args.anchor_items, run + "a"), False, latency_s)
                report(wire, latency_ms, batched, anchor)
                both = None
                if args.in_flight > 1:
                    items = documents(args.items, run + "c")
                    both = measure(control, server, wire, items, True, latency_s, args.in_flight)
                    per = both.requests / (both.items / BATCH)
                    figures = {"batches": args.in_flight, "items_per_s": both.items_per_s, "requests_per_batch": per}
                    emit("in_flight", wire=wire.value, latency_ms=latency_ms, **figures)
                    print(
                        f"  {args.in_flight} batches in flight: {both.items} items in {both.seconds:.2f} s = "
                        f"{both.items_per_s:,.0f} items/s, {per:.2f} requests per batch"
                    )
                per_batch = batched.requests / (batched.items / BATCH)
                if wire is CortexWire.DIRECT:
                    met &= check(
                        f"<= {TARGET_DIRECT_PER_BATCH:g} requests per batch", per_batch <= TARGET_DIRECT_PER_BATCH
                    )
                    if latency_ms > 0:
                        fast = batched.items_per_s >= TARGET_DIRECT_ITEMS_PER_S
                        met &= check(f">= {TARGET_DIRECT_ITEMS_PER_S:,.0f} items/s at {latency_ms:g} ms", fast)
                        if both is not None:
                            ok = both.items_per_s >= TARGET_DIRECT_ITEMS_PER_S
                            check(f">= {TARGET_DIRECT_ITEMS_PER_S:,.0f} items/s with {args.in_flight} in flight", ok)
                else:
                    met &= check(
                        f"<= {TARGET_HOSTED_PER_BATCH:g} requests per batch", per_batch <= TARGET_HOSTED_PER_BATCH
                    )
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
