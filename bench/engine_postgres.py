"""Benchmark of the PostgreSQL engine: store_many against COPY, fetch latency per mode, quality against local.

    .venv/bin/python bench/engine_postgres.py [--endpoint postgresql://...] [--documents 20000] [--queries 200]
                                              [--floor-docs 3000] [--repeats 2] [--embedder static|hashing|minilm]
                                              [--tldr ../shared/corpus/tldr-pages]
                                              [--nfcorpus ../shared/corpus/ir/nfcorpus]
                                              [--skip-write] [--skip-large] [--skip-quality] [--skip-celery]
                                              [--data DIR [--reuse]]

Without `--endpoint` the run starts a private PostgreSQL 16 with pgvector 0.6 (pgserver, as the tests do) in a
temporary folder: same machine, Unix socket, default settings. Each part uses a fresh database. With `--data` the
private server keeps its data in DIR (left there, stopped, after the run), and the large run's database is named
after its size and embedder; `--reuse` then queries that database when an earlier run built it, rather than
storing the documents again (300,000 take half an hour here).

1. The write path against its floor, in the same run: `store_many` (batches of 100, the hashing embedder, whose
   vectors are computed as items are stored, so every batch writes rows, tsvectors and vectors) against COPY of the
   same texts and the same vectors into a bare table with the same indexes (a GIN index on a stored generated
   tsvector of the engine's text configuration, kept in the row as the engine keeps it, an HNSW cosine index on the
   vectors), 100 rows a COPY and a commit,
   the vectors computed inside the floor's clock too. Batch by batch in turn, over `--repeats` runs; the texts are
   tldr-pages' common pages and the generated 2 KB documents of bench/engine_local.py. Target ratio >= 0.5.
2. The large run: `--documents` generated documents (bench/engine_local.py's), stored with `--embedder`'s
   vectors (a semantic embedder's through the backlog: its time to the last vector is printed), then queried with
   three words drawn from a random stored document, `--queries` times per mode; p50 and p95 of fetch (limit 10),
   with, in the same run on the same database, the anchors. Keyword is timed twice: the first pass builds the
   champion list of each common word on its first use (`engines.postgres.champions`; how many is printed), the
   later passes read them, as every read after a word's first does. The anchors: a bare full-text query (the
   three words OR-ed, `@@` ranked by `ts_rank`, limit 10) and a bare HNSW query (`ORDER BY embedding <=> q
   LIMIT 10`). Issue 33's targets at 300,000 documents: keyword p95 <= 50 ms, hybrid p95 <= 100 ms.
3. Search quality on real collections (bench/search_quality.py's NFCorpus and tldr known-item, held-out halves):
   nDCG@10 per mode of the PostgreSQL engine against the local engine with the same embedder, in the same run;
   target: hybrid within 0.01 of local's.
4. The Celery backfill of tldr-pages' English pages (`pages/`, a folder source) through two workers
   (`tinymemory worker --concurrency 1`, bench/_celery.py's pipeline on the local Redis, warmed first), into
   PostgreSQL and into the local engine, one after the other in this run: seconds from the enqueue until every
   planned unit is done, files a second, and the items each engine holds afterwards. `--skip-celery` leaves it out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _report import emit  # noqa: E402
from engine_local import documents, p95, real_embedder, tldr_documents, vocabulary  # noqa: E402
from search_quality import Collection, load_evaluate, nfcorpus, paired, score, tldr  # noqa: E402

from engines.contract import Document, FetchMode, FetchRequest  # noqa: E402
from engines.local import Embedder, HashingEmbedder, LocalEngine  # noqa: E402
from engines.postgres import PostgresEngine  # noqa: E402
from engines.postgres.schema import TEXT_CONFIG, TEXT_SEARCH  # noqa: E402
from engines.postgres.writes import indexed_words  # noqa: E402

SHARED = ROOT.parent / "shared" / "corpus"
TARGET_FLOOR_RATIO = 0.5
TARGET_KEYWORD_P95_MS = 50.0
TARGET_HYBRID_P95_MS = 100.0
TARGET_QUALITY_GAP = 0.01


@contextlib.contextmanager
def server(endpoint: str | None, data: Path | None = None) -> Iterator[str]:
    """The URL of the server to use: `endpoint`, or a private one started for the run (in `data`, kept, if given)."""
    if endpoint:
        yield endpoint
        return
    folder = Path(tempfile.mkdtemp(prefix="tm-bench-postgres-"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        handle = pgserver.get_server(data or folder / "data", cleanup_mode="stop")
    try:
        yield handle.get_uri()
    finally:
        with contextlib.suppress(Exception):
            handle.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def database_url(url: str, name: str) -> str:
    base, _, query = url.partition("?")
    return base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")


def fresh_database(url: str, name: str | None = None) -> str:
    """A new database on the server of `url` (with pgvector), and its URL."""
    name = name or f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}".encode())
        conn.execute(f"CREATE DATABASE {name}".encode())
    found = database_url(url, name)
    with psycopg.connect(found, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return found


def built(url: str, name: str, count: int) -> str | None:
    """The URL of database `name` when an earlier run stored all its `count` documents."""
    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            return None
    found = database_url(url, name)
    with psycopg.connect(found) as conn, contextlib.suppress(psycopg.Error):
        row = conn.execute("SELECT count(*) FROM items").fetchone()
        return found if row and row[0] == count else None
    return None


class FloorTable:
    """A bare table with the engine's indexes: a stored tsvector of the engine's text configuration under GIN, and
    vectors under HNSW (cosine); rows go in by COPY, 100 a commit."""

    def __init__(self, url: str, dimensions: int) -> None:
        self.conn = psycopg.connect(url)
        register_vector(self.conn)
        for statement in TEXT_SEARCH.split(";\n"):
            self.conn.execute(statement.encode())
        self.conn.execute(
            f"CREATE TABLE floor (id bigserial PRIMARY KEY, body text NOT NULL, words tsvector GENERATED ALWAYS AS "
            f"(to_tsvector('{TEXT_CONFIG}', body)) STORED, embedding vector({dimensions}) NOT NULL)".encode()
        )
        # Stored as the engine stores its tsvectors: in the row, not in TOAST.
        self.conn.execute("ALTER TABLE floor ALTER COLUMN words SET STORAGE MAIN")
        self.conn.execute("CREATE INDEX floor_words ON floor USING gin (words)")
        self.conn.execute("CREATE INDEX floor_hnsw ON floor USING hnsw (embedding vector_cosine_ops)")
        self.conn.commit()

    def store(self, texts: list[str], vectors: np.ndarray) -> None:
        with self.conn.cursor().copy("COPY floor (body, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["text", "vector"])
            for text, vector in zip(texts, vectors, strict=True):
                copy.write_row((text, vector))
        self.conn.commit()

    def close(self) -> None:
        self.conn.close()


async def interleaved(url: str, docs: list[Document]) -> tuple[float, float]:
    """Seconds of the floor and of store_many on fresh databases, batch by batch in turn."""
    embedder = HashingEmbedder()
    floor = FloorTable(fresh_database(url), embedder.dimensions)
    engine = PostgresEngine(fresh_database(url), embedder=embedder)
    engine.settle()
    floor_s = engine_s = 0.0
    for start in range(0, len(docs), 100):
        batch = docs[start : start + 100]
        # The floor's rows are the engine's passage texts (one a document here), with the same words and vectors.
        texts = [" ".join(indexed_words(doc.render_text())) for doc in batch]
        began = time.perf_counter()
        floor.store(texts, embedder.embed_sync([doc.render_text() for doc in batch]))
        middle = time.perf_counter()
        await engine.store_many(batch)
        floor_s, engine_s = floor_s + middle - began, engine_s + time.perf_counter() - middle
    floor.close()
    engine.close()
    return floor_s, engine_s


async def write_ratios(url: str, corpora: dict[str, list[Document]], repeats: int) -> None:
    for name, docs in corpora.items():
        floor_s = engine_s = 0.0
        for _ in range(repeats):
            floor_run, engine_run = await interleaved(url, docs)
            floor_s, engine_s = floor_s + floor_run, engine_s + engine_run
        floor, ours = len(docs) * repeats / floor_s, len(docs) * repeats / engine_s
        print(
            f"write {name} ({len(docs):,} docs, {repeats} runs): store_many {ours:,.0f} docs/s  "
            f"COPY floor {floor:,.0f} docs/s  ratio {ours / floor:.2f} (target >= {TARGET_FLOOR_RATIO})",
            flush=True,
        )
        emit("postgres_write", corpus=name, docs=len(docs), store_per_s=ours, floor_per_s=floor, ratio=ours / floor)


def queries_from(docs: list[Document], count: int, rng: random.Random) -> list[str]:
    picked = rng.sample(docs, min(count, len(docs)))
    return [" ".join(rng.sample(doc.body.value.split(), 3)) for doc in picked]


async def timed(engine: PostgresEngine, mode: FetchMode, queries: list[str]) -> list[float]:
    await engine.fetch(FetchRequest(query=queries[0], mode=mode, limit=10))
    times = []
    for query in queries:
        began = time.perf_counter()
        await engine.fetch(FetchRequest(query=query, mode=mode, limit=10))
        times.append((time.perf_counter() - began) * 1000)
    return times


def anchors(url: str, embedder_vectors: np.ndarray, queries: list[str]) -> dict[str, list[float]]:
    """Bare SQL on the engine's own tables: full text with ts_rank, and HNSW nearest neighbours."""
    found: dict[str, list[float]] = {"bare full text": [], "bare HNSW": []}
    with psycopg.connect(url) as conn:
        register_vector(conn)
        for query, vector in zip(queries, embedder_vectors, strict=True):
            began = time.perf_counter()
            conn.execute(
                f"SELECT id FROM passages WHERE words @@ to_tsquery('{TEXT_CONFIG}', %s) "
                f"ORDER BY ts_rank(words, to_tsquery('{TEXT_CONFIG}', %s)) DESC LIMIT 10".encode(),
                (" | ".join(query.split()), " | ".join(query.split())),
            ).fetchall()
            middle = time.perf_counter()
            conn.execute("SELECT passage FROM passage_vectors ORDER BY embedding <=> %s LIMIT 10", (vector,)).fetchall()
            ended = time.perf_counter()
            found["bare full text"].append((middle - began) * 1000)
            found["bare HNSW"].append((ended - middle) * 1000)
    return found


async def large_run(
    url: str, count: int, queries_wanted: int, embedder: Embedder, rng: random.Random, reuse: bool
) -> None:
    name = f"large_{count}_{embedder.identity.split(':')[0].split('/')[0]}".replace("-", "_")
    found = built(url, name, count) if reuse else None
    database = found or fresh_database(url, name if reuse else None)
    docs = documents(count, vocabulary(rng), rng)
    engine = PostgresEngine(database, embedder=embedder)
    try:
        if found:
            print(f"large run: {count:,} documents stored by an earlier run (database {name})", flush=True)
        else:
            await store_large(engine, docs, embedder)
            with psycopg.connect(database, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE")
        queries = queries_from(docs, queries_wanted, rng)
        engine.settle()  # an earlier release's database is migrated first
        lists = listed(database)
        times = await timed(engine, FetchMode.KEYWORD, queries)
        new = listed(database) - lists
        print(
            f"fetch keyword  p50 {statistics.median(times):6.1f} ms  p95 {p95(times):6.1f} ms  first pass: "
            f"{new} champion lists built on first use ({lists} there before)"
        )
        emit("postgres_fetch", mode="keyword first pass", documents=count, p50_ms=statistics.median(times),
             p95_ms=p95(times), lists_built=new)  # fmt: skip
        for mode in FetchMode:
            times = await timed(engine, mode, queries)
            target = {FetchMode.KEYWORD: TARGET_KEYWORD_P95_MS, FetchMode.HYBRID: TARGET_HYBRID_P95_MS}.get(mode)
            said = f" (target at 300,000: <= {target:.0f} ms)" if target else ""
            print(f"fetch {mode.value:8} p50 {statistics.median(times):6.1f} ms  p95 {p95(times):6.1f} ms{said}")
            emit("postgres_fetch", mode=mode.value, documents=count, p50_ms=statistics.median(times), p95_ms=p95(times))
        vectors = await embedder.embed(queries)
        for name, times in anchors(database, vectors, queries).items():
            print(f"anchor {name:15} p50 {statistics.median(times):6.1f} ms  p95 {p95(times):6.1f} ms")
            emit("postgres_fetch", mode=name, documents=count, p50_ms=statistics.median(times), p95_ms=p95(times))
    finally:
        engine.close()


async def store_large(engine: PostgresEngine, docs: list[Document], embedder: Embedder) -> None:
    began = time.perf_counter()
    for start in range(0, len(docs), 100):
        await engine.store_many(docs[start : start + 100])
        if start and start % 50_000 == 0:
            print(f"  {start:,} stored in {time.perf_counter() - began:.0f} s", flush=True)
    stored_s = time.perf_counter() - began
    await engine.wait_for_vectors(timeout_s=7200)
    vectors_s = time.perf_counter() - began
    print(
        f"large run: {len(docs):,} documents stored in {stored_s:.0f} s ({len(docs) / stored_s:,.0f} docs/s), "
        f"every vector by {vectors_s:.0f} s ({embedder.identity})",
        flush=True,
    )


def listed(database: str) -> int:
    """How many words have a champion list (`engines.postgres.champions`)."""
    with psycopg.connect(database) as conn:
        row = conn.execute("SELECT count(*) FROM common_terms").fetchone()
        return int(row[0]) if row else 0


async def runs(engine: LocalEngine | PostgresEngine, collection: Collection) -> dict[str, dict[str, list[str]]]:
    by_item: dict[str, str] = {}
    for first in range(0, len(collection.docs), 100):
        batch = collection.docs[first : first + 100]
        receipts = await engine.store_many([Document.from_text(text, title=title or None) for _, title, text in batch])
        by_item.update((str(r.id), doc_id) for r, (doc_id, _, _) in zip(receipts, batch, strict=True))
    await engine.wait_for_vectors(timeout_s=7200)
    found: dict[str, dict[str, list[str]]] = {}
    for mode in FetchMode:
        found[mode.value] = {}
        for qid, text in collection.queries.items():
            page = await engine.fetch(FetchRequest(query=text, mode=mode, limit=100))
            found[mode.value][qid] = [by_item[str(hit.id)] for hit in page.hits]
    return found


async def quality(url: str, collections: list[Collection], evaluate: object, make: str) -> None:
    for collection in collections:
        with tempfile.TemporaryDirectory(prefix="tm-bench-local-") as tmp:
            local = LocalEngine(Path(tmp) / "memory.sqlite3", embedder=real_embedder(make))
            try:
                theirs = await runs(local, collection)
            finally:
                local.close()
        ours_engine = PostgresEngine(fresh_database(url), embedder=real_embedder(make))
        try:
            ours = await runs(ours_engine, collection)
        finally:
            ours_engine.close()
        held = collection.splits["held-out"]
        for mode in FetchMode:
            mine, local_ndcg = (
                score(evaluate, ours[mode.value], collection.qrels, held),
                score(evaluate, theirs[mode.value], collection.qrels, held),
            )
            gap = paired(evaluate, ours[mode.value], theirs[mode.value], collection.qrels, held)
            check = f" (target: within {TARGET_QUALITY_GAP})" if mode is FetchMode.HYBRID else ""
            print(
                f"quality {collection.name} held-out ({len(held)} queries) {mode.value:8} nDCG@10 postgres "
                f"{mine[0]:.4f}  local {local_ndcg[0]:.4f}  difference {gap}{check}",
                flush=True,
            )
            emit(
                "postgres_quality",
                collection=collection.name,
                mode=mode.value,
                postgres_ndcg=mine[0],
                local_ndcg=local_ndcg[0],
            )


def page_count(pages: Path) -> int:
    return sum(1 for _ in pages.rglob("*.md"))


async def celery_backfill(url: str, pages: Path, embedder: str) -> None:
    """tldr-pages through two Celery workers into each engine, side by side (needs Redis on its usual URL)."""
    import os

    from _celery import CeleryPipeline

    files = page_count(pages)
    for engine in ("local", "postgres"):
        database = fresh_database(url) if engine == "postgres" else ""
        settings = {
            "TINYMEMORY_ENGINE": engine,
            f"TINYMEMORY_ENGINES__{engine.upper()}__EMBEDDER__KIND": embedder,
            **({"TINYMEMORY_ENGINES__POSTGRES__ENDPOINT": database} if database else {}),
        }
        saved = {name: os.environ.get(name) for name in settings}
        os.environ.update(settings)
        try:
            with tempfile.TemporaryDirectory(prefix="tm-bench-celery-") as tmp, CeleryPipeline(Path(tmp), 2) as cluster:
                cluster.start()
                cluster.warm()
                step = cluster.sync(cluster.add_folder("tldr", pages), within_s=3600)
                if database:
                    with psycopg.connect(database) as conn:
                        row = conn.execute("SELECT count(*) FROM items").fetchone()
                        items = int(row[0]) if row else 0
                else:
                    items = await cluster.items("tldr")
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        print(
            f"celery backfill {engine:8} {files:,} tldr pages through 2 workers: {step.seconds:.1f} s "
            f"({files / step.seconds:,.0f} files/s), {items:,} items stored, {step.missing} units uncounted",
            flush=True,
        )
        emit("postgres_celery", engine=engine, files=files, seconds=step.seconds, items=items)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint")
    parser.add_argument("--documents", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--floor-docs", type=int, default=3_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--embedder", default="static", choices=("static", "hashing", "minilm"))
    parser.add_argument("--tldr", type=Path, default=SHARED / "tldr-pages")
    parser.add_argument("--nfcorpus", type=Path, default=SHARED / "ir" / "nfcorpus")
    parser.add_argument("--tldr-queries", type=int, default=500)
    parser.add_argument("--skip-write", action="store_true")
    parser.add_argument("--skip-large", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--skip-celery", action="store_true")
    parser.add_argument("--data", type=Path, help="the private server's data folder, kept after the run")
    parser.add_argument("--reuse", action="store_true", help="query the large run's database if a run built it")
    args = parser.parse_args()
    if args.reuse and not (args.data or args.endpoint):
        parser.error("--reuse needs --data or --endpoint: a temporary server keeps nothing between runs")
    rng = random.Random(33)
    with server(args.endpoint, args.data) as url:
        if not args.skip_write:
            corpora = {"generated 2 KB": documents(args.floor_docs, vocabulary(random.Random(5)), random.Random(6))}
            if args.tldr.exists():
                corpora = {"tldr-pages common": tldr_documents(args.tldr)[: args.floor_docs], **corpora}
            await write_ratios(url, corpora, args.repeats)
        if not args.skip_large:
            await large_run(url, args.documents, args.queries, real_embedder(args.embedder), rng, args.reuse)
        if not args.skip_quality and args.nfcorpus.exists():
            evaluate = load_evaluate(args.nfcorpus)
            collections = [nfcorpus(args.nfcorpus, evaluate)]
            if args.tldr.exists():
                collections.append(tldr(args.tldr, args.tldr_queries))
            await quality(url, collections, evaluate, args.embedder)
        if not args.skip_celery and (args.tldr / "pages").exists():
            await celery_backfill(url, args.tldr / "pages", args.embedder)


if __name__ == "__main__":
    asyncio.run(main())
