"""The PostgreSQL engine ranks as the local engine does: the same BM25 (FTS5's formula, Porter stems, the local
stop words), the same vectors searched by HNSW, and the same hybrid fusion, on one generated collection."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engines.contract import Document, FetchMode, FetchRequest, MemoryMeta, MetaFilter
from engines.local import HashingEmbedder, LocalEngine
from engines.postgres import PostgresEngine

VOCABULARY = [
    "deploy", "deploying", "deployment", "cluster", "clusters", "backup", "restore", "index", "indexes", "vector",
    "query", "queries", "latency", "replica", "replication", "failover", "postgres", "memory", "worker", "workers",
    "queue", "retry", "retries", "timeout", "checkpoint", "schema", "migration", "rollback", "snapshot", "volume",
    "the", "of", "and", "to", "how", "what", "is", "café", "naïve", "résumé",
]  # fmt: skip
QUERIES = [
    "how to deploy a cluster",
    "backup and restore",
    "replica failover latency",
    "vector index queries",
    "what is the retry timeout",
    "cafe resume",
    "schema migrations rollback",
    "worker queue",
    "deploying résumé",  # one of the commonest words and one of the rarest: the rare one's passages suffice
]
DOCUMENTS = 240


def _documents(seed: int = 7) -> list[Document]:
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(VOCABULARY))]
    docs = []
    for n in range(DOCUMENTS):
        words = rng.choices(VOCABULARY, weights, k=rng.randint(8, 80))
        meta = MemoryMeta(workspace="search", tags=[f"group-{n % 3}"])
        docs.append(Document.from_text(" ".join(words), title=f"note {n}", meta=meta))
    return docs


@pytest.fixture
async def engines(postgres_url: str, tmp_path: Path) -> AsyncIterator[tuple[LocalEngine, PostgresEngine]]:
    local = LocalEngine(tmp_path / "memory.sqlite3", embedder=HashingEmbedder(64))
    remote = PostgresEngine(postgres_url, embedder=HashingEmbedder(64))
    docs = _documents()
    for start in range(0, len(docs), 100):
        await local.store_many(docs[start : start + 100])
        await remote.store_many(docs[start : start + 100])
    yield local, remote
    local.close()
    remote.close()


async def _ranked(engine: LocalEngine | PostgresEngine, query: str, mode: FetchMode, filter: MetaFilter) -> list:
    page = await engine.fetch(FetchRequest(query=query, mode=mode, filter=filter, limit=10))
    return [(hit.id, hit.score) for hit in page.hits]


@pytest.mark.parametrize("filter", [MetaFilter(workspace="search"), MetaFilter(tags_any=["group-1"])])
async def test_keyword_scores_are_the_local_engines_bm25(
    engines: tuple[LocalEngine, PostgresEngine], filter: MetaFilter
) -> None:
    local, remote = engines
    for query in QUERIES:
        expected = await _ranked(local, query, FetchMode.KEYWORD, filter)
        got = await _ranked(remote, query, FetchMode.KEYWORD, filter)
        assert expected, query
        assert [item for item, _ in got] == [item for item, _ in expected], query
        assert [score for _, score in got] == pytest.approx([score for _, score in expected], rel=1e-6), query


@pytest.mark.parametrize("mode", [FetchMode.VECTOR, FetchMode.HYBRID])
async def test_vector_and_hybrid_rank_as_the_local_engine(
    engines: tuple[LocalEngine, PostgresEngine], mode: FetchMode
) -> None:
    local, remote = engines
    found = 0
    for query in QUERIES:
        expected = await _ranked(local, query, mode, MetaFilter(workspace="search"))
        got = await _ranked(remote, query, mode, MetaFilter(workspace="search"))
        found += len(expected)
        # float32 in numpy against float4 in pgvector: equal to about 1e-6, so tied items may come in either order.
        scores = [score for _, score in expected]
        assert [score for _, score in got] == pytest.approx(scores, abs=1e-5), query
        untied = [n for n, score in enumerate(scores) if sum(abs(score - other) < 1e-5 for other in scores) == 1]
        assert [got[n][0] for n in untied] == [expected[n][0] for n in untied], query
    assert found >= len(QUERIES) * 5


async def test_stop_words_alone_still_search(engines: tuple[LocalEngine, PostgresEngine]) -> None:
    local, remote = engines
    filter = MetaFilter(workspace="search")
    expected = await _ranked(local, "how is the", FetchMode.KEYWORD, filter)
    got = await _ranked(remote, "how is the", FetchMode.KEYWORD, filter)
    assert got and [item for item, _ in got] == [item for item, _ in expected]
