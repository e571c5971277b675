"""Messages the broker lost: a backfill's batches and an erasure taken off their queues as a worker that dies between
Redis popping a message and kombu recording it in `unacked` takes them (celery/kombu#305: nothing is left to
redeliver). Real Celery workers and a real `tinymemory beat` on real Redis, with a short visibility timeout: the
beat's sweep (`worker.cluster.deliveries`) finds each lost message missing twice, past the timeout, and sends it
again. Every file is stored exactly once, the erasure completes, and nothing is left queued, unacknowledged or
unsettled. Without the sweep the lost batches' units wait for the source's next sync, and the erasure for ever.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster, cluster_fixture, write_notes
from tests.reliability.figures import exactly_once, print_figures
from worker import control
from worker.cluster.celery_app import create_app
from worker.cluster.queues import BACKFILL_QUEUE, ERASE_QUEUE
from worker.cluster.runtime import deliveries_for
from worker.control import ErasureTarget, Services
from worker.redis.keys import Keys

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FILES = 600
LOST = 2
SOURCE = "notes"
HARD_LIMIT_S, VISIBILITY_S = 4, 5
# Past the timeout, two sweeps `CONFIRM_S` apart find a lost message missing; beat ticks every second.
WITHIN_S = 90


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)


def _configure(cluster: Cluster) -> None:
    cluster.extra_env.update(
        {
            "TINYMEMORY_TASK_SOFT_LIMIT_S": str(HARD_LIMIT_S - 1),
            "TINYMEMORY_TASK_HARD_LIMIT_S": str(HARD_LIMIT_S),
            "TINYMEMORY_VISIBILITY_TIMEOUT_S": str(VISIBILITY_S),
            "TINYMEMORY_BEAT_TICK_S": "1",
        }
    )


def _lose(cluster: Cluster, queue: str, count: int) -> None:
    """Take the `count` oldest messages off `queue`, once it holds them."""
    key = Keys(cluster.prefix).celery() + queue
    client = cluster.client()
    cluster.wait(lambda: int(client.llen(key)) >= count, 60, f"{count} messages on {queue}")
    for _ in range(count):
        assert client.rpop(key) is not None


def _resent(cluster: Cluster) -> int:
    logs = [cluster.root / f"worker-{n}.log" for n in range(len(cluster.workers))]
    return sum(path.read_text(errors="replace").count("was lost by the broker: sent again") for path in logs)


def test_batches_the_broker_lost_are_sent_again_and_stored_once(
    cluster: Cluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    _configure(cluster)
    notes = tmp_path / "notes"
    write_notes(notes, FILES)
    cluster.add_folder(SOURCE, notes)
    # The sync runs and queues its batches; no worker takes them until two are lost.
    cluster.start_worker(queues="tm.sync")
    assert cluster.sync(SOURCE)
    _lose(cluster, BACKFILL_QUEUE, LOST)
    started = time.monotonic()
    cluster.start_worker(queues="tm.ingest,tm.backfill")
    cluster.start_beat()
    deliveries = deliveries_for(create_app(cluster.settings()), cluster.client(), cluster.settings())
    cluster.wait(
        lambda: cluster.committed(SOURCE) == FILES and cluster.idle() and deliveries.count() == 0,
        WITHIN_S,
        f"{FILES} files committed and every delivery settled",
    )
    took = time.monotonic() - started
    lost, duplicated = exactly_once((str(p.resolve()) for p in notes.rglob("*.md")), cluster.items(SOURCE))
    letters = cluster.state().dead_letters(SOURCE)
    print_figures(
        request,
        f"items lost: {lost}; duplicated: {duplicated}; stuck: 0; dead letters: {len(letters)}",
        f"{LOST} of {FILES // 100} batches taken off tm.backfill, {_resent(cluster)} sent again by the sweep; "
        f"all stored {took:.1f} s after the workers started (visibility timeout {VISIBILITY_S} s)",
    )
    assert (lost, duplicated, letters) == (0, 0, [])
    assert _resent(cluster) == LOST


def test_an_erasure_the_broker_lost_is_sent_again_and_completes(
    cluster: Cluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    _configure(cluster)
    notes = tmp_path / "notes"
    write_notes(notes, 100)
    cluster.add_folder(SOURCE, notes)
    cluster.start_worker(queues="tm.sync,tm.ingest,tm.backfill")
    assert cluster.sync(SOURCE)
    cluster.wait_done(SOURCE, 100)
    # Queued through the Redis services, as `tinymemory erase source` and the API queue one; no erase worker yet.
    with Services(cluster.settings()) as services:
        target = ErasureTarget(source_id=SOURCE)
        receipt = asyncio.run(control.request_erasure(services.state(), services.erasures(), target, "ops"))
    _lose(cluster, ERASE_QUEUE, 1)
    started = time.monotonic()
    cluster.start_worker(queues="tm.erase")
    cluster.start_beat()

    def finished() -> bool:
        found = cluster.state().get_erasure(receipt.id)
        return found is not None and found.finished

    cluster.wait(finished, WITHIN_S, f"erasure {receipt.id} finished")
    took = time.monotonic() - started
    done = cluster.state().get_erasure(receipt.id)
    assert done is not None
    left = len(cluster.items(SOURCE))
    print_figures(
        request,
        f"items left: {left}; erasure {done.status} {took:.1f} s after the erase worker started",
        f"its message taken off tm.erase, {_resent(cluster)} sent again by the sweep",
    )
    assert (left, done.status) == (0, "completed")
    assert _resent(cluster) == 1
