"""The fused MiniLM graph is built once per model file, kept under its sha256, and rebuilt when damaged."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pytest

from engines.local import graphcache, minilm, minilmgraph
from engines.local.minilm import MiniLMEmbedder


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The model files graphs were built from, in order (the real builder still writes them)."""
    made: list[Path] = []
    real = minilmgraph.write_fused

    def counted(source: Path, out: BinaryIO) -> None:
        made.append(source)
        real(source, out)

    monkeypatch.setattr(minilmgraph, "write_fused", counted)
    return made


@pytest.fixture
def fake_builds(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Builds that write the source's bytes back, so the cache's bookkeeping is tested without the model."""
    made: list[Path] = []

    def copy(source: Path, out: BinaryIO) -> None:
        made.append(source)
        out.write(source.read_bytes())

    monkeypatch.setattr(minilmgraph, "write_fused", copy)
    return made


def test_a_graph_is_built_once_per_digest_and_reused(tmp_path: Path, fake_builds: list[Path]) -> None:
    source = tmp_path / "model.onnx"
    source.write_bytes(b"weights")
    first = graphcache.cached_graph(source, "a" * 64, tmp_path / "cache")
    stamp = first.stat().st_mtime_ns
    assert graphcache.cached_graph(source, "a" * 64, tmp_path / "cache") == first
    assert first.stat().st_mtime_ns == stamp and len(fake_builds) == 1
    other = graphcache.cached_graph(source, "b" * 64, tmp_path / "cache")  # another model file: a graph of its own
    assert other != first and len(fake_builds) == 2
    assert first.name == f"minilm-fused-v{graphcache.GRAPH_VERSION}-{'a' * 32}.onnx"
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted([first.name, other.name])


def test_a_failed_build_leaves_no_file_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(source: Path, out: BinaryIO) -> None:
        out.write(b"half a graph")
        raise minilmgraph.GraphError("the model has no encoder.layer.0.output.dense.weight")

    monkeypatch.setattr(minilmgraph, "write_fused", broken)
    with pytest.raises(minilmgraph.GraphError):
        graphcache.cached_graph(tmp_path / "model.onnx", "c" * 64, tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


def test_builders_racing_leave_one_whole_graph(tmp_path: Path, fake_builds: list[Path]) -> None:
    source = tmp_path / "model.onnx"
    source.write_bytes(b"w" * 100_000)
    threads = [
        threading.Thread(target=graphcache.cached_graph, args=(source, "d" * 64, tmp_path / "cache", True))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [p.read_bytes() for p in (tmp_path / "cache").iterdir()] == [source.read_bytes()]  # no temporary left


def test_the_cache_folder_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(graphcache.CACHE_ENV, str(tmp_path / "models"))
    assert graphcache.default_cache_dir() == tmp_path / "models"
    monkeypatch.delenv(graphcache.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert graphcache.default_cache_dir() == tmp_path / "xdg" / "tinymemory"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert graphcache.default_cache_dir() == tmp_path / "home" / ".cache" / "tinymemory"


def test_the_embedder_loads_the_kept_graph_and_rebuilds_a_damaged_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, builds: list[Path], caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("engines.local.minilm._loaded", {})
    cache = tmp_path / "cache"
    first = MiniLMEmbedder(cache_dir=cache).embed_sync(["the deploy runs at noon"])
    graph = graphcache.graph_path(cache, minilm.MODEL_SHA256)
    assert graph.is_file() and len(builds) == 1
    assert minilm._loaded[str(MiniLMEmbedder().model_file)].fused

    monkeypatch.setattr("engines.local.minilm._loaded", {})  # another process: the kept graph is loaded, not built
    stamp = graph.stat().st_mtime_ns
    MiniLMEmbedder(cache_dir=cache).embed_sync(["a text"])
    assert len(builds) == 1 and graph.stat().st_mtime_ns == stamp

    graph.write_bytes(graph.read_bytes()[: 1 << 20])  # truncated, as a full disk or a killed copy leaves it
    monkeypatch.setattr("engines.local.minilm._loaded", {})
    with caplog.at_level(logging.WARNING, logger="engines.local.minilm"):
        again = MiniLMEmbedder(cache_dir=cache).embed_sync(["the deploy runs at noon"])
    assert len(builds) == 2 and "cannot be loaded" in caplog.text and "rebuilding it" in caplog.text
    assert np.allclose(first, again, atol=1e-6)


def test_an_unwritable_cache_folder_builds_the_graph_for_the_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, builds: list[Path], caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("engines.local.minilm._loaded", {})
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")
    with caplog.at_level(logging.WARNING, logger="engines.local.minilm"):
        vectors = MiniLMEmbedder(cache_dir=blocker / "cache").embed_sync(["a text"])
    assert vectors.shape == (1, 384) and len(builds) == 1
    assert "cannot keep the fused MiniLM graph" in caplog.text
    assert minilm._loaded[str(MiniLMEmbedder().model_file)].fused
