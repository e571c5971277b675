"""A GitHub repository synced by real Celery workers whose pool processes are SIGKILLed again and again during
the sync (its listing and its batches): once the workers have respawned them and the queues drained, every
file of the repository is stored exactly once and no job is left queued, running or holding a lease.

The repository is a real git repository served by the fake GitHub API on loopback, which answers each blob
after a short delay, so the sync lasts long enough for the kills to land in it.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sources import REGISTRY, SourceRequest
from tests.fixtures.github_fake import FakeGitHub
from tests.integration.cluster import Cluster, cluster_fixture, worker_children
from tests.reliability.conftest import Figures, job_holds, redis_ms, stuck_after_kills
from tests.reliability.figures import exactly_once
from tests.reliability.github_pages import REPO, SlowGitHub, page_path, pages_repo

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FILES = 400  # four batches: the last kills land between commits, before the last one
KILLS = 6
SOURCE = "gh"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)


@pytest.fixture
def github(tmp_path: Path) -> Iterator[SlowGitHub]:
    server = SlowGitHub()
    with server:
        server.add_repo(REPO, pages_repo(tmp_path / "repo", FILES))
        yield server


def _kill_pool_processes(cluster: Cluster, rng: random.Random, files: int) -> tuple[list[int], int]:
    """SIGKILL a pool process of a random worker, again and again while the sync runs, half of the kills
    before its first batch is committed and half after; the files committed at each kill, and Redis's clock after
    the last one."""
    kills: list[int] = []
    last_kill_ms = 0
    while len(kills) < KILLS and (committed := cluster.committed(SOURCE)) < files:
        if len(kills) == KILLS // 2 and committed == 0:
            cluster.wait(lambda: cluster.committed(SOURCE) > 0, 60, "a first batch between the kills")
            continue
        children = [pid for worker in cluster.workers for pid in worker_children(worker)]
        if children:
            try:
                os.kill(rng.choice(children), signal.SIGKILL)  # the worker respawns it; its task is redelivered
            except ProcessLookupError:  # it ended between the listing and the kill: choose again
                continue
            kills.append(committed)
            last_kill_ms = redis_ms(cluster)
        time.sleep(rng.uniform(0.3, 0.9))
    return kills, last_kill_ms


def _wait_or_explain(cluster: Cluster, github: FakeGitHub, condition: Callable[[], bool], what: str) -> None:
    """`cluster.wait`, failing with what the API was asked, the source's last sync and the workers' warnings
    (a failed run's folder is soon reclaimed by later runs)."""
    try:
        cluster.wait(condition, 120, what)
    except AssertionError as err:
        state = cluster.state()
        logs = [line for path in sorted(cluster.root.glob("worker-*.log")) for line in path.read_text().splitlines()]
        warnings = [line[:300] for line in logs if '"level": "warning"' in line or '"level": "error"' in line][-20:]
        raise AssertionError(
            f"{err}\nrequests: {dict(github.requests)}\nlast sync: {state.last_sync(SOURCE)}\n"
            f"dead letters: {state.dead_letters(SOURCE)[:3]}\nworker warnings:\n" + "\n".join(warnings)
        ) from err


def test_pool_processes_killed_during_a_github_sync_lose_duplicate_and_strand_nothing(
    cluster: Cluster, github: SlowGitHub, figures: Figures
) -> None:
    cluster.extra_env.update({"TINYMEMORY_GITHUB_API_URL": github.url})
    cluster.state().put_source(REGISTRY.configure(SourceRequest(kind="github", target=REPO, id=SOURCE)))
    workers = [cluster.start_worker(concurrency=2), cluster.start_worker(concurrency=1)]
    cluster.wait(lambda: all(worker_children(w) for w in workers), 60, "workers started")
    started = time.monotonic()
    assert cluster.sync(SOURCE)
    # The first kill lands as soon as a blob is asked for: in the listing's batch or the sync itself.
    _wait_or_explain(cluster, github, lambda: github.count("blob") > 0, "the sync under way")
    kills, last_kill_ms = _kill_pool_processes(cluster, random.Random(19), FILES)
    _wait_or_explain(cluster, github, lambda: cluster.committed(SOURCE) == FILES and cluster.idle(), "every file")
    took = time.monotonic() - started

    stored = cluster.items(SOURCE)
    expected = {page_path(n) for n in range(FILES)}
    lost, duplicated = exactly_once(expected, stored)
    # A pool process killed mid-batch leaves its hold on the job lease to lapse (within 30 s): counted apart.
    stuck, lapsing = stuck_after_kills(cluster, SOURCE, last_kill_ms), len(job_holds(cluster, SOURCE))
    letters = cluster.state().dead_letters(SOURCE)
    figures(
        f"items lost: {lost}; duplicated: {duplicated}; stuck: {stuck} (queued, running or leased); "
        f"dead letters: {len(letters)}",
        f"{FILES} files of a GitHub repository, {len(kills)} pool processes SIGKILLed (files committed at each: "
        f"{kills}), all stored after {took:.0f} s; {github.count('blob')} blob reads; job-lease holds of killed "
        f"processes still lapsing: {lapsing}",
    )
    assert len(kills) >= 5, "the sync ended before five kills: the test proves little"
    assert (lost, duplicated, stuck) == (0, 0, 0)
    assert set(stored) == expected
    assert letters == []
