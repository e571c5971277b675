"""Every benchmark of bench/ as the report runs it: sizes for a full and a quick run, its anchor, its ratios.

Sizes are chosen so that a full run (three runs of each machine-dependent benchmark) takes about 15 minutes on
a busy 2-core machine and a quick one (one run each, small sizes) about 2; each script's own defaults are
larger and remain what its docstring's targets are stated for.
"""

from __future__ import annotations

from bench.report.engine_stdout import engine_records
from bench.report.runs import CORPUS, Bench, Headline

TLDR = str(CORPUS / "tldr-pages")
TLDR_PAGES = str(CORPUS / "tldr-pages" / "pages")
DIRECT_0 = (("wire", "direct"), ("latency_ms", 0.0))
DIRECT_5 = (("wire", "direct"), ("latency_ms", 5.0))
LINK_UNCHANGED = (("case", "link"), ("sync", "unchanged sync"))
GITHUB_10 = (("case", "github"), ("sync", "after a 10-file commit"))
FIRST = (("step", "first ingest"),)
UNCHANGED = (("step", "unchanged re-sync"),)

PLAN: tuple[Bench, ...] = (
    Bench(
        name="formats",
        title="Conversion throughput by format",
        script="-m bench.report.formats",
        full=("--rounds", "2", "--pages", "40"),
        quick=("--rounds", "1", "--pages", "10"),
        anchor="markitdown's `convert_stream` on the same bytes, taking turns file by file (CPU time)",
        headlines=(Headline("all formats: markitdown CPU / ours", "all_formats", "ratio"),),
    ),
    Bench(
        name="backfill",
        title="Folder backfill of tldr-pages (embedded)",
        script="bench/backfill.py",
        # markitdown alone over 7,425 pages takes minutes (most of it in its file-type guess), so the floor is
        # measured on the mixed-format folder below and, per format, by `formats`.
        full=(TLDR, "--skip-floor"),
        quick=(f"{TLDR_PAGES}/osx", "--skip-floor"),
        anchor="LangChain `index()` and LlamaIndex `IngestionPipeline` over the same files and deletions "
        "(in memory, fake embeddings)",
        headlines=(
            Headline("first ingest: LangChain s / ours", "steps", "LangChain", FIRST, "ours"),
            Headline("first ingest: LlamaIndex s / ours", "steps", "LlamaIndex", FIRST, "ours"),
            Headline("unchanged re-sync: LangChain s / ours", "steps", "LangChain", UNCHANGED, "ours"),
            Headline("first ingest, s: ours", "steps", "ours", FIRST),
        ),
        repeats=2,
    ),
    Bench(
        name="backfill_floor",
        title="Folder backfill of the markitdown test files, against markitdown alone",
        script="bench/backfill.py",
        full=(str(CORPUS / "markitdown-test-files"), "--skip-peers"),
        quick=None,  # its scanned PDF and `tinymemory ingest` run twice make it the slowest minute of the run
        anchor="markitdown alone (`MarkItDown().convert(path)`) over the same files in as many warm processes",
        headlines=(Headline("first ingest: markitdown floor s / ours", "floor", "ratio", (("run", "ours"),)),),
        repeats=1,
    ),
    Bench(
        name="engine_local",
        title="Local engine: store_many and fetch",
        script="bench/engine_local.py",
        full=("--items", "5000", "--queries", "60"),
        quick=("--items", "2000", "--queries", "30", "--embedder", "hashing"),  # no backlog of vectors to wait for
        anchor="no peer runs here; hybrid and vector p95 against keyword p95 of the same run (target <= 3.3x), "
        "store_many against its target of 5,000 items/s",
        headlines=(
            Headline("hybrid p95 / keyword p95", "fetch", "p95_over_keyword", (("mode", "hybrid"),)),
            Headline("store_many items/s", "store", "items_per_s"),
            Headline("embedding: ours / plain onnxruntime passages/s", "embed", "ratio"),
        ),
        parse_stdout=engine_records,
    ),
    Bench(
        name="searchable",
        title="Time until fully searchable, default embedder, against LangChain with real vectors",
        script="bench/backfill.py",
        full=("--searchable", "--limit", "1000"),
        quick=("--searchable", "--corpora", "tldr", "--limit", "200"),
        anchor="LangChain's `index()` with sentence-transformers' all-MiniLM-L6-v2 on the CPU, same texts and threads",
        headlines=(
            Headline("tldr-pages: fully searchable, ours / LangChain", "searchable", "ratio", (("corpus", "tldr"),)),
            Headline("NFCorpus: fully searchable, ours / LangChain", "searchable", "ratio", (("corpus", "nfcorpus"),)),
        ),
        keys={"searchable": ("corpus",)},
        repeats=1,
    ),
    Bench(
        name="up_memory",
        title="`tinymemory up` on the sample notes: RSS through a churn of edits and queries",
        script="bench/up_memory.py",
        full=("--seconds", "60"),
        quick=("--seconds", "15"),
        anchor="the same churn with the hashing embedder (no model loaded)",
        headlines=(
            Headline("default embedder: highest RSS sample, MB", "up_memory", "highest_mb", (("embedder", "minilm"),)),
        ),
        keys={"up_memory": ("embedder",)},
        repeats=1,
    ),
    Bench(
        name="api_load",
        title="Read API under load",
        script="bench/api_load.py",
        full=("--items", "3000", "--seconds", "3", "--queries", "30"),
        quick=("--items", "1000", "--seconds", "2", "--queries", "15"),
        anchor="the same queries through the engine in-process, one at a time (HTTP cost = HTTP p50 - engine p50)",
        headlines=(
            Headline("fetch keyword: HTTP cost, ms (paired)", "costs", "paired_ms", (("route", "fetch keyword"),)),
            Headline("fetch keyword under load: p95 ms", "load", "p95_ms", (("route", "fetch keyword"),)),
        ),
        keys={"load": ("route", "clients"), "costs": ("route",)},
    ),
    Bench(
        name="cortex_requests",
        title="CortexDB backfill: requests per batch by wire",
        script="bench/cortex_requests.py",
        full=("--items", "500", "--anchor-items", "50"),
        quick=("--items", "300", "--anchor-items", "30", "--in-flight", "1"),
        anchor="the same items stored one `store()` call at a time (one request per item and more)",
        headlines=(
            Headline(
                "direct, 0 ms: items/s / one-per-item's", "batches", "items_per_s", DIRECT_0, "anchor_items_per_s"
            ),
            Headline(
                "direct, 5 ms: items/s / one-per-item's", "batches", "items_per_s", DIRECT_5, "anchor_items_per_s"
            ),
            Headline("direct: requests per 100-item batch", "batches", "requests_per_batch", (("wire", "direct"),)),
        ),
        keys={
            "routes": ("wire", "latency_ms"),
            "batches": ("wire", "latency_ms"),
            "in_flight": ("wire", "latency_ms", "batches"),
        },
    ),
    Bench(
        name="erasure",
        title="Erasure of a source",
        script="bench/erasure.py",
        full=("--items", "10000", "--backfill", "2000"),
        quick=("--items", "2000", "--backfill", "500"),
        anchor="page-by-page erasure, as the peers do it: list a page of ids, forget them, until none is left",
        headlines=(Headline("page by page / ours", "erase", "ratio"),),
        python_flags=("-P",),
    ),
    Bench(
        name="legacy_import",
        title="Legacy v1 import",
        script="bench/legacy_import.py",
        full=("--rows", "10000", "--repeat", "1"),
        quick=("--rows", "3000", "--repeat", "1"),
        anchor="`store_many` alone on exactly the items the import stores (the floor)",
        headlines=(Headline("migrate: floor s / migrate s", "steps", "floor_s", (("step", "migrate"),), "wall_s"),),
    ),
    Bench(
        name="scrub_quality",
        title="Scrubber: recall, prose left alone, throughput",
        script="bench/scrub_quality.py",
        full=(TLDR_PAGES, "--repeat", "1", "--sample", "5"),
        quick=(f"{TLDR_PAGES}/linux", "--repeat", "1", "--sample", "3"),
        anchor="the scrubber before issue 15 (`pipeline/scrub` at that commit, from git), taking turns page by page",
        headlines=(Headline("throughput: anchor CPU / default", "throughput", "ratio", (("scrubber", "default"),)),),
        keys={"recall": ("table_of", "label"), "prose": ("scrubber",), "throughput": ("scrubber",)},
    ),
    Bench(
        name="sources",
        title="Network sources: requests and seconds per sync",
        script="bench/sources.py",
        full=("--quick",),
        quick=("--pages", "20", "--entries", "30", "--files", "300", "--changes", "10"),
        anchor="each case's own first sync (requests and seconds of the later syncs over the first's)",
        headlines=(
            Headline(
                "link, unchanged sync: requests / first sync's", "syncs", "requests", LINK_UNCHANGED, "first_requests"
            ),
            Headline("github, 10-file commit: seconds / first sync's", "syncs", "seconds", GITHUB_10, "first_seconds"),
        ),
    ),
    Bench(
        name="search_quality",
        title="Search quality (NFCorpus)",
        script="bench/search_quality.py",
        # NFCorpus only (no tldr folder): the tldr known-item collection embeds all 7,425 pages, 7 minutes more.
        full=("--embedders", "minilm", "--tldr", str(CORPUS / "none")),
        quick=None,
        anchor="rank_bm25 BM25Okapi with Porter stemming and the same stop words, on the same texts",
        headlines=(
            Headline(
                "NFCorpus held-out: hybrid nDCG@10",
                "quality",
                "hybrid_ndcg",
                (("collection", "NFCorpus"), ("split", "held-out")),
            ),
            Headline(
                "NFCorpus held-out: anchor nDCG@10",
                "quality",
                "anchor_ndcg",
                (("collection", "NFCorpus"), ("split", "held-out")),
            ),
        ),
        repeats=1,  # its quality figures do not depend on the machine; only its latencies do
    ),
    Bench(
        name="ocr",
        title="OCR of generated scans: word recall, CER, pages/s",
        script="bench/ocr.py",
        full=("--pages", "3"),  # and, beside the checkout, tldr-pages ingested with OCR on and off
        quick=("--quick", "--tldr", str(CORPUS / "none")),
        anchor="the `tesseract FILE -` command on the same page images, two at a time (`xargs -P2`, one thread each)",
        headlines=(
            Headline("pages/s: ours / tesseract command's", "throughput", "ratio"),
            Headline(
                "clean 300 dpi: word recall",
                "quality",
                "recall",
                (("condition", "clean"), ("dpi", 300), ("engine", "ours")),
            ),
            Headline(
                "skewed 200 dpi: word recall",
                "quality",
                "recall",
                (("condition", "skew"), ("dpi", 200), ("engine", "ours")),
            ),
        ),
        keys={"quality": ("condition", "dpi", "engine"), "deskew": ("dpi",)},
        repeats=1,  # its recall does not depend on the machine; its pages/s ratio is measured side by side
    ),
)
