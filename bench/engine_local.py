"""Benchmark of the local engine: store_many throughput, fetch latency per mode, file size.

    .venv/bin/python bench/engine_local.py [--items 50000] [--queries 200] [--dir DIR]
                                           [--embedder minilm|static|hashing] [--tldr ../shared/corpus/tldr-pages]
                                           [--nfcorpus ../shared/corpus/ir/nfcorpus] [--embed-passages 500]
                                           [--write-only] [--breakdown] [--repeats 3] [--build-only] [--reuse]

First, the write path against its floor: on the same texts, `store_many` (batches of 100, fresh file,
the chosen embedder) against bare SQLite (a rowid table plus a contentless FTS5 index with the
engine's tokenizer and pragmas, 100 rows a commit), both measured in this run, batch by batch in
turn, over `--repeats` runs; the ratio is engine / floor (target >= 0.6). The texts are tldr-pages'
common pages (as a folder sync makes them: title, folder, path, observed time) when `--tldr` is given
or found beside this checkout, and 5,000 of the generated 2 KB documents. `--breakdown` then times the write's
two halves alone against the same floor (`_write_breakdown.py`). `--write-only` stops there.

Then the large run: documents are generated (about 2 KB of text from a Zipf-distributed vocabulary of made-up words),
stored in batches of 100 one call at a time, then queried with three words drawn from a random
stored document; "source doc in top 10" is how often that document is among the first ten hits.
The made-up words share letters heavily, which is hard on the lexical hashing embedder, and mean
nothing to the static (semantic) one: vector figures here are a floor, not what English text gets.
Items are stored keyword-searchable and their vectors follow from the engine's backlog: store_many is
timed to the last call's return, then the time until every vector is there is printed, then the time until
the derived keyword index (where the engine keeps one beside the file) holds every passage, and queries run
once both have caught up. With MiniLM (the default embedder) the backlog would take about an hour at
50,000 items, so the large run fills the vectors with a stand-in of MiniLM's size under its identity
(hashed n-grams) and then reopens the file with MiniLM itself, which embeds each query. Search-quality figures on
real collections are bench/search_quality.py's.
Targets on a 2-core machine: store_many >= 5,000 items/s; keyword p95 <= 30 ms; vector p95 <= 50 ms; hybrid p95
<= 100 ms (on a slower or busier machine, the same ratios against this run's keyword p95: hybrid <= 3.3 x keyword).
The vector mode is timed twice: as a client meets it (each query embedded once, MiniLM's few milliseconds), then
with the query vectors cached, the search alone.

With MiniLM, between the write path and the large run: the embedder's passages/s against plain onnxruntime
and the least cosine of their vectors, from `embedding.py` run on `--embed-passages` passages of NFCorpus and
tldr-pages (its lines, prefixed `embed:`; target >= 1.5x, stretch 2x; cosine >= 0.999; peak RSS <= 400 MB).
After the reads, for each mode, a fresh process (`fresh_open.py`) builds the engine from its settings on the
file, with the same embedder, and answers the first query: the seconds from building the engine to the
answer (target <= 2 s for hybrid at 300,000 items) and its RSS and peak RSS (target <= 1 GB at 300,000), with
the whole process's wall time (interpreter and imports included) beside them. Then the whole data directory
(the SQLite file and whatever the engine keeps beside it), in bytes per item against the item's own text.
`--build-only` stops once the large run's items and vectors are stored; `--reuse` then reads a file an earlier
run left in `--dir` without storing again (the same documents are generated for the queries), so a run at a
million items can be split in two. `--repeats 0` skips the write path against its floor. Without `--dir` the
large run's files go to a temporary directory, removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from _write_breakdown import print_breakdown
from fresh_open import fresh_open

from engines.contract import Document, FetchMode, FetchRequest, MemoryMeta, SourceKind, SourceRef
from engines.local import Embedder, HashingEmbedder, LocalEngine, Vectors
from engines.local.embed import normalise_rows
from engines.local.minilm import MiniLMEmbedder
from engines.local.schema import FTS_TOKENIZER
from engines.local.static import StaticEmbedder

TARGET_STORE_PER_S = 5_000
TARGET_FLOOR_RATIO = 0.6
FLOOR_DOCS = 5_000
DEFAULT_TLDR = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "tldr-pages"
DEFAULT_NFCORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "ir" / "nfcorpus"
TARGET_P95_MS = {FetchMode.KEYWORD: 30.0, FetchMode.VECTOR: 50.0, FetchMode.HYBRID: 100.0}
TARGET_FIRST_ANSWER_S = 2.0  # a fresh process's first hybrid answer at 300,000 items
TARGET_RSS_BYTES = 10**9  # a fresh reading process at 300,000 items


class StandIn:
    """Vectors of an embedder's size under its identity, from hashed n-grams: for filling a corpus whose
    real vectors would take an hour to compute."""

    def __init__(self, real: Embedder) -> None:
        self.identity, self.dimensions = real.identity, real.dimensions
        # Hashing needs a power of two: the next one up, its first `dimensions` columns kept.
        self._hashing = HashingEmbedder(1 << (real.dimensions - 1).bit_length())

    async def embed(self, texts: Sequence[str]) -> Vectors:
        return normalise_rows(np.ascontiguousarray((await self._hashing.embed(texts))[:, : self.dimensions]))


def real_embedder(name: str) -> Embedder:
    if name == "hashing":
        return HashingEmbedder()
    return MiniLMEmbedder() if name == "minilm" else StaticEmbedder()


def vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    words = set()
    while len(words) < size:
        length = rng.randint(2, 10)
        words.add("".join(rng.choices(letters, weights=range(len(letters), 0, -1), k=length)))
    return sorted(words)


def documents(count: int, words: list[str], rng: random.Random) -> list[Document]:
    # The running sums once (`choices` given plain weights sums them again at every call: 20,000 additions
    # a document); the same draws as before.
    cumulative = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(words))))
    docs = []
    for n in range(count):
        text = " ".join(rng.choices(words, cum_weights=cumulative, k=330))
        meta = MemoryMeta(workspace=f"ws-{n % 10}", folder=f"/notes/{n % 100}", file_path=f"/notes/{n % 100}/{n}.md")
        docs.append(Document.from_text(text[:2048], meta=meta, title=f"Note {n}"))
    return docs


def tldr_documents(root: Path) -> list[Document]:
    """tldr-pages' common pages as a folder sync stores them (one item a page: they are all small)."""
    folder = root / "pages" / "common"
    docs = []
    for path in sorted(folder.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        meta = MemoryMeta(
            workspace=str(root),
            folder=str(folder),
            file_path=str(path),
            source=SourceRef(kind=SourceKind.FOLDER, id="tldr"),
            observed_at=datetime.fromtimestamp(path.stat().st_mtime, UTC),
        )
        title = text.split("\n", 1)[0].lstrip("# ").strip() or None
        docs.append(Document.from_text(text, meta=meta, title=title, mime="text/markdown"))
    return docs


class FloorStore:
    """Bare SQLite: a rowid table and a contentless FTS5 index (the engine's tokenizer and pragmas)."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        for pragma in ("page_size = 16384", "journal_mode = WAL", "synchronous = NORMAL", "cache_size = -65536"):
            self.conn.execute(f"PRAGMA {pragma}")
        self.conn.execute("CREATE TABLE docs (rowid INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        self.conn.execute(
            f"CREATE VIRTUAL TABLE docs_text USING fts5 (text, content = '', tokenize = '{FTS_TOKENIZER}')"
        )
        self.rows = 0

    def store(self, texts: list[str]) -> None:
        """One commit of these texts."""
        rows = list(enumerate(texts, start=self.rows + 1))
        self.rows += len(rows)
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany("INSERT INTO docs (rowid, body) VALUES (?, ?)", rows)
        self.conn.executemany("INSERT INTO docs_text (rowid, text) VALUES (?, ?)", rows)
        self.conn.execute("COMMIT")


async def interleaved(docs: list[Document], folder: Path, embedder: Embedder) -> tuple[float, float]:
    """Seconds spent by the floor and by `store_many`, each on fresh files, batch by batch in turn, so a
    busy machine slows both alike (this machine's load varies too much within a second for runs in turn)."""
    floor = FloorStore(folder / f"floor-{time.perf_counter_ns()}.sqlite3")
    engine = LocalEngine(folder / f"engine-{time.perf_counter_ns()}.sqlite3", embedder=embedder)
    await engine.wait_for_vectors()  # open the file and settle the embedder outside the clock
    floor_s = engine_s = 0.0
    for start in range(0, len(docs), 100):
        batch = docs[start : start + 100]
        texts = [doc.body.value for doc in batch]
        began = time.perf_counter()
        floor.store(texts)
        middle = time.perf_counter()
        await engine.store_many(batch)
        floor_s, engine_s = floor_s + middle - began, engine_s + time.perf_counter() - middle
    floor.conn.close()
    engine.close()
    return floor_s, engine_s


async def write_ratios(corpora: dict[str, list[Document]], embedder: Embedder, repeats: int) -> None:
    """store_many against the bare SQLite+FTS5 floor on the same texts, over `repeats` interleaved runs."""
    await embedder.embed(["warm the model up"])
    for name, docs in corpora.items():
        floor_s = engine_s = 0.0
        with tempfile.TemporaryDirectory(prefix="tm-bench-floor-") as tmp:
            for _ in range(repeats):
                floor_run, engine_run = await interleaved(docs, Path(tmp), embedder)
                floor_s, engine_s = floor_s + floor_run, engine_s + engine_run
        floor, ours = len(docs) * repeats / floor_s, len(docs) * repeats / engine_s
        chars = sum(len(doc.body.value) for doc in docs) / len(docs)
        print(
            f"write {name} ({len(docs):,} docs, {chars:,.0f} chars avg, {repeats} runs): store_many {ours:,.0f} "
            f"docs/s  floor {floor:,.0f} docs/s  ratio {ours / floor:.2f} (target >= {TARGET_FLOOR_RATIO})",
            flush=True,
        )


async def store_all(engine: LocalEngine, docs: list[Document]) -> list[float]:
    """Store in batches of 100, one call at a time; the seconds of each tenth of the documents."""
    tenth = max(len(docs) // 10, 100)
    times, started = [], time.perf_counter()
    for start in range(0, len(docs), 100):
        await engine.store_many(docs[start : start + 100])
        if (start + 100) % tenth == 0:
            times.append(time.perf_counter() - started)
            started = time.perf_counter()
    return times


async def measure(engine: LocalEngine, mode: FetchMode, queries: list[tuple[str, str]]) -> tuple[list[float], float]:
    """Latencies in ms, and the share of queries whose source document is in the top 10."""
    await engine.fetch(FetchRequest(query=queries[0][0], mode=mode, limit=10))  # warm caches
    times, found = [], 0
    for query, source_id in queries:
        started = time.perf_counter()
        page = await engine.fetch(FetchRequest(query=query, mode=mode, limit=10))
        times.append((time.perf_counter() - started) * 1000)
        found += any(hit.id == source_id for hit in page.hits)
    return times, found / len(queries)


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def print_embedding(nfcorpus: Path, tldr: Path, count: int) -> None:
    """`embedding.py`'s figures (the lane against plain onnxruntime, each in a fresh process), line by line."""
    script = Path(__file__).with_name("embedding.py")
    command = [sys.executable, str(script), "--passages", str(count), "--nfcorpus", str(nfcorpus), "--tldr", str(tldr)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines() or [f"failed ({done.returncode}): {done.stderr.strip()[-300:]}"]
    for line in lines:
        print(f"embed: {line.strip()}", flush=True)


def print_fresh(path: Path, embedder: str, query: str) -> None:
    """One fresh process per mode: its seconds to the first answer and its memory, beside the targets."""
    for mode in FetchMode:
        got = fresh_open(path, embedder, mode, query)
        rss, peak = got["VmRSS"] * 1024, got["VmHWM"] * 1024
        print(
            f"fresh process {mode.value:8s} open + first answer {got['seconds']:5.2f} s  "
            f"target <= {TARGET_FIRST_ANSWER_S:g} s (hybrid, at 300,000)  "
            f"ratio {got['seconds'] / TARGET_FIRST_ANSWER_S:.2f}  whole process {got['wall_s']:5.2f} s  "
            f"RSS {rss / 2**20:,.0f} MiB, peak {peak / 2**20:,.0f} MiB  "
            f"target <= {TARGET_RSS_BYTES / 1e9:g} GB (at 300,000)  ratio {peak / TARGET_RSS_BYTES:.2f}",
            flush=True,
        )


def print_sizes(folder: Path, path: Path, docs: list[Document]) -> None:
    """The engine file (as always), then everything in its data directory, per item and against the text."""
    size = sum(p.stat().st_size for p in folder.glob(f"{path.name}*"))
    print(f"file size: {size / 2**20:,.1f} MiB ({size / len(docs):,.0f} bytes per item) at {path}")
    files = [p for p in folder.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    text = sum(len(doc.render_text().encode()) for doc in docs) / len(docs)
    print(
        f"data dir: {total / 2**20:,.1f} MiB in {len(files)} files ({total / len(docs):,.0f} bytes per item; "
        f"{(total - size) / 2**20:,.1f} MiB beside the SQLite file)  item text {text:,.0f} bytes  "
        f"ratio {total / len(docs) / text:.2f} x the text at {folder}",
        flush=True,
    )


async def store_large(engine: LocalEngine, docs: list[Document], embedder: Embedder, stand_in: bool) -> None:
    """Store the large run's documents and wait for their vectors, printing both."""
    started = time.perf_counter()
    tenths = await store_all(engine, docs)
    elapsed = sum(tenths)
    rate = len(docs) / elapsed
    last = len(docs) / 10 / tenths[-1]
    print(
        f"store_many ({embedder.identity}): {rate:,.0f} items/s overall ({elapsed:.1f} s), {last:,.0f} items/s "
        f"for the last tenth  target >= {TARGET_STORE_PER_S:,}  ratio {rate / TARGET_STORE_PER_S:.2f}",
        flush=True,
    )
    backlog = await engine.vector_backlog()
    await engine.wait_for_vectors(timeout_s=7200)
    print(
        f"vectors: {backlog:,} passages still waiting when the last store returned; all embedded "
        f"{time.perf_counter() - started:.1f} s after the first store"
        + (f" (by a stand-in of {embedder.identity})" if stand_in else ""),
        flush=True,
    )


async def wait_for_keyword_index(engine: LocalEngine, since: str) -> None:
    """Wait until the engine's derived keyword index (where it keeps one) holds every passage, and say how long
    that took: searches never wait for it (FTS5 answers meanwhile), but the reads mean to measure it."""
    wait = getattr(engine, "wait_for_keyword_index", None)
    if wait is None:
        return
    started = time.perf_counter()
    caught_up = await wait(timeout_s=3600)
    state = "caught up" if caught_up else "NOT caught up within an hour"
    print(f"keyword index: {state} {time.perf_counter() - started:.1f} s after {since}", flush=True)


async def read_modes(engine: LocalEngine, queries: list[tuple[str, str]]) -> None:
    keyword_p95 = 0.0
    for mode in FetchMode:
        times, recall = await measure(engine, mode, queries)
        target = TARGET_P95_MS[mode]
        keyword_p95 = keyword_p95 or p95(times)
        ratio_target = target / TARGET_P95_MS[FetchMode.KEYWORD]
        print(
            f"fetch {mode.value:8s} p50 {statistics.median(times):6.1f} ms  p95 {p95(times):6.1f} ms  "
            f"target p95 <= {target:.0f} ms  ratio {p95(times) / target:.2f}  "
            f"p95 / keyword p95 {p95(times) / keyword_p95:.2f} (target <= {ratio_target:.2f})  "
            f"source doc in top 10: {recall:.0%}",
            flush=True,
        )
        if mode is FetchMode.VECTOR:
            # Each query's vector is now in the engine's cache: the same reads again time the search alone, so the
            # line above less this one is what embedding the query cost (MiniLM: a few milliseconds a query).
            cached, _ = await measure(engine, mode, queries)
            print(
                f"fetch vector, query vectors cached  p50 {statistics.median(cached):6.1f} ms  "
                f"p95 {p95(cached):6.1f} ms  target p95 <= {target:.0f} ms  ratio {p95(cached) / target:.2f}  "
                "(the search without the query's embedding)",
                flush=True,
            )


async def large_run(args: argparse.Namespace, embedder: Embedder, words: list[str], rng: random.Random) -> None:
    print(f"generating {args.items:,} documents of about 2 KB ...", flush=True)
    docs = documents(args.items, words, rng)
    folder = args.dir or Path(tempfile.mkdtemp(prefix="tm-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "bench.sqlite3"
    filler = StandIn(embedder) if isinstance(embedder, MiniLMEmbedder) else embedder
    if args.reuse and path.is_file():
        print(f"reusing {path}: its items are not stored again", flush=True)
    else:
        engine = LocalEngine(path, embedder=filler)
        await store_large(engine, docs, embedder, filler is not embedder)
        await wait_for_keyword_index(engine, "the vectors")
        engine.close()
    if args.build_only:
        print_sizes(folder, path, docs)
        return
    engine = LocalEngine(path, embedder=embedder)
    await wait_for_keyword_index(engine, "the file was opened for the reads")
    queries = []
    for doc in rng.sample(docs, args.queries):
        words_of_doc = (doc.body.text or "").split()
        queries.append((" ".join(rng.sample(words_of_doc, 3)), doc.fingerprint()))
    await read_modes(engine, queries)
    engine.close()
    print_fresh(path, args.embedder, queries[0][0])
    print_sizes(folder, path, docs)
    if args.dir is None:  # gigabytes at a large run, of no use once measured
        shutil.rmtree(folder, ignore_errors=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--embedder", choices=("minilm", "static", "hashing"), default="minilm")
    parser.add_argument("--tldr", type=Path, default=None)
    parser.add_argument("--nfcorpus", type=Path, default=DEFAULT_NFCORPUS, help="passages embedding.py times")
    parser.add_argument("--embed-passages", type=int, default=500, help="passages embedding.py times (0: none)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write-only", action="store_true")
    parser.add_argument("--breakdown", action="store_true")
    parser.add_argument("--build-only", action="store_true", help="store the large run's items, then stop")
    parser.add_argument("--reuse", action="store_true", help="read the file an earlier run left in --dir")
    args = parser.parse_args()
    if args.reuse and args.dir is None:
        parser.error("--reuse needs the --dir of an earlier run")
    embedder = real_embedder(args.embedder)
    rng = random.Random(7)
    words = vocabulary(rng)
    corpora = {"synthetic-2k": documents(FLOOR_DOCS, words, random.Random(11))}
    if args.tldr is not None and not (args.tldr / "pages" / "common").is_dir():
        parser.error(f"--tldr {args.tldr}: no pages/common folder there; give a checkout of tldr-pages")
    tldr = args.tldr or DEFAULT_TLDR
    if (tldr / "pages" / "common").is_dir():
        corpora = {"tldr-pages": tldr_documents(tldr), **corpora}
    if args.repeats > 0:
        await write_ratios(corpora, embedder, args.repeats)
    if args.breakdown:
        print_breakdown(corpora, FloorStore, max(args.repeats, 1))
    if isinstance(embedder, MiniLMEmbedder) and args.embed_passages > 0:
        print_embedding(args.nfcorpus, tldr, args.embed_passages)
    if args.write_only:
        return
    await large_run(args, embedder, words, rng)


if __name__ == "__main__":
    asyncio.run(main())
