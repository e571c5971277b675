"""The PostgreSQL engine passes the conformance suite, alone, twice over one database, and as two tenants."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engines.conformance import run, run_isolation
from engines.local import HashingEmbedder
from engines.postgres import PostgresEngine


@pytest.fixture
def engine(postgres_url: str) -> Iterator[PostgresEngine]:
    engine = PostgresEngine(postgres_url, embedder=HashingEmbedder(64))
    yield engine
    engine.close()


async def test_postgres_engine_passes_run(engine: PostgresEngine) -> None:
    await run(engine)


async def test_postgres_engine_passes_run_twice_on_one_database(engine: PostgresEngine, postgres_url: str) -> None:
    await run(engine)
    reopened = PostgresEngine(postgres_url, embedder=HashingEmbedder(64))
    try:
        await run(reopened)
    finally:
        reopened.close()


async def test_two_tenants_on_one_database_are_isolated(postgres_url: str) -> None:
    a = PostgresEngine(postgres_url, tenant="user-a", embedder=HashingEmbedder(64))
    b = PostgresEngine(postgres_url, tenant="user-b", embedder=HashingEmbedder(64))
    try:
        await run_isolation(a, b)
    finally:
        a.close()
        b.close()


async def test_the_default_embedder_conforms_with_its_vectors_from_the_backlog(postgres_url: str) -> None:
    # MiniLM embeds in the backlog, so reads meet items still waiting for vectors (keyword stands in for them).
    engine = PostgresEngine(postgres_url)
    try:
        await run(engine)
    finally:
        engine.close()


async def test_small_passages_still_conform(postgres_url: str) -> None:
    engine = PostgresEngine(postgres_url, passage_chars=48, embedder=HashingEmbedder(64))
    try:
        await run(engine)
    finally:
        engine.close()
