"""Engine outages of 20 s in the middle of a backfill, both at once: the local engine's file locked by another
process under real Celery workers, and the CortexDB double holding every request past the client's timeout.
Nothing is lost, nothing is stored twice, nothing is dead-lettered, the workers stay up, and each backfill
completes once its outage ends. (The two run side by side because each outage is mostly waiting.)

The CortexDB backfill runs in the embedded runtime, in this process, so that the engine's 60 s request timeout
can be lowered for the test (it is a constant of `engines.cortex.pool`, not a setting): the double holds each
request twice that long, then applies and answers it (a write whose outcome the client cannot know). Its count
is read through the double's own listing route (`listed_items` of the CortexDB pipeline test).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import SecretStr

from engines.cortex import CortexEngine, pool
from engines.settings import EngineSettings
from sources import SourceRequest
from tests.integration.cluster import Cluster, cluster_fixture, worker_children, write_notes
from tests.integration.test_cortex_pipeline import listed_items
from tests.reliability.conftest import Figures, until
from tests.reliability.figures import exactly_once
from tinymemory_ingest.cortex_double import CortexDouble, DoubleConfig, serve
from worker import control
from worker.embedded import EmbeddedRuntime
from worker.settings import Settings
from worker.wiring import open_engine

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OUTAGE_S = 20.0
CLIENT_TIMEOUT_S = 1.0
CORTEX_FILES = 600
LOCAL_FILES = 1_500
# The longest either side waits for the other to be ready.
READY_S = 90.0
# Started before the backfill and told when to lock, so that the lock lands within milliseconds of the first
# commit: a backfill of small notes commits in a couple of seconds, less than a loaded machine takes to start
# a Python process.
LOCKER = """
import sqlite3, sys, time
print("ready", flush=True)
sys.stdin.readline()
conn = sqlite3.connect(sys.argv[1], timeout=60, isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


@dataclass
class Tally:
    """How one backfill through an outage ended."""

    outage: str
    files: int
    lost: int
    duplicated: int
    letters: list[str]
    committed: tuple[int, int]  # units committed when the outage began, and when it ended
    took_s: float
    detail: str
    survived: bool = True  # the workers that ran it are the ones that started it, alive

    def lines(self) -> tuple[str, str]:
        begin, end = self.committed
        return (
            f"{self.outage}: items lost: {self.lost}; duplicated: {self.duplicated}; "
            f"dead letters: {len(self.letters)}; {self.detail}",
            f"{self.files} files; {begin} committed when the {OUTAGE_S:g} s outage began, {end} when it ended; "
            f"backfill {self.took_s:.0f} s",
        )

    def check(self) -> None:
        assert self.committed[0] > 0 and self.committed[1] < self.files, (
            f"{self.outage}: the outage did not land mid-backfill, the test proves little"
        )
        assert (self.lost, self.duplicated, self.letters) == (0, 0, []), self.outage
        assert self.survived, f"{self.outage}: {self.detail}"


class Outage:
    """Every request to the double held past the client's timeout, from `begin()` for `OUTAGE_S`."""

    def __init__(self, double: CortexDouble) -> None:
        self.double = double
        self.timer = threading.Timer(OUTAGE_S, double.faults.clear)
        self._first = self.requests = 0

    def begin(self) -> None:
        self.double.faults.delay(2 * CLIENT_TIMEOUT_S)
        self._first = len(self.double.requests)
        self.timer.start()

    def join(self) -> None:
        self.timer.join()
        self.requests = len(self.double.requests) - self._first


async def _cortex_through_timeouts(tmp_path: Path, double: CortexDouble, url: str, go: threading.Event) -> Tally:
    folder = tmp_path / "cortex-notes"
    write_notes(folder, CORTEX_FILES)
    settings = Settings(
        data_dir=tmp_path / "cortex-data",
        convert_workers=1,
        engine="cortexdb",
        engines={"cortexdb": EngineSettings(endpoint=url)},
        engine_key=SecretStr("k"),
    )
    engine = open_engine(settings)
    assert isinstance(engine, CortexEngine)
    try:
        with EmbeddedRuntime(settings, engine=engine) as runtime:
            state = runtime.state
            source_id = control.add_source(state, SourceRequest(kind="folder", target=str(folder))).id
            assert await asyncio.to_thread(go.wait, READY_S), "the Celery worker never started"
            started = time.monotonic()
            backfill = asyncio.create_task(runtime.sync(source_id))
            await until(lambda: bool(state.unit_states(source_id)) or backfill.done(), 60, "the backfill under way")
            outage = Outage(double)
            outage.begin()
            at_begin = len(state.unit_states(source_id))
            await asyncio.to_thread(outage.join)
            at_end = len(state.unit_states(source_id))
            await backfill
            took = time.monotonic() - started
            letters = [f"{d.unit_id}: {d.message}" for d in state.dead_letters(source_id)]
    finally:
        await engine.aclose()  # in this loop, which opened its connections
    events, per_item = await asyncio.to_thread(listed_items, url)
    return Tally(
        outage="CortexDB timing out",
        files=CORTEX_FILES,
        lost=CORTEX_FILES - len(per_item),
        duplicated=events - len(per_item),
        letters=letters,
        committed=(at_begin, at_end),
        took_s=took,
        detail=f"{outage.requests} requests held {2 * CLIENT_TIMEOUT_S:g} s (client timeout {CLIENT_TIMEOUT_S:g} s)",
    )


class FileLock:
    """Another process holding `BEGIN EXCLUSIVE` on a SQLite file for `OUTAGE_S` (a backup tool, a stray shell)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.process: subprocess.Popen[str] | None = None

    def prepare(self) -> None:
        """Start the locker (the file may not exist yet), ready to lock at once."""
        command = [sys.executable, "-c", LOCKER, str(self.path), str(OUTAGE_S)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None and self.process.stdout.readline().strip() == "ready"

    def begin(self) -> None:
        assert self.process is not None and self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("lock\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "locked"

    def join(self) -> None:
        assert self.process is not None
        self.process.communicate(timeout=OUTAGE_S + 30)
        assert self.process.returncode == 0


def _local_through_a_lock(cluster: Cluster, folder: Path, go: threading.Event) -> Tally:
    write_notes(folder, LOCAL_FILES)
    cluster.add_folder("notes", folder)
    try:
        worker = cluster.start_worker(concurrency=2)
        cluster.wait(lambda: bool(worker_children(worker)), READY_S, "the worker started")
    finally:
        go.set()
    pools = set(worker_children(worker))
    lock = FileLock(cluster.data_dir / "memory.sqlite3")
    lock.prepare()
    started = time.monotonic()
    assert cluster.sync("notes")
    cluster.wait(lambda: cluster.committed("notes") > 0, 60, "the backfill under way")
    lock.begin()
    at_begin = cluster.committed("notes")
    lock.join()
    at_end = cluster.committed("notes")
    cluster.wait_done("notes", LOCAL_FILES, within_s=120)
    took = time.monotonic() - started
    lost, duplicated = exactly_once((str(p.resolve()) for p in folder.rglob("*.md")), cluster.items("notes"))
    alive = worker.poll() is None
    replaced = len(pools - set(worker_children(worker)))
    return Tally(
        outage="local engine file locked",
        files=LOCAL_FILES,
        lost=lost,
        duplicated=duplicated,
        letters=[f"{d.unit_id}: {d.message}" for d in cluster.state().dead_letters("notes")],
        committed=(at_begin, at_end),
        took_s=took,
        detail=f"worker alive: {alive}, pool processes replaced: {replaced}",
        survived=alive and replaced == 0,
    )


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)


async def test_engine_outages_of_20_s_lose_duplicate_and_dead_letter_nothing(
    cluster: Cluster, tmp_path: Path, figures: Figures, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pool, "REQUEST_TIMEOUT_S", CLIENT_TIMEOUT_S)
    double = CortexDouble(DoubleConfig())
    go = threading.Event()  # set once the Celery worker is up, so both backfills (and outages) run together
    with serve(double) as url:
        local, cortex = await asyncio.gather(
            asyncio.to_thread(_local_through_a_lock, cluster, tmp_path / "notes", go),
            _cortex_through_timeouts(tmp_path, double, url, go),
        )
    for tally in (local, cortex):
        figures(*tally.lines())
    local.check()
    cortex.check()
