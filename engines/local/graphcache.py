"""The fused MiniLM graph on disk: built once per model file, then loaded by every process of the user.

Building it (`minilmgraph.write_fused`) takes a second or two and about 200 MB for a moment, so it is
done once and kept, under a name made of the model file's sha256 and the builder's version: another
model file, or a builder that writes another graph, gets a file of its own, and a changed file is
never mistaken for the one the graph was built from.

Several processes may build at once (workers starting together): each writes a file of its own and
renames it into place, which is atomic, so a reader sees either no graph or a whole one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import tempfile
import time
from pathlib import Path

from engines.local import minilmgraph

logger = logging.getLogger(__name__)

CACHE_ENV = "TINYMEMORY_MODEL_CACHE"
"""The environment variable naming the folder of built graphs, in place of the user's cache folder."""

GRAPH_VERSION = 2
"""Bumped whenever `minilmgraph` writes another graph, so graphs built by an older build are not used."""


def default_cache_dir() -> Path:
    """`$TINYMEMORY_MODEL_CACHE`, else `$XDG_CACHE_HOME/tinymemory`, else `~/.cache/tinymemory` (a user
    without a home folder: the temporary folder's `tinymemory-cache`)."""
    named = os.environ.get(CACHE_ENV)
    if named:
        return Path(named)
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no HOME and no passwd entry (a bare container's user)
            return Path(tempfile.gettempdir()) / "tinymemory-cache"
    return Path(base) / "tinymemory"


def graph_path(cache_dir: Path, digest: str) -> Path:
    """Where the graph of the model file with this sha256 is kept."""
    return cache_dir / f"minilm-fused-v{GRAPH_VERSION}-{digest[:32]}.onnx"


def cached_graph(source: Path, digest: str, cache_dir: Path, rebuild: bool = False) -> Path:
    """The fused graph of `source` (whose sha256 is `digest`), built and kept when it is not there yet,
    or when `rebuild` (the kept one could not be loaded). Raises OSError when the folder is not writable,
    `minilmgraph.GraphError` when `source` is not the model the builder knows."""
    path = graph_path(cache_dir, digest)
    if path.is_file() and not rebuild:
        return path
    began = time.monotonic()
    cache_dir.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        with temporary.open("wb") as out:
            minilmgraph.write_fused(source, out)
            out.flush()
            os.fsync(out.fileno())
        temporary.replace(path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
    logger.info("built the fused MiniLM graph %s in %.1f s (once per model file)", path, time.monotonic() - began)
    return path
