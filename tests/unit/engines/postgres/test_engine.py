"""The PostgreSQL engine's own rules beyond the conformance suite: batches, replays, removals, the backlog's
claims, the schema's versions, the embedder's dimensions, faults and settings."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator, Sequence

import numpy as np
import psycopg
import pytest

from engines.contract import (
    ConfigError,
    Document,
    EngineError,
    EraseRequest,
    FetchMode,
    FetchRequest,
    ForgetTarget,
    ListRequest,
    MemoryMeta,
    MetaFilter,
    Namespace,
    Reach,
    UnavailableError,
)
from engines.local import HashingEmbedder, Vectors
from engines.postgres import PostgresEngine
from engines.postgres.schema import SCHEMA_VERSION, create_schema
from engines.registry import MemoryConfig, build_engine
from engines.settings import EngineCredential, EngineSettings, masked_endpoint


class CountingEmbedder:
    """A hashing embedder the engine does not know as cheap (so the backlog embeds), counting every text."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self._inner = HashingEmbedder(64)
        self._delay_s = delay_s
        self._lock = threading.Lock()
        self.texts: Counter[str] = Counter()

    @property
    def identity(self) -> str:
        return self._inner.identity

    @property
    def dimensions(self) -> int:
        return 64

    async def embed(self, texts: Sequence[str]) -> Vectors:
        with self._lock:
            self.texts.update(texts)
        if self._delay_s:
            await asyncio.sleep(self._delay_s)
        return await self._inner.embed(texts)


def _doc(n: int, workspace: str = "w", title: str | None = None) -> Document:
    meta = MemoryMeta(workspace=workspace)
    return Document.from_text(f"note {n} about replication number{n}", title=title, meta=meta)


def _count(url: str, sql: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(sql.encode()).fetchone()
        return int(row[0]) if row else -1


@pytest.fixture
def engine(postgres_url: str) -> Iterator[PostgresEngine]:
    engine = PostgresEngine(postgres_url, embedder=HashingEmbedder(64))
    yield engine
    engine.close()


async def test_a_replayed_batch_inserts_nothing(engine: PostgresEngine, postgres_url: str) -> None:
    docs = [_doc(n) for n in range(50)]
    first = await engine.store_many([*docs, docs[0]])
    assert [r.replayed for r in first] == [False] * 50 + [True]
    again = await engine.store_many(docs)
    assert all(r.replayed for r in again) and [r.id for r in again] == [r.id for r in first[:50]]
    assert _count(postgres_url, "SELECT count(*) FROM items") == 50
    assert _count(postgres_url, "SELECT count(*) FROM passage_vectors") == _count(
        postgres_url, "SELECT count(*) FROM passages"
    )


async def test_a_batch_failing_midway_stores_none_of_it(engine: PostgresEngine, postgres_url: str) -> None:
    await engine.store(_doc(0))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE items ADD CONSTRAINT no_poison CHECK (title IS DISTINCT FROM 'poison')")
    with pytest.raises(EngineError, match="23514"):
        await engine.store_many([_doc(1), _doc(2, title="poison"), _doc(3)])
    assert _count(postgres_url, "SELECT count(*) FROM items") == 1
    assert _count(postgres_url, "SELECT count(*) FROM passages") == 1


async def test_forget_and_erase_remove_every_row_of_their_items(engine: PostgresEngine, postgres_url: str) -> None:
    team = Namespace.parse("team:acme")
    kept = await engine.store(_doc(0, workspace="keep"))
    await engine.store_many([_doc(n, workspace="drop") for n in range(1, 6)])
    await engine.store(Document.from_text("team note", meta=MemoryMeta(namespace=team)))
    report = await engine.forget(ForgetTarget.by_filter(MetaFilter(workspace="drop")))
    assert report.forgotten == 5
    erased = await engine.erase(EraseRequest(reach=Reach.subtree(team)))
    assert erased.erased_scopes == 1
    listed = await engine.list(ListRequest(filter=MetaFilter(reach=Reach.subtree(Namespace.ROOT)), limit=10))
    assert [hit.id for hit in listed.items] == [kept.id]
    for table in ("items", "passages", "passage_vectors"):
        assert _count(postgres_url, f"SELECT count(*) FROM {table}") == 1, table
    assert _count(postgres_url, "SELECT last_value FROM deletions") == 2


async def test_two_backlogs_share_the_queue_and_embed_no_passage_twice(postgres_url: str) -> None:
    counting = [CountingEmbedder(delay_s=0.01), CountingEmbedder(delay_s=0.01)]
    writers = [PostgresEngine(postgres_url, embedder=embedder) for embedder in counting]
    try:
        for start in range(0, 400, 100):
            await writers[start // 100 % 2].store_many([_doc(n) for n in range(start, start + 100)])
        assert await writers[0].wait_for_vectors(timeout_s=60)
    finally:
        for writer in writers:
            writer.close()
    together = counting[0].texts + counting[1].texts
    passages = _count(postgres_url, "SELECT count(*) FROM passages")
    assert passages == 400 and sum(together.values()) == 400 and max(together.values()) == 1
    assert counting[0].texts and counting[1].texts  # both took part
    assert _count(postgres_url, "SELECT count(*) FROM passage_vectors") == 400


async def test_a_vector_read_finds_the_last_stored_item_before_the_backlog(postgres_url: str) -> None:
    engine = PostgresEngine(postgres_url, embedder=CountingEmbedder())
    engine._backlog.close()  # no backlog: only the read's promise can embed
    try:
        receipt = await engine.store(Document.from_text("zanzibar harbour ferries"))
        page = await engine.fetch(FetchRequest(query="zanzibar harbour ferries", mode=FetchMode.VECTOR, limit=3))
        assert [hit.id for hit in page.hits] == [receipt.id]
        assert _count(postgres_url, "SELECT count(*) FROM passage_vectors") == 1
    finally:
        engine.close()


async def test_an_older_schema_is_migrated_forward(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        create_schema(conn, version=1)
    engine = PostgresEngine(postgres_url, embedder=HashingEmbedder(64))
    try:
        await engine.store(_doc(1))
    finally:
        engine.close()
    assert _count(postgres_url, "SELECT max(version) FROM schema_version") == SCHEMA_VERSION
    assert _count(postgres_url, "SELECT count(*) FROM pg_indexes WHERE indexname = 'items_listing'") == 1
    tables = "SELECT count(*) FROM pg_tables WHERE tablename IN ('common_terms', 'champions', 'term_changes')"
    assert _count(postgres_url, tables) == 3


async def test_a_newer_schema_is_refused(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        create_schema(conn)
        conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    engine = PostgresEngine(postgres_url, embedder=HashingEmbedder(64))
    try:
        with pytest.raises(ConfigError, match=f"newer tinymemory \\(schema {SCHEMA_VERSION + 1}"):
            await engine.store(_doc(1))
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("other", "said"),
    [(HashingEmbedder(128), "holds vectors of 64 dimensions"), (CountingEmbedder(), None)],
)
async def test_an_embedder_of_other_vectors_is_refused(postgres_url: str, other: object, said: str | None) -> None:
    first = PostgresEngine(postgres_url, embedder=HashingEmbedder(64))
    await first.store(_doc(1))
    first.close()
    if said is None:  # same identity and size: the same vectors, welcome
        second = PostgresEngine(postgres_url, embedder=other)  # type: ignore[arg-type]
        second.settle()
        second.close()
        return
    second = PostgresEngine(postgres_url, embedder=other)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=said):
        second.settle()
    second.close()


async def test_another_embedder_of_the_same_size_is_refused(postgres_url: str) -> None:
    first = PostgresEngine(postgres_url, embedder=HashingEmbedder(64))
    first.settle()
    first.close()

    class Other(CountingEmbedder):
        @property
        def identity(self) -> str:
            return "other-model/64"

    second = PostgresEngine(postgres_url, embedder=Other())
    with pytest.raises(ConfigError, match="holds vectors of embedder hashing-ngram-v2/64, not other-model/64"):
        second.settle()
    second.close()


async def test_an_unreachable_database_is_unavailable(tmp_path: object) -> None:
    engine = PostgresEngine(f"postgresql://nobody:secret@/nowhere?host={tmp_path}", embedder=HashingEmbedder(64))
    try:
        with pytest.raises(UnavailableError) as raised:
            await engine.store(_doc(1))
        assert "secret" not in str(raised.value) and "nobody:***@" in str(raised.value)
        health = await engine.health()
        assert health.state == "down"
    finally:
        engine.close()


def test_a_server_without_pgvector_is_refused_saying_how_to_install_it() -> None:
    from engines.postgres import schema

    class NoPgvector:
        def execute(self, query: object, params: object = None) -> NoPgvector:
            return self

        def fetchone(self) -> None:
            return None

    with pytest.raises(ConfigError, match=r"lacks the pgvector extension.*install it on the server"):
        schema._ensure_pgvector(NoPgvector(), "postgresql://db")  # type: ignore[arg-type]


def test_a_password_is_masked_wherever_the_endpoint_is_shown() -> None:
    assert masked_endpoint("postgresql://app:s3cret@db:5432/tm") == "postgresql://app:***@db:5432/tm"
    assert masked_endpoint("postgresql://app@db/tm") == "postgresql://app@db/tm"


def test_the_registry_builds_it_from_settings_with_the_key_as_password(postgres_url: str) -> None:
    settings = EngineSettings(endpoint=postgres_url, embedder={"kind": "hashing", "dimensions": 64})
    engine = build_engine("postgres", settings, EngineCredential.of("pw"))
    try:
        assert isinstance(engine, PostgresEngine)
        assert engine.database.password_given
    finally:
        engine.close()
    config = MemoryConfig.from_toml('engine = "postgres"\n[engines.postgres]\nendpoint = "http://x"\n')
    with pytest.raises(ConfigError, match="postgresql://user@host:5432/database"):
        config.build()
    with pytest.raises(ConfigError, match="needs an endpoint"):
        build_engine("postgres", EngineSettings(), EngineCredential.none())


async def test_hits_carry_scores_and_vectors_are_unit_length(engine: PostgresEngine, postgres_url: str) -> None:
    await engine.store_many([_doc(n) for n in range(5)])
    page = await engine.fetch(FetchRequest(query="replication number3", mode=FetchMode.HYBRID, limit=5))
    assert page.hits[0].text.endswith("number3") and page.hits[0].score > page.hits[-1].score
    with psycopg.connect(postgres_url) as conn:
        norms = [row[0] for row in conn.execute("SELECT vector_norm(embedding) FROM passage_vectors")]
    assert np.allclose(norms, 1.0, atol=1e-5)


async def test_a_batch_is_listed_in_its_order_with_repeats_replayed(engine: PostgresEngine) -> None:
    docs = [_doc(n) for n in range(5)]
    receipts = await engine.store_many([docs[3], docs[1], docs[3], docs[4], docs[1]])
    assert [r.replayed for r in receipts] == [False, False, True, False, True]
    listed = await engine.list(ListRequest(limit=10))
    assert [hit.id for hit in listed.items] == [receipts[0].id, receipts[1].id, receipts[3].id]


async def test_the_vector_backlog_is_read_for_a_status(postgres_url: str) -> None:
    from worker.control import vector_backlog

    engine = PostgresEngine(postgres_url, embedder=CountingEmbedder())
    try:
        engine._backlog.close()  # nothing embeds: the stored passages wait
        await engine.store_many([_doc(n) for n in range(3)])
        status = await vector_backlog(engine)
        assert status is not None and status.waiting == 3 and status.rate_per_s is None
    finally:
        engine.close()
