"""`tinymemory ingest` waits for the engine's background vectors before it returns (`--no-wait-vectors`
does not), with their progress on standard error, and stops waiting for an embedder that makes none."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from engines.contract import EngineHealth, MemoryEngine
from engines.local import LocalEngine
from engines.reference import ReferenceEngine
from tests.integration.test_local_openai import DIMENSIONS, FakeOpenAI, server
from tinymemory_ingest.cli import app
from tinymemory_ingest.cli import ingest as ingest_cli

__all__ = ["server"]  # the loopback embeddings server, a fixture


class Queue:
    """The part of an engine `wait_for_vectors` uses, with a backlog that takes the given sizes in turn."""

    def __init__(self, sizes: list[int], reason: str | None = None) -> None:
        self.sizes, self.reason, self.waits = sizes, reason, 0

    async def vector_backlog(self) -> int:
        return self.sizes[0] if len(self.sizes) == 1 else self.sizes.pop(0)

    async def wait_for_vectors(self, timeout_s: float = 60.0) -> bool:
        self.waits += 1
        return False

    async def health(self) -> EngineHealth:
        return EngineHealth.degraded(self.reason) if self.reason else EngineHealth.ok()


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> Iterator[Console]:
    """What the command says on standard error, recorded."""
    console = Console(record=True, width=400)
    monkeypatch.setattr(ingest_cli, "console", console)
    yield console


async def _wait(queue: Queue, stall_s: float = 5.0) -> int:
    return await ingest_cli.wait_for_vectors(queue, quiet=False, stall_s=stall_s)  # type: ignore[arg-type]


async def test_the_wait_lasts_until_the_queue_is_empty(said: Console) -> None:
    queue = Queue([40, 40, 25, 30, 3, 0])  # another process queues 5 more meanwhile
    assert await _wait(queue) == 0
    assert queue.waits == 5
    assert "vectors: 45 passages embedded in" in said.export_text()


async def test_the_wait_gives_up_on_a_queue_that_does_not_shrink(said: Console) -> None:
    queue = Queue([12, 9, 9], reason="the /embeddings endpoint is unreachable")
    assert await _wait(queue, stall_s=0.3) == 9
    text = said.export_text()
    assert "9 of 12 passages still wait for their vectors (none embedded for 0.3 s: the /embeddings" in text
    assert "the next time this memory is opened" in text


async def test_nothing_to_wait_for(said: Console) -> None:
    empty = Queue([0])
    assert await _wait(empty) == 0 and empty.waits == 0
    engine: MemoryEngine = ReferenceEngine()  # no background vectors at all
    assert await ingest_cli.wait_for_vectors(engine, quiet=False) == 0
    assert said.export_text() == ""


# --- the command, on the local engine with an embeddings server on loopback -----------------------------


def _folder(root: Path, files: int) -> Path:
    folder = root / "notes"
    folder.mkdir()
    for n in range(files):
        (folder / f"n{n:03}.md").write_text(f"# Note {n}\n\nThe quarzite sample {n} sits beside okapi {n}.\n")
    return folder


def _left(data: Path) -> int:
    engine = LocalEngine(data / "memory.sqlite3")  # counting opens no backlog of its own
    try:
        return asyncio.run(engine.vector_backlog())
    finally:
        engine.close()


@pytest.fixture
def ingest(tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The environment of an ingest embedding through `server`, down until the sync is over; the backlog
    each wait found when it began."""
    for name, value in {
        "TINYMEMORY_DATA_DIR": str(tmp_path / "data"),
        "TINYMEMORY_CONVERT_WORKERS": "1",
        "TINYMEMORY_ENGINES__LOCAL__EMBEDDER__KIND": "openai",
        "TINYMEMORY_ENGINES__LOCAL__EMBEDDER__ENDPOINT": server,
        "TINYMEMORY_ENGINES__LOCAL__EMBEDDER__MODEL": "fake",
        "TINYMEMORY_ENGINES__LOCAL__EMBEDDER__DIMENSIONS": str(DIMENSIONS),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("TINYMEMORY_CONFIG", raising=False)
    FakeOpenAI.status = 503  # nothing is embedded while the files are ingested
    found: list[int] = []
    real = ingest_cli.wait_for_vectors

    async def waiting(engine: MemoryEngine, *, quiet: bool, stall_s: float = 60.0) -> int:
        assert isinstance(engine, ingest_cli.VectorQueue)
        found.append(await engine.vector_backlog())
        FakeOpenAI.status = 200  # the embedder is back as the wait begins
        return await real(engine, quiet=quiet, stall_s=stall_s)

    monkeypatch.setattr(ingest_cli, "wait_for_vectors", waiting)
    yield found


@pytest.mark.integration
def test_ingest_returns_once_every_vector_is_embedded(tmp_path: Path, ingest: list[int]) -> None:
    folder = _folder(tmp_path, 150)
    result = CliRunner().invoke(app, ["ingest", str(folder)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (queued,) = ingest
    assert queued >= 100  # all but the last item of each store_many waited for the backlog
    assert f"vectors: {queued} passages embedded" in result.stderr
    assert _left(tmp_path / "data") == 0


@pytest.mark.integration
def test_no_wait_vectors_leaves_them_queued(tmp_path: Path, ingest: list[int]) -> None:
    folder = _folder(tmp_path, 150)
    result = CliRunner().invoke(app, ["ingest", str(folder), "--no-wait-vectors"], catch_exceptions=False)
    assert result.exit_code == 0 and ingest == []
    assert "vectors:" not in result.stderr
    assert _left(tmp_path / "data") >= 100  # the embedder was never back: they wait for the next open
