"""Text units prepared in the text pool's processes end exactly as they would in the batch's own
process: the same items, the same dead letters, the same redactions; a dead pool process costs
nothing but time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from engines.contract import ListRequest
from pipeline.scrub import SanitizationReport
from tests.fixtures.documents import pdf_bytes
from tests.fixtures.processes import alive, wait_gone
from worker.control import ensure_local_source
from worker.embedded import TextPool
from worker.embedded.runtime import EmbeddedRuntime
from worker.jobs import MIN_TEXT_UNITS as MIN_UNITS
from worker.jobs.context import Progress
from worker.settings import Settings

pytestmark = pytest.mark.e2e


class Tally(Progress):
    def __init__(self) -> None:
        self.redactions: Counter[str] = Counter()

    def redacted(self, report: SanitizationReport) -> None:
        self.redactions["blocked"] += report.blocked_secret_hits
        self.redactions["text"] += report.text_redactions
        self.redactions["pii"] += report.pii_redactions


def _folder(root: Path, count: int) -> None:
    for n in range(count):
        kind = ("md", "txt", "py")[n % 3]
        body = f"note {n} about the okapi number {n}\n"
        if n % 7 == 0:
            body += "password: hunter2 and SSN 123-45-6789\n"
        (root / f"d{n % 4}").mkdir(parents=True, exist_ok=True)
        (root / f"d{n % 4}" / f"note{n:03}.{kind}").write_text(body, encoding="utf-8")
    (root / "looks-like-text.md").write_bytes(pdf_bytes(["The pdf in disguise, page one"]))
    (root / "noise.md").write_bytes(os.urandom(4096).replace(b"\n", b"\x00") + b"\xff\xfe")
    with (root / "huge.log").open("wb") as sparse:
        sparse.truncate(11 * 1024 * 1024)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    _folder(root, 3 * MIN_UNITS)
    return root


def _runtime(data_dir: Path, progress: Progress, pool: TextPool | None) -> EmbeddedRuntime:
    runtime = EmbeddedRuntime(Settings(data_dir=data_dir, convert_workers=1, convert_timeout_s=30), progress)
    runtime.text_pool.close()
    runtime.context.text_pool = pool
    return runtime


async def _ingest(runtime: EmbeddedRuntime, folder: Path) -> tuple[set[str], set[tuple[str, str, str]]]:
    entry = ensure_local_source(runtime.state, folder)
    await runtime.sync(entry.id)
    ids: set[str] = set()
    cursor = None
    while True:
        page = await runtime.engine.list(ListRequest(limit=200, cursor=cursor))
        ids.update(hit.id for hit in page.items)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    letters = {(d.unit_id, d.stage, d.message) for d in runtime.state.dead_letters(entry.id)}
    return ids, letters


@pytest.fixture
def pool() -> Iterator[TextPool]:
    pool = TextPool(1)
    pool.warm()
    yield pool
    pool.close()


async def test_the_pool_prepares_exactly_what_the_batch_process_would(
    folder: Path, tmp_path: Path, pool: TextPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared_there: list[str] = []
    original = TextPool.prepare

    async def spied(self: TextPool, job):  # type: ignore[no-untyped-def]
        done = await original(self, job)
        prepared_there.extend(unit.change.unit_id for unit in done or [])
        return done

    monkeypatch.setattr(TextPool, "prepare", spied)
    here, there = Tally(), Tally()
    with _runtime(tmp_path / "inline", here, None) as inline:
        expected_ids, expected_letters = await _ingest(inline, folder)
    with _runtime(tmp_path / "pooled", there, pool) as pooled:
        ids, letters = await _ingest(pooled, folder)

    assert len(prepared_there) == 3 * MIN_UNITS + 2  # every text unit (the huge one is refused at listing)
    assert ids == expected_ids
    assert len(ids) == 3 * MIN_UNITS + 1  # the notes, and the PDF named .md, converted after all
    assert letters == expected_letters
    assert {(unit, stage) for unit, stage, _ in letters} == {("noise.md", "convert"), ("huge.log", "list")}
    assert there.redactions == here.redactions
    assert there.redactions["text"] > 0 and there.redactions["pii"] > 0


async def test_a_killed_pool_process_costs_nothing_and_the_pool_starts_again(
    folder: Path, tmp_path: Path, pool: TextPool
) -> None:
    killed = pool.pids
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    with _runtime(tmp_path / "data", Progress(), pool) as runtime:
        ids, letters = await _ingest(runtime, folder)
        assert len(ids) == 3 * MIN_UNITS + 1
        assert {unit for unit, _, _ in letters} == {"noise.md", "huge.log"}
        # The broken pool was dropped; the next backfill batch starts it again in the background.
        assert not pool.ready
        _folder(tmp_path / "more", 2 * MIN_UNITS)
        await _ingest(runtime, tmp_path / "more")
        pool.warm()
        assert pool.ready and pool.pids and not set(pool.pids) & set(killed)


def test_pool_processes_exit_when_their_parent_is_killed() -> None:
    script = "from worker.embedded import TextPool\np = TextPool(2)\np.warm()\nprint(*p.pids, flush=True)\ninput()\n"
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as parent:
        assert parent.stdout is not None
        pids = [int(pid) for pid in parent.stdout.readline().split()]
        assert pids and all(alive(pid) for pid in pids)
        parent.kill()
        parent.wait(timeout=10)
    assert wait_gone(pids) == []
