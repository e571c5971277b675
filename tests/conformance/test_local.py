"""The local engine passes the conformance suite, alone, twice over one file, and as two tenants."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engines.conformance import run, run_isolation
from engines.local import HashingEmbedder, LocalEngine


@pytest.fixture
def memory_file(tmp_path: Path) -> Path:
    return tmp_path / "memory.sqlite3"


@pytest.fixture
def engine(memory_file: Path) -> Iterator[LocalEngine]:
    engine = LocalEngine(memory_file)
    yield engine
    engine.close()


async def test_local_engine_passes_run(engine: LocalEngine) -> None:
    await run(engine)


async def test_local_engine_passes_run_twice_on_one_file(engine: LocalEngine, memory_file: Path) -> None:
    await run(engine)
    reopened = LocalEngine(memory_file)
    try:
        await run(reopened)
    finally:
        reopened.close()


async def test_two_tenants_on_one_file_are_isolated(memory_file: Path) -> None:
    a = LocalEngine(memory_file, tenant="user-a")
    b = LocalEngine(memory_file, tenant="user-b")
    try:
        await run_isolation(a, b)
    finally:
        a.close()
        b.close()


async def test_small_passages_still_conform(memory_file: Path) -> None:
    # Conversations are cut into a passage per line: ranked reads must still give one hit per item.
    engine = LocalEngine(memory_file, passage_chars=48, embedder=HashingEmbedder(64))
    try:
        await run(engine)
    finally:
        engine.close()
