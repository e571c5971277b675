"""Run progress on Redis: counters add up across writers, the record expires, a late writer revives nothing."""

from __future__ import annotations

import threading

import pytest

from tests.fixtures.redis_servers import RedisTarget
from worker.redis.progress import Progress, RunProgress


@pytest.fixture
def progress(redis_target: RedisTarget) -> RunProgress:
    return RunProgress(redis_target.client, redis_target.prefix, ttl_s=100)


def test_a_run_counts_to_its_plan(progress: RunProgress) -> None:
    run = progress.start()
    assert progress.read(run) == Progress(run, planned=None, done=0, items=0, failed=0)
    assert not progress.read(run).finished  # type: ignore[union-attr]
    assert progress.plan(run, 3)
    assert progress.advance(run, units=2, items=7)
    assert not progress.read(run).finished  # type: ignore[union-attr]
    assert progress.advance(run, failed=1)
    assert progress.read(run) == Progress(run, planned=3, done=2, items=7, failed=1)
    assert progress.read(run).finished  # type: ignore[union-attr]


def test_a_plan_of_nothing_is_finished_and_starting_again_keeps_counts(progress: RunProgress) -> None:
    run = progress.start("backfill-1", units=0)
    assert run == "backfill-1" and progress.read(run).finished  # type: ignore[union-attr]
    progress.plan(run, 5)
    progress.advance(run, units=4)
    progress.start(run)
    assert progress.read(run) == Progress(run, planned=5, done=4, items=0, failed=0)
    assert progress.start() != progress.start()


def test_every_write_pushes_the_expiry_back(progress: RunProgress, redis_target: RedisTarget) -> None:
    run = progress.start(units=2)
    key = progress.keys.progress(run)
    assert 0 < redis_target.client.ttl(key) <= 100
    redis_target.client.expire(key, 5)
    assert progress.advance(run, units=1)
    assert redis_target.client.ttl(key) > 5
    redis_target.client.expire(key, 5)
    assert progress.plan(run, 2)
    assert redis_target.client.ttl(key) > 5


def test_an_unknown_or_expired_run_is_not_revived(progress: RunProgress, redis_target: RedisTarget) -> None:
    assert progress.read("never") is None
    assert not progress.advance("never", units=1)
    assert not progress.plan("never", 1)
    assert redis_target.client.exists(progress.keys.progress("never")) == 0


def test_writers_in_parallel_add_up(progress: RunProgress) -> None:
    run = progress.start(units=400)

    def work() -> None:
        for _ in range(50):
            progress.advance(run, units=1, items=2)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert progress.read(run) == Progress(run, planned=400, done=400, items=800, failed=0)
