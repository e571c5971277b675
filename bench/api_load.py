"""Load test of the read API: concurrent fetch and recall over HTTP, against the local engine in-process.

    .venv/bin/python bench/api_load.py [--items 50000] [--seconds 30] [--clients 16] [--queries 200]
                                       [--data-dir DIR] [--quick]

A data directory's local engine is filled with `--items` generated documents (about 2 KB each, made-up
words with Zipf frequencies as in `engine_local.py`, stored 100 to a `store_many`). With `--data-dir` it is
kept and reused when it already holds them; without, it is built in a temporary directory and removed.
Either way the background vectors are waited for first, so nothing embeds while routes are measured.
`--embedder` is the engine's (the server's and this process's): MiniLM, the default, or the static model.
MiniLM embeds 10-20 passages a second here, so 50,000 would take an hour: the corpus's vectors are then
a stand-in's, hashed n-grams of MiniLM's size under MiniLM's identity. A vector read costs the same for
any values (a scan of 384 floats a passage), and every query is embedded by the real model, so the
timings are MiniLM's; the rankings are not meaningful and are not what this measures.
`tinymemory serve` (port 0, loopback, one API process) then serves it from a process of its own, and for
each route (fetch keyword, fetch hybrid, recall), with a fixed, seeded list of `--queries` queries of three
words drawn from the corpus vocabulary (common words match most items, rare ones a few):
  anchor      the queries through the engine in this process, one at a time (`await engine.fetch(...)`),
              with the CPU they take; their "ceiling" is the cores / the CPU a query takes: the engine
              reads on a thread per core, so no API process on this machine answers more requests/s;
              alternating with
  sequential  the same queries over HTTP, one request at a time: `HTTP p50 - engine p50` is the cost the
              HTTP layer adds ("paired": the median of each query's own difference, printed beside it), and
              GET /healthz, a route that does nothing, its floor;
  load        `--clients` concurrent httpx clients in this process (keep-alive) for `--seconds` each:
              requests/s (and their share of the ceiling), p50/p95/p99, errors (any exits non-zero), and
              the CPU per request of the server and of the clients, whose CPU comes from the same cores.
Before the clock, each query runs twice through both, and each HTTP answer must name the engine's items.
Targets, one API process: under load fetch p95 <= 50 ms (keyword) and <= 150 ms (hybrid); the HTTP layer
adds <= 3 ms at p50, checked one request at a time (with 16 clients on 2 cores the difference is mostly
queueing: it is printed beside it, not checked).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from random import Random
from typing import Any

import httpx
from _report import emit
from engine_local import StandIn, real_embedder, vocabulary

from engines.contract import Document, ExploreRequest, Facet, FetchMode, FetchRequest, Item, MemoryMeta, RecallRequest
from engines.local import LocalEngine
from worker.settings import Settings

SEED = 7
BATCH = 100
WORDS_PER_DOC = 330
WORDS_PER_QUERY = 3
FETCH_LIMIT = 10
RECALL_LIMIT = 5
ROUNDS = 2  # alternating anchor and sequential passes, so a drift in the machine's speed hits both alike
MANIFEST = "api_load.json"
QUICK = (2_000, 5.0)
FULL = (50_000, 30.0)
TARGET_P95_MS = {"fetch keyword": 50.0, "fetch hybrid": 150.0}
TARGET_HTTP_COST_MS = 3.0
EMBED_TIMEOUT_S = 1_800.0
NAGLE_MS = 30.0  # a do-nothing route this slow is waiting on delayed ACKs (40 ms on Linux), not working


@dataclass(frozen=True)
class Route:
    """One measured route: its body over HTTP and the same call in-process, both naming the items answered."""

    name: str
    path: str
    mode: FetchMode | None  # None: recall

    def body(self, query: str) -> dict[str, Any]:
        if self.mode is None:
            return {"question": query, "limit": RECALL_LIMIT}
        return {"query": query, "mode": self.mode.value, "limit": FETCH_LIMIT}

    def answered(self, payload: dict[str, Any]) -> list[str]:
        return [str(entry["id"]) for entry in payload["citations" if self.mode is None else "hits"]]

    async def direct(self, engine: LocalEngine, query: str) -> list[str]:
        if self.mode is None:
            answer = await engine.recall(RecallRequest(question=query, limit=RECALL_LIMIT))
            return [str(citation.id) for citation in answer.citations]
        page = await engine.fetch(FetchRequest(query=query, mode=self.mode, limit=FETCH_LIMIT))
        return [str(hit.id) for hit in page.hits]


ROUTES = (
    Route("fetch keyword", "/v1/fetch", FetchMode.KEYWORD),
    Route("fetch hybrid", "/v1/fetch", FetchMode.HYBRID),
    Route("recall", "/v1/recall", None),
)


@dataclass
class Anchor:
    """One route called one at a time: in-process (with the CPU it took) and over HTTP."""

    direct: list[float] = field(default_factory=list)
    http: list[float] = field(default_factory=list)
    direct_cpu_s: float = 0.0

    @property
    def ceiling(self) -> float:
        """Requests/s the machine can answer at most: its reads run on a thread per core, so every core's
        CPU divided by the CPU one query takes (the clients and the HTTP layer take theirs from it too)."""
        return (os.cpu_count() or 1) * len(self.direct) / max(self.direct_cpu_s, 1e-9)


@dataclass
class Load:
    """What the concurrent clients saw on one route, and the CPU both sides spent meanwhile."""

    ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    server_cpu_s: float = 0.0
    client_cpu_s: float = 0.0


# -- the corpus --------------------------------------------------------------------------------------------


def zipf_cumulative(words: list[str]) -> list[float]:
    # Summed once: `choices(weights=...)` would sum 20,000 weights again for every document.
    return list(accumulate(1 / (rank + 1) for rank in range(len(words))))


def document_batches(count: int, words: list[str], rng: Random) -> Iterator[list[Item]]:
    """`count` documents made as `engine_local.py` makes them, 100 at a time (never all in memory)."""
    cumulative = zipf_cumulative(words)
    for start in range(0, count, BATCH):
        batch: list[Item] = []
        for n in range(start, min(start + BATCH, count)):
            text = " ".join(rng.choices(words, cum_weights=cumulative, k=WORDS_PER_DOC))
            folder = f"/notes/{n % 100}"
            meta = MemoryMeta(workspace=f"ws-{n % 10}", folder=folder, file_path=f"{folder}/{n}.md")
            batch.append(Document.from_text(text[:2048], meta=meta, title=f"Note {n}"))
        yield batch


def fixed_queries(words: list[str], count: int) -> list[str]:
    """Words drawn as the documents draw theirs, from a generator of their own (the same for any --items)."""
    rng, cumulative = Random(SEED + 1), zipf_cumulative(words)
    return [" ".join(rng.choices(words, cum_weights=cumulative, k=WORDS_PER_QUERY)) for _ in range(count)]


async def ensure_corpus(data_dir: Path, items: int, words: list[str], embedder: str) -> None:
    """Fill the data directory's engine with `items` documents, unless a run of this already did."""
    manifest = data_dir / MANIFEST
    wanted = {"items": items, "seed": SEED, "words": len(words), "embedder": embedder}
    real = real_embedder(embedder)
    filler = StandIn(real) if embedder == "minilm" else real
    engine = LocalEngine(Settings(data_dir=data_dir).memory_file, embedder=filler)
    try:
        held = (await engine.explore(ExploreRequest(facet=Facet.KIND, limit=10))).total
        if manifest.exists() and json.loads(manifest.read_text()) == wanted and held == items:
            print(f"reusing the {held:,} items in {data_dir} (delete it to rebuild)", flush=True)
            await embedded(engine)
            return
        if held:
            raise SystemExit(
                f"{data_dir} holds {held:,} items but not this benchmark's {items:,}: pass another --data-dir"
            )
        print(f"building {items:,} documents of about 2 KB in {data_dir} ...", flush=True)
        started, storing = time.perf_counter(), 0.0
        for batch in document_batches(items, words, Random(SEED)):
            stored = time.perf_counter()
            await engine.store_many(batch)
            storing += time.perf_counter() - stored
        total = time.perf_counter() - started
        print(f"built in {total:.1f} s ({storing:.1f} s of it storing: {items / storing:,.0f} items/s)", flush=True)
        manifest.write_text(json.dumps(wanted))
        await embedded(engine)
    finally:
        engine.close()


async def embedded(engine: LocalEngine) -> None:
    """Wait for the background vectors: measured while the lane still embeds, every route would share the
    cores with it (and the API process would embed too), which is not how a served corpus is read."""
    backlog, started = await engine.vector_backlog(), time.perf_counter()
    if not backlog:
        return
    print(f"embedding the {backlog:,} passages still waiting for a vector ...", flush=True)
    if not await engine.wait_for_vectors(timeout_s=EMBED_TIMEOUT_S):
        raise SystemExit(f"the vector backlog was not done within {EMBED_TIMEOUT_S:g} s")
    print(f"embedded in {time.perf_counter() - started:.1f} s", flush=True)


# -- the server --------------------------------------------------------------------------------------------


class ApiServer:
    """The API over a data directory, in a process of its own, as `tinymemory serve` runs it; its log in a file."""

    def __init__(self, data_dir: Path, log: Path, embedder: str) -> None:
        # Only the data directory and the embedder come from here: no TINYMEMORY_* of the caller's shell may
        # change the engine.
        env = {k: v for k, v in os.environ.items() if not k.startswith("TINYMEMORY_")}
        env.update(TINYMEMORY_DATA_DIR=str(data_dir), TINYMEMORY_API_HOST="127.0.0.1", TINYMEMORY_API_PORT="0")
        env.update(TINYMEMORY_ENGINES__LOCAL__EMBEDDER__KIND=embedder)
        serve = [str(Path(sys.executable).with_name("tinymemory")), "serve"]
        self.name = "`tinymemory serve`"
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(serve, env=env, stdout=out, stderr=subprocess.STDOUT)
        self.url = self._wait_for_url(timeout_s=60.0)

    def _wait_for_url(self, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.process.poll() is None:
            found = re.search(r"serving the API on (\S+)", self.log.read_text(errors="replace"))
            if found:
                return found.group(1)
            time.sleep(0.05)
        self.stop()
        raise SystemExit(f"the API did not start; its output:\n{self.log.read_text(errors='replace')[-4000:]}")

    def cpu_seconds(self) -> float:
        """User and system time of the server process so far, all its threads (from Linux's /proc)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# -- measuring ---------------------------------------------------------------------------------------------


def elapsed_ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


async def warm(client: httpx.AsyncClient, engine: LocalEngine, route: Route, queries: list[str]) -> int:
    """Each query twice through both (caches, the vector index, and the words' kept scores, which a word gets at
    its second query); how many HTTP answers differ from the engine's."""
    unlike = 0
    for query in [*queries, *queries]:
        response = await client.post(route.path, json=route.body(query))
        response.raise_for_status()
        unlike += route.answered(response.json()) != await route.direct(engine, query)
    return unlike


async def one_at_a_time(client: httpx.AsyncClient, engine: LocalEngine, route: Route, queries: list[str]) -> Anchor:
    """Milliseconds of each query in-process and over HTTP, one call at a time, in alternating passes."""
    anchor = Anchor()
    for _ in range(ROUNDS):
        cpu = time.process_time()
        for query in queries:
            started = time.perf_counter()
            await route.direct(engine, query)
            anchor.direct.append(elapsed_ms(started))
        anchor.direct_cpu_s += time.process_time() - cpu
        for query in queries:
            started = time.perf_counter()
            response = await client.post(route.path, json=route.body(query))
            anchor.http.append(elapsed_ms(started))
            response.raise_for_status()
    return anchor


async def healthz(client: httpx.AsyncClient, server: ApiServer, count: int = 100) -> tuple[float, float, float]:
    """GET /healthz one at a time: p50, and the server's and this process's CPU per request (ms)."""
    for _ in range(10):  # `serve` prints its address before it imports and builds the app
        (await client.get("/healthz")).raise_for_status()
    times = []
    cpu, server_cpu = time.process_time(), server.cpu_seconds()
    for _ in range(count):
        started = time.perf_counter()
        (await client.get("/healthz")).raise_for_status()
        times.append(elapsed_ms(started))
    server_ms, client_ms = (server.cpu_seconds() - server_cpu) * 1000, (time.process_time() - cpu) * 1000
    return statistics.median(times), server_ms / count, client_ms / count


async def under_load(server: ApiServer, route: Route, queries: list[str], clients: int, seconds: float) -> Load:
    """`clients` tasks posting back to back until `seconds` are up, each starting at its own place in the list."""
    load = Load()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=60.0) as client:

        async def one_client(position: int) -> None:
            while time.perf_counter() < deadline:
                query = queries[position % len(queries)]
                position += 1
                started = time.perf_counter()
                try:
                    response = await client.post(route.path, json=route.body(query))
                except httpx.HTTPError as err:
                    load.errors.append(f"{type(err).__name__}: {err}")
                    return  # the server is gone or stuck: going on would only count the same failure again
                load.ms.append(elapsed_ms(started))
                if response.status_code != 200:
                    load.errors.append(f"{response.status_code}: {response.text[:200]}")

        cpu, server_cpu, started = time.process_time(), server.cpu_seconds(), time.perf_counter()
        deadline = started + seconds
        await asyncio.gather(*(one_client(k * len(queries) // clients) for k in range(clients)))
        load.seconds = time.perf_counter() - started
        load.server_cpu_s, load.client_cpu_s = server.cpu_seconds() - server_cpu, time.process_time() - cpu
    return load


# -- printing ----------------------------------------------------------------------------------------------


def quantiles(ms: list[float]) -> tuple[float, float, float]:
    """p50, p95, p99."""
    if len(ms) < 2:
        return (ms[0],) * 3 if ms else (float("nan"),) * 3
    cuts = statistics.quantiles(ms, n=100, method="inclusive")
    return statistics.median(ms), cuts[94], cuts[98]


def print_rows(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))
        print(" | ".join([row[0].ljust(widths[0]), *cells]))


def cpu_cell(cpu_s: float, load: Load) -> str:
    cores = os.cpu_count() or 1
    return f"{cpu_s * 1000 / max(len(load.ms), 1):.1f} ms/req ({cpu_s / load.seconds / cores:.0%} of {cores} cores)"


def print_load(loads: dict[str, Load], anchors: dict[str, Anchor], clients: int) -> None:
    header = ["route", "requests", "req/s", "of ceiling", "p50 ms", "p95 ms", "p99 ms", "errors", "server CPU"]
    rows = [[*header, "client CPU", "target", "ratio"]]
    for name, load in loads.items():
        p50, p95, p99 = quantiles(load.ms)
        target = TARGET_P95_MS.get(name)
        rate = len(load.ms) / load.seconds
        emit(
            "load",
            route=name,
            clients=clients,
            req_per_s=rate,
            ceiling=anchors[name].ceiling,
            p50_ms=p50,
            p95_ms=p95,
            p99_ms=p99,
            errors=len(load.errors),
        )
        rows.append(
            [
                f"{name}, {clients} clients",
                f"{len(load.ms):,}",
                f"{len(load.ms) / load.seconds:,.1f}",
                f"{len(load.ms) / load.seconds / anchors[name].ceiling:.2f}",
                *(f"{value:.1f}" for value in (p50, p95, p99)),
                f"{len(load.errors)}",
                cpu_cell(load.server_cpu_s, load),
                cpu_cell(load.client_cpu_s, load),
                "—" if target is None else f"p95 <= {target:.0f} ms",
                "—" if target is None else f"{p95 / target:.2f}",
            ]
        )
    print_rows(rows)


def print_costs(anchors: dict[str, Anchor], loads: dict[str, Load], clients: int) -> None:
    header = ["route", "engine p50", "p95", "CPU/query", "ceiling", "HTTP p50, 1 client", "HTTP/engine", "HTTP cost"]
    rows = [[*header, "target", "ratio", "paired", f"{clients} clients: p50 - engine p50 (not checked)"]]
    for name, anchor in anchors.items():
        engine_p50, engine_p95, _ = quantiles(anchor.direct)
        http_p50, loaded_p50 = statistics.median(anchor.http), statistics.median(loads[name].ms)
        cost = http_p50 - engine_p50
        # The same query's two times, taken in the same round: less spread than a difference of two medians.
        paired = statistics.median(h - d for h, d in zip(anchor.http, anchor.direct, strict=True))
        emit(
            "costs",
            route=name,
            engine_p50_ms=engine_p50,
            engine_p95_ms=engine_p95,
            http_p50_ms=http_p50,
            http_p95_ms=quantiles(anchor.http)[1],
            cost_ms=cost,
            paired_ms=paired,
        )
        rows.append(
            [
                name,
                f"{engine_p50:.2f} ms",
                f"{engine_p95:.2f} ms",
                f"{anchor.direct_cpu_s * 1000 / len(anchor.direct):.1f} ms",
                f"{anchor.ceiling:.1f} req/s",
                f"{http_p50:.2f} ms",
                f"{http_p50 / engine_p50:.2f}",
                f"{cost:+.2f} ms",
                f"<= {TARGET_HTTP_COST_MS:g} ms",
                f"{cost / TARGET_HTTP_COST_MS:.2f}",
                f"{paired:+.2f} ms",
                f"{loaded_p50 - engine_p50:+.1f} ms",
            ]
        )
    print_rows(rows)


def print_floor(p50_ms: float, server_ms: float, client_ms: float) -> None:
    print(
        f"GET /healthz, 1 client: p50 {p50_ms:.2f} ms (transport, uvicorn and FastAPI doing nothing); CPU per "
        f"request {server_ms:.1f} ms in the server, {client_ms:.1f} ms in the client (clock ticks: coarse)"
    )
    if p50_ms >= NAGLE_MS:
        print(
            "  that is Nagle's algorithm waiting on the client's delayed ACK: uvicorn writes a response's head and "
            "body apart, so the serving socket needs TCP_NODELAY (`tinymemory_ingest/cli/serving.py::bind` sets it)"
        )


def load_line(when: str) -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {when}: {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} CPUs)"


# -- main --------------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=None, help=f"documents stored (default {FULL[0]:,})")
    parser.add_argument("--seconds", type=float, default=None, help=f"of load per route (default {FULL[1]:g})")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients under load")
    parser.add_argument("--queries", type=int, default=200, help="the fixed list of queries, cycled through")
    parser.add_argument("--data-dir", type=Path, default=None, help="keep (and reuse) the built corpus here")
    parser.add_argument("--embedder", choices=("minilm", "static"), default="minilm")
    parser.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK[0]:,} items, {QUICK[1]:g} s")
    args = parser.parse_args()
    items, seconds = QUICK if args.quick else FULL
    args.items = items if args.items is None else args.items
    args.seconds = seconds if args.seconds is None else args.seconds
    return args


async def measure(args: argparse.Namespace, data_dir: Path, scratch: Path, queries: list[str]) -> list[str]:
    """Print the tables; the errors seen under load."""
    server = ApiServer(data_dir, scratch / "serve.log", args.embedder)
    engine = LocalEngine(Settings(data_dir=data_dir).memory_file, embedder=real_embedder(args.embedder))
    anchors: dict[str, Anchor] = {}
    loads: dict[str, Load] = {}
    try:
        print(f"API process {server.process.pid} ({server.name}) at {server.url}", flush=True)
        async with httpx.AsyncClient(base_url=server.url, timeout=60.0) as client:
            floor = await healthz(client, server)
            for route in ROUTES:
                unlike = await warm(client, engine, route, queries)
                print(f"{route.name}: warm; HTTP answers unlike the engine's: {unlike}/{2 * len(queries)}", flush=True)
                anchors[route.name] = await one_at_a_time(client, engine, route, queries)
        for route in ROUTES:
            loads[route.name] = await under_load(server, route, queries, args.clients, args.seconds)
            print(f"{route.name}: {len(loads[route.name].ms):,} requests in {args.seconds:g} s", flush=True)
    finally:
        engine.close()
        server.stop()
    print()
    print_load(loads, anchors, args.clients)
    print()
    print_costs(anchors, loads, args.clients)
    print_floor(*floor)
    return [error for load in loads.values() for error in load.errors]


def main() -> None:
    args = parse_args()
    print(load_line("at start"), flush=True)
    print(
        f"{os.cpu_count()} CPUs, shared by the API process and this one (the {args.clients} clients and the "
        "in-process anchor): under load the clients' CPU is taken from the server's",
        flush=True,
    )
    words = vocabulary(Random(SEED))
    queries = fixed_queries(words, args.queries)
    scratch = Path(tempfile.mkdtemp(prefix="tm-api-load-"))
    try:
        data_dir = args.data_dir or scratch / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        asyncio.run(ensure_corpus(data_dir, args.items, words, args.embedder))
        errors = asyncio.run(measure(args, data_dir, scratch, queries))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(load_line("at end"))
    for error in errors[:5]:
        print(f"error: {error}")
    if errors:
        raise SystemExit(f"FAIL: {len(errors):,} requests failed or were answered with a status other than 200")


if __name__ == "__main__":
    main()
