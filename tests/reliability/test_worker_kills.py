"""A 2,000-file folder backfill through two real Celery workers, each SIGKILLed whole again and again (its process
group: the worker, its pool process and that one's converters) and restarted at once, as a supervisor would. Once
the queues have drained, every file is stored exactly once and nothing is left queued, unacknowledged, leased or
dead-lettered, nor any process of a killed worker.

Where a dead worker's messages go (kombu 5.7, `kombu/transport/redis.py`). A delivered message waits in the
`unacked` hash, indexed by its delivery time in `unacked_index`, until its worker acknowledges it (late acks: when
its task ends). A whole worker's death is seen by no one: `QoS.restore_visible` puts back every message delivered
more than the visibility timeout ago. A worker sweeps as it starts, at its first empty poll of the broker (while
Celery's mingle step waits for its neighbours: `MultiChannelPoller.get`), then every `unacked_restore_interval`
(10 s), but scanning only on every `unacked_restore_throttle`-th (10th) call: every 100 s. So whenever nothing is
left but dead workers' messages, the test reads when the newest was delivered and, once that is past the timeout,
restarts a worker, which puts them back as it starts: no fixed sleep, no 100 s wait.

The task limits are lowered (soft 6 s, hard 7 s, where a batch of these notes takes 0.2 to 1 s, and 2.5 s at most
under a load of 4, measured) so that the visibility timeout, which must exceed the hard limit
(`worker/cluster/celery_app.py`), can be 8 s. Pool processes are not killed here
(`tests/integration/test_celery_pipeline.py` and `test_github_kills.py` do, under the default limits): one killed
as it starts a task is at times noticed by its worker only about 4 s later (measured), which races so short a hard
limit, at which Celery acknowledges the task as failed (`acks_on_timeout`).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import cast

import pytest

from sources import REGISTRY, SourceRequest
from tests.integration.cluster import Cluster, cluster_fixture, worker_children
from tests.reliability.conftest import Figures, job_holds, redis_ms, stuck_after_kills
from tests.reliability.figures import exactly_once
from tests.reliability.github_pages import REPO, SlowGitHub, page_path, pages_repo
from worker.cluster.queues import INGEST_TASK, SYNC_TASK
from worker.redis.keys import Keys

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FILES = 2_000
PARAGRAPHS = 80
SOURCE = "notes"
CONCURRENCY = (1, 1)  # the pool processes of each worker slot: one each, so that a worker holds one message at most
# Each kill lands on a worker holding a message of the task named, once that many files are committed: the first
# in the sync (which holds the sync lease), the others in the batches it queued, before the first is committed and
# after.
PLAN = (
    (SYNC_TASK, 0),
    (INGEST_TASK, 0),
    (INGEST_TASK, 100),
    (INGEST_TASK, 300),
    (INGEST_TASK, 500),
    (INGEST_TASK, 700),
)
# A GitHub repository's sync lists one tree, too quickly to be caught: every kill lands in its batches, each of
# 100 blob reads answered `BLOB_DELAY_S` late (about 2.5 s a batch).
GITHUB_FILES = 500
GITHUB_SOURCE = "gh"
GITHUB_PLAN = ((INGEST_TASK, 0), (INGEST_TASK, 0), (INGEST_TASK, 100), (INGEST_TASK, 200), (INGEST_TASK, 300))


@dataclass(frozen=True)
class Backfill:
    """What the workers back-fill while they are killed: a source of `files` units, and the kills to make."""

    source: str
    files: int
    plan: tuple[tuple[str, int], ...]


SOFT_LIMIT_S, HARD_LIMIT_S, VISIBILITY_S = 6, 7, 8
_RECEIVED = re.compile(r"Task tm\.\w+\[(?P<id>[0-9a-f-]+)\] received")
_TOOK = re.compile(r"\] succeeded in (?P<s>[0-9.]+)s")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)


@dataclass(frozen=True)
class Delivery:
    """A message delivered and not acknowledged: its task, when it was delivered (epoch seconds, the index's score)
    and the worker that logged receiving it since (an index into `cluster.workers`; None until one has)."""

    task_id: str
    task: str
    at: float
    holder: int | None


def _write_notes(folder: Path) -> None:
    """`FILES` notes of `PARAGRAPHS` paragraphs each, every paragraph naming its note: enough text that a batch of
    100 takes a fifth of a second to store, so that the backfill outlasts a worker's restart."""
    words = [f"w{n:04}" for n in range(1_000)]
    lines = [" ".join(words[(n * 37 + k * 101) % 1_000] for k in range(15)) for n in range(PARAGRAPHS)]
    for n in range(FILES):
        path = folder / f"d{n % 20:02}" / f"note-{n:05}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# note {n}\n\n" + "".join(f"{line} note{n}x\n\n" for line in lines))


def _worker_logs(cluster: Cluster) -> Iterator[tuple[int, str]]:
    for index in range(len(cluster.workers)):
        for line in (cluster.root / f"worker-{index}.log").read_text(errors="replace").splitlines():
            yield index, line


def _receipts(cluster: Cluster) -> dict[str, tuple[float, int]]:
    """Each task id, with when (epoch seconds) and by which worker (its index in `cluster.workers`) it was last
    logged received: a task put back after its worker died is received again, maybe by another worker."""
    latest: dict[str, tuple[float, int]] = {}
    for index, line in _worker_logs(cluster):
        if " received" in line and line.startswith("{") and line.endswith("}"):  # not a line being written
            record = json.loads(line)
            if match := _RECEIVED.fullmatch(record["message"]):
                at = datetime.fromisoformat(record["at"]).timestamp()
                if at >= latest.get(match["id"], (0.0, 0))[0]:
                    latest[match["id"]] = (at, index)
    return latest


def _deliveries(cluster: Cluster) -> list[Delivery]:
    """The messages delivered and not acknowledged (kombu's `unacked` hash, its `unacked_index` their times), each
    with the worker that logged receiving it after this delivery, if one has yet."""
    client, keys = cluster.client(), Keys(cluster.prefix).celery()
    raw = cast(dict[bytes, bytes], client.hgetall(keys + "unacked"))
    scored = cast(list[tuple[bytes, float]], client.zrange(keys + "unacked_index", 0, -1, withscores=True))
    delivered_at, receipts = dict(scored), _receipts(cluster)
    deliveries = []
    for tag, value in raw.items():
        headers = json.loads(value)[0]["headers"]
        at = delivered_at.get(tag, time.time())
        logged, index = receipts.get(headers["id"], (0.0, 0))
        # The log's clock is the index's, to the millisecond; an earlier receipt was of an earlier delivery.
        deliveries.append(Delivery(headers["id"], headers["task"], at, index if logged >= at - 0.002 else None))
    return deliveries


@dataclass
class Crew:
    """The cluster's workers, one per slot of `CONCURRENCY`, each restarted in its slot; what the kills did."""

    cluster: Cluster
    backfill: Backfill
    slots: list[subprocess.Popen[bytes]]
    orphaned: list[int] = field(default_factory=list)  # per whole kill, the messages it left unacknowledged
    committed: list[int] = field(default_factory=list)  # per whole kill, the files committed then
    killed: list[int] = field(default_factory=list)  # the process groups killed whole
    spared: int = 0  # workers frozen between two messages, and let go on
    sweeps: int = 0
    last_kill_ms: int = 0

    def busy(self, deliveries: list[Delivery], task: str) -> list[int]:
        """The slots whose worker is alive and holds an unacknowledged message of `task`."""
        holders = {self.cluster.workers[d.holder] for d in deliveries if d.holder is not None and d.task == task}
        return [slot for slot, worker in enumerate(self.slots) if worker in holders and worker.poll() is None]

    def stalled(self, deliveries: list[Delivery]) -> bool:
        """Nothing queued and every unacknowledged message a dead worker's: only a sweep puts them back. A message no
        worker has logged yet counts as a live worker's for a second (it logs it next), then as a dead one's (its
        worker died between taking it and logging it)."""
        if not deliveries or not self.cluster.queues_empty():
            return False
        live = {w for w in self.slots if w.poll() is None}
        return not any(
            (self.cluster.workers[d.holder] in live) if d.holder is not None else time.time() - d.at < 1.0
            for d in deliveries
        )

    def kill(self, slot: int) -> bool:
        """Freeze the slot's worker with its pool process and that one's converters (its process group: it was
        started in a session of its own), and SIGKILL them if it still holds a message, then start another worker
        in its place; else let it go on. Whether it was killed.

        A worker of one pool process holding a message has no BRPOP outstanding: kombu asks for the next message
        only once it has acknowledged this one. So the kill never lands between Redis popping a message and the
        worker writing it to `unacked`, where the message would be lost (kombu's Redis transport, celery/kombu#305).
        """
        worker = self.slots[slot]
        index = self.cluster.workers.index(worker)
        os.killpg(worker.pid, signal.SIGSTOP)
        held = sum(d.holder == index for d in _deliveries(self.cluster))
        if not held:
            os.killpg(worker.pid, signal.SIGCONT)
            self.spared += 1
            return False
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        self.last_kill_ms = redis_ms(self.cluster)
        self.orphaned.append(held)
        self.committed.append(self.cluster.committed(self.backfill.source))
        self.killed.append(worker.pid)
        self.slots[slot] = self.cluster.start_worker(concurrency=CONCURRENCY[slot])
        return True

    def ready(self, worker: subprocess.Popen[bytes]) -> bool:
        """Whether the worker has logged that it is ready, after its mingle step: it has swept."""
        log = self.cluster.root / f"worker-{self.cluster.workers.index(worker)}.log"
        return worker.poll() is None and b" ready." in log.read_bytes()

    def sweep(self, deliveries: list[Delivery]) -> None:
        """Once the newest stranded message is past the visibility timeout, restart the first slot's worker: the new
        one puts back every message older than that as it starts. Only while every worker is ready: one still
        starting sweeps anyway, and may hold kombu's restore mutex, which makes a sweep beside it skip."""
        if time.time() < max(d.at for d in deliveries) + VISIBILITY_S or not all(map(self.ready, self.slots)):
            return
        self.slots[0].send_signal(signal.SIGTERM)  # a warm shutdown (it holds no message); reaped by the cluster
        self.slots[0] = self.cluster.start_worker(concurrency=CONCURRENCY[0])
        self.sweeps += 1


def _survivors(process_groups: list[int]) -> int:
    """Processes still alive in the process groups killed whole."""
    found = [
        subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True, check=False)
        for pgid in process_groups
    ]
    return sum(len(f.stdout.split()) for f in found)


def _longest_task_s(cluster: Cluster) -> float:
    return max((float(m["s"]) for _, line in _worker_logs(cluster) if (m := _TOOK.search(line))), default=0.0)


def _run(crew: Crew, rng: random.Random, within_s: float) -> None:
    """Make the kills of the backfill's plan, sweeping whenever only dead workers' messages are left, until every
    unit is committed and the queues are empty."""
    cluster, plan, source, files = crew.cluster, list(crew.backfill.plan), crew.backfill.source, crew.backfill.files
    deadline = time.monotonic() + within_s
    while not (done := cluster.committed(source) == files and cluster.idle()) or plan:
        assert not done, f"the backfill ended before the kills {plan}: the test proves little"
        deliveries = _deliveries(cluster)
        assert time.monotonic() < deadline, (
            f"kills left: {plan}; {cluster.committed(source)} units committed; queues empty: {cluster.queues_empty()}; "
            f"unacknowledged: {deliveries}; workers alive: {[w.poll() is None for w in cluster.workers]}; {crew}"
        )
        task, after = plan[0] if plan else ("", files)
        if cluster.committed(source) >= after and (busy := crew.busy(deliveries, task)):
            if crew.kill(rng.choice(busy)):
                plan.pop(0)
            time.sleep(rng.uniform(0.1, 0.4))
        elif crew.stalled(deliveries):
            crew.sweep(deliveries)
        else:
            time.sleep(0.05)


def _kill_through(cluster: Cluster, backfill: Backfill, within_s: float) -> tuple[Crew, float]:
    """Start the workers, queue the source's sync, and make the plan's kills until every unit is committed; the crew
    and the seconds from the sync on."""
    cluster.extra_env.update(
        {
            "TINYMEMORY_TASK_SOFT_LIMIT_S": str(SOFT_LIMIT_S),
            "TINYMEMORY_TASK_HARD_LIMIT_S": str(HARD_LIMIT_S),
            "TINYMEMORY_VISIBILITY_TIMEOUT_S": str(VISIBILITY_S),
        }
    )
    crew = Crew(cluster, backfill, [cluster.start_worker(concurrency=n) for n in CONCURRENCY])
    cluster.wait(lambda: all(worker_children(w) for w in crew.slots), 60, "workers started")
    started = time.monotonic()
    assert cluster.sync(backfill.source)
    _run(crew, random.Random(19), within_s)
    return crew, time.monotonic() - started


def _check(cluster: Cluster, crew: Crew, expected: Iterable[str], took: float, figures: Figures, what: str) -> None:
    """Print the figures of the kills and assert that every unit was stored exactly once, nothing stranded."""
    source = crew.backfill.source
    lost, duplicated = exactly_once(expected, cluster.items(source))
    stuck, lapsing = stuck_after_kills(cluster, source, crew.last_kill_ms), len(job_holds(cluster, source))
    letters = cluster.state().dead_letters(source)
    survivors = _survivors(crew.killed)
    figures(
        f"items lost: {lost}; duplicated: {duplicated}; stuck: {stuck} (queued, unacknowledged or leased); "
        f"dead letters: {len(letters)}; processes outliving their worker: {survivors}",
        f"{crew.backfill.files} {what} through two workers, {len(crew.killed)} SIGKILLed whole (messages each left "
        f"unacknowledged: {crew.orphaned}; units committed at each: {crew.committed}; frozen between two messages "
        f"and let go: {crew.spared}); "
        f"{crew.sweeps} restarts past the {VISIBILITY_S} s visibility timeout put them back; all stored after "
        f"{took:.0f} s, the longest task {_longest_task_s(cluster):.1f} s (hard limit {HARD_LIMIT_S} s); "
        f"job-lease holds of killed processes still lapsing: {lapsing}",
    )
    plan = crew.backfill.plan
    assert len(crew.killed) == len(plan) and min(crew.orphaned) >= 1 and max(crew.committed) < crew.backfill.files
    assert crew.sweeps >= 1, "no message waited for the visibility timeout: the test proves little"
    assert (lost, duplicated, stuck, len(letters), survivors) == (0, 0, 0, 0, 0)


def test_whole_workers_killed_during_a_backfill_lose_duplicate_and_strand_nothing(
    cluster: Cluster, tmp_path: Path, figures: Figures
) -> None:
    folder = tmp_path / "notes"
    _write_notes(folder)
    cluster.add_folder(SOURCE, folder)
    crew, took = _kill_through(cluster, Backfill(SOURCE, FILES, PLAN), within_s=90)
    _check(cluster, crew, (str(p.resolve()) for p in folder.rglob("*.md")), took, figures, "files")


def test_whole_workers_killed_during_a_github_sync_lose_duplicate_and_strand_nothing(
    cluster: Cluster, tmp_path: Path, figures: Figures
) -> None:
    with SlowGitHub() as github:
        github.add_repo(REPO, pages_repo(tmp_path / "repo", GITHUB_FILES))
        cluster.extra_env["TINYMEMORY_GITHUB_API_URL"] = github.url
        request = SourceRequest(kind="github", target=REPO, id=GITHUB_SOURCE)
        cluster.state().put_source(REGISTRY.configure(request))
        crew, took = _kill_through(cluster, Backfill(GITHUB_SOURCE, GITHUB_FILES, GITHUB_PLAN), within_s=120)
        blobs = github.count("blob")
    _check(
        cluster, crew, [page_path(n) for n in range(GITHUB_FILES)], took, figures, f"GitHub files ({blobs} blob reads)"
    )
