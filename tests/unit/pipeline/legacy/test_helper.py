"""The helper process of a migration (`pipeline.legacy.helper`): the batches it hands over are exactly those read
in place, rows and skips counted once; one that dies is replaced by reading in place; closing the migration stops
it. Each test starts one helper process (about half a second of CPU)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from contextlib import aclosing
from pathlib import Path

import pytest

from engines.contract import Namespace, Reach
from engines.reference import ReferenceEngine
from pipeline.legacy import Checkpoint, LegacySqliteError, LegacyWorkspace, ReadStats, migrate_with
from pipeline.legacy.batches import Batch
from pipeline.legacy.helper import HelperProcess, ReadPlan, read_batches
from pipeline.scrub import Policy
from tests.fixtures.legacy_workspace import V1Workspace, generated_workspace
from tests.unit.pipeline.legacy.test_migrate import held

PLAN = ReadPlan(Policy(), Namespace.parse("team:a"), 64)
READY_S = 60.0


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> V1Workspace:
    """About 450 items in five batches, with skipped rows (blank documents, events, dropped facets) among them."""
    ws = generated_workspace(tmp_path_factory.mktemp("helper") / "ws", 600)
    for n in range(0, 240, 9):
        ws.doc(f"doc-{n:06d}-blank", "document_notes", " \n ")
        ws.doc(f"doc-{n:06d}-event", "event_x", "an event row")
    for n in range(0, 60, 7):
        ws.facet(f"f{n:06d}-gone", "gone", f"k{n}", "v", state="dropped")
    return ws


def wire(batches: list[Batch]) -> list[tuple[list[str], object]]:
    return [([item.wire_json() for item in batch.items], batch.keys) for batch in batches]


async def in_place(ws: V1Workspace) -> tuple[list[Batch], ReadStats]:
    stats = ReadStats()
    with LegacyWorkspace.open(ws.root) as opened:
        async with aclosing(read_batches(opened, Checkpoint.START, PLAN, stats, None)) as batches:
            return [batch async for batch in batches], stats


async def started(opened: LegacyWorkspace) -> HelperProcess:
    helper = HelperProcess.start(opened, PLAN)
    assert helper is not None
    deadline = time.monotonic() + READY_S
    while not helper.ready():
        assert time.monotonic() < deadline, "the helper process did not start"
        await asyncio.sleep(0.01)
    return helper


async def test_the_helper_hands_over_exactly_the_batches_read_in_place(ws: V1Workspace) -> None:
    expected, expected_stats = await in_place(ws)
    assert len(expected) >= 4 and expected_stats.skipped_rows > 40
    stats = ReadStats()
    opened = LegacyWorkspace.open(ws.root)
    helper = await started(opened)
    got = []
    async with aclosing(read_batches(opened, Checkpoint.START, PLAN, stats, helper)) as batches:
        async for batch in batches:
            got.append(batch)
            # Read in place from now on, the next batch would fail: every later one is the helper's.
            opened.close()
    assert wire(got) == wire(expected)
    assert stats == expected_stats
    with pytest.raises(LegacySqliteError):
        list(opened.items())


async def test_a_helper_that_dies_is_replaced_by_reading_in_place(
    ws: V1Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    expected, expected_stats = await in_place(ws)
    stats = ReadStats()
    with LegacyWorkspace.open(ws.root) as opened:
        helper = await started(opened)
        got = []
        async with aclosing(read_batches(opened, Checkpoint.START, PLAN, stats, helper)) as batches:
            async for batch in batches:
                got.append(batch)
                if len(got) == 2:
                    os.kill(helper.pid, signal.SIGKILL)
    assert wire(got) == wire(expected)
    assert stats == expected_stats
    assert any(
        "helper process failed" in record.message for record in caplog.records if record.levelno >= logging.WARNING
    )


async def test_closing_the_batches_stops_the_helper(ws: V1Workspace) -> None:
    with LegacyWorkspace.open(ws.root) as opened:
        helper = await started(opened)
        async with aclosing(read_batches(opened, Checkpoint.START, PLAN, ReadStats(), helper)) as batches:
            await anext(batches)
            await anext(batches)  # the helper's
        with pytest.raises(ProcessLookupError):
            os.kill(helper.pid, 0)  # killed and reaped


async def test_a_migration_with_a_helper_stores_what_one_in_place_stores(ws: V1Workspace) -> None:
    outcomes = []
    for helper_from in (None, 0):
        engine, heard, stats = ReferenceEngine(), list[Checkpoint](), ReadStats()
        with LegacyWorkspace.open(ws.root) as opened:
            report = await migrate_with(
                engine, opened, None, heard.append, namespace=PLAN.namespace, stats=stats, helper_from=helper_from
            )
        outcomes.append((report, heard, stats, await held(engine, Reach.exact(PLAN.namespace))))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize(("cpus", "helped"), [(1, False), (2, True), (4, True)])
async def test_a_helper_reads_from_two_cpus_up(
    ws: V1Workspace, monkeypatch: pytest.MonkeyPatch, cpus: int, helped: bool
) -> None:
    started: list[LegacyWorkspace] = []

    def start(workspace: LegacyWorkspace, plan: ReadPlan) -> None:
        started.append(workspace)  # and no process: the migration reads in place

    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(cpus)))
    monkeypatch.setattr(HelperProcess, "start", start)
    with LegacyWorkspace.open(ws.root) as opened:
        report = await migrate_with(ReferenceEngine(), opened, None, lambda _: None, helper_from=1)
    assert report.stored > 0 and len(started) == int(helped)


async def test_a_helper_that_cannot_open_the_workspace_is_never_ready(tmp_path: Path) -> None:
    ws = generated_workspace(tmp_path / "ws", 10)
    with LegacyWorkspace.open(ws.root) as opened:
        ws.root.rename(tmp_path / "moved")  # the helper opens the workspace by its path, which is gone
        helper = HelperProcess.start(opened, PLAN)
        assert helper is not None
        deadline = time.monotonic() + READY_S
        while not helper._child.poll():  # until it has said why
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        assert not helper.ready()
        helper.close()
        async with aclosing(read_batches(opened, Checkpoint.START, PLAN, ReadStats(), helper)) as batches:
            assert sum([len(batch.items) async for batch in batches]) == len(list(opened.items()))
