"""The packaged static embedder: offline semantic vectors, far cheaper than MiniLM, stable under its identity."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from engines.contract import ConfigError
from engines.local.factory import build_embedder
from engines.local.static import MAX_TOKENS, StaticEmbedder
from engines.settings import EmbedderSettings


@pytest.fixture(scope="module")
def embedder() -> StaticEmbedder:
    # The model's table is read once per process and shared by every embedder built on it.
    return StaticEmbedder()


def test_vectors_are_unit_length_float32_rows_in_order(embedder: StaticEmbedder) -> None:
    texts = ["the deploy runs at noon", "", "cats sleep all day", "x" * (MAX_TOKENS * 4)]
    vectors = embedder.embed_sync(texts)
    assert vectors.shape == (4, 256) and vectors.dtype == np.float32
    norms = np.linalg.norm(vectors, axis=1)
    assert np.allclose(norms[[0, 2, 3]], 1.0, atol=1e-5) and norms[1] == 0
    again = embedder.embed_sync(["cats sleep all day"])
    assert np.array_equal(again[0], vectors[2])
    assert embedder.embed_sync([]).shape == (0, 256)


def test_similar_meanings_score_higher_than_shared_letters(embedder: StaticEmbedder) -> None:
    car, mechanic, cart = embedder.embed_sync(["car repair shop", "automobile mechanic garage", "shopping cart"])
    assert float(car @ mechanic) > 0.3 > float(mechanic @ cart)


def test_any_python_string_is_embedded(embedder: StaticEmbedder) -> None:
    vectors = embedder.embed_sync(["lone \ud800 surrogate", "\x00 nul and 東京 and émoji 🙂"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_fewer_dimensions_keep_the_leading_ones(embedder: StaticEmbedder) -> None:
    small = StaticEmbedder(dimensions=64)
    assert (small.identity, small.dimensions) == ("static:wordllama-l2-supercat/64", 64)
    full, short = embedder.embed_sync(["budget review"])[0], small.embed_sync(["budget review"])[0]
    assert np.allclose(short, full[:64] / np.linalg.norm(full[:64]), atol=1e-5)
    for bad in (8, 512):
        with pytest.raises(ConfigError, match="ask for 16 to 256"):
            StaticEmbedder(dimensions=bad)


def test_static_vectors_stay_those_of_its_identity(embedder: StaticEmbedder) -> None:
    # Files indexed under this identity are searched with vectors computed later: any change to the
    # vectors (another tokenization, another pooling) must come with a new identity.
    texts = ["The quick brown fox", "", "Grüße aus Köln: naïve café — 東京 2026", "x" * 9000]
    texts += [f"note {n}: alpha beta gamma" for n in range(40)]
    assert embedder.identity == "static:wordllama-l2-supercat/256"
    vectors = np.round(embedder.embed_sync(texts), 5)
    assert hashlib.sha256(vectors.tobytes()).hexdigest() == (
        "ec12565654872c6ac1c4a8b061cbf9ef2dfc9522436f730c3d753ca6c0578edc"
    )


def test_the_settings_build_the_static_embedder(tmp_path: Path) -> None:
    built = build_embedder(EmbedderSettings(kind="static"), None)
    assert isinstance(built, StaticEmbedder) and built.identity == "static:wordllama-l2-supercat/256"
    with pytest.raises(ConfigError, match='unknown static model "nope"; this build ships wordllama-l2-supercat'):
        build_embedder(EmbedderSettings(kind="static", model="nope"), None)


def test_a_missing_model_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("engines.local.static._loaded", {})
    real = importlib.util.find_spec
    monkeypatch.setattr(
        "engines.local.static.importlib.util.find_spec", lambda name: None if name == "wordllama" else real(name)
    )
    with pytest.raises(ConfigError, match="pip install wordllama"):
        StaticEmbedder()
