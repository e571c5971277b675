"""`tinymemory up` syncs sources with an interval as beat does: the due ones, each tick, and a failure waits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rich.progress import Progress

from engines.contract import UnavailableError
from sources import SourceEntry
from tinymemory_ingest.cli.ingest import BarProgress, _OneAtATime, _poll_intervals
from worker.records import SyncOutcome, SyncReport
from worker.settings import Settings
from worker.state.sqlite import SqliteStateStore


@dataclass
class FakeRuntime:
    """What the poller reads of an embedded runtime: its settings and state, and the syncs it asks for."""

    settings: Settings
    state: SqliteStateStore
    asked: list[str] = field(default_factory=list)
    failing: set[str] = field(default_factory=set)

    async def request_sync(self, source_id: str, hints: Iterable[str] | None = None) -> SyncOutcome:
        self.asked.append(source_id)
        if source_id in self.failing:
            # As a real sync does when its listing fails: the failure is recorded, then raised.
            self.state.record_sync(SyncReport(source_id=source_id, error="UnavailableError: down"))
            raise UnavailableError("feed.example is down")
        report = SyncReport(source_id=source_id)
        self.state.record_sync(report)
        return SyncOutcome(source_id=source_id, status="synced", report=report)


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[FakeRuntime]:
    state = SqliteStateStore(tmp_path / "state.sqlite3")
    yield FakeRuntime(Settings(data_dir=tmp_path, beat_tick_s=0.02), state)
    state.close()


async def test_due_sources_are_synced_each_tick_and_a_failing_one_waits_its_interval(runtime: FakeRuntime) -> None:
    runtime.state.put_source(SourceEntry(id="feed", kind="rss_feed", label="f", url="https://e.x/f", interval_s=0.1))
    runtime.state.put_source(SourceEntry(id="down", kind="web_page", label="d", url="https://e.x/d", interval_s=0.1))
    runtime.state.put_source(SourceEntry(id="notes", kind="folder", label="n", path="/notes"))  # no interval
    runtime.state.put_source(
        SourceEntry(id="off", kind="web_page", label="o", url="https://e.x/o", interval_s=0.1, enabled=False)
    )
    runtime.failing = {"down"}
    poller = asyncio.create_task(
        _poll_intervals(runtime, _OneAtATime(runtime), BarProgress(Progress()))  # type: ignore[arg-type]
    )
    await asyncio.sleep(0.55)
    assert not poller.done(), poller.exception()
    poller.cancel()
    asked = runtime.asked
    assert "notes" not in asked and "off" not in asked
    # Each interval source about every 0.1 s, whatever the 0.02 s tick: a failure is not retried each tick.
    assert 2 <= asked.count("feed") <= 7 and 2 <= asked.count("down") <= 7
