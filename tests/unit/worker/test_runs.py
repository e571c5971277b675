"""Live runs: an embedded runtime counts each sync's units and items as its batches finish, two syncs at once
count apart, old finished runs are let go; on Redis a queued sync is a run every worker counts into."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from tests.fixtures.redis_servers import RedisTarget
from worker import control
from worker.embedded.runtime import EmbeddedRuntime
from worker.jobs import Progress
from worker.records import now
from worker.redis.progress import RunProgress
from worker.runs import LiveRuns, RunView
from worker.settings import Settings


class Recording(Progress):
    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def planned(self, units: int) -> None:
        self.events.append(("planned", units))

    def advanced(self, units: int = 0, items: int = 0, failed: int = 0) -> None:
        self.events.append(("advanced", units))


def _view(**fields: object) -> RunView:
    started = now()
    base: dict[str, object] = {
        "id": "r",
        "source_id": "notes",
        "planned": 10,
        "done": 0,
        "items": 0,
        "failed": 0,
        "started_at": started,
        "updated_at": started,
    }
    return RunView.model_validate({**base, **fields})


def test_a_view_says_how_far_how_fast_and_how_long_is_left() -> None:
    started = now()
    view = _view(done=3, failed=1, items=40, started_at=started, updated_at=started + timedelta(seconds=8))
    assert (view.percent, view.finished) == (40, False)
    assert view.items_per_s == pytest.approx(5.0)
    assert view.eta_s == pytest.approx(12.0)  # 6 units left at 2 s a unit
    assert _view(planned=None).percent == 0 and _view(planned=None).eta_s is None
    assert _view(done=10).finished and _view(done=10).percent == 100 and _view(done=10).eta_s is None
    assert _view(planned=0).finished  # nothing to do is done at once


async def test_each_tracked_sync_counts_its_own_batches_and_passes_them_on() -> None:
    inner = Recording()
    live = LiveRuns(inner)

    async def sync(source_id: str, units: int) -> None:
        with live.track(source_id):
            live.planned(units)
            await asyncio.sleep(0)

            async def batch() -> None:  # a task the sync creates, as the dispatcher's batches are
                live.advanced(units=units, items=units * 2)

            await asyncio.create_task(batch())

    await asyncio.gather(sync("a", 3), sync("b", 5))
    live.advanced(units=99)  # outside any run: passed on, counted nowhere
    counted = {v.source_id: (v.planned, v.done, v.items, v.finished) for v in live.runs()}
    assert counted == {"a": (3, 3, 6, True), "b": (5, 5, 10, True)}
    assert ("advanced", 99) in inner.events and ("planned", 5) in inner.events


def test_running_runs_come_first_and_only_the_newest_finished_are_kept() -> None:
    live = LiveRuns(keep=2)
    for n in range(4):
        with live.track(f"done-{n}"):
            pass
    with live.track("running"):
        shown = live.runs()
        assert [v.source_id for v in shown] == ["running", "done-3", "done-2"]
        assert not shown[0].finished and shown[1].finished


async def test_an_embedded_sync_is_a_run_that_reaches_its_plan(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for n in range(7):
        (folder / f"n{n}.md").write_text(f"# Note {n}\n\nwombat {n}\n")
    with EmbeddedRuntime(Settings(data_dir=tmp_path / "data", convert_workers=1, engine="reference")) as runtime:
        entry = control.ensure_local_source(runtime.state, folder)
        await runtime.sync(entry.id)
        (run,) = control.runs(runtime)
    assert (run.source_id, run.planned, run.done, run.failed, run.percent) == (entry.id, 7, 7, 0, 100)
    assert run.items >= 7 and run.finished_at is not None


async def test_a_queued_sync_is_a_run_of_its_source(redis_target: RedisTarget) -> None:
    progress = RunProgress(redis_target.client, redis_target.prefix, ttl_s=100)
    older = progress.start(source_id="a")
    newer = progress.start(source_id="b", units=4)
    progress.advance(newer, units=4, items=9)
    listed = progress.runs()
    assert [(p.run_id, p.source_id) for p in listed] == [(newer, "b"), (older, "a")]
    assert listed[0].finished and listed[0].updated >= listed[0].started
    progress.drop(older)
    assert [p.run_id for p in progress.runs()] == [newer]
    progress.drop(newer)


def test_a_runner_without_runs_shows_none() -> None:
    assert control.runs(object()) == []
